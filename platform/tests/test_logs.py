"""Logs without secrets or personal data: the web server's and Django's handlers, and the Celery worker's."""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from uvicorn.logging import AccessFormatter

from common.endpoints import endpoints_masked_in
from common.masking import SECRET_MASK, redact
from common.personal_data import DETECTORS, PERSONAL_DATA_KINDS
from platform.logs import (
    _SECRET_QUERY,
    RedactFilter,
    TaskResultFilter,
    nothing_to_mask,
    redact_line,
    uvicorn_log_config,
)
from tests.mcp_processes import free_port

ROOT = Path(__file__).resolve().parents[2]
KEY = "ark_1a2b3c4d_Q0DOsecretsecretsecret"
PROBE_LINE = "Error executing tool consultar_fatura: Linha (11) 98765-4321 não encontrada"


def record(name: str, msg: str, args: tuple | dict | None = None, level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def written(handler_record: logging.LogRecord, formatter: logging.Formatter | None = None) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter or logging.Formatter("%(levelname)s %(name)s %(message)s"))
    handler.addFilter(RedactFilter())
    handler.handle(handler_record)
    return stream.getvalue()


def test_a_websocket_url_with_a_key_is_logged_without_the_key():
    line = written(
        record("uvicorn.error", '%s - "WebSocket %s" [accepted]', ("127.0.0.1:5000", f"/ws/chat/a/s/?key={KEY}"))
    )

    assert KEY not in line
    assert '"WebSocket /ws/chat/a/s/?key=***" [accepted]' in line


def test_an_access_line_keeps_its_fields_and_loses_every_credential_in_its_query():
    access = record(
        "uvicorn.access",
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "GET", f"/api/x?tenant=a&api_key={KEY}&access_token=tok123&page=2", "1.1", 200),
    )

    line = written(access, AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False))

    assert KEY not in line and "tok123" not in line
    assert line.strip() == '127.0.0.1:5000 - "GET /api/x?tenant=a&api_key=***&access_token=***&page=2 HTTP/1.1" 200 OK'


def test_the_probes_mcp_warning_logs_the_phone_masked():
    error = RuntimeError(PROBE_LINE)

    line = written(record("agents.mcp", "MCP %s error: %s", ("telecom.consultar_fatura", error), logging.WARNING))

    assert "98765-4321" not in line
    assert "MCP telecom.consultar_fatura error: Error executing tool consultar_fatura: Linha [PHONE] não" in line


def test_cpf_card_email_and_bearer_tokens_are_masked_in_a_line_and_its_traceback():
    try:
        raise ValueError("cliente joao.silva@example.com, cartão 4111 1111 1111 1111")
    except ValueError:
        failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "CPF %s with %s", None, sys.exc_info())
    failed.args = ("123.456.789-09", f"Authorization: Bearer {KEY}")

    line = written(failed)

    for raw in ("123.456.789-09", "joao.silva@example.com", "4111 1111 1111 1111", KEY):
        assert raw not in line
    assert "CPF [CPF] with Authorization: Bearer ***" in line
    assert "[EMAIL], cartão [CARD ••••1111]" in line


@contextlib.contextmanager
def every_line_written(level: int = logging.DEBUG):
    """What a redacting handler on the root logger writes meanwhile, every logger at ``level``."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    handler.addFilter(RedactFilter())
    root = logging.getLogger()
    before = root.level
    root.addHandler(handler)
    root.setLevel(level)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(before)


def test_the_http_clients_request_lines_name_the_host_and_path_but_no_credential():
    import httpx
    import httpx2

    from tests.webhook_receiver import Receiver

    receiver = Receiver()
    port = receiver.server.server_address[1]
    url = f"http://hookuser:h00k-pw@127.0.0.1:{port}/hook?sig=s1g-value&x=plain-v4lue"
    try:
        with every_line_written() as lines:
            httpx.post(url, content=b"{}")
            httpx2.post(url, content=b"{}")
    finally:
        receiver.stop()
    text = lines.getvalue()

    assert len(receiver.posts) == 2  # both requests were made and logged
    assert text.count(f"HTTP Request: POST http://***@127.0.0.1:{port}/hook?sig=***&x=*** ") == 2
    for secret in ("hookuser", "h00k-pw", "s1g-value", "plain-v4lue"):
        assert secret not in text


def test_an_mcp_tool_call_logs_no_credential_of_its_endpoint_at_any_level(mcp_servers):
    from agents.mcp import Endpoint, tool_call

    address = mcp_servers["telecom"].replace("http://", "http://mcpuser:mcp-pa55@") + "?token=mcp-t0ken"
    down = "http://mcpuser:mcp-pa55@127.0.0.1:9/mcp?token=mcp-t0ken"  # nothing listens: the error path's lines
    with every_line_written() as lines:
        called = asyncio.run(
            tool_call(
                endpoint=Endpoint("telecom", address, 5.0),
                tool="consultar_fatura",
                arguments={"msisdn": "5511999999999"},
                schema={},
            )
        )
        failed = asyncio.run(
            tool_call(endpoint=Endpoint("down", down, 2.0), tool="consultar_fatura", arguments={}, schema={})
        )
    text = lines.getvalue()

    assert called.ok and not failed.ok, (called, failed)
    assert "HTTP Request: POST http://***@127.0.0.1:" in text  # the SDK's HTTP client logged its requests
    for secret in ("mcpuser", "mcp-pa55", "mcp-t0ken"):
        assert secret not in text
        assert secret not in failed.error and secret not in repr(failed)


def test_a_line_without_digits_or_at_signs_is_left_as_it_is():
    plain = record("django.request", "Not Found: %s", ("/api/nowhere",))

    RedactFilter().filter(plain)

    assert plain.msg == "Not Found: %s" and plain.args == ("/api/nowhere",)
    assert redact_line("serving platform.asgi") == "serving platform.asgi"


def _every_step(text: str) -> str:
    """What :func:`redact_line` does to a line when it runs every step (the URLs, the query, the detectors)."""
    text = _SECRET_QUERY.sub(lambda match: match.group(1) + SECRET_MASK, endpoints_masked_in(text))
    return str(redact(text))


def test_an_access_line_with_nothing_to_mask_runs_no_detector_and_is_written_as_before(monkeypatch):
    redacted = []

    def counted(obj):
        redacted.append(obj)
        return redact(obj)

    monkeypatch.setattr("platform.logs.redact", counted)
    formatter = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False)
    args = ("127.0.0.1:51234", "POST", "/v1/agents/telecom_contas/messages", "1.1", 200)

    line = written(record("uvicorn.access", '%s - "%s %s HTTP/%s" %d', args), formatter)

    assert redacted == []
    assert line.strip() == '127.0.0.1:51234 - "POST /v1/agents/telecom_contas/messages HTTP/1.1" 200 OK'
    phoned = ("127.0.0.1:51234", "GET", "/api/call:11987654321", "1.1", 404)
    line = written(record("uvicorn.access", '%s - "%s %s HTTP/%s" %d', phoned), formatter)
    assert len(redacted) == 2  # the line, then its path (its arguments cleaned one by one)
    assert line.strip() == '127.0.0.1:51234 - "GET /api/call:[PHONE] HTTP/1.1" 404 Not Found'


def test_a_line_said_to_hold_nothing_to_mask_is_one_every_step_leaves_as_it_is():
    generator = random.Random(60)
    alphabet = "0123456789" * 3 + " .()/+-" * 2 + ':"_aZxé@=[#?&' + "\n"

    def number() -> str:  # digits in groups, as a phone, a CPF or a card is written, 5 to 16 of them
        groups = [str(generator.randrange(10**size)).zfill(size) for size in generator.choices((1, 2, 3, 4), k=5)]
        text = "".join(group + generator.choice(("", " ", "-", ".", ") ", "/")) for group in groups)
        return generator.choice(("", "+", "(")) + text[: generator.randint(5, 22)]

    lines = ["".join(generator.choice(alphabet) for _ in range(generator.randint(1, 40))) for _ in range(20_000)] + [
        f"ligue {number()} hoje" for _ in range(20_000)
    ]
    lines += [
        "ligue +1 234 5678 hoje",  # a phone of 8 digits: the shortest number a detector accepts
        "ligue +1 234 567 hoje",
        "cpf 529.982.247-25 ok",
        "cnpj 11.222.333/0001-81",
        "card 4111 1111 1111 1111",
        "(11) 98765-4321",
        "[CPF_1] said",
        "Authorization: Bearer abcdefghijkl",
        "GET http://user:pw@host/x?token=1",
        '192.168.100.200:54321 - "GET / HTTP/1.1" 200',
    ]
    quiet = [line for line in lines if nothing_to_mask(line)]

    assert {kind for kind, _pattern, _accept in DETECTORS} == set(PERSONAL_DATA_KINDS)  # the detectors it reasons on
    assert [line for line in quiet if _every_step(line) != line] == []
    assert [line for line in lines if redact_line(line) != _every_step(line)] == []
    # Both sides are there: lines told apart by the digits alone, and numbers found one digit past the bound.
    assert 5_000 < len(quiet) < len(lines) - 5_000
    assert sum(_every_step(line) != line for line in lines) > 2_000
    assert not nothing_to_mask("ligue +1 234 5678 hoje") and nothing_to_mask("ligue +1 234 567 hoje")
    assert not nothing_to_mask('192.168.100.200:54321 - "GET / HTTP/1.1" 200')  # 12 digits in a run: detectors


def test_the_success_line_of_a_task_keeps_name_id_and_time_but_not_the_result():
    context = {
        "id": "abc",
        "name": "routing.specialist_step",
        "runtime": 0.25,
        "return_value": "{'answer': 'R$ 289,90'}",
    }
    success = record("celery.app.trace", "Task %(name)s[%(id)s] succeeded in %(runtime)ss: %(return_value)s", context)
    success.data = dict(context)

    TaskResultFilter().filter(success)

    assert success.getMessage() == "Task routing.specialist_step[abc] succeeded in 0.25s"
    assert "return_value" not in success.data


def test_djangos_console_handler_and_uvicorns_handlers_carry_the_filter():
    root = logging.getLogger()
    assert any(isinstance(f, RedactFilter) for handler in root.handlers for f in handler.filters)
    config = uvicorn_log_config()
    assert all("redact" in handler["filters"] for handler in config["handlers"].values())


@pytest.mark.slow
def test_the_production_server_logs_neither_keys_nor_personal_data(tmp_path):
    import websockets.sync.client

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VAR_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)  # SQLite in tmp_path: the requests below need no data
    log = (tmp_path / "web.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "platform.serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as probe:
                    probe.sendall(f"GET /nowhere?key={KEY}&phone=11987654321 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                    if probe.recv(65536).startswith(b"HTTP/1.1"):
                        break
            except OSError:
                time.sleep(0.3)
        else:
            pytest.fail("platform.serve did not answer")
        # Refused or closed: either way the server logged the URL.
        with (
            contextlib.suppress(Exception),
            websockets.sync.client.connect(
                f"ws://127.0.0.1:{port}/ws/chat/telecom_contas/s1/?key={KEY}", open_timeout=10
            ) as ws,
        ):
            ws.recv(timeout=10)
        time.sleep(1)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=40)
        log.close()
    text = (tmp_path / "web.log").read_text(encoding="utf-8", errors="replace")

    assert "/nowhere?key=***" in text
    assert "WebSocket /ws/chat/telecom_contas/s1/?key=***" in text
    assert KEY not in text and "11987654321" not in text


@pytest.mark.slow
def test_the_worker_logs_that_a_task_succeeded_but_not_its_result_and_masks_personal_data(celery_worker):
    from platform.celery import app

    marker = "R$ 289,90 tracking RL123456789BR"
    result = app.send_task("celery.accumulate", args=(marker,))
    assert result.get(timeout=10) == [marker]
    app.send_task("no.such.task", args=("joao.silva@example.com", "(11) 98765-4321"))
    succeeded = f"Task celery.accumulate[{result.id}] succeeded in"
    deadline = time.monotonic() + 60  # a hang guard
    # The pool's process logs the success after the result is stored: the caller may have it, and the next task's
    # refusal may be logged, before that line is written.
    awaited = ("no.such.task", succeeded)
    while time.monotonic() < deadline and not all(line in celery_worker.output() for line in awaited):
        time.sleep(0.2)
    text = celery_worker.output()

    assert succeeded in text
    assert marker not in text and "RL123456789BR" not in text
    assert "no.such.task" in text  # the unregistered task's message, arguments included, is logged...
    assert "[EMAIL]" in text and "joao.silva@example.com" not in text and "98765-4321" not in text  # ...masked
