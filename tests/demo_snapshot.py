"""The demo (``manage.py seed_demo``) seeded once per test worker, then restored from a snapshot; the same for
the cast's ``telecom`` profile (tests/fixtures.py), which some 1,000 tests build (:func:`replayed`).

About 200 tests start from the demo, and a real ``seed_demo`` costs several seconds (parsing config/demo, the
import, compiling the examples tier, the publishing gate running the saved routing tests). :func:`demo_seed` runs
the command for real the first time in a worker for given arguments and a given database, and records:

* which tables the command read or wrote (the tables its SQL names) and their content before it ran, as one md5
  of the rows per table — the *pre-state* the result depends on;
* the rows of every table whose content it changed (``COPY … TO STDOUT``; on SQLite, the rows as stored), the
  sequences it advanced (SQLite's ``AUTOINCREMENT`` counters), and what it printed.

A later test whose database holds the same content in those tables (one query) gets the recorded result instead:
the changed tables are emptied (``DELETE``: inside the test's transaction, so rolled back with it) and their rows
copied back, the sequences set, the configuration version bumped (which marks this process's routing snapshot
stale, as any configuration write does). A test whose own fixtures wrote something the command reads, or changed a
table it writes, has another pre-state, and seeds for real (its result is recorded too).

What the command does outside the database is left to the fixtures as before: they point the MCP servers'
endpoints at this test's running servers. The command's other effects outside the database are not state a test
can see: the finance server's manifest is only read (``--sync``), the configuration version reaches the shared
cache only on commit (never, in a test's transaction; the autouse ``fresh_routing_snapshot`` clears it anyway).

A transactional test (``transactional_db``, ``django_db(transaction=True)``; some 350 build ``telecom``, a quarter of
their CPU when it was built for real) is served from a snapshot too: the restore is one transaction of its own,
committed, as the test's other rows are. What the real call left to run on commit runs again only where it was the
configuration version's publishing to the shared cache (the restore's own bump leaves it again); a snapshot whose call
left other work for its commit (a task sent, an event pushed: :attr:`Snapshot.on_commit`) serves only a test inside a
transaction, where nothing commits, and a transactional test makes it for real. The same on PostgreSQL and on SQLite
(the runs of tests/test_sqlite_too.py, where the pre-state's md5s are taken in Python, a query a table).
``TEST_DEMO_SNAPSHOT=0`` in the environment seeds and builds for real every time.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from io import StringIO
from typing import Any, TypeVar

from django.core.management import call_command
from django.db import connection, transaction

ENV_SWITCH = "TEST_DEMO_SNAPSHOT"
# The environment the demo's files read (config/demo/mcp_servers.yaml: ${MCP_<SERVER>_HOST}, …).
ENV_PREFIX = "MCP_"
MAX_SNAPSHOTS_PER_KEY = 4
QUOTED_NAME = re.compile(r'"([A-Za-z0-9_]+)"')
INSERTED_INTO = re.compile(r'^\s*INSERT INTO "([A-Za-z0-9_]+)"', re.IGNORECASE)
# The field history's table (django-auditlog's entries), which every audited write appends to, a test's own fixtures'
# (its API key, say) before the command: where the command only inserts into it (never reads, changes or deletes an
# entry), its content is no pre-state of the command's, and a restore adds the entries the command added (new ids
# from the table's own sequence, their times moved on to now by as much as the first's) to those there.
APPENDED = {"auditlog_logentry": "timestamp"}  # table -> the column of when each row was written
# The content types, read through Django's cache as often as by a query (the history's entries point at them), and put
# back by a transactional test's flush under ids of their own (those of the worker's first flush, not the migrated
# database's): part of every pre-state, so that a restore never points at a content type the database has not.
ALWAYS_READ = ("django_content_type",)
R = TypeVar("R")


@dataclass(frozen=True)
class SeedOutput:
    stdout: str
    stderr: str


@dataclass
class Snapshot:
    pre_state: dict[str, str]  # table -> md5 of its rows, for every table the command named or changed
    # table -> its rows after the command (COPY text format; on SQLite, tuples as stored), for every table it changed
    rows: dict[str, bytes | list[tuple]]
    sequences: dict[str, int]  # sequence -> last value after the command, for every sequence it advanced
    output: Any  # what the call returned, as plain data (``replayed``'s ``keep``)
    # The history's table (:data:`APPENDED`), if the command only inserted into it: the rows it added, less their ids
    added: dict[str, bytes | list[tuple]] = field(default_factory=dict)
    # What the call left to run on commit, by qualified name, besides the configuration version's publishing
    on_commit: tuple[str, ...] = ()


@dataclass
class Stats:
    real: int = 0
    restored: int = 0
    keys: dict[tuple, list[Snapshot]] = field(default_factory=dict)


# One worker process, one database: the snapshots live as long as the process.
_stats = Stats()


def snapshots_enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


def counts() -> tuple[int, int]:
    """How many seeds ran for real and how many were restored, in this process (for the helper's own tests)."""
    return _stats.real, _stats.restored


def forget() -> None:
    """Drop every snapshot of this process (for the helper's own tests)."""
    _stats.keys.clear()


def _quote(name: str) -> str:
    return connection.ops.quote_name(name)


def _sqlite() -> bool:
    return connection.vendor == "sqlite"


def _tables() -> list[str]:
    """Every table but the configuration version's: a counter (started from the clock when its row is made), which
    the command only moves on; a restore moves it on too (:func:`config_version_bump`). On SQLite, the full-text
    tables aside too (:func:`_sqlite_index_tables`)."""
    from common.models import ConfigVersion

    with connection.cursor() as cursor:
        tables = set(connection.introspection.table_names(cursor)) - {ConfigVersion._meta.db_table}
        if _sqlite():
            tables -= _sqlite_index_tables(cursor)
    return sorted(tables)


def _sqlite_index_tables(cursor: Any) -> set[str]:
    """SQLite's full-text tables (knowledge/migrations/0002_search_indexes.py) and the shadow tables that hold their
    index: triggers on the passages' table keep them in step with it, so they are no state of their own, and a
    restore of the passages (a ``DELETE`` and ``INSERT`` that fire the triggers) brings them back."""
    cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'")
    rows = cursor.fetchall()
    virtual = {name for name, sql in rows if (sql or "").upper().startswith("CREATE VIRTUAL TABLE")}
    return {name for name, _ in rows if any(name == table or name.startswith(f"{table}_") for table in virtual)}


def _sqlite_rows(table: str) -> list[tuple]:
    """The rows of ``table`` as SQLite stores them: each column read through a unary ``+`` (an expression, which
    keeps the value and its storage class but has no declared type, so Django's converters leave it as stored)."""
    with connection.cursor() as cursor:
        # PRAGMA, not the introspection's table description: that one parses each table's SQL (~10 ms a table).
        cursor.execute(f"PRAGMA table_info({_quote(table)})")
        columns = [name for _, name, *_ in cursor.fetchall()]
        selected = ", ".join(f"+{_quote(column)}" for column in columns)
        cursor.execute(f"SELECT {selected} FROM {_quote(table)}")  # noqa: S608 — names from the catalogue
        return [tuple(row) for row in cursor.fetchall()]


def _sqlite_md5(table: str) -> str:
    return hashlib.md5("\n".join(sorted(map(repr, _sqlite_rows(table)))).encode(), usedforsecurity=False).hexdigest()


def table_md5s(tables: list[str]) -> dict[str, str]:
    """Per table, an md5 of its rows in a fixed order: one query (on SQLite, one a table)."""
    if not tables:
        return {}
    if _sqlite():
        return {table: _sqlite_md5(table) for table in tables}
    parts = [
        f"SELECT %s, md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM {_quote(table)} t"  # noqa: S608 — names from the catalogue
        for table in tables
    ]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), tables)
        return dict(cursor.fetchall())


def sequences() -> dict[str, int | None]:
    """Each sequence's last value (None: never used); on SQLite, the ``AUTOINCREMENT`` tables' counters (a table
    that never had a row has none)."""
    with connection.cursor() as cursor:
        if _sqlite():
            cursor.execute("SELECT name, seq FROM sqlite_sequence")
        else:
            cursor.execute("SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = current_schema()")
        return dict(cursor.fetchall())


def sequences_set(values: dict[str, int | None]) -> None:
    """Each sequence of ``values`` set to its last value (None: as if never used)."""
    with connection.cursor() as cursor:
        for name, value in values.items():
            if _sqlite():
                cursor.execute("DELETE FROM sqlite_sequence WHERE name = %s", [name])
                if value is not None:
                    cursor.execute("INSERT INTO sqlite_sequence (name, seq) VALUES (%s, %s)", [name, value])
            elif value is None:
                cursor.execute("SELECT setval(%s, 1, false)", [_quote(name)])
            else:
                cursor.execute("SELECT setval(%s, %s, true)", [_quote(name), value])


def _copy_out(table: str) -> bytes | list[tuple]:
    if _sqlite():
        return _sqlite_rows(table)
    with connection.cursor() as cursor, cursor.copy(f"COPY {_quote(table)} TO STDOUT") as copy:
        return b"".join(bytes(block) for block in copy)


def _max_id(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {_quote(table)}")  # noqa: S608 — a name from the catalogue
        return int(cursor.fetchone()[0])


def _columns_but_id(table: str) -> list[str]:
    with connection.cursor() as cursor:
        if _sqlite():  # PRAGMA, not the introspection's description, which parses the table's SQL (~10 ms a call)
            cursor.execute(f"PRAGMA table_info({_quote(table)})")
            names = [name for _, name, *_ in cursor.fetchall()]
        else:
            names = [column.name for column in connection.introspection.get_table_description(cursor, table)]
    return [name for name in names if name != "id"]


def _added_out(table: str, after_id: int) -> bytes | list[tuple]:
    """The rows of ``table`` past ``after_id``, in id order, without their ids."""
    columns = ", ".join(_quote(column) for column in _columns_but_id(table))
    query = f"SELECT {columns} FROM {_quote(table)} WHERE id > {int(after_id)} ORDER BY id"  # noqa: S608 — idem
    with connection.cursor() as cursor:
        if _sqlite():
            cursor.execute(query)
            return [tuple(row) for row in cursor.fetchall()]
        with cursor.copy(f"COPY ({query}) TO STDOUT") as copy:
            return b"".join(bytes(block) for block in copy)


def _added_in(table: str, rows: bytes | list[tuple]) -> None:
    """The rows of :func:`_added_out` inserted after those there, with new ids, and written later than them and no
    later than now: their times moved on to end at now, as the command's would, and pressed in, in their order, after
    the last of those there where the recorded call took longer than has passed since it (a restore takes no time, so
    an entry the test writes next is the latest, as after a real call)."""
    from django.apps import apps
    from django.db.models import Max
    from django.utils import timezone

    model = next(model for model in apps.get_models() if model._meta.db_table == table)
    last, when = _max_id(table), APPENDED[table]
    there = model._base_manager.aggregate(latest=Max(when))["latest"]
    names = _columns_but_id(table)
    columns = ", ".join(_quote(column) for column in names)
    with connection.cursor() as cursor:
        if isinstance(rows, list):
            if rows:
                marks = ", ".join(["%s"] * len(names))
                cursor.executemany(f"INSERT INTO {_quote(table)} ({columns}) VALUES ({marks})", rows)  # noqa: S608
        elif rows:
            with cursor.copy(f"COPY {_quote(table)} ({columns}) FROM STDIN") as copy:
                copy.write(rows)
    added = list(model._base_manager.filter(id__gt=last).order_by(when, "pk").values_list("pk", when))
    if not added:
        return
    now = timezone.now()
    first, span = added[0][1], added[-1][1] - added[0][1]
    start = now - span if there is None else min(max(now - span, there), now)
    moved = []
    for pk, written in added:  # their order and spacing kept, the span pressed into what is left of it before now
        shift = (written - first) * ((now - start) / span) if span else now - start
        moved.append((connection.ops.adapt_datetimefield_value(start + shift), pk))
    # One plain UPDATE a row: ``bulk_update``'s CASE of 500 ids a statement cost ~5 s of the SQLite pass's CPU.
    with connection.cursor() as cursor:
        cursor.executemany(f"UPDATE {_quote(table)} SET {_quote(when)} = %s WHERE id = %s", moved)  # noqa: S608


def _id_sequence(table: str) -> str:
    """The name :func:`sequences` gives the counter of ``table``'s ids."""
    if _sqlite():
        return table
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [_quote(table)])
        (qualified,) = cursor.fetchone()
    return qualified.rsplit(".", 1)[-1].strip('"') if qualified else ""


def _copy_in(table: str, rows: bytes | list[tuple]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {_quote(table)}")  # noqa: S608 — a name from the catalogue
        if isinstance(rows, list):  # SQLite's: the rows as stored, in the table's column order
            if rows:
                marks = ", ".join(["%s"] * len(rows[0]))
                cursor.executemany(f"INSERT INTO {_quote(table)} VALUES ({marks})", rows)  # noqa: S608 — idem
        elif rows:
            with cursor.copy(f"COPY {_quote(table)} FROM STDIN") as copy:
                copy.write(rows)


def _call(args: tuple[str, ...]) -> SeedOutput:
    out, err = StringIO(), StringIO()
    call_command("seed_demo", *args, stdout=out, stderr=err)
    return SeedOutput(out.getvalue(), err.getvalue())


def _key(args: tuple[str, ...]) -> tuple:
    from releases.management.commands import seed_demo

    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(ENV_PREFIX)))
    return ("seed_demo", args, env, str(seed_demo.DEMO_DIR), str(seed_demo.TESTS_DIR))


def _restore(snapshot: Snapshot) -> None:
    from common.config_version import config_version_bump

    for table, rows in snapshot.rows.items():
        _copy_in(table, rows)
    for table, rows in snapshot.added.items():
        _added_in(table, rows)
    sequences_set(dict(snapshot.sequences))
    config_version_bump()  # the rows came back without the signals that bump it


def _published_version(hook: Callable[[], Any]) -> bool:
    """Whether ``hook`` is :func:`common.config_version.config_version_bump`'s publishing of the new version."""
    return hook.__module__ == "common.config_version" and hook.__qualname__.startswith("config_version_bump.")


def _record(call: Callable[[], R]) -> tuple[R, Snapshot]:
    tables = _tables()
    before = table_md5s(tables)
    sequences_before = sequences()
    appended = [table for table in APPENDED if table in tables]
    last_ids = {table: _max_id(table) for table in appended}
    named: set[str] = set()
    read: set[str] = set()  # named by a statement other than an INSERT into them

    def record(execute, sql, params, many, context):
        names = set(QUOTED_NAME.findall(sql))
        named.update(names)
        inserted = INSERTED_INTO.match(sql)
        read.update(names - {inserted.group(1)} if inserted else names)
        return execute(sql, params, many, context)

    left: list[str] = []  # what the call left to run on commit (at once, outside a transaction), besides the version
    on_commit = connection.on_commit

    def noted(func: Callable[[], Any], robust: bool = False) -> None:
        if not _published_version(func):
            left.append(f"{func.__module__}.{func.__qualname__}")
        on_commit(func, robust=robust)

    connection.on_commit = noted  # type: ignore[method-assign] # this connection's, for the call's length
    try:
        with connection.execute_wrapper(record):
            result = call()
    finally:
        del connection.on_commit  # the class's again
    after = table_md5s(tables)
    changed = [table for table in tables if before[table] != after[table]]
    only_added = [table for table in appended if table not in read]
    depends = ((named & set(tables)) | set(changed) | (set(ALWAYS_READ) & set(tables))) - set(only_added)
    skipped = {_id_sequence(table) for table in only_added}  # new ids as the table gives them
    snapshot = Snapshot(
        pre_state={table: before[table] for table in sorted(depends)},
        rows={table: _copy_out(table) for table in changed if table not in only_added},
        sequences={
            name: value
            for name, value in sequences().items()
            if value is not None and value != sequences_before.get(name) and name not in skipped
        },
        output=None,
        added={table: _added_out(table, last_ids[table]) for table in only_added if table in changed},
        on_commit=tuple(sorted(set(left))),
    )
    return result, snapshot


def _serving(recorded: list[Snapshot]) -> Snapshot | None:
    """The record a restore takes: the first that started from the database's present content (in a transactional
    test, where a restore commits, one whose call left no other work for its commit)."""
    committed = not connection.in_atomic_block
    for snapshot in recorded:
        if committed and snapshot.on_commit:
            continue
        if table_md5s(sorted(snapshot.pre_state)) == snapshot.pre_state:
            return snapshot
    return None


def served(*args: str) -> bool:
    """Whether :func:`demo_seed` of ``args`` would be restored from the present content (for the helper's own tests)."""
    return _serving(_stats.keys.get((*_key(args), connection.settings_dict["NAME"]), [])) is not None


def replayed(key: tuple, call: Callable[[], R], keep: Callable[[R], Any], revive: Callable[[Any], R]) -> R:
    """``call()`` — for real, or its rows restored from this worker's record of a run with the same ``key`` that
    started from the same content; ``keep`` turns its result into plain data to record, ``revive`` turns that back
    into a result after a restore (e.g. a model's primary key and a fresh query)."""
    if not snapshots_enabled():
        _stats.real += 1
        return call()
    recorded = _stats.keys.setdefault((*key, connection.settings_dict["NAME"]), [])
    snapshot = _serving(recorded)
    if snapshot is not None:
        with transaction.atomic():
            _restore(snapshot)
        _stats.restored += 1
        return revive(snapshot.output)
    _stats.real += 1
    if len(recorded) >= MAX_SNAPSHOTS_PER_KEY:  # no room for another record: not worth taking one
        return call()
    result, snapshot = _record(call)
    snapshot.output = keep(result)
    recorded.append(snapshot)
    return result


def demo_seed(*args: str) -> SeedOutput:
    """``manage.py seed_demo *args`` — for real, or restored from this worker's record of the same run.

    What it printed comes back either way.
    """
    return replayed(_key(args), lambda: _call(args), keep=lambda output: output, revive=lambda output: output)
