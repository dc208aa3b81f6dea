"""The method of the tests that prove a move of models between apps keeps every row (``test_migrations_keep_*``): a
PostgreSQL database filled at the migrations of before the move is migrated to the latest ones, and what it held is
read again through today's models."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.core.management.sql import emit_post_migrate_signal
from django.db import connection, models
from django.db.migrations.executor import MigrationExecutor

Rows = Mapping[str, tuple[type[models.Model], Sequence[str]]]  # historical label -> (today's model, compared columns)


def installed_at(targets: Sequence[tuple[str, str | None]]) -> MigrationExecutor:
    """The test's PostgreSQL database emptied (its schema dropped and made again) and migrated forward to where
    ``executor.migrate(targets)`` would take it back (every migration but the later ones of the targets' apps and
    those that depend on them; ``(app, None)``: none of the app's), as ``manage.py migrate`` installed it then, its
    ``post_migrate`` content types and permissions included; an executor for the database as it is now. Rows stored
    before are gone.

    Cheaper than migrating back to an early migration: to undo migrations Django copies and renders the project's
    state at every migration of the whole plan up to the last one undone, then renders it again for each one undone,
    so undoing most of them and applying them again costs about twice what this one ``migrate`` of them all does. A
    late migration, whose undoing is a few, is cheaper to go back to."""
    graph = MigrationExecutor(connection).loader.graph
    undone: set[tuple[str, str]] = set()
    for app, name in targets:
        if name is None:
            after = graph.root_nodes(app)
        else:
            after = [node for node in graph.node_map[(app, name)].children if node[0] == app]
        for node in after:
            undone.update(graph.backwards_plan(node))
    assert connection.vendor == "postgresql", "a schema of its own to drop is PostgreSQL's"
    with connection.cursor() as cursor:
        cursor.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    executor = MigrationExecutor(connection)  # its record of what is applied went with the schema
    everything = executor.migration_plan(executor.loader.graph.leaf_nodes(), clean_start=True)
    plan = [(migration, False) for migration, _ in everything if (migration.app_label, migration.name) not in undone]
    state = executor.migrate(targets, plan=plan)
    state.clear_delayed_apps_cache()
    emit_post_migrate_signal(0, False, connection.alias, apps=state.apps, plan=plan)
    executor.loader.build_graph()
    return executor


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
