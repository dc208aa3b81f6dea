"""Tool calls over the Model Context Protocol (JSON-RPC 2.0 over streamable HTTP).

We use the official ``mcp`` SDK's client (``streamable_http_client`` +
``ClientSession``) rather than hand-written JSON-RPC over httpx: the SDK does
the initialisation handshake, protocol-version negotiation, request ids,
notifications and result validation the way servers expect, and follows the
protocol as it evolves.

Sessions are reused, not opened per call. An SDK session belongs to the event
loop (and the task) that opened it, while our callers run on many loops —
uvicorn's, ``async_to_sync``'s short-lived ones, Celery workers'. So every
session lives on **one dedicated event-loop thread per process**
(:class:`McpRuntime`); callers hand it coroutines and await the result from
their own loop. A session is owned by one task there (the SDK requires its
contexts to be entered and left by the same task) and is shared by all
concurrent calls to that server.

A server that is down, slow or answers an error never raises to the caller:
:func:`tool_call` returns a :class:`ToolResult` whose ``status`` says what
happened, and the specialist answers without it. Nor does a server decide how
much of its output the platform carries: a result over
``MCP_TOOL_OUTPUT_MAX_BYTES`` (as JSON) is cut with a marker
(:func:`common.sizes.json_bounded`) before anything reads it — a model, a goal
plan, the answer, the stored rows — and ``ToolResult.cut`` says how big it was;
an answer over ``MCP_RESPONSE_MAX_BYTES`` on the wire is not even read
(:mod:`agents.mcp_wire`): the call fails, and ``ToolResult.refused`` says so. Nor is anything sent to a server on
an internal address the operator does not allow (:mod:`common.outbound`): its calls are ``unavailable``.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import logging
import mimetypes
import os
import secrets
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache
from jsonschema.exceptions import best_match

from agents.mcp_stdio import declared as stdio_declared
from agents.mcp_stdio import restart_delay, stdio_name
from agents.mcp_wire import bounded_client, too_large_in
from agents.structured import SchemaTooCostly, schema_errors, schema_problem
from common.endpoints import endpoint_mask, endpoints_masked_in
from common.infra import tracing
from common.infra.metrics import tool_call_observe
from common.outbound import AsyncHttpx2GuardedTransport
from common.rehearsal import ToolCalled, rehearsal_current
from common.sizes import json_bounded, text_cut

logger = logging.getLogger(__name__)

STATUS_OK = "ok"
STATUS_ERROR = "error"
STATUS_TIMEOUT = "timeout"
STATUS_UNAVAILABLE = "unavailable"
STATUS_INVALID = "invalid_arguments"


@dataclass(frozen=True)
class Endpoint:
    """Where a server is and how long we wait for it (from the admin's MCP server). The URL may carry credentials:
    what is said about the server names it by :attr:`shown`, never by ``url``."""

    name: str
    url: str = field(repr=False)
    timeout: float

    @property
    def shown(self) -> str:
        """The URL without its credentials and query values."""
        return endpoint_mask(self.url)


@dataclass
class ToolResult:
    tool: str
    server: str
    arguments: dict[str, Any]
    status: str
    latency_ms: float = 0.0
    result: Any = None
    error: str = ""
    cut: int = 0  # the size of the server's output (JSON bytes) when it was cut to MCP_TOOL_OUTPUT_MAX_BYTES
    refused: int = 0  # the size of the server's answer (bytes) when it was over MCP_RESPONSE_MAX_BYTES, not read

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    @property
    def reason(self) -> str:
        """Why the call failed, as a model and a customer may read it: a server that cannot be reached is said
        so in words (``error`` keeps the transport's exception for the tool call's row and the log; an answer
        quoting it would lose it to the ``no_stack_trace`` guardrail, which cuts exception text out)."""
        if self.status == STATUS_UNAVAILABLE:
            return f"{self.server} could not be reached"
        return self.error

    def as_dict(self) -> dict[str, Any]:
        data = {
            "tool": self.tool,
            "server": self.server,
            "arguments": self.arguments,
            "status": self.status,
            "latency_ms": round(self.latency_ms, 1),
            "result": self.result,
            "error": self.error,
        }
        if self.cut:
            data["cut"] = self.cut
        if self.refused:
            data["refused"] = self.refused
        return data


@dataclass(frozen=True)
class ToolInfo:
    """A tool as a server lists it (``tools/list``)."""

    name: str
    description: str
    input_schema: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None  # what its structured results are (None: the server does not say)
    # Its annotations' readOnlyHint; a tool that does not say may change something (MCP's default).
    read_only: bool = False
    # It runs only as a background task (execution.taskSupport "required", MCP 2025-11-25), which the platform's
    # calls are not: every call would fail, so a sync refuses it.
    task_only: bool = False


class McpUnavailable(Exception):
    """The server could not be reached or its session broke."""


class McpRuntime:
    """A daemon thread running the event loop that owns every MCP session of this process.

    Started lazily, and again after a fork (Celery's prefork pool), since
    threads do not survive one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0
        self.connections: dict[Endpoint, ServerConnection] = {}
        atexit.register(self._stop)

    def _stop(self) -> None:
        """Close the stdio servers' sessions when the interpreter exits, so that their processes stop with it (an
        HTTP session is left to its server: closing it would cost a request to each at every exit)."""
        loop = self._loop
        if loop is None or not loop.is_running() or self._pid != os.getpid():
            return
        stdio = [connection for endpoint, connection in self.connections.items() if stdio_name(endpoint.url)]

        async def close() -> None:
            await asyncio.gather(*(connection.close() for connection in stdio), return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), loop).result(timeout=10)

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid() or not self._loop.is_running():
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(target=self._serve, args=(loop, ready), name="mcp-runtime", daemon=True)
                thread.start()
                ready.wait()
                self._loop, self._pid, self.connections = loop, os.getpid(), {}
            return self._loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    async def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coroutine`` on the runtime loop and await its result from the caller's loop."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop())
        return await asyncio.wrap_future(future)

    def run_sync(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """The same, for synchronous callers (management commands, admin actions)."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop()).result()

    def connection(self, endpoint: Endpoint) -> ServerConnection:
        """The shared connection to ``endpoint`` (call on the runtime loop)."""
        connection = self.connections.get(endpoint)
        if connection is None:
            connection = self.connections[endpoint] = ServerConnection(endpoint)
        return connection

    async def close_all(self) -> None:
        connections, self.connections = list(self.connections.values()), {}
        await asyncio.gather(*(connection.close() for connection in connections), return_exceptions=True)


class ServerConnection:
    """One MCP session to one server, opened on first use and reopened after a failure."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.session: Any = None
        self._owner: asyncio.Task | None = None
        self._closing: asyncio.Event | None = None
        self._opening: asyncio.Future | None = None
        # Each tool's output schema as the server last listed it: what its results are checked against.
        self.output_schemas: dict[str, dict[str, Any] | None] = {}
        self.restarts = 0  # of a stdio server's process after it stopped (agents.mcp_stdio)

    def tools_listed(self, listed: Any) -> Any:
        """Keep the output schemas of a ``tools/list`` result (as ``ClientSession`` keeps its own); returns it."""
        self.output_schemas.update({tool.name: tool.output_schema for tool in listed.tools})
        return listed

    async def ensure(self, deadline: float | None = None) -> Any:
        """The open session; raises :class:`McpUnavailable`, or ``TimeoutError`` at ``deadline`` (the loop's
        clock; default: the endpoint's timeout from now). A session still opening at the deadline is closed in
        the background: the caller's time limit is the whole call's, not one per step."""
        if self.session is not None:
            return self.session
        loop = asyncio.get_running_loop()
        if deadline is None:
            deadline = loop.time() + self.endpoint.timeout
        if self._opening is None or self._opening.done():
            self._opening = loop.create_future()
            self._closing = asyncio.Event()
            self._owner = asyncio.create_task(self._own(self._opening, self._closing))
        try:
            return await asyncio.wait_for(asyncio.shield(self._opening), max(deadline - loop.time(), 0))
        except TimeoutError:
            self._abandon()
            raise

    def _abandon(self) -> None:
        """Drop a session that is still opening at a caller's deadline; it closes in the background, and the
        next call opens a new one (rather than waiting on this one)."""
        owner, closing, opening = self._owner, self._closing, self._opening
        self._owner = self._closing = self._opening = None
        self.session = None
        if opening is not None:  # nobody awaits it any more: its failure is not an "exception never retrieved"
            opening.add_done_callback(lambda future: future.cancelled() or future.exception())
        if closing is not None:
            closing.set()
        if owner is not None and not owner.done():
            _in_background(_finish(owner))

    async def _own(self, opened: asyncio.Future, closing: asyncio.Event) -> None:
        """Open the session and hold it until ``closing``. A stdio server (:mod:`agents.mcp_stdio`) is supervised:
        when its process exits, it is started again after a growing wait, and calls meanwhile wait for it."""
        name = stdio_name(self.endpoint.url)
        if name is None:
            await self._serve(opened, closing, self._http_streams(), None)
            return
        loop = asyncio.get_running_loop()
        delay = 0.0
        while True:
            started, exited = loop.time(), asyncio.Event()
            await self._serve(opened, closing, self._stdio_streams(name, exited), exited)
            if closing.is_set():
                return
            delay = restart_delay(delay, loop.time() - started)
            self.restarts += 1
            logger.warning("MCP stdio server %s stopped; starting it again in %gs", name, delay)
            opened = self._opening = loop.create_future()  # calls meanwhile wait for the new session
            opened.add_done_callback(lambda future: future.cancelled() or future.exception())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(closing.wait(), delay)
                return

    @contextlib.asynccontextmanager
    async def _http_streams(self) -> AsyncIterator[tuple[Any, Any]]:
        from mcp.client.streamable_http import DEFAULT_MAX_SSE_EVENT_SIZE, streamable_http_client

        limit = settings.MCP_RESPONSE_MAX_BYTES  # 0: answers read whole, the SDK's own limit (agents/mcp_wire.py)
        # The server's address is the operator's: never an internal one unless allowed (common/outbound.py).
        client = bounded_client(limit, AsyncHttpx2GuardedTransport())
        async with (
            client,
            streamable_http_client(
                self.endpoint.url, http_client=client, max_sse_event_size=limit or DEFAULT_MAX_SSE_EVENT_SIZE
            ) as (read_stream, write_stream),
        ):
            yield read_stream, write_stream

    @contextlib.asynccontextmanager
    async def _stdio_streams(self, name: str, exited: asyncio.Event) -> AsyncIterator[tuple[Any, Any]]:
        """The declared server's process, started; ``exited`` is set when its output ends (it stopped)."""
        import anyio
        from mcp.client.stdio import StdioServerParameters, stdio_client

        server = stdio_declared().get(name)
        if server is None:
            raise McpUnavailable(f"no stdio server {name!r} is declared in MCP_STDIO_SERVERS")
        command, *args = server.command
        parameters = StdioServerParameters(command=command, args=args, env=server.env or None, cwd=server.cwd)
        async with stdio_client(parameters) as (read_stream, write_stream):
            send, receive = anyio.create_memory_object_stream[Any](0)

            async def relay() -> None:
                try:
                    async with send:
                        async for message in read_stream:
                            await send.send(message)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    pass
                finally:
                    exited.set()

            relaying = asyncio.ensure_future(relay())
            try:
                yield receive, write_stream
            finally:
                relaying.cancel()

    async def _serve(self, opened: asyncio.Future, closing: asyncio.Event, streams: Any, exited: Any) -> None:
        from mcp import ClientSession

        owned = None
        try:
            async with (
                streams as (read_stream, write_stream),
                # The SDK's own request timeout only backs ours up: the caller's deadline decides, so a frozen
                # server is always a `timeout` (the SDK timing out the handshake first said `unavailable`).
                ClientSession(read_stream, write_stream, read_timeout_seconds=self.endpoint.timeout + 1) as session,
            ):
                await session.initialize()
                self.tools_listed(await session.list_tools())  # the output schemas results are checked against
                if closing.is_set():  # abandoned while it opened
                    return
                self.session = owned = session
                if not opened.done():
                    opened.set_result(session)
                waits = [asyncio.ensure_future(closing.wait())]
                if exited is not None:
                    waits.append(asyncio.ensure_future(exited.wait()))
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for wait in waits:
                        wait.cancel()
        except BaseException as exc:
            if not opened.done():
                opened.set_exception(McpUnavailable(_describe(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            if owned is not None and self.session is owned:  # not a newer session opened meanwhile
                self.session = None

    def broken(self) -> None:
        """Forget a session whose transport failed; the next call reconnects."""
        self.session = None
        if self._closing is not None:
            self._closing.set()

    async def close(self) -> None:
        self.broken()
        owner, self._owner = self._owner, None
        if owner is not None and not owner.done():
            try:
                await asyncio.wait_for(owner, 5)
            except (TimeoutError, asyncio.CancelledError):
                owner.cancel()


# Sessions being closed after a timeout, kept referenced until they are (the caller does not wait for it).
_CLOSING: set[asyncio.Task[None]] = set()


def _in_background(coroutine: Coroutine[Any, Any, None]) -> None:
    task = asyncio.ensure_future(coroutine)
    _CLOSING.add(task)
    task.add_done_callback(_CLOSING.discard)


async def _cancel(call: asyncio.Future) -> None:
    call.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(call, 30)


async def _finish(owner: asyncio.Task) -> None:
    try:
        await asyncio.wait_for(owner, 5)
    except (TimeoutError, asyncio.CancelledError):
        owner.cancel()


def _describe(exc: BaseException) -> str:
    leaves: list[BaseException] = []

    def walk(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                walk(inner)
        else:
            leaves.append(error)

    walk(exc)
    first = leaves[0] if leaves else exc
    # An HTTP client's error may quote the URL it was given, credentials and all.
    return endpoints_masked_in(f"{type(first).__name__}: {first}".rstrip(": "))


runtime = McpRuntime()


# --- arguments ---------------------------------------------------------------------------


def arguments_from_context(
    schema: dict[str, Any], context: dict[str, Any], given: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Build a tool's arguments: the schema's properties taken from ``given`` (the model's) or the request context.

    Only names the schema declares are passed; ``None`` values are dropped.
    """
    properties = (schema or {}).get("properties", {})
    arguments: dict[str, Any] = {}
    for name in properties:
        value = (given or {}).get(name)
        if value is None:
            value = context.get(name)
        if value is not None:
            arguments[name] = value
    return arguments


def arguments_errors(schema: dict[str, Any], arguments: dict[str, Any]) -> list[str]:
    """Validation errors of ``arguments`` against the tool's JSON Schema (empty when valid), checked within the bounds
    of :mod:`agents.structured`: a schema it does not take, or a check over its steps, is an error too."""
    if not schema:
        return []
    problem = schema_problem(schema)
    if problem is not None:
        return [f"arguments: the tool's schema is not one the platform checks against: {problem}"]
    try:
        errors = schema_errors(schema, arguments)
    except SchemaTooCostly as exc:
        return [f"arguments: {exc}"]
    return [
        f"{'.'.join(str(p) for p in error.absolute_path) or 'arguments'}: {error.message}"
        for error in sorted(errors, key=lambda e: [str(part) for part in e.absolute_path])
    ]


def missing_required(schema: dict[str, Any], context: dict[str, Any]) -> list[str]:
    return [name for name in (schema or {}).get("required", []) if context.get(name) in (None, "")]


# --- calls -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attachment:
    """Bytes a tool returned (an image, audio, a binary embedded resource), kept for ``MCP_ATTACHMENT_TTL_SECONDS``
    under :attr:`key` and served at :func:`attachment_url`: a result carries its link, never its base64."""

    key: str
    kind: str  # "image", "audio" or "file"
    mime_type: str
    name: str
    data: bytes = field(repr=False)


ATTACHMENT_PATH = "/api/mcp/attachments/"  # chat/urls.py serves it
_ATTACHMENT_CACHE_KEY = "mcp-attachment:{key}"
ATTACHMENT_KINDS = {"image": "image", "audio": "audio", "resource": "file"}


@dataclass(frozen=True)
class AttachmentScope:
    """Whose the attachments of the calls made within it are, and where their links point: ``tenant`` is the pk of
    the tenant whose turn (or debug call) the calls serve — only its clients are served them (chat/mcp_apis.py) —
    ``None`` for no tenant's (an operator's call); ``origin`` is the ``scheme://host`` the client reached, for
    absolute links ("" → a path; ``PUBLIC_URL``, when the operator sets it, wins over both)."""

    tenant: int | None = None
    origin: str = ""

    def as_dict(self) -> dict[str, Any]:
        """As a Celery task's payload carries it to a worker."""
        return {"tenant": self.tenant, "origin": self.origin}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> AttachmentScope:
        data = data or {}
        tenant = data.get("tenant")
        return cls(tenant=int(tenant) if tenant is not None else None, origin=str(data.get("origin") or ""))

    @property
    def links_base(self) -> str:
        return (settings.PUBLIC_URL or self.origin).rstrip("/")


_scope: ContextVar[AttachmentScope | None] = ContextVar("attachment_scope", default=None)
_NO_SCOPE = AttachmentScope()


@contextlib.contextmanager
def attachments_for(scope: AttachmentScope) -> Iterator[AttachmentScope]:
    """Within the block (and the tasks it starts), the attachments tool calls keep are ``scope``'s."""
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def attachment_scope() -> AttachmentScope:
    """The scope the calls made here are in (:func:`attachments_for`; no tenant's and a path outside any)."""
    return _scope.get() or _NO_SCOPE


def attachment_url(key: str, base: str = "") -> str:
    """The link to attachment ``key``: absolute under ``base`` (``scheme://host[/prefix]``), else a path."""
    return f"{base}{ATTACHMENT_PATH}{key}"


@dataclass(frozen=True)
class KeptAttachment:
    tenant: int | None  # whose it is (AttachmentScope.tenant)
    mime_type: str
    name: str
    data: bytes = field(repr=False)


async def attachments_store(attachments: list[Attachment], tenant: int | None) -> None:
    """Keep ``attachments`` in the cache (shared by the processes) for ``MCP_ATTACHMENT_TTL_SECONDS``, as
    ``tenant``'s."""
    for attachment in attachments:
        value = (tenant, attachment.mime_type, attachment.name, attachment.data)
        await cache.aset(_ATTACHMENT_CACHE_KEY.format(key=attachment.key), value, settings.MCP_ATTACHMENT_TTL_SECONDS)


def attachment_read(key: str) -> KeptAttachment | None:
    """A kept attachment; ``None`` when unknown or expired."""
    value = cache.get(_ATTACHMENT_CACHE_KEY.format(key=key))
    if not (isinstance(value, tuple | list) and len(value) == 4):
        return None
    tenant, mime_type, name, data = value
    return KeptAttachment(int(tenant) if tenant is not None else None, str(mime_type), str(name), bytes(data))


def attachment_keys(result: Any) -> list[str]:
    """The keys of the attachments a stored tool result links to (its ``attachments``' ``url``)."""
    items = result.get("attachments") if isinstance(result, dict) else None
    urls = [item.get("url") for item in items if isinstance(item, dict)] if isinstance(items, list) else []
    linked = [url for url in urls if isinstance(url, str) and url.startswith(ATTACHMENT_PATH)]
    return [url.removeprefix(ATTACHMENT_PATH) for url in linked]


def attachments_forget(keys: list[str]) -> None:
    """Drop kept attachments before they expire (a customer's data being erased)."""
    cache.delete_many([_ATTACHMENT_CACHE_KEY.format(key=key) for key in keys])


def _decoded(data: str, limit: int) -> tuple[bytes | None, int]:
    """The bytes of base64 ``data`` and their size; ``None`` (not decoded) when over ``limit`` or not base64."""
    size = len(data) * 3 // 4 - data[-2:].count("=")
    if size > limit:
        return None, size
    try:
        return base64.b64decode(data, validate=True), size
    except ValueError:
        return None, size


def _blob_item(
    kind: str, mime_type: str, name: str, data: str, attachments: list[Attachment], base: str
) -> dict[str, Any]:
    """A binary content item as a result carries it: its kind, type, name, size and link under ``base`` (kept in
    ``attachments``), or why it was not kept."""
    limit = settings.MCP_ATTACHMENT_MAX_BYTES
    decoded, size = _decoded(data, limit)
    item: dict[str, Any] = {"type": kind, "mime_type": mime_type, "name": name, "bytes": size}
    if decoded is None:
        item["omitted"] = f"over MCP_ATTACHMENT_MAX_BYTES ({limit} bytes)" if size > limit else "its data is not base64"
        return item
    attachment = Attachment(secrets.token_urlsafe(24), kind, mime_type, name, decoded)
    attachments.append(attachment)
    item["url"] = attachment_url(attachment.key, base)
    return item


def _result_payload(result: Any, base: str = "") -> tuple[Any, list[Attachment]]:
    """What a ``CallToolResult`` carries on, and the attachments to keep.

    Its structured content when it has some; else its text when it holds text alone (as it always was); else
    ``{"text", "attachments", "links"}``: the text of its text items and of its text resources, each binary item
    (image, audio, binary resource) as a link to its kept bytes (``MCP_ATTACHMENT_MAX_BYTES`` at most: a larger one
    is named, not kept; its link under ``base``), each resource link as its URI and names.
    """
    if getattr(result, "structured_content", None) is not None:
        return result.structured_content, []
    texts: list[str] = []
    items: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    attachments: list[Attachment] = []
    for item in getattr(result, "content", None) or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            texts.append(item.text)
        elif kind in ("image", "audio"):
            name = f"{kind}-{len(items) + 1}{mimetypes.guess_extension(item.mime_type) or ''}"
            items.append(_blob_item(kind, item.mime_type, name, item.data, attachments, base))
        elif kind == "resource_link":
            link = {"uri": str(item.uri), "name": item.name}
            link.update({key: value for key in ("title", "description") if (value := getattr(item, key, None))})
            if item.mime_type:
                link["mime_type"] = item.mime_type
            links.append(link)
        elif kind == "resource":
            resource = item.resource
            if getattr(resource, "text", None) is not None:
                texts.append(resource.text)
            else:
                name = str(resource.uri).rstrip("/").rsplit("/", 1)[-1] or "resource"
                mime_type = resource.mime_type or "application/octet-stream"
                items.append(_blob_item("file", mime_type, name, resource.blob, attachments, base))
    text = "\n".join(text for text in texts if text)
    if not items and not links:
        return text, []
    payload: dict[str, Any] = {"text": text}
    if items:
        payload["attachments"] = items
    if links:
        payload["links"] = links
    return payload, attachments


RESULT_ERROR_CHARS = 300  # of a check's message, which quotes the server's value


def result_problem(tool: str, output_schema: dict[str, Any] | None, result: Any) -> str | None:
    """Why a successful ``result`` (a ``CallToolResult``) of ``tool`` is not what its ``output_schema`` says, checked
    within the bounds of :mod:`agents.structured`: a schema they do not take, a result without structured content,
    one the schema refuses, or a check over its steps; ``None`` when it is (or the tool declares no schema)."""
    if output_schema is None:
        return None
    problem = schema_problem(output_schema)
    if problem is not None:
        return f"{tool}: its output schema is not one the platform checks results against: {problem}"
    structured = getattr(result, "structured_content", None)
    if structured is None:
        return f"{tool} has an output schema but returned no structured content"
    try:
        errors = schema_errors(output_schema, structured)
    except SchemaTooCostly as exc:
        return f"{tool}: its result: {exc}"
    if not errors:
        return None
    error = best_match(errors)
    where = ".".join(str(part) for part in error.absolute_path) or "result"
    message = text_cut(error.message, RESULT_ERROR_CHARS)
    return f"{tool}: the result does not match its output schema at {where}: {message}"


async def _output_schema(
    connection: ServerConnection, session: Any, tool: str, deadline: float
) -> dict[str, Any] | None:
    """``tool``'s output schema, listing the server's tools again when the session never saw it listed (as
    ``ClientSession`` does)."""
    if tool not in connection.output_schemas:
        timeout = max(deadline - asyncio.get_running_loop().time(), 0)
        connection.tools_listed(await asyncio.wait_for(session.list_tools(), timeout))
    return connection.output_schemas.get(tool)


async def _call(
    endpoint: Endpoint, tool: str, arguments: dict[str, Any], progress: Any = None, base: str = ""
) -> tuple[str, Any, str, list[Attachment]]:
    """``(status, payload, error, attachments)`` of one call on the runtime loop; ``progress``: the SDK's progress
    callback (the request then asks the server for progress notifications); ``base``: where attachment links
    point (:attr:`AttachmentScope.links_base`, read on the caller's loop)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CallToolRequest, CallToolRequestParams, CallToolResult

    connection = runtime.connection(endpoint)
    timed_out: tuple[str, Any, str, list[Attachment]] = (
        STATUS_TIMEOUT,
        None,
        f"no answer from {endpoint.name} within {endpoint.timeout:g}s",
        [],
    )
    # One limit for the whole call: connecting, the handshake and the call share it.
    deadline = asyncio.get_running_loop().time() + endpoint.timeout
    try:
        session = await connection.ensure(deadline)
    except TimeoutError:
        return timed_out
    except McpUnavailable as exc:
        return STATUS_UNAVAILABLE, None, str(exc), []
    loop = asyncio.get_running_loop()
    # Not session.call_tool, which checks the result with stock jsonschema (the module's docstring says why).
    request = CallToolRequest(params=CallToolRequestParams(name=tool, arguments=arguments))
    call = asyncio.ensure_future(session.send_request(request, CallToolResult, progress_callback=progress))
    await asyncio.wait({call}, timeout=max(deadline - loop.time(), 0))
    if not call.done():
        # Not cancelled in place: the SDK then tells the server, shielded from cancellation, and a frozen server
        # holds that up for its transport's timeout (a 3 s limit took 8 s). The call is cancelled in the
        # background. The session stays: other calls share it (closing it would fail them as "unavailable" at
        # their own deadline), each is bounded by its own, and a server that answers again serves it at once.
        _in_background(_cancel(call))
        return timed_out
    try:
        result = call.result()
    except MCPError as exc:
        if exc.code == -32001:  # the SDK's request timeout
            return STATUS_TIMEOUT, None, f"no answer from {endpoint.name} within {endpoint.timeout:g}s", []
        too_large = too_large_in(exc.message)
        if too_large is not None:  # that answer alone was not read; the session serves on
            return STATUS_ERROR, None, f"{tool}: {too_large[0]}", []
        connection.broken()
        return STATUS_UNAVAILABLE, None, f"{endpoint.name}: {exc.message}", []
    except Exception as exc:  # noqa: BLE001 — a broken transport; reconnect next time
        connection.broken()
        return STATUS_UNAVAILABLE, None, _describe(exc), []
    if getattr(result, "is_error", False):
        if result.structured_content is not None:
            return STATUS_ERROR, None, str(result.structured_content), []
        return STATUS_ERROR, None, "\n".join(item.text for item in result.content or [] if item.type == "text"), []
    try:
        output_schema = await _output_schema(connection, session, tool, deadline)
    except TimeoutError:
        return timed_out
    except Exception as exc:  # noqa: BLE001 — the listing's transport broke; reconnect next time
        connection.broken()
        return STATUS_UNAVAILABLE, None, _describe(exc), []
    problem = result_problem(tool, output_schema, result)
    if problem is not None:  # the server's fault, not the session's: it serves on
        return STATUS_ERROR, None, problem, []
    payload, attachments = _result_payload(result, base)
    return STATUS_OK, payload, "", attachments


Progress = Callable[[float, float | None, str], Coroutine[Any, Any, None]]
PROGRESS_MAX = 100  # progress notifications passed on per call; a server may send any number
PROGRESS_MESSAGE_CHARS = 200


def _progress_relay(on_progress: Progress) -> Callable[[float, float | None, str | None], Awaitable[None]]:
    """The SDK's progress callback (it runs on the runtime loop): each of the first :data:`PROGRESS_MAX`
    notifications handed to ``on_progress`` on the caller's loop, without waiting for it (a slow client does not
    hold the server's stream); its message cut to :data:`PROGRESS_MESSAGE_CHARS`."""
    caller = asyncio.get_running_loop()
    passed = 0

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        nonlocal passed
        if passed >= PROGRESS_MAX:
            return
        passed += 1
        said = text_cut(message or "", PROGRESS_MESSAGE_CHARS)
        future = asyncio.run_coroutine_threadsafe(on_progress(progress, total, said), caller)
        future.add_done_callback(lambda done: done.cancelled() or done.exception())

    return relay


async def tool_call(
    *,
    endpoint: Endpoint,
    tool: str,
    arguments: dict[str, Any],
    schema: dict[str, Any],
    called_as: str = "",
    on_progress: Progress | None = None,
) -> ToolResult:
    """Validate ``arguments`` against ``schema`` and call ``tool`` — on the server, ``called_as`` when its name there
    is another (the result, the metrics and the trace name ``tool``); never raises. ``on_progress(progress, total,
    message)``: the server's progress notifications for this call, as they come (at most :data:`PROGRESS_MAX`).
    Traced as ``mcp.tool_call``."""
    progress = _progress_relay(on_progress) if on_progress is not None else None
    with tracing.span("mcp.tool_call", tool=tool, server=endpoint.name) as current, tracing.library_spans_nested():
        result = await _tool_call(endpoint, tool, arguments, schema, called_as or tool, progress)
        tracing.annotate(current, status=result.status, latency_ms=round(result.latency_ms, 3))
        tracing.failed(current, None if result.status == STATUS_OK else result.status)
    return result


async def _tool_call(
    endpoint: Endpoint, tool: str, arguments: dict[str, Any], schema: dict[str, Any], called_as: str, progress: Any
) -> ToolResult:
    started = time.perf_counter()
    rehearsal = rehearsal_current()
    errors = arguments_errors(schema, arguments)
    if errors:
        tool_call_observe(tool, STATUS_INVALID, 0.0)
        if rehearsal is not None:
            rehearsal.calls.append(ToolCalled(tool, dict(arguments), STATUS_INVALID))
        return ToolResult(tool, endpoint.name, arguments, STATUS_INVALID, 0.0, None, "; ".join(errors))
    if rehearsal is not None and tool in rehearsal.tool_answers:  # a conversation test's recorded answer
        rehearsal.calls.append(ToolCalled(tool, dict(arguments), STATUS_OK, recorded=True))
        recorded, cut = json_bounded(rehearsal.tool_answers[tool], settings.MCP_TOOL_OUTPUT_MAX_BYTES)
        return ToolResult(tool, endpoint.name, arguments, STATUS_OK, 0.0, recorded, "", cut)
    scope = attachment_scope()
    status, payload, error, attachments = await runtime.run(
        _call(endpoint, called_as, arguments, progress, scope.links_base)
    )
    if rehearsal is not None:
        rehearsal.calls.append(ToolCalled(tool, dict(arguments), status))
    await attachments_store(attachments, scope.tenant)
    limit = settings.MCP_TOOL_OUTPUT_MAX_BYTES
    payload, cut = json_bounded(payload, limit)
    error = text_cut(error, limit)
    too_large = too_large_in(error) if status == STATUS_ERROR else None
    latency = (time.perf_counter() - started) * 1000
    tool_call_observe(tool, status, latency / 1000)
    if status != STATUS_OK:
        logger.warning("MCP %s.%s %s: %s", endpoint.name, tool, status, error)
    return ToolResult(
        tool, endpoint.name, arguments, status, latency, payload, error, cut, too_large[1] if too_large else 0
    )


async def _list(endpoint: Endpoint) -> list[ToolInfo]:
    connection = runtime.connection(endpoint)
    try:
        session = await connection.ensure()
    except TimeoutError:
        raise McpUnavailable(f"no answer from {endpoint.shown} within {endpoint.timeout:g}s") from None
    try:
        listed = connection.tools_listed(await asyncio.wait_for(session.list_tools(), endpoint.timeout))
    except Exception as exc:
        connection.broken()
        raise McpUnavailable(_describe(exc)) from exc
    return [
        ToolInfo(
            tool.name,
            tool.description or "",
            dict(tool.input_schema or {}),
            dict(tool.output_schema) if tool.output_schema is not None else None,
            read_only=bool(tool.annotations is not None and tool.annotations.read_only_hint),
            task_only=tool.execution is not None and tool.execution.task_support == "required",
        )
        for tool in listed.tools
    ]


async def tools_list(endpoint: Endpoint) -> list[ToolInfo]:
    """The server's ``tools/list``; raises :class:`McpUnavailable` when it cannot be reached."""
    return await runtime.run(_list(endpoint))


def tools_list_sync(endpoint: Endpoint) -> list[ToolInfo]:
    return runtime.run_sync(_list(endpoint))


# --- resources: domain manifests ---------------------------------------------------------

MANIFEST_SCHEME = "manifest://"  # a domain's manifest (docs/goals.md): manifest://<domain>


async def _manifests(endpoint: Endpoint) -> list[tuple[str, str]]:
    from mcp.shared.exceptions import MCPError
    from mcp_types import PaginatedRequestParams

    connection = runtime.connection(endpoint)
    try:
        session = await connection.ensure()
    except TimeoutError:
        raise McpUnavailable(f"no answer from {endpoint.shown} within {endpoint.timeout:g}s") from None
    capabilities = session.server_capabilities
    if capabilities is not None and capabilities.resources is None:
        return []  # the server offers no resources, so no manifest
    try:
        uris: list[str] = []
        cursor: str | None = None
        while True:
            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            listed = await asyncio.wait_for(session.list_resources(params=params), endpoint.timeout)
            uris.extend(str(resource.uri) for resource in listed.resources)
            cursor = listed.next_cursor
            if not cursor:
                break
        manifests = []
        for uri in uris:
            if not uri.startswith(MANIFEST_SCHEME):
                continue
            read = await asyncio.wait_for(session.read_resource(uri), endpoint.timeout)
            text = "".join(getattr(content, "text", "") for content in read.contents)
            manifests.append((uri, text))
    except MCPError as exc:
        if exc.code == -32601:  # method not found: a server without resources
            return []
        connection.broken()
        raise McpUnavailable(f"{endpoint.name}: {exc.message}") from exc
    except Exception as exc:
        connection.broken()
        raise McpUnavailable(_describe(exc)) from exc
    return manifests


async def manifests_read(endpoint: Endpoint) -> list[tuple[str, str]]:
    """``(uri, text)`` of every ``manifest://`` resource the server lists (``resources/list``, then
    ``resources/read``); ``[]`` for a server without resources. Raises :class:`McpUnavailable` when the server
    cannot be reached. The text is not checked here: ``routing.goals.manifest.manifest_read`` does that."""
    return await runtime.run(_manifests(endpoint))


def manifests_read_sync(endpoint: Endpoint) -> list[tuple[str, str]]:
    return runtime.run_sync(_manifests(endpoint))
