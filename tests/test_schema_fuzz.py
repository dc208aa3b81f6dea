"""Schemathesis against ``/api/schema/`` of the platform served as in production, with a key and without one.

The server is ``python -m platform.serve`` (one worker, ``DJANGO_DEBUG=false``, the offline model) on a database of
its own, migrated and seeded with ``seed_demo``; the keys come from ``create_api_key``. Each run is schemathesis'
CLI with every check (``--checks all``): any 5xx, a response that does not match its schema, a status the schema
does not list, a schema-valid request refused, an invalid one accepted — each fails the test, with schemathesis'
report (and the ``st replay`` command) in the failure message. Bounded: ``MAX_EXAMPLES`` cases per operation and
phase, ``MAX_SECONDS`` per run.

What is switched off, and why:

* ``--generation-allow-x00 false``: generated strings carry no NUL character. Django and DRF refuse NUL in every
  text field (``Null characters are not allowed.``), on purpose: PostgreSQL cannot store it. OpenAPI 3.0 has no
  way to say "any string but NUL" short of a pattern on every string.
* Positive data acceptance on the analytics operations only, for 400: ``days`` excludes ``start``/``end``, and
  ``start`` must not come after ``end``; OpenAPI 3.0 cannot state rules between two parameters, so the schema
  says them in words (a 400 naming the parameter) and schemathesis generates such pairs as "valid".
* Positive data acceptance on the message POSTs and the chat completion, for 400 and 404: the ``agent_id`` /
  ``model`` must name an enabled profile and the text must fit that profile's limit, which the schema cannot
  know (profiles are data); OpenAI's "messages must contain a user message" is a rule over an array's items
  OpenAPI 3.0 cannot state either. And for 409 and 422 there: schemathesis sends the same generated
  ``Idempotency-Key`` with different bodies (422) or while its first request runs (409), a rule over two
  requests that no schema states.
* Positive data acceptance on the answer feedback POST, for 400: its ``message_id`` must name an answer of that
  conversation (data again, as the profiles are); the fuzzer reaches a real conversation through the message
  POSTs' example ``session_id`` and rates a made-up message id.

* Throttles off on the served platform (``API_MESSAGE_RATE_PER_KEY``, ``API_RATE_PER_KEY``, ``AUTH_FAILURE_LIMIT``):
  thousands of requests from one key would otherwise be mostly 429s; the throttles have tests of their own.

Everything else runs as schemathesis ships it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.mcp_processes import free_port

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MAX_EXAMPLES = 12
MAX_SECONDS = 120

pytestmark = pytest.mark.timeout(600)


def _database_url(name: str) -> str:
    from tests.celery_fixtures import worker_database_url

    return worker_database_url().rsplit("/", 1)[0] + "/" + name


@contextlib.contextmanager
def _scratch_database():
    """A PostgreSQL database of its own on the test server, dropped afterwards (the suite's stays untouched)."""
    import psycopg
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("the fuzzer serves from PostgreSQL (scripts/test starts one)")
    db = connection.settings_dict
    name = f"fuzz_{secrets.token_hex(4)}"
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


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The platform served by ``platform.serve``: (base URL, debug+preview key, log path)."""
    tmp = tmp_path_factory.mktemp("fuzz")
    port = free_port()
    with _scratch_database() as database_url:
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
            # The fuzzer sends thousands of requests from one key and one address: throttles off (their 429s
            # are documented and tested in their own tests).
            "API_MESSAGE_RATE_PER_KEY": "off",
            "API_RATE_PER_KEY": "off",
            "AUTH_FAILURE_LIMIT": "0",
        }
        _manage(env, "migrate", "--no-input")
        _manage(env, "seed_demo")
        key = _manage(env, "create_api_key", "--tenant", "tenant_a", "--debug", "--preview").strip().splitlines()[-1]
        log_path = tmp / "server.log"
        with log_path.open("w") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "platform.serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                cwd=PROJECT_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                assert server.poll() is None, f"the server exited:\n{log_path.read_text()}"
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{base}/api/schema/?format=json", timeout=2).status_code == 200:
                        break
                assert time.monotonic() < deadline, f"the server did not answer:\n{log_path.read_text()}"
                time.sleep(0.3)
            yield base, key, log_path
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def _fuzz(base: str, tmp: Path, *headers: str) -> subprocess.CompletedProcess[str]:
    config = tmp / "schemathesis.toml"
    config.write_text(
        # Per operation: what OpenAPI 3.0 cannot say about valid requests (see the module docstring).
        "[[operations]]\n"
        'include-path-regex = "^/api/analytics/"\n'
        'checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "429", "503"]\n'
        "\n[[operations]]\n"
        'include-path-regex = "^/(api/(gateway|chat|debug/(route|plan))|v1/chat)"\n'
        'checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "422", '
        '"429", "503"]\n'
        "\n[[operations]]\n"
        'include-path-regex = "^/api/sessions/[^/]+/feedback$"\n'
        'checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "429", "503"]\n'
    )
    command = [
        str(Path(sys.executable).with_name("st")),
        "--config-file",
        str(config),
        "run",
        f"{base}/api/schema/?format=json",
        "--checks",
        "all",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--max-time",
        str(MAX_SECONDS),
        "--seed",
        "1",
        # One worker: with two, hypothesis' ast.parse in parallel threads hit CPython 3.11's "AST constructor
        # recursion depth mismatch" (a SystemError of the interpreter, not a finding) in a run.
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--generation-allow-x00",
        "false",
        "--no-color",
        "--continue-on-failure",
    ]
    for header in headers:
        command += ["--header", header]
    return subprocess.run(command, cwd=tmp, capture_output=True, text=True, timeout=MAX_SECONDS + 240)


def _report(run: subprocess.CompletedProcess[str], log_path: Path) -> str:
    return f"{run.stdout[-20000:]}\n{run.stderr[-3000:]}\n--- server log ---\n{log_path.read_text()[-5000:]}"


def test_the_api_with_a_debug_key_matches_its_schema_and_never_answers_5xx(served, tmp_path):
    base, key, log_path = served
    run = _fuzz(base, tmp_path, f"Authorization: Bearer {key}")
    assert run.returncode == 0, _report(run, log_path)


def test_the_api_without_a_key_matches_its_schema_and_never_answers_5xx(served, tmp_path):
    base, _, log_path = served
    run = _fuzz(base, tmp_path)
    assert run.returncode == 0, _report(run, log_path)
