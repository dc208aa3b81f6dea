"""How much of an MCP server's answer the platform reads off the wire: at most ``MCP_RESPONSE_MAX_BYTES`` a message.

A tool's output is cut to ``MCP_TOOL_OUTPUT_MAX_BYTES`` before anything reads it (:mod:`agents.mcp`), but the SDK
reads and parses a server's whole answer first: a server answering 3 MB made the process read, decode and validate
3 MB to keep 16 KB, holding the interpreter long enough to slow every other tenant served by it. So the HTTP client
the SDK is given stops reading an answer at the limit:

* a JSON answer (``application/json``, the whole JSON-RPC message) over the limit — said by its ``Content-Length``
  or found while it streams — raises :class:`ResponseTooLarge`, an ``httpx`` stream error: the SDK fails that
  request alone with a parse error that carries this module's message (:func:`too_large_in`), and the session goes
  on serving other calls;
* a Server-Sent Event is bounded by the SDK's own ``max_sse_event_size``, given the same limit.

``MCP_RESPONSE_MAX_BYTES=0`` reads answers whole (SSE events up to the SDK's own default). Either way the client
sends nothing to an address the outbound policy refuses: :mod:`agents.mcp` gives it that transport. The SDK's
handling of a stream error in a JSON answer is not a documented contract: a canary test
(``agents/tests/test_mcp_wire.py``) fails if it changes; ``docs/decisions/mcp-response-limit.md`` says why.

Pure: imports no app.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator

import httpx2

# The SDK's own timeouts for its default client: 30 s to connect, write and wait for a pooled connection, 300 s to
# read (a server may hold its event stream open); each call is bounded by the server's timeout anyway.
TIMEOUT = httpx2.Timeout(30.0, read=300.0)
_TOO_LARGE = re.compile(r"answer over MCP_RESPONSE_MAX_BYTES \((\d+) bytes\): (?:at least )?(\d+) bytes, not read")


class ResponseTooLarge(httpx2.StreamError):
    """A server's answer over the limit; ``size`` is its declared length, or what was read when the limit passed."""

    def __init__(self, limit: int, size: int, *, declared: bool) -> None:
        self.limit, self.size = limit, size
        super().__init__(
            f"answer over MCP_RESPONSE_MAX_BYTES ({limit} bytes): {'' if declared else 'at least '}{size} bytes, "
            "not read"
        )


def too_large_in(message: str) -> tuple[str, int] | None:
    """``(sentence, size)`` when an error message (the SDK's, which quotes the stream error) says an answer was
    over the limit — the sentence as :class:`ResponseTooLarge` wrote it; ``None`` otherwise."""
    found = _TOO_LARGE.search(message)
    return (found.group(0), int(found.group(2))) if found else None


class _Bounded(httpx2.AsyncByteStream):
    """An answer's body that raises :class:`ResponseTooLarge` at once when its declared length is over the limit
    (nothing read: the connection is dropped, not drained), or as soon as what it read passes the limit."""

    def __init__(self, stream: httpx2.AsyncByteStream, limit: int, declared: int | None) -> None:
        self._stream, self._limit, self._declared = stream, limit, declared

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._declared is not None and self._declared > self._limit:
            raise ResponseTooLarge(self._limit, self._declared, declared=True)
        read = 0
        async for chunk in self._stream:
            read += len(chunk)
            if read > self._limit:
                raise ResponseTooLarge(self._limit, read, declared=False)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose JSON answers stop at ``limit`` bytes (event streams are the SDK's to bound)."""

    def __init__(self, limit: int, transport: httpx2.AsyncBaseTransport | None = None) -> None:
        self._limit = limit
        self._transport = transport or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._transport.handle_async_request(request)
        if not response.headers.get("content-type", "").startswith("application/json"):
            return response
        length = response.headers.get("content-length", "")
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)  # a transport's own response streams
        response.stream = _Bounded(stream, self._limit, int(length) if length.isdigit() else None)
        return response

    async def aclose(self) -> None:
        await self._transport.aclose()


class RefusedAnswerFilter(logging.Filter):
    """Drops the SDK's own ``ERROR`` with a traceback for an answer refused here (``logging.exception`` in its JSON
    answer's handler): the refusal is the platform's decision, logged once as a warning by :mod:`agents.mcp`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], ResponseTooLarge))


def bounded_client(limit: int, transport: httpx2.AsyncBaseTransport | None = None) -> httpx2.AsyncClient:
    """An HTTP client for the SDK that reads at most ``limit`` bytes of a JSON answer (0: no limit), sending through
    ``transport`` (default: httpx2's own)."""
    if not limit:
        return httpx2.AsyncClient(timeout=TIMEOUT, transport=transport)
    return httpx2.AsyncClient(timeout=TIMEOUT, transport=BoundedTransport(limit, transport))
