"""Schemathesis against ``/api/schema/`` of the platform served as in production, with a key and without one.

The server is ``python -m platform.serve`` (one worker, ``DJANGO_DEBUG=false``, the offline model) on a database of
its own, migrated and seeded with ``seed_demo``; the keys come from ``create_api_key``. Each run is schemathesis'
CLI with every check (``--checks all``): any 5xx, a response that does not match its schema, a status the schema
does not list, a schema-valid request refused, an invalid one accepted — each fails the test, with schemathesis'
report (and the ``st replay`` command) in the failure message. Bounded by examples, not by time: ``MAX_EXAMPLES``
cases per operation and phase, each phase run once (given a ``--max-time``, schemathesis repeats the fuzzing and
stateful phases until the time is spent, so a run's size would be the machine's speed). Without a key every
operation but the public ones is a 401 given before the body is read (platform/tests/test_gate.py), so random
bodies reach nothing the coverage phase's cases do not, and no chain of requests gets past the first: that run has
the examples and coverage phases and leaves out the fuzzing and stateful ones. Nor do the coverage phase's cases of
an operation that needs a key (its ``security`` a key or a staff session, nothing anonymous) reach past that 401:
its query, headers and body are read only after the credentials (of 4,500 such cases, all but 11 were that 401,
and those a 404 of a path no route matches, as with a key), and the run with a key sends each of them where they
are read. So without a key the coverage phase runs on the operations anyone may call, and the examples phase gives
every operation a case (``fill-missing``, also where the schema has no example: 28 operations had none without a
key), each answered in the schema's shape. Should the schema's security requirements change shape, the filter
matches nothing and the coverage phase runs on every operation again.

Generated strings carry NUL characters, which the platform refuses everywhere (a 400 naming the field: no
PostgreSQL text can store one), the operations that take ``start``/``end`` are also sent the calendar's edge
dates, and the lists that take a ``cursor`` the cursor a real page of theirs gave and forged ones, as explicit
examples (tests/schema_fuzz_hooks.py).

What is switched off, and why:

* Positive data acceptance for 400 on the operations that take a string in their path or query (the sessions'
  key and the sessions list's filters, the debug usage's ``profile``, the MCP tool's name, a profile's conversation
  test runs — whose ``version`` and ``names`` must also name a version and tests the profile has): a NUL in it is a 400
  naming it, and OpenAPI 3.0 has no way to say "any string but NUL" short of a pattern on every string. The
  sessions list's ``agent_id`` must also name a profile and its ``cursor`` be one a page gave (data), and its
  ``tenant`` is a staff session's (a key names none).
* Positive data acceptance on the analytics operations only, for 400: ``days`` excludes ``start``/``end``, and
  ``start`` must not come after ``end``; OpenAPI 3.0 cannot state rules between two parameters, so the schema
  says them in words (a 400 naming the parameter) and schemathesis generates such pairs as "valid". Nor does a
  ``format: date`` have bounds: dates outside the range the analytics count are a 400 naming them.
* Positive data acceptance on the message POSTs, the chat completion and the responses, for 400 and 404: the
  ``agent_id`` / ``model`` must name an enabled profile and the text must fit that profile's limit, which the schema
  cannot know (profiles are data); OpenAI's "messages must contain a user message" is a rule over an array's items
  OpenAPI 3.0 cannot state either, nor "a JSON Schema the platform can fill" in a ``response_format``, and a
  ``previous_response_id`` or a response's id must name a stored response (data again). And for 409 and 422 there:
  schemathesis sends the same generated ``Idempotency-Key`` with different bodies (422) or while its first request
  runs (409), a rule over two requests that no schema states.
* Positive data acceptance on the escalations API, for 400: a list's ``profile`` must name a profile and its
  ``cursor`` be one a page gave (data again), and an action's ``text`` must not be blank nor ``team`` other than one
  of the profile's teams; the ids the fuzzer makes up name no escalation (404).
* Positive data acceptance on the answer feedback POST, for 400: its ``message_id`` must name an answer of that
  conversation (data again, as the profiles are); the fuzzer reaches a real conversation through the message
  POSTs' example ``session_id`` and rates a made-up message id.

* A conversation's events (``GET /api/sessions/{conversation_key}/events``) are read for ``EVENTS_READ_SECONDS``,
  not the run's 30 s: the stream stays open while the client does (a keep-alive comment every 15 s), and
  schemathesis reads an event stream until its request timeout. Its status and headers come at once (the
  conversation read, before the stream subscribes) and its first line (``: following``) once subscribed: 30 s only
  added two keep-alives, and cost 30 s a valid request (a run without ``--max-time`` spent six minutes on them).
  And it is given ``EVENTS_MAX_EXAMPLES`` cases in the fuzzing phase, not ``MAX_EXAMPLES``: its one generated
  input is the conversation key, and there schemathesis fills it with keys earlier responses gave (every case of a
  run with 12 was a 200 stream on a real conversation, each held for ``EVENTS_READ_SECONDS``: a third of the
  phase's time); the hostile and unknown keys (NUL, empty, too long, another tenant's) are the coverage phase's, sent
  in full.

* Throttles off on the served platform (``API_MESSAGE_RATE_PER_KEY``, ``API_MESSAGE_RATE_PER_SESSION``,
  ``API_RATE_PER_KEY``, ``AUTH_FAILURE_LIMIT``): thousands of requests from one key (and one example session)
  would otherwise be mostly 429s; the throttles have tests of their own.

Everything else runs as schemathesis ships it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest

from tests import forged_cursors
from tests.platform_instance import platform_served
from tests.schema_fuzz_hooks import FUZZ_CURSORS

MAX_EXAMPLES = 12
PHASES_WITHOUT_KEY = "examples,coverage"
# An operation that needs a key: the schema's security requirements of every API operation but the public ones.
NEEDS_A_KEY = '/security == [{"ApiKey": []}, {"cookieAuth": []}]'
EVENTS_READ_SECONDS = 2
EVENTS_MAX_EXAMPLES = 3
# A hung run must not hold the suite for ever: far above a run's time on a busy machine, never a measure of speed.
RUN_TIMEOUT_SECONDS = 360
HOOKS = Path(__file__).with_name("schema_fuzz_hooks.py")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The platform served by ``platform.serve``: (base URL, debug+preview key, log path)."""
    # The fuzzer sends thousands of requests from one key and one address: throttles off (their 429s are documented
    # and tested in their own tests).
    with platform_served(
        tmp_path_factory.mktemp("fuzz"),
        prefix="fuzz",
        API_MESSAGE_RATE_PER_KEY="off",
        API_MESSAGE_RATE_PER_SESSION="off",
        API_RATE_PER_KEY="off",
        AUTH_FAILURE_LIMIT="0",
    ) as instance:
        yield instance.base, instance.key, instance.log_path


@pytest.fixture(scope="module")
def cursors(served) -> dict[str, dict]:
    """A cursor each list gave, by operation path (:data:`tests.schema_fuzz_hooks.FUZZ_CURSORS`): two conversations
    handed to a person, so that the conversations, a conversation's messages and the escalations have a second page."""
    base, key, _ = served
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as http:
        for session in ("fuzz-paged-1", "fuzz-paged-2"):
            body = {
                "agent_id": "telecom_contas",
                "payload": {"text": "quero falar com um atendente", "session_id": session},
            }
            assert http.post("/api/gateway/message", json=body).status_code == 200
        conversation = http.get("/api/sessions", params={"limit": 1}).json()
        key_of = conversation["sessions"][0]["conversation_key"]
        pages = {
            "/api/sessions": conversation,
            "/api/sessions/{conversation_key}/messages": http.get(
                f"/api/sessions/{key_of}/messages", params={"limit": 1}
            ).json(),
            "/api/escalations": http.get("/api/escalations", params={"limit": 1}).json(),
        }
    return {
        path: {
            "cursor": parse_qs(urlsplit(page["next"]).query)["cursor"][0],
            "path_parameters": {"conversation_key": key_of} if "{conversation_key}" in path else {},
        }
        for path, page in pages.items()
    }


def _fuzz(
    base: str, tmp: Path, *headers: str, phases: str = "", cursors: dict[str, dict] | None = None
) -> subprocess.CompletedProcess[str]:
    config = tmp / "schemathesis.toml"
    # Without a key: every operation in the examples phase, the coverage phase on the public ones (module docstring).
    without_key = (
        ""
        if headers
        else "[phases.examples]\nfill-missing = true\n\n"
        f"[[operations]]\ninclude-by = '{NEEDS_A_KEY}'\nphases.coverage.enabled = false\n\n"
    )
    config.write_text(
        f'hooks = "{HOOKS}"\n\n'
        f"{without_key}"
        # Per operation: what OpenAPI 3.0 cannot say about valid requests (see the module docstring).
        "[[operations]]\n"
        'include-path-regex = "^/api/(sessions(/|$)|debug/(usage|mcp/call/)|profiles/)"\n'
        'checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "429", "503"]\n'
        "\n[[operations]]\n"
        'include-path-regex = "^/api/escalations"\n'
        'checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429", "503"]\n'
        "\n[[operations]]\n"
        'include-path-regex = "^/api/analytics/"\n'
        'checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "429", "503"]\n'
        "\n[[operations]]\n"
        'include-path-regex = "^/(api/(gateway|chat|debug/(route|plan))|v1/(chat|responses))"\n'
        'checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "422", '
        '"429", "503"]\n'
        # A conversation's events: a stream that stays open (see the module docstring), read this long.
        "\n[[operations]]\n"
        'include-path-regex = "^/api/sessions/[^/]+/events$"\n'
        f"request-timeout = {EVENTS_READ_SECONDS}\n"
        f"generation.max-examples = {EVENTS_MAX_EXAMPLES}\n"
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
        "--seed",
        "1",
        # One worker: with two, hypothesis' ast.parse in parallel threads hit CPython 3.11's "AST constructor
        # recursion depth mismatch" (a SystemError of the interpreter, not a finding) in a run.
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--no-color",
        "--continue-on-failure",
    ]
    for header in headers:
        command += ["--header", header]
    if phases:
        command += ["--phases", phases]
    env = {**os.environ, FUZZ_CURSORS: json.dumps(cursors or {})}
    return subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS)


def _report(run: subprocess.CompletedProcess[str], log_path: Path) -> str:
    return f"{run.stdout[-20000:]}\n{run.stderr[-3000:]}\n--- server log ---\n{log_path.read_text()[-5000:]}"


def test_the_api_with_a_debug_key_matches_its_schema_and_never_answers_5xx(served, cursors, tmp_path):
    base, key, log_path = served
    run = _fuzz(base, tmp_path, f"Authorization: Bearer {key}", cursors=cursors)
    assert run.returncode == 0, _report(run, log_path)
    access_log = log_path.read_text()
    assert "%00" in access_log, "no NUL character was sent"
    assert "=9999-12-31" in access_log and "=0001-01-01" in access_log, "the calendar's edges were not sent"
    for path, given in cursors.items():
        assert given["cursor"] in access_log or quote(given["cursor"], safe="") in access_log, f"{path}'s own cursor"
    forged = forged_cursors.SESSIONS["a position beyond the calendar in UTC"]
    assert forged in access_log or quote(forged, safe="") in access_log, "the forged cursors were not sent"


def test_the_api_without_a_key_matches_its_schema_and_never_answers_5xx(served, tmp_path):
    base, _, log_path = served
    run = _fuzz(base, tmp_path, phases=PHASES_WITHOUT_KEY)
    assert run.returncode == 0, _report(run, log_path)
