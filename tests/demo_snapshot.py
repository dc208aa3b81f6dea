"""The demo (``manage.py seed_demo``) seeded once per test worker, then restored from a snapshot; the same for
the cast's ``telecom`` profile (tests/fixtures.py), which some 1,000 tests build (:func:`replayed`).

About 200 tests start from the demo, and a real ``seed_demo`` costs several seconds (parsing config/demo, the
import, compiling the examples tier, the publishing gate running the saved routing tests). :func:`demo_seed` runs
the command for real the first time in a worker for given arguments and a given database, and records:

* which tables the command read or wrote (the tables its SQL names) and their content before it ran, as one md5
  of the rows per table — the *pre-state* the result depends on;
* the rows of every table whose content it changed (``COPY … TO STDOUT``), the sequences it advanced, and what it
  printed.

A later test whose database holds the same content in those tables (one query) gets the recorded result instead:
the changed tables are emptied (``DELETE``: inside the test's transaction, so rolled back with it) and their rows
copied back, the sequences set, the configuration version bumped (which marks this process's routing snapshot
stale, as any configuration write does). A test whose own fixtures wrote something the command reads, or changed a
table it writes, has another pre-state, and seeds for real (its result is recorded too).

What the command does outside the database is left to the fixtures as before: they point the MCP servers'
endpoints at this test's running servers. The command's other effects outside the database are not state a test
can see: the finance server's manifest is only read (``--sync``), the configuration version reaches the shared
cache only on commit (never, in a test's transaction; the autouse ``fresh_routing_snapshot`` clears it anyway).

Only a test inside a transaction (``db``) is served from a snapshot; a transactional test (``transactional_db``,
``django_db(transaction=True)``) seeds for real every time: its rows are committed and flushed, and what runs on
commit must run; so does a test on SQLite (tests/test_sqlite_too.py). ``TEST_DEMO_SNAPSHOT=0`` in the environment
seeds and builds for real every time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from io import StringIO
from typing import Any, TypeVar

from django.core.management import call_command
from django.db import connection

ENV_SWITCH = "TEST_DEMO_SNAPSHOT"
# The environment the demo's files read (config/demo/mcp_servers.yaml: ${MCP_<SERVER>_HOST}, …).
ENV_PREFIX = "MCP_"
MAX_SNAPSHOTS_PER_KEY = 4
QUOTED_NAME = re.compile(r'"([A-Za-z0-9_]+)"')
R = TypeVar("R")


@dataclass(frozen=True)
class SeedOutput:
    stdout: str
    stderr: str


@dataclass
class Snapshot:
    pre_state: dict[str, str]  # table -> md5 of its rows, for every table the command named or changed
    rows: dict[str, bytes]  # table -> its rows after the command (COPY text format), for every table it changed
    sequences: dict[str, int]  # sequence -> last value after the command, for every sequence it advanced
    output: Any  # what the call returned, as plain data (``replayed``'s ``keep``)


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


def _tables() -> list[str]:
    """Every table but the configuration version's: a counter (started from the clock when its row is made), which
    the command only moves on; a restore moves it on too (:func:`config_version_bump`)."""
    from common.models import ConfigVersion

    with connection.cursor() as cursor:
        return sorted(set(connection.introspection.table_names(cursor)) - {ConfigVersion._meta.db_table})


def table_md5s(tables: list[str]) -> dict[str, str]:
    """Per table, an md5 of its rows in a fixed order: one query."""
    if not tables:
        return {}
    parts = [
        f"SELECT %s, md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), '')) FROM {_quote(table)} t"  # noqa: S608 — names from the catalogue
        for table in tables
    ]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), tables)
        return dict(cursor.fetchall())


def _sequences() -> dict[str, int | None]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sequencename, last_value FROM pg_sequences WHERE schemaname = current_schema()")
        return dict(cursor.fetchall())


def _copy_out(table: str) -> bytes:
    with connection.cursor() as cursor, cursor.copy(f"COPY {_quote(table)} TO STDOUT") as copy:
        return b"".join(bytes(block) for block in copy)


def _copy_in(table: str, rows: bytes) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {_quote(table)}")  # noqa: S608 — a name from the catalogue
        if rows:
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
    with connection.cursor() as cursor:
        for sequence, value in snapshot.sequences.items():
            cursor.execute("SELECT setval(%s, %s, true)", [_quote(sequence), value])
    config_version_bump()  # the rows came back without the signals that bump it


def _record(call: Callable[[], R]) -> tuple[R, Snapshot]:
    tables = _tables()
    before = table_md5s(tables)
    sequences_before = _sequences()
    named: set[str] = set()

    def record(execute, sql, params, many, context):
        named.update(QUOTED_NAME.findall(sql))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        result = call()
    after = table_md5s(tables)
    changed = [table for table in tables if before[table] != after[table]]
    depends = (named & set(tables)) | set(changed)  # the configuration version's table is not among them
    snapshot = Snapshot(
        pre_state={table: before[table] for table in sorted(depends)},
        rows={table: _copy_out(table) for table in changed},
        sequences={
            name: value
            for name, value in _sequences().items()
            if value is not None and value != sequences_before.get(name)
        },
        output=None,
    )
    return result, snapshot


def replayed(key: tuple, call: Callable[[], R], keep: Callable[[R], Any], revive: Callable[[Any], R]) -> R:
    """``call()`` — for real, or its rows restored from this worker's record of a run with the same ``key`` that
    started from the same content; ``keep`` turns its result into plain data to record, ``revive`` turns that back
    into a result after a restore (e.g. a model's primary key and a fresh query)."""
    if not snapshots_enabled() or not connection.in_atomic_block or connection.vendor != "postgresql":
        _stats.real += 1
        return call()
    full_key = (*key, connection.settings_dict["NAME"])
    recorded = _stats.keys.setdefault(full_key, [])
    for snapshot in recorded:
        if table_md5s(sorted(snapshot.pre_state)) == snapshot.pre_state:
            _restore(snapshot)
            _stats.restored += 1
            return revive(snapshot.output)
    result, snapshot = _record(call)
    snapshot.output = keep(result)
    _stats.real += 1
    if len(recorded) < MAX_SNAPSHOTS_PER_KEY:
        recorded.append(snapshot)
    return result


def demo_seed(*args: str) -> SeedOutput:
    """``manage.py seed_demo *args`` — for real, or restored from this worker's record of the same run.

    What it printed comes back either way.
    """
    return replayed(_key(args), lambda: _call(args), keep=lambda output: output, revive=lambda output: output)
