"""Other databases and instances of the platform for the tests.

A migrated database, made once per run: ``migrate`` takes ~16 s of CPU on an empty database, and every worker's test
database, every served instance and every production-like stack would otherwise run it again. The first process that
needs it migrates a database of the run's own (its name in ``TEST_MIGRATED_DATABASE``, chosen by the process that
starts the run and dropped when that one ends); the others wait for it on an advisory lock. Each worker's test
database is then created from it as a template (``TEST["TEMPLATE"]``; pytest-django's ``migrate`` that follows finds
nothing left to apply). Stacks on a PostgreSQL server of their own restore a ``pg_dump`` of it (or of the seeded one,
below) before their ``migrate``. The same for SQLite (:func:`migrated_sqlite`): the runs of tests/test_sqlite_too.py
each copy a file the first of them migrated, instead of migrating (~35 s of CPU there) once a run each.

Another instance of the platform, served as in production, for tests that talk to one over HTTP (the schema fuzzer,
the A2A TCK, the gateway's second deployments): a scratch PostgreSQL database of its own copied from the run's seeded
one, an API key from ``create_api_key``, and ``python -m platform.serve`` (one worker) on a free port. The seeded
database is the migrated one after ``seed_demo``, made once a run as the migrated one is (:func:`seeded_database`):
each instance had run the seed itself, the same rows each time (about 4 s of CPU and PostgreSQL's writes an
instance); the demo's rows live in the database alone, none in ``VAR_DIR``."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from django.conf import settings
from django.db import connection

from scripts import services
from tests.celery_fixtures import worker_database_url
from tests.guarded import guarded_spawn
from tests.mcp_processes import free_port

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MIGRATED_DATABASE = "TEST_MIGRATED_DATABASE"  # the environment variable naming the run's migrated database
# The environment variable naming a migrated SQLite file to copy as the test database (tests/test_sqlite_too.py's
# runs, with ``--reuse-db``: pytest-django's ``migrate`` that follows finds nothing left to apply).
MIGRATED_SQLITE = "TEST_MIGRATED_SQLITE"

# The served instance's key, made on its copy of the seeded database: a debug+preview key of ``tenant_a``.
MAKE_KEY = ("create_api_key", "--tenant", "tenant_a", "--debug", "--preview", "--answer")

_named_here = False  # whether this process chose the name (and drops the database when the run ends)
_dumps: dict[str, Path] = {}  # this process's pg_dump of each database a stack asked for, by name


def pytest_configure(config: pytest.Config) -> None:
    """The process that starts the run names its migrated database; xdist's workers inherit the name."""
    global _named_here
    if not os.environ.get(MIGRATED_DATABASE):
        os.environ[MIGRATED_DATABASE] = f"migrated_{secrets.token_hex(4)}"
        _named_here = True


def pytest_unconfigure(config: pytest.Config) -> None:
    for dump in _dumps.values():
        shutil.rmtree(dump.parent, ignore_errors=True)
    if not _named_here:
        return
    for made in (_sqlite_path(), _sqlite_path().with_suffix(".lock")):
        made.unlink(missing_ok=True)
    if connection.vendor != "postgresql":
        return
    name = os.environ[MIGRATED_DATABASE]
    with contextlib.suppress(psycopg.Error), postgres_server() as server:
        # With the databases of earlier states made from it (tests/migration_moves.py), named after it.
        made = server.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (f"{name}_",))
        for (other,) in [(name,), *made.fetchall()]:
            server.execute(f'DROP DATABASE IF EXISTS "{other}" WITH (FORCE)')


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """pytest-django's hook, before it creates the test databases: on PostgreSQL, copied from the migrated one."""
    if connection.vendor == "postgresql":
        settings.DATABASES["default"].setdefault("TEST", {})["TEMPLATE"] = migrated_database()
    elif connection.vendor == "sqlite" and os.environ.get(MIGRATED_SQLITE):
        copy = Path(settings.VAR_DIR) / "test-db.sqlite3"
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(os.environ[MIGRATED_SQLITE], copy)
        settings.DATABASES["default"].setdefault("TEST", {})["NAME"] = str(copy)


def _database_url(name: str) -> str:
    return worker_database_url().rsplit("/", 1)[0] + "/" + name


@contextlib.contextmanager
def postgres_server() -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection to the test server's ``postgres`` database."""
    db = connection.settings_dict
    with psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"] or None,
        password=db["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    ) as server:
        yield server


def migrated_database() -> str:
    """The name of the run's migrated database on the test server, migrated by the first process that asks (the
    others wait on an advisory lock). Nobody connects to it: it is only copied."""
    return _made_once(os.environ[MIGRATED_DATABASE], None, ("migrate", "--no-input"))


def seeded_database() -> str:
    """The name of the run's seeded database on the test server: a copy of the migrated one after ``seed_demo``,
    made by the first process that asks (the others wait on an advisory lock). Nobody connects to it: it is only
    copied (:func:`platform_served`)."""
    return _made_once(f"{os.environ[MIGRATED_DATABASE]}_seeded", migrated_database(), ("seed_demo",))


def _made_once(name: str, template: str | None, command: tuple[str, ...]) -> str:
    """Database ``name``, made by the first process that asks: ``template`` copied (an empty database without one),
    then ``manage.py command`` run on it; the others wait on an advisory lock."""
    with postgres_server() as server:
        server.execute("SELECT pg_advisory_lock(hashtext(%s))", (name,))
        try:
            if server.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                building = f"{name}_building"  # renamed once made: a half-made one is never copied
                server.execute(f'DROP DATABASE IF EXISTS "{building}"')
                server.execute(f'CREATE DATABASE "{building}"' + (f' TEMPLATE "{template}"' if template else ""))
                manage({**os.environ, "DATABASE_URL": _database_url(building)}, *command)
                server.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        finally:
            server.execute("SELECT pg_advisory_unlock(hashtext(%s))", (name,))
    return name


def _sqlite_path() -> Path:
    return Path(tempfile.gettempdir()) / f"{os.environ[MIGRATED_DATABASE]}.sqlite3"


def migrated_sqlite(env: dict[str, str]) -> Path:
    """The run's migrated SQLite database file, migrated by the first process that asks with ``env`` (its
    ``DATABASE_URL`` replaced; the others wait on a lock file) and removed when the run ends. Nobody opens it: it
    is only copied."""
    path = _sqlite_path()
    with path.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not path.exists():
            building = path.with_suffix(".building")  # renamed once migrated: a half-made one is never copied
            building.unlink(missing_ok=True)
            manage({**env, "DATABASE_URL": f"sqlite:///{building}"}, "migrate", "--no-input")
            with contextlib.closing(sqlite3.connect(building)) as migrated:  # one file: its WAL written back
                migrated.execute("PRAGMA journal_mode=DELETE")
            building.rename(path)
    return path


def _postgres_tool(tool: str, *args: str | Path) -> None:
    """One of the test server's client programs (``pg_dump``, ``pg_restore``), run to its end."""
    done = subprocess.run(
        [str(services.postgres_bindir() / tool), *map(str, args)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{tool} failed:\n{done.stdout}\n{done.stderr}"


def restore_migrated(url: str) -> None:
    """The run's migrated database restored into the empty database at ``url`` (another server's): what ``migrate``
    would have written, the data migrations' rows included."""
    _restore(migrated_database(), url)


def restore_seeded(url: str) -> None:
    """The run's seeded database (:func:`seeded_database`) restored into the empty database at ``url`` (another
    server's): what ``migrate`` and then ``seed_demo`` would have written."""
    _restore(seeded_database(), url)


def _restore(name: str, url: str) -> None:
    if name not in _dumps:
        dump = Path(tempfile.mkdtemp(prefix="dumped-")) / f"{name}.dump"
        _postgres_tool("pg_dump", "--format=custom", "--no-owner", "--file", dump, _database_url(name))
        _dumps[name] = dump
    _postgres_tool("pg_restore", "--no-owner", "--exit-on-error", "--dbname", url, _dumps[name])


@contextlib.contextmanager
def scratch_database(prefix: str = "scratch", *, seeded: bool = False) -> Iterator[str]:
    """A migrated PostgreSQL database of its own on the test server (its URL), copied from the run's migrated one (with
    ``seeded``, from its seeded one) and dropped afterwards (the suite's stays untouched). Skips the test where the
    suite does not run on PostgreSQL."""
    if connection.vendor != "postgresql":
        pytest.skip("a served instance runs on PostgreSQL (scripts/test starts one)")
    template = seeded_database() if seeded else migrated_database()
    name = f"{prefix}_{secrets.token_hex(4)}"
    with postgres_server() as server:
        try:
            server.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            yield _database_url(name)
        finally:
            server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(env: dict[str, str], *args: str) -> str:
    """``manage.py args`` in the instance's environment; its output (fails the test when it fails)."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@dataclass
class Instance:
    """A served instance: its address, a debug+preview key of ``tenant_a``, its environment and log."""

    base: str
    key: str
    env: dict[str, str]
    log_path: Path
    server: subprocess.Popen[bytes] | None = None

    def manage(self, *args: str) -> str:
        return manage(self.env, *args)

    def log(self) -> str:
        return self.log_path.read_text()


@contextlib.contextmanager
def platform_served(
    tmp: Path,
    *,
    prefix: str = "served",
    before_serve: Callable[[Instance], None] | None = None,
    **environment: str,
) -> Iterator[Instance]:
    """The platform served by ``platform.serve`` (``DJANGO_DEBUG=false``, the offline model) on a scratch copy of the
    run's seeded database (the demo); ``environment`` adds or overrides variables; ``before_serve`` may configure it
    (``instance.manage(...)``, its address and key known) before it starts. Stopped and its database dropped
    afterwards."""
    port = free_port()
    with scratch_database(prefix, seeded=True) as database_url:
        env = {
            **os.environ,
            "PYTHONPATH": str(PROJECT_ROOT),
            "DJANGO_SETTINGS_MODULE": "platform.settings",
            "DATABASE_URL": database_url,
            "DJANGO_DEBUG": "false",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_SECURE_SSL_REDIRECT": "false",
            "DJANGO_SECURE_COOKIES": "false",
            "VAR_DIR": str(tmp / "var"),
            "CACHE_DIR": str(tmp / "cache"),
            "OFFLINE_LLM_LATENCY_MS": "0",
            "OPENAI_BASE_URL": "",
            "OPENAI_API_KEY": "",
            "LOG_LEVEL": "WARNING",
            **environment,
        }
        key = manage(env, *MAKE_KEY).strip().splitlines()[-1]
        instance = Instance(base=f"http://127.0.0.1:{port}", key=key, env=env, log_path=tmp / "server.log")
        if before_serve is not None:
            before_serve(instance)
        server = instance.server = guarded_spawn(  # killed with the test process, however it ends
            ["-m", "platform.serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            env=env,
            log_path=instance.log_path,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                assert server.poll() is None, f"the server exited:\n{instance.log()}"
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{instance.base}/api/schema/?format=json", timeout=2).status_code == 200:
                        break
                assert time.monotonic() < deadline, f"the server did not answer:\n{instance.log()}"
                time.sleep(0.3)
            yield instance
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
