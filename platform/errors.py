"""Errors Django answers itself, outside DRF, in the API's one error shape (:mod:`common.errors`).

DRF's views answer their own errors (``common.errors.exception_handler``). What is left is Django's: a path no
route matches (404), an unhandled exception (500), a bad ``Host`` header or a body over
``DATA_UPLOAD_MAX_MEMORY_SIZE`` (400, answered 413), a 403 and a CSRF failure. On the admin and the HTML pages
(:data:`PAGE_PREFIXES`) those stay Django's pages; everywhere else they are JSON. A database outage in any view
answers 503 with ``Retry-After`` (:class:`DatabaseUnavailableMiddleware`), logged as one WARNING line.

A WebSocket path that no route matches is refused at the handshake (:func:`websocket_not_found`).
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.utils.deprecation import MiddlewareMixin
from django.views import csrf, defaults

from common.errors import (
    DATABASE_UNAVAILABLE,
    ERROR_BAD_REQUEST,
    ERROR_CSRF,
    ERROR_FORBIDDEN,
    ERROR_PATH_NOT_FOUND,
    ERROR_SERVER,
    ERROR_SERVICE_UNAVAILABLE,
    RETRY_AFTER_SECONDS,
    database_unavailable_body,
    error_body,
)
from common.infra.circuit import TRIAL
from common.infra.outages import database_circuit
from common.parsers import ERROR_BODY_TOO_LARGE

logger = logging.getLogger(__name__)

# Where Django's own HTML error pages stay: the admin and the pages people open in a browser.
PAGE_PREFIXES = ("/admin/", "/chat/", "/desk/", "/analytics/", "/api/docs/")


def is_page(request: HttpRequest) -> bool:
    return request.path.startswith(PAGE_PREFIXES)


def _json(status: int, code: str, message: str, fields: dict[str, list[str]] | None = None) -> JsonResponse:
    return JsonResponse(error_body(code, message, fields), status=status)


def _unavailable(body: dict[str, Any], request: HttpRequest, retry_after: int = RETRY_AFTER_SECONDS) -> HttpResponse:
    if is_page(request):
        response: HttpResponse = HttpResponse(ERROR_SERVICE_UNAVAILABLE, status=503, content_type="text/plain")
    else:
        response = JsonResponse(body, status=503)
    response["Retry-After"] = str(retry_after)
    response._has_been_logged = True  # type: ignore[attr-defined]  # logged once, as a warning: Django adds no ERROR
    return response


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler400``: a bad Host header, a body over the size limit (413), other suspicious requests."""
    if isinstance(exception, RequestDataTooBig):
        message = ERROR_BODY_TOO_LARGE.format(limit=settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
        if is_page(request):
            return HttpResponse(message, status=413, content_type="text/plain")
        return _json(413, "body_too_large", message, {"body": [message]})
    if is_page(request):
        return defaults.bad_request(request, exception)  # type: ignore[arg-type]
    return _json(400, "bad_request", ERROR_BAD_REQUEST)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler403``."""
    if is_page(request):
        return defaults.permission_denied(request, exception)  # type: ignore[arg-type]
    return _json(403, "permission_denied", ERROR_FORBIDDEN)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """``handler404``: an unknown path (DRF's views answer their own 404s)."""
    if is_page(request):
        return defaults.page_not_found(request, exception)
    return _json(404, "not_found", ERROR_PATH_NOT_FOUND)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: Django calls it while handling the exception, so ``sys.exc_info()`` names it."""
    exc = sys.exc_info()[1]
    if isinstance(exc, DATABASE_UNAVAILABLE):
        return _unavailable(database_unavailable_body(exc, f"{request.method} {request.path}"), request)
    if is_page(request):
        return defaults.server_error(request)
    return _json(500, "server_error", ERROR_SERVER)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: Django's page in the admin and the pages, the error shape elsewhere."""
    if is_page(request):
        return csrf.csrf_failure(request, reason)
    return _json(403, "csrf_failed", ERROR_CSRF, {"csrf": [reason]} if reason else None)


class DatabaseCircuitMiddleware(MiddlewareMixin):
    """While the database is known to be down (:data:`common.infra.outages.database_circuit`), answer 503 at once.

    Without it every request of an outage waits the pool's whole timeout (``DATABASE_POOL_TIMEOUT``) before its
    503. One request per ``DATABASE_OUTAGE_PAUSE_SECONDS`` still goes through as a trial; when it does not meet
    the outage, everything goes through again. The health routes always run (readiness probes the database
    itself), and so do static files, which need no database.
    """

    EXEMPT_PREFIXES = ("/api/health",)

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if request.path.startswith(self.EXEMPT_PREFIXES) or request.path.startswith("/" + settings.STATIC_URL):
            return None
        admitted = database_circuit.admit()
        if admitted is None:
            body = error_body("service_unavailable", ERROR_SERVICE_UNAVAILABLE)
            return _unavailable(body, request, retry_after=max(round(database_circuit.seconds_left()), 1))
        request._database_trial = admitted == TRIAL  # type: ignore[attr-defined]  # read in process_response
        return None

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if request.__dict__.pop("_database_trial", False):
            database_circuit.trial_done()
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        """Under Django's own ASGI handler (``STOCK_PATHS``) a request is cancelled when its client leaves, and
        ``process_response`` never runs: a trial cut off so must still end, or the circuit never admits another."""
        try:
            return await super().__acall__(request)
        finally:
            if request.__dict__.pop("_database_trial", False):  # still set: the answer never came back
                database_circuit.trial_abandoned()


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    """A view that hits a database outage answers 503 with ``Retry-After``, logged as one WARNING line.

    Without it Django logs every such request at ERROR with a whole traceback and answers a 500: an outage of
    a few seconds floods the log with identical tracebacks and tells clients the fault is the server's code.
    (DRF's views map the outage in their exception handler; this is the same for every other view.)
    """

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, DATABASE_UNAVAILABLE):
            return _unavailable(database_unavailable_body(exception, f"{request.method} {request.path}"), request)
        return None


async def websocket_not_found(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The WebSocket router's last route: a path no route matches is refused at the handshake (HTTP 403),
    with one log line, instead of Channels' ``ValueError`` and a 500 with a traceback."""
    message = await receive()
    if message["type"] == "websocket.connect":
        logger.info("WebSocket refused: no route for path %r", scope.get("path", "")[:300])
        await send({"type": "websocket.close", "code": 4404})
