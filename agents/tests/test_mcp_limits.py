"""An MCP call's time limit is the whole call's, and the answer names a tool's failure whole."""

from __future__ import annotations

import asyncio
import inspect
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from agents.mcp import STATUS_TIMEOUT, STATUS_UNAVAILABLE, Endpoint, ToolResult, runtime, tool_call

LIMIT_SECONDS = 1.0
HANG_GUARD_SECONDS = 60.0  # a call the limit did not end; the test has failed long before

SCHEMA = {"type": "object", "properties": {"msisdn": {"type": "string"}}}


class RuntimeClock:
    """The clock of the loop that runs every MCP call (``agents.mcp.runtime``), stopped, and moved only by the test.

    A call reads its deadline from that clock (the SDK's own timeouts and httpx's too), so a call that ends once the
    clock has moved by its limit, and not before, was ended by that limit, however slowly the machine ran."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.loop = runtime.loop()
        self.now = self.loop.time()
        monkeypatch.setattr(self.loop, "time", lambda: self.now)

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.loop.call_soon_threadsafe(lambda: None)  # wakes the loop: the timers now due run

    def calls_under_way(self) -> int:
        """The calls that have started (read their deadline) and wait."""

        async def count() -> int:
            return sum(
                task.get_coro().__qualname__ == "_call"  # type: ignore[union-attr]
                and inspect.getcoroutinestate(task.get_coro()) == inspect.CORO_SUSPENDED  # type: ignore[arg-type]
                for task in asyncio.all_tasks()
            )

        return asyncio.run_coroutine_threadsafe(count(), self.loop).result(HANG_GUARD_SECONDS)


def hang_guarded(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def call_ended_by_the_clock(
    clock: RuntimeClock, endpoint: Endpoint, tool: str = "consultar_fatura", *, session_open: bool = False
) -> ToolResult:
    """One call of ``tool``, the runtime's clock moved by the endpoint's limit once the call waits (with
    ``session_open``: once its session is open too, so that the limit meets the call itself rather than the
    handshake); the call must then end without the clock moving again."""
    arguments = {"msisdn": "5511999999999"}
    pool = ThreadPoolExecutor(1)
    try:
        ended = pool.submit(asyncio.run, tool_call(endpoint=endpoint, tool=tool, arguments=arguments, schema=SCHEMA))
        hang_guarded(lambda: clock.calls_under_way() == 1, "the call did not start")
        if session_open:
            hang_guarded(lambda: runtime.connection(endpoint).session is not None, "the session did not open")
        assert not ended.done()
        clock.advance(endpoint.timeout)
        return ended.result(timeout=HANG_GUARD_SECONDS)
    finally:
        pool.shutdown(wait=False)  # a call still under way ends on the real clock, once the test has failed


@pytest.fixture
def frozen_server() -> Iterator[tuple[str, Callable[[], int]]]:
    """A server that accepts connections and never answers: what a SIGSTOPped process looks like from outside
    (the kernel completes the handshake for it); with the number of connections it was asked for so far."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        accepted: list[socket.socket] = []

        def connections() -> int:
            sock.setblocking(False)
            while True:
                try:
                    accepted.append(sock.accept()[0])  # taken from the backlog, never read
                except BlockingIOError:
                    return len(accepted)

        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", connections
        for conn in accepted:
            conn.close()


def test_a_call_to_a_frozen_server_ends_at_its_limit_connecting_included(frozen_server, monkeypatch):
    url, connections = frozen_server
    clock = RuntimeClock(monkeypatch)
    endpoint = Endpoint("frozen", url, timeout=LIMIT_SECONDS)
    for number in (1, 2):  # the second call opens a new session too: still one limit, no wait for the old one
        result = call_ended_by_the_clock(clock, endpoint)
        assert result.status == STATUS_TIMEOUT
        assert result.error == f"no answer from frozen within {LIMIT_SECONDS:g}s"
        hang_guarded(lambda number=number: connections() >= number, "the call did not connect")
    assert connections() == 2


def test_a_call_to_a_slow_server_ends_at_its_limit(held_telecom_server, monkeypatch):
    clock = RuntimeClock(monkeypatch)
    endpoint = Endpoint("slow", held_telecom_server, timeout=LIMIT_SECONDS)
    for _ in range(2):  # the session serves on after a call's limit
        result = call_ended_by_the_clock(clock, endpoint, session_open=True)
        assert result.status == STATUS_TIMEOUT, result.error


def test_the_answer_names_why_a_tool_was_unavailable_whole(api, telecom):
    from agents.models import McpServer
    from common.config_version import config_version_bump
    from conversations.models import ToolCall

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    McpServer.objects.filter(name="telecom").update(endpoint=f"http://127.0.0.1:{port}/mcp")
    config_version_bump()

    response = api.post(
        "/api/gateway/message",
        {
            "agent_id": "telecom_contas",
            "payload": {
                "text": "Minha fatura veio alta",
                "session_id": "mcp-down",
                "context": {"msisdn": "5511999999999", "invoice_id": "INV001"},
            },
        },
        format="json",
    )

    assert response.status_code == 200
    calls = list(ToolCall.objects.filter(status=STATUS_UNAVAILABLE).values_list("error", flat=True))
    assert calls, "no tool call was made"
    answer = response.json()["answer"]
    assert all(error.startswith("ConnectError") for error in calls)  # the rows keep the detail for operators
    assert answer.count("não consegui consultar agora (unavailable: telecom could not be reached).") == len(calls)


def test_calls_on_an_open_session_to_a_server_that_froze_each_end_at_the_limit_and_recover_after(monkeypatch):
    """The probe's case: a session already open, then the server stops answering (SIGSTOP). Cancelling the SDK's
    call in place waited, shielded, to tell the frozen server — the second call took the limit plus ~5 s."""
    import os
    import signal

    from tests.mcp_processes import MCPServerProcess

    server = MCPServerProcess("telecom").start()
    try:
        endpoint = Endpoint("telecom", server.url, timeout=LIMIT_SECONDS)
        arguments = {"msisdn": "5511999999999"}

        def call(tool: str):
            return asyncio.run(tool_call(endpoint=endpoint, tool=tool, arguments=arguments, schema=SCHEMA))

        assert call("consultar_fatura").status == "ok"  # the session is open
        assert server.process is not None
        clock = RuntimeClock(monkeypatch)
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            for tool in ("consultar_fatura", "consultar_pagamentos", "consultar_fatura"):
                result = call_ended_by_the_clock(clock, endpoint, tool, session_open=True)
                assert result.status == STATUS_TIMEOUT, (tool, result.error)
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
            monkeypatch.undo()  # the runtime's own clock again
        deadline = time.monotonic() + HANG_GUARD_SECONDS
        while (result := call("consultar_pagamentos")).status != "ok" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert result.status == "ok", result.error  # no restart of anything: a new session
    finally:
        server.stop()


def test_a_tools_output_over_the_limit_is_cut_with_a_marker_before_anyone_reads_it(hostile_mcp, settings):
    from common.sizes import json_size
    from tests.hostile_mcp import BIG_CHARS

    result = asyncio.run(
        tool_call(endpoint=Endpoint("hostile", hostile_mcp, 10), tool="big_report", arguments={}, schema={})
    )

    assert result.ok and result.cut > BIG_CHARS
    assert json_size(result.result) <= settings.MCP_TOOL_OUTPUT_MAX_BYTES
    assert result.result["rows"] == BIG_CHARS  # the rest of the result as it was
    assert result.result["explanation"].startswith("BBB") and "…[cut:" in result.result["explanation"]
    assert result.as_dict()["cut"] == result.cut


def test_a_tools_output_within_the_limit_is_not_marked(hostile_mcp):
    result = asyncio.run(
        tool_call(endpoint=Endpoint("hostile", hostile_mcp, 10), tool="notify", arguments={"message": "oi"}, schema={})
    )

    assert result.result == {"sent": True, "explanation": "Avisado."}
    assert result.cut == 0 and "cut" not in result.as_dict()
