"""What a request must be before the application reads it.

Two checks, each where it can first be made:

* :class:`RequestGate`, an ASGI application around Django's handler (``platform/asgi.py``). Django's ASGI handler
  reads a request's whole body, to a temporary file past ``FILE_UPLOAD_MAX_MEMORY_SIZE``, before any middleware or
  view runs: an anonymous 3 GB upload was written to disk and then refused 401. Here an API request (the routes of
  :data:`~platform.middleware.KEY_PREFIXES`) that announces a body is answered before one byte of it is read when
  it has no credentials or a wrong key (401, a locked-out address 429) or a ``Content-Length`` over
  ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (413). A chunked body (no ``Content-Length``) is read here up to that limit and
  handed on with its length, which Django and DRF need to read it at all (without one they read an empty body);
  past the limit it is a 413. Each answer is the route's own (its DRF exception handler: the API's error shape,
  OpenAI's on ``/v1/``) and closes the connection, so the rest of the upload is never read. Every other request
  (the admin's forms and uploads, the pages) is bounded the same way by ``PAGE_MAX_BODY_BYTES``, answered with a
  plain 413: a page's credentials are a session, which only Django can read, so size is what the gate can check.
* :class:`InputMiddleware`, in Django's middleware (so under every server and Django's test client): a path or a
  query value holding a NUL character (no PostgreSQL text can store one) and a query string of more fields than
  ``DATA_UPLOAD_MAX_NUMBER_FIELDS`` are a 400 naming the field before any view reads them. Django would raise
  ``TooManyFieldsSent`` for the second, logged at ERROR with a traceback as a suspicious operation.

A JSON body's NUL characters are refused where JSON is read (:mod:`common.parsers`).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.http.cookie import parse_cookie
from django.urls import Resolver404, ResolverMatch, resolve
from django.utils.deprecation import MiddlewareMixin
from rest_framework import exceptions
from rest_framework.response import Response

from common.errors import DATABASE_UNAVAILABLE, ERROR_INVALID_KEY, exception_handler, validation_error_body
from common.infra.metrics import http_request_observe
from common.infra.outages import database_circuit
from common.infra.renderers import JSONRenderer
from common.parsers import ERROR_NUL_CHARACTER, BodyTooLarge
from platform.errors import bad_request, is_page
from platform.middleware import KEY_PREFIXES, route_label
from tenants.public import api_client_authenticate, api_key_verified, client_address

ERROR_TOO_MANY_QUERY_FIELDS = "The query string has more than {limit} parameters."
ERROR_PAGE_BODY_TOO_LARGE = "Request body too large: the limit is {limit} bytes."

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# What verifying a key may raise that is answered as the request's authentication would: 429 while its address is
# locked out, 503 with Retry-After while the database cannot be reached.
_VERIFY_REFUSALS: tuple[type[Exception], ...] = (exceptions.Throttled, *DATABASE_UNAVAILABLE)
# The request headers the gate reads (ASGI gives their names in lower case).
_READ = (b"content-length", b"transfer-encoding", b"authorization", b"cookie", b"x-forwarded-for")


class RequestGate:
    """The ASGI application ``app`` behind the checks of an API request's body (module docstring).

    A key this process has already found valid (:func:`tenants.auth.api_key_verified`) passes at the cost of a hash
    and a dictionary lookup; any other key is verified here, in a thread, with the lookup and the lockout of
    :func:`tenants.auth.api_client_authenticate`, which then leave the key in the cache the request's own
    authentication reads: no query more than the request would make. A session cookie passes: Django checks the
    session and its CSRF token, and the body is still bounded by the limit.
    """

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name: value for name, value in scope["headers"] if name in _READ}
        length = _content_length(headers)
        chunked = b"transfer-encoding" in headers
        if not chunked and not length:  # no body announced: nothing to hold back
            await self.app(scope, receive, send)
            return
        if not scope["path"].startswith(KEY_PREFIXES):
            await self._page(scope, receive, send, length=length, chunked=chunked)
            return
        started = time.perf_counter()
        refusal = await _credentials_refusal(scope, headers)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if refusal is None and not chunked and limit is not None and length is not None and length > limit:
            refusal = BodyTooLarge(limit)
        if refusal is not None:
            await _refuse(scope, send, refusal, started)
            return
        if not chunked:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive, limit)
        if body is None:  # the client went away
            return
        if limit is not None and len(body) > limit:
            await _refuse(scope, send, BodyTooLarge(limit), started)
            return
        await self.app(_with_length(scope, len(body)), _replayed(body, receive), send)

    async def _page(self, scope: Scope, receive: Receive, send: Send, *, length: int | None, chunked: bool) -> None:
        """A page's request: its body bounded by ``PAGE_MAX_BODY_BYTES`` as an API body is by its own limit."""
        limit = settings.PAGE_MAX_BODY_BYTES
        if not chunked and (length is None or length <= limit):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        body = None if not chunked else await _read_body(receive, limit)
        if chunked and body is None:  # the client went away
            return
        if body is None or len(body) > limit:
            await _refuse_page(scope, send, limit, started)
            return
        await self.app(_with_length(scope, len(body)), _replayed(body, receive), send)


def _content_length(headers: dict[bytes, bytes]) -> int | None:
    raw = headers.get(b"content-length")
    return int(raw) if raw is not None and raw.isdigit() else None


async def _credentials_refusal(scope: Scope, headers: dict[bytes, bytes]) -> Exception | None:
    """What the request's authentication would refuse it with, when that can be known before the body: no
    credentials (401), a malformed or wrong key (401), an address locked out (429), a database that cannot be
    reached to look the key up (503). ``None``: let it in."""
    authorization = headers.get(b"authorization")
    if authorization is None:
        cookies = parse_cookie(headers.get(b"cookie", b"").decode("latin-1"))
        return None if settings.SESSION_COOKIE_NAME in cookies else exceptions.NotAuthenticated()
    scheme, _, raw = authorization.decode("latin-1").partition(" ")
    raw = raw.strip()
    if scheme.lower() != "bearer" or not raw:
        return exceptions.AuthenticationFailed(ERROR_INVALID_KEY)
    if api_key_verified(raw):
        return None
    if database_circuit.is_open:
        return None  # the database is known to be down: Django answers at once (503), or lets its trial through
    client = scope.get("client")
    forwarded = headers.get(b"x-forwarded-for")
    address = client_address(client[0] if client else None, forwarded.decode("latin-1") if forwarded else None)
    try:
        verified = await sync_to_async(_key_verify, thread_sensitive=False)(raw, address)
    except _VERIFY_REFUSALS as refused:
        return refused
    return None if verified else exceptions.AuthenticationFailed(ERROR_INVALID_KEY)


def _key_verify(raw_key: str, address: str) -> bool:
    """The key's authentication, in a thread of no request: its database connection is handed back at once."""
    try:
        return api_client_authenticate(raw_key=raw_key, address=address) is not None
    finally:
        connections.close_all()


async def _read_body(receive: Receive, limit: int | None) -> bytes | None:
    """The body, read until its end or one byte past ``limit``; ``None`` when the client disconnects."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if (limit is not None and size > limit) or not message.get("more_body", False):
            return b"".join(chunks)


def _with_length(scope: Scope, length: int) -> Scope:
    """``scope`` with the body's length in place of its transfer encoding."""
    headers = [
        (name, value) for name, value in scope["headers"] if name not in (b"content-length", b"transfer-encoding")
    ]
    return {**scope, "headers": [*headers, (b"content-length", str(length).encode())]}


def _replayed(body: bytes, receive: Receive) -> Receive:
    """``receive`` that gives ``body`` whole first, then what the client sends (its disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return replay


async def _refuse(scope: Scope, send: Send, exc: Exception, started: float) -> None:
    """Answer ``exc`` as the route's view would (its exception handler), and close the connection: whatever of
    the body is still on its way is never read."""
    match = _resolved(scope["path"])
    view_class = getattr(match.func, "cls", None) if match is not None else None
    view = view_class() if view_class is not None else None
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        exc.auth_header = "Bearer"  # type: ignore[union-attr]  # as DRF's APIView.handle_exception sets it
    handler = view.get_exception_handler() if view is not None else exception_handler
    response: Response | None = handler(exc, {"view": view, "request": None})
    assert response is not None  # every handler of ours answers DRF's exceptions and the database's outage
    content = JSONRenderer().render(response.data)
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in response.items()
        if name.lower() != "content-type"  # an unrendered response's is Django's default, text/html
    ]
    headers += [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": content})
    route = route_label(match)
    http_request_observe(route, scope.get("method", ""), response.status_code, time.perf_counter() - started)


async def _refuse_page(scope: Scope, send: Send, limit: int, started: float) -> None:
    """A page's 413, in plain text, closing the connection before the rest of the body is read."""
    content = ERROR_PAGE_BODY_TOO_LARGE.format(limit=limit).encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(content)).encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": content})
    match = _resolved(scope["path"])
    http_request_observe(route_label(match), scope.get("method", ""), 413, time.perf_counter() - started)


def _resolved(path: str) -> ResolverMatch | None:
    try:
        return resolve(path)
    except Resolver404:
        return None


class InputMiddleware(MiddlewareMixin):
    """A path or query value with a NUL character, or a query string over ``DATA_UPLOAD_MAX_NUMBER_FIELDS``
    fields, is a 400 naming the field (the URL's parameter, the query's, or ``query``); the admin and the pages
    answer Django's 400 page. In the event loop under an async server, as every check here is plain computing."""

    get_response: Callable[[HttpRequest], Any]  # a response, or under ASGI its coroutine

    def __call__(self, request: HttpRequest) -> Any:
        if self.async_mode:
            return self.__acall__(request)
        return input_refusal(request) or self.get_response(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        return input_refusal(request) or await self.get_response(request)


def input_refusal(request: HttpRequest) -> HttpResponseBase | None:
    """The 400 that :class:`InputMiddleware` answers ``request`` with, or ``None``."""
    query = request.META.get("QUERY_STRING", "")
    if query:
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        if limit is not None and query.count("&") >= limit:  # as Django counts them, before reading any
            return _invalid(request, "query", ERROR_TOO_MANY_QUERY_FIELDS.format(limit=limit))
        if "%00" in query:
            for name, values in request.GET.lists():
                if "\x00" in name:
                    return _invalid(request, "query", ERROR_NUL_CHARACTER)
                if any("\x00" in value for value in values):
                    return _invalid(request, name, ERROR_NUL_CHARACTER)
    if "\x00" in request.path_info:
        match = _resolved(request.path_info)
        named = (name for name, value in match.kwargs.items() if "\x00" in str(value)) if match is not None else ()
        return _invalid(request, next(iter(named), "path"), ERROR_NUL_CHARACTER)
    return None


def _invalid(request: HttpRequest, field: str, message: str) -> HttpResponseBase:
    if is_page(request):
        return bad_request(request)
    return JsonResponse(validation_error_body({field: [message]}), status=400)
