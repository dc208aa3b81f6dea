"""A server's answer is read off the wire up to MCP_RESPONSE_MAX_BYTES (agents/mcp_wire.py), against real servers.

The first two are the canary of docs/decisions/mcp-response-limit.md: they fail if the MCP SDK stops failing one
request alone, quoting the stream error, when its JSON answer raises one while it is read.
"""

from __future__ import annotations

import asyncio
import logging
import logging.config
import threading
import time
from collections.abc import Iterator

import httpx2
import pytest
import uvicorn

from agents.mcp import STATUS_ERROR, Endpoint, runtime, tool_call
from agents.mcp_wire import BoundedTransport, ResponseTooLarge
from tests.hostile_mcp import BIG_CHARS, HUGE_CHARS
from tests.mcp_processes import free_port


def call(url: str, tool: str, *, name: str = "hostile", arguments: dict | None = None):
    endpoint = Endpoint(name, url, 10)
    return asyncio.run(tool_call(endpoint=endpoint, tool=tool, arguments=arguments or {}, schema={})), endpoint


def test_an_answer_over_the_limit_is_not_read_its_call_fails_saying_so_and_the_session_serves_on(hostile_mcp):
    result, endpoint = call(hostile_mcp, "huge_report")
    session = runtime.connection(endpoint).session

    assert result.status == STATUS_ERROR and result.result is None
    assert "answer over MCP_RESPONSE_MAX_BYTES (1048576 bytes)" in result.error
    assert result.refused > 2 * HUGE_CHARS  # the declared length of the text and the structured copy
    assert result.as_dict()["refused"] == result.refused and "cut" not in result.as_dict()
    # An error, not a timeout: failed on reading the answer's length, not at the SDK's or the endpoint's limit.
    after, _ = call(hostile_mcp, "notify", arguments={"message": "oi"})
    assert after.ok and runtime.connection(endpoint).session is session  # the same session, not a reconnection


def test_with_the_limit_off_the_sdks_own_client_reads_the_whole_answer_and_the_output_is_cut(hostile_mcp, settings):
    settings.MCP_RESPONSE_MAX_BYTES = 0

    result, _ = call(hostile_mcp, "huge_report", name="hostile-stock")  # a session of its own, opened now

    assert result.ok and result.cut > HUGE_CHARS and not result.refused


def test_an_answer_under_the_limit_is_read_whole(hostile_mcp):
    result, _ = call(hostile_mcp, "big_report", name="hostile-big")

    assert result.ok and result.cut > BIG_CHARS and not result.refused


# -- the transport itself, against a server that streams its JSON without a length ---------------------------------


async def _streamed_json(scope, receive, send):
    """An ASGI app answering ``?bytes=N`` bytes of JSON in 64 KB chunks, with no Content-Length."""
    if scope["type"] != "http":
        return
    size = int(scope["query_string"].decode().removeprefix("bytes=") or 0)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    body = b'"' + b"x" * max(size - 2, 0) + b'"'
    for start in range(0, len(body), 65536):
        await send({"type": "http.response.body", "body": body[start : start + 65536], "more_body": True})
    await send({"type": "http.response.body", "body": b""})


@pytest.fixture(scope="module")
def streaming_server() -> Iterator[str]:
    port = free_port()
    served = uvicorn.Server(uvicorn.Config(_streamed_json, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=served.run, daemon=True)
    thread.start()
    while not served.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{port}/"
    served.should_exit = True
    thread.join(timeout=10)


def fetch(url: str, size: int, limit: int) -> bytes:
    async def run() -> bytes:
        async with httpx2.AsyncClient(transport=BoundedTransport(limit)) as client:
            response = await client.get(url, params={"bytes": size})
            return await response.aread()

    return asyncio.run(run())


def test_a_streamed_answer_stops_being_read_once_it_passes_the_limit(streaming_server):
    with pytest.raises(ResponseTooLarge) as raised:
        fetch(streaming_server, 5_000_000, 100_000)

    assert raised.value.limit == 100_000 and 100_000 < raised.value.size <= 100_000 + 65536
    assert "at least" in str(raised.value)


def test_a_streamed_answer_within_the_limit_is_read_whole(streaming_server):
    assert len(fetch(streaming_server, 100_000, 100_000)) == 100_000


def test_a_refused_answer_is_logged_once_as_the_platforms_warning_without_the_sdks_traceback(hostile_mcp, caplog):
    with caplog.at_level(logging.INFO):
        call(hostile_mcp, "huge_report", name="hostile-logged")

    refused = [record for record in caplog.records if "MCP_RESPONSE_MAX_BYTES" in record.getMessage()]
    assert [(record.name, record.levelname) for record in refused] == [("agents.mcp", "WARNING")]
    assert not [record for record in caplog.records if record.exc_info]
