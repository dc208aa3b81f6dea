"""The method of the tests that prove a move of models between apps keeps every row (``test_migrations_keep_*``): a
PostgreSQL database filled at the migrations of before the move is migrated to the latest ones, and what it held is
read again through today's models."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.management.sql import emit_post_migrate_signal
from django.db import connection, models
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.graph import MigrationGraph

from tests.platform_instance import MIGRATED_DATABASE, MIGRATED_SQLITE, migrated_database, postgres_server

Rows = Mapping[str, tuple[type[models.Model], Sequence[str]]]  # historical label -> (today's model, compared columns)
Targets = Sequence[tuple[str, str | None]]  # as ``executor.migrate(targets)`` takes them; ``(app, None)``: none of it

# The states the suite's migration tests start from (:func:`copy_installed_at`), each installed in the one before it
# (every migration of one is in the next), so that one pass of ``migrate`` builds them all, once a run.
STATES: tuple[tuple[tuple[str, str | None], ...], ...] = (
    (  # before the models moved out of routing (tests/test_migrations_keep_rows.py)
        ("routing", "0010_conversation_handoff_kinds"),
        ("handoffs", "0004_handoff_cohort"),
        ("analytics", "0002_daily_totals"),
        ("agents", "0004_profile_delegation_loop_safety_words"),
        ("common", None),
        ("tenants", None),
        ("conversations", None),
    ),
    (("agents", "0004_profile_delegation_loop_safety_words"),),
    (("agents", "0006_examples_tier"),),
    (("routing", "0031_multi_agent_flag_description_in_plain_words"),),
    (("routing", "0032_history_user_ids_pseudonymised"),),
    (("routing", "0033_version_released_at"),),
    (("routing", "0035_history_opaque_user_ids_pseudonymised"),),
)


def undone_by(graph: MigrationGraph, targets: Targets) -> set[tuple[str, str]]:
    """The migrations ``executor.migrate(targets)`` would undo on a database with all of them applied."""
    undone: set[tuple[str, str]] = set()
    for app, name in targets:
        if name is None:
            after = graph.root_nodes(app)
        else:
            after = [node for node in graph.node_map[(app, name)].children if node[0] == app]
        for node in after:
            undone.update(graph.backwards_plan(node))
    return undone


def _disconnect() -> None:
    connection.close()
    if connection.vendor == "postgresql":
        connection.close_pool()  # its connections' database was fixed when it was made


@contextlib.contextmanager
def connected_to(name: str) -> Iterator[None]:
    """This process's default connection on the test server's database ``name`` (not the test database) inside."""
    before = connection.settings_dict["NAME"]
    _disconnect()
    connection.settings_dict["NAME"] = name
    try:
        yield
    finally:
        _disconnect()
        connection.settings_dict["NAME"] = before
        ContentType.objects.clear_cache()  # its ids were the other database's


def _build_states(server: Any, names: Sequence[str]) -> None:
    """Every state of :data:`STATES` as a database of the test server (``names``): one ``migrate`` on a database of
    its own, stopped at each state to copy it; the copy is given the ``post_migrate`` content types and permissions
    of its state, as ``manage.py migrate`` would have installed it then."""
    chain = f"{names[0]}_chain"
    server.execute(f'DROP DATABASE IF EXISTS "{chain}" WITH (FORCE)')
    server.execute(f'CREATE DATABASE "{chain}"')
    for name, targets in zip(names, STATES, strict=True):
        with connected_to(chain):
            executor = MigrationExecutor(connection)
            undone, applied = undone_by(executor.loader.graph, targets), set(executor.loader.applied_migrations)
            assert not undone & applied, f"{list(targets)}: holds fewer migrations than the state before it in STATES"
            everything = executor.migration_plan(executor.loader.graph.leaf_nodes(), clean_start=True)
            skip = undone | applied
            plan = [(m, False) for m, _ in everything if (m.app_label, m.name) not in skip]
            state = executor.migrate(list(targets), plan=plan)
            state.clear_delayed_apps_cache()
        building = f"{name}_building"  # renamed once made: a half-made one is never copied
        server.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
        server.execute(f'CREATE DATABASE "{building}" TEMPLATE "{chain}"')
        with connected_to(building):
            emit_post_migrate_signal(0, False, connection.alias, apps=state.apps, plan=plan)
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # left by a build that failed after it
        server.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
    server.execute(f'DROP DATABASE "{chain}" WITH (FORCE)')


def copy_installed_at(targets: Targets) -> str:
    """A new database of the test server (its name; the caller drops it) as ``manage.py migrate`` installed it at
    ``targets`` (every migration but the later ones of the targets' apps and those that depend on them), its
    ``post_migrate`` content types and permissions included: a copy of the run's database of that state (one of
    :data:`STATES`), which the first process to ask builds, all of them, while the others wait.

    Cheaper than migrating back: to undo migrations Django copies and renders the project's state at every migration
    of the whole plan from the first one undone, then renders it again for each one undone, so undoing even the last
    twenty costs more than applying them; and cheaper than a ``migrate`` from an empty database each time."""
    assert connection.vendor == "postgresql", "a database copied from another as a template is PostgreSQL's"
    wanted = set(targets)
    index = next((n for n, state in enumerate(STATES) if set(state) == wanted), None)
    assert index is not None, f"{list(targets)}: not a state of tests.migration_moves.STATES (add it in its order)"
    names = [f"{os.environ[MIGRATED_DATABASE]}_at{n}" for n in range(len(STATES))]
    copy = f"{names[index]}_{secrets.token_hex(4)}"
    with postgres_server() as server:
        server.execute("SELECT pg_advisory_lock(hashtext(%s))", (names[0],))
        try:
            if server.execute("SELECT 1 FROM pg_database WHERE datname = %s", (names[-1],)).fetchone() is None:
                _build_states(server, names)
        finally:
            server.execute("SELECT pg_advisory_unlock(hashtext(%s))", (names[0],))
        server.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{names[index]}"')
    return copy


def copy_latest() -> str | None:
    """A new copy of the run's migrated database (:func:`tests.platform_instance.migrated_database`): its name (the
    caller drops it), or None where there is none to copy. The same as the test database was before its test, less
    the rows the test's fixtures stored: a test migrates it back and forth, and the test database never needs
    migrating forward again after. On SQLite the copy is of the run's migrated file, where the run has one
    (:func:`tests.platform_instance.migrated_sqlite`, the ``sqlite_too`` shards'): its path is its name. (Without
    one, migrating back costs the most, forward the least: there a test migrates the test database itself.)"""
    if connection.vendor == "sqlite":
        migrated = os.environ.get(MIGRATED_SQLITE)
        if not migrated:
            return None
        copy = Path(settings.VAR_DIR) / f"latest-{secrets.token_hex(4)}.sqlite3"
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(migrated, copy)
        return str(copy)
    if connection.vendor != "postgresql":
        return None
    template = migrated_database()
    copy_name = f"{template}_latest_{secrets.token_hex(4)}"  # dropped with the run's databases if a test cannot
    with postgres_server() as server:
        server.execute(f'CREATE DATABASE "{copy_name}" TEMPLATE "{template}"')
    return copy_name


def drop_database(name: str) -> None:
    """Drop a copy made here: a database of the test server, or on SQLite the file of :func:`copy_latest`."""
    if connection.vendor == "sqlite":
        for part in ("", "-wal", "-shm"):  # its write-ahead log, if a connection left one
            Path(f"{name}{part}").unlink(missing_ok=True)
        return
    with postgres_server() as server:
        server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate_to_latest(executor: MigrationExecutor) -> None:
    """Apply every migration (the state every other test expects)."""
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    executor.loader.build_graph()
    ContentType.objects.clear_cache()


def row_maker(apps: Any) -> tuple[Callable[..., Any], dict[str, list[int]]]:
    """``add(label, **fields)``, which creates a row of the historical model ``label`` and notes its id under it, and
    those ids by label."""
    made: dict[str, list[int]] = defaultdict(list)

    def add(label: str, **fields: Any) -> Any:
        row = apps.get_model(label).objects.create(**fields)
        made[label].append(row.pk)
        return row

    return add, made


def contents(rows: Rows, model_of: Callable[[str], Any]) -> dict[str, list[tuple]]:
    """Every row of every table of ``rows``: its id and compared columns, read through ``model_of(label)``."""
    return {
        label: list(model_of(label).objects.order_by("pk").values_list("pk", *columns))
        for label, (_, columns) in rows.items()
    }


def assert_foreign_keys_declared(rows: Rows) -> None:
    """Each foreign key of the current models of ``rows`` is a PostgreSQL constraint on the right column and table."""
    with connection.cursor() as cursor:
        for model, _ in rows.values():
            constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
            declared = {(tuple(c["columns"]), c["foreign_key"]) for c in constraints.values() if c["foreign_key"]}
            for field in model._meta.concrete_fields:
                if field.many_to_one:
                    target = (field.related_model._meta.db_table, field.target_field.column)
                    assert ((field.column,), target) in declared, f"{model.__name__}.{field.name} lost its constraint"
