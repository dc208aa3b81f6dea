"""Domain errors and their one mapping to HTTP responses.

Every API error has the shape ``{"error": {"code", "message", "fields"}}``;
``fields`` maps dotted field names (``payload.text``) to messages. Messages are
constants so tests can import them. Errors Django answers outside DRF (unknown
paths, a 500, a bad Host) get the same shape from ``platform/errors.py``.

A database that cannot be reached (:data:`DATABASE_UNAVAILABLE`) is a 503 with
``Retry-After``, logged as one WARNING line: an outage is not a bug in a view.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from psycopg_pool import PoolTimeout
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

from common.infra.outages import database_circuit, database_outage_evident
from common.parsers import BodyTooLarge, JsonTooDeep

logger = logging.getLogger(__name__)

ERROR_INVALID_KEY = "Missing or invalid API key; send 'Authorization: Bearer <key>'."
ERROR_NOT_AUTHENTICATED = "Authentication required; send 'Authorization: Bearer <key>'."
ERROR_DEBUG_FORBIDDEN = (
    "This route needs a debug API key (create_api_key --debug) or a session whose user has the debug right "
    "over the tenant."
)
ERROR_PREVIEW_FORBIDDEN = (
    "This route needs an API key allowed to preview the multi-agent graph (can_preview) or a session whose user "
    "may chat as the tenant."
)
ERROR_MALFORMED_JSON = "The request body is not valid JSON."
ERROR_TEXT_REQUIRED = "This field is required and must not be empty."
ERROR_TEXT_TOO_LONG = "Text is longer than the limit of {limit} characters."
ERROR_UNKNOWN_AGENT = "Unknown agent_id {agent_id!r}."
ERROR_CONVERSATION_NOT_FOUND = "No conversation with this key."
ERROR_SERVICE_UNAVAILABLE = "The service is briefly unavailable (its database cannot be reached); retry shortly."
ERROR_SERVER = "The server failed to answer this request."
ERROR_PATH_NOT_FOUND = "No API route at this path."
ERROR_PATH_MEANT = "No API route at this path; the route is {path} (the trailing slash differs)."
ERROR_BAD_REQUEST = "The request could not be read."
ERROR_FORBIDDEN = "You may not do this."
ERROR_CSRF = "CSRF check failed: send the CSRF token with a session, or use 'Authorization: Bearer <key>'."

# What a database outage raises: Django's wrappers of the driver's errors, and the pool's wait running out.
DATABASE_UNAVAILABLE: tuple[type[Exception], ...] = (OperationalError, InterfaceError, PoolTimeout)
RETRY_AFTER_SECONDS = 5


class DomainError(Exception):
    """An error the API reports as a 4xx with a stable code."""

    status_code: int = status.HTTP_400_BAD_REQUEST  # subclasses set other 4xx codes
    code = "invalid"

    def __init__(self, message: str, *, fields: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields or {}


class NotFound(DomainError):
    status_code = status.HTTP_404_NOT_FOUND
    code = "not_found"


def error_fields(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested validation detail as ``{dotted field name: [messages]}`` (``payload.text``)."""
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix and key != "non_field_errors" else (prefix or str(key))
            out.update(error_fields(value, name))
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return {prefix or "non_field_errors": [str(item) for item in detail]}
        out = {}
        for index, item in enumerate(detail):
            out.update(error_fields(item, f"{prefix}.{index}" if prefix else str(index)))
        return out
    return {prefix or "non_field_errors": [str(detail)]}


# The error body in the OpenAPI schema (drf-spectacular), for every view's 4xx responses.
ERROR_RESPONSE = inline_serializer(
    "Error",
    {
        "error": inline_serializer(
            "ErrorBody",
            {
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "fields": serializers.DictField(child=serializers.ListField(child=serializers.CharField())),
            },
        )
    },
)


ERROR_DESCRIPTIONS = {
    400: "Invalid input, malformed JSON or JSON nested too deep; `fields` names what is wrong.",
    401: "No API key, or an unknown or revoked one.",
    403: "The key or session may not do this.",
    404: "Nothing with this name or key (another tenant's looks the same).",
    405: "Method not allowed on this path.",
    413: "The request body is over the size limit.",
    409: "A request with this `Idempotency-Key` is still being answered; retry after it ends.",
    415: "The body is not `application/json`.",
    422: "This `Idempotency-Key` was used with another request body.",
    429: "Too many requests; retry after `Retry-After` seconds.",
    503: "The database cannot be reached; retry after `Retry-After` seconds.",
}


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    """The schema's error answers for ``codes``, in the one error shape.

    One line per view: ``responses={200: ANSWER, **error_responses(400, 401, 413)}``.
    """
    return {code: OpenApiResponse(ERROR_RESPONSE, description=ERROR_DESCRIPTIONS[code]) for code in codes}


def error_body(code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def validation_error_body(fields: dict[str, list[str]]) -> dict[str, Any]:
    """The 400 body for invalid input, naming the first bad field in its message and every one in ``fields``."""
    return error_body("validation_error", f"Invalid input: {next(iter(fields), 'body')}.", fields)


def database_unavailable_response(body: dict[str, Any]) -> Response:
    """A 503 with ``Retry-After`` for a logged outage (Django does not log it again as an ERROR)."""
    response = Response(body, status=503, headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    response._has_been_logged = True  # type: ignore[attr-defined]  # django.utils.log.log_response skips it
    return response


def database_unavailable_body(exc: BaseException, where: str) -> dict[str, Any]:
    """The 503 body for a database outage, logged as one WARNING line (no traceback: the cause is the outage)."""
    logger.warning("Database unavailable during %s: %s: %s", where, type(exc).__name__, str(exc).strip()[:200])
    if database_outage_evident(exc):
        database_circuit.trip()  # the next requests are answered at once, not after the pool's timeout each
    return error_body("service_unavailable", ERROR_SERVICE_UNAVAILABLE)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    # Imported here: rest_framework.views imports the authentication classes, which import this module.
    from rest_framework.views import exception_handler as drf_exception_handler

    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status_code)
    if isinstance(exc, DATABASE_UNAVAILABLE):
        request = context.get("request")
        where = f"{request.method} {request.path}" if request is not None else "a request"
        return database_unavailable_response(database_unavailable_body(exc, where))
    if isinstance(exc, JsonTooDeep):
        message = str(exc.detail)
        return Response(error_body(exc.default_code, message, {"body": [message]}), status=400)
    if isinstance(exc, RequestDataTooBig):  # Django's own check, when something read the body before DRF
        exc = BodyTooLarge(_body_limit())
    if isinstance(exc, BodyTooLarge):
        message = str(exc.detail)
        return Response(error_body(exc.default_code, message, {"body": [message]}), status=exc.status_code)
    if isinstance(exc, exceptions.ParseError):
        return Response(error_body("malformed_json", ERROR_MALFORMED_JSON, {"body": [str(exc.detail)]}), status=400)
    if isinstance(exc, exceptions.NotAuthenticated):
        exc.detail = exceptions.ErrorDetail(ERROR_NOT_AUTHENTICATED, code=exc.default_code)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = validation_error_body(error_fields(exc.detail))
    else:
        code = getattr(exc, "default_code", "error")
        response.data = error_body(code, str(getattr(exc, "detail", exc)))
    return response


def _body_limit() -> int:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0
