"""Another instance of the platform, served as in production, for tests that talk to one over HTTP (the schema
fuzzer, the gateway's second deployment): a scratch PostgreSQL database of its own, migrated and seeded with
``seed_demo``, an API key from ``create_api_key``, and ``python -m platform.serve`` (one worker) on a free port."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.mcp_processes import free_port

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def _database_url(name: str) -> str:
    from tests.celery_fixtures import worker_database_url

    return worker_database_url().rsplit("/", 1)[0] + "/" + name


@contextlib.contextmanager
def scratch_database(prefix: str = "scratch") -> Iterator[str]:
    """A PostgreSQL database of its own on the test server (its URL), dropped afterwards (the suite's stays
    untouched). Skips the test where the suite does not run on PostgreSQL."""
    import psycopg
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("a served instance runs on PostgreSQL (scripts/test starts one)")
    db = connection.settings_dict
    name = f"{prefix}_{secrets.token_hex(4)}"
    admin = psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"] or None,
        password=db["PASSWORD"] or None,
        dbname="postgres",
        autocommit=True,
    )
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        yield _database_url(name)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


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
    """The platform served by ``platform.serve`` (``DJANGO_DEBUG=false``, the offline model) on a scratch database;
    ``environment`` adds or overrides variables; ``before_serve`` may configure it (``instance.manage(...)``, its
    address and key known) before it starts. Stopped and its database dropped afterwards."""
    port = free_port()
    with scratch_database(prefix) as database_url:
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
        manage(env, "migrate", "--no-input")
        manage(env, "seed_demo")
        made = manage(env, "create_api_key", "--tenant", "tenant_a", "--debug", "--preview", "--answer")
        key = made.strip().splitlines()[-1]
        instance = Instance(base=f"http://127.0.0.1:{port}", key=key, env=env, log_path=tmp / "server.log")
        if before_serve is not None:
            before_serve(instance)
        with instance.log_path.open("w") as log:
            server = instance.server = subprocess.Popen(
                [sys.executable, "-m", "platform.serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                cwd=PROJECT_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
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
