"""Domain errors and their one mapping to HTTP responses.

Every API error has the shape ``{"error": {"code", "message", "fields"}}``;
``fields`` maps dotted field names (``payload.text``) to messages. Messages are
constants so tests can import them.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

ERROR_INVALID_KEY = "Missing or invalid API key; send 'Authorization: Bearer <key>'."
ERROR_NOT_AUTHENTICATED = "Authentication required; send 'Authorization: Bearer <key>'."
ERROR_DEBUG_FORBIDDEN = "This route needs a debug API key (create_api_key --debug) or a staff session."
ERROR_PREVIEW_FORBIDDEN = (
    "This route needs an API key allowed to preview the multi-agent graph (can_preview) or a staff session."
)
ERROR_MALFORMED_JSON = "The request body is not valid JSON."
ERROR_TEXT_REQUIRED = "This field is required and must not be empty."
ERROR_TEXT_TOO_LONG = "Text is longer than the limit of {limit} characters."
ERROR_UNKNOWN_AGENT = "Unknown agent_id {agent_id!r}."
ERROR_CONVERSATION_NOT_FOUND = "No conversation with this key."


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


def error_body(code: str, message: str, fields: dict[str, list[str]] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    # Imported here: rest_framework.views imports the authentication classes, which import this module.
    from rest_framework.views import exception_handler as drf_exception_handler

    if isinstance(exc, DomainError):
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status_code)
    if isinstance(exc, exceptions.ParseError):
        return Response(error_body("malformed_json", ERROR_MALFORMED_JSON, {"body": [str(exc.detail)]}), status=400)
    if isinstance(exc, exceptions.NotAuthenticated):
        exc.detail = exceptions.ErrorDetail(ERROR_NOT_AUTHENTICATED, code=exc.default_code)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = error_fields(exc.detail)
        first = next(iter(fields), "body")
        response.data = error_body("validation_error", f"Invalid input: {first}.", fields)
    else:
        code = getattr(exc, "default_code", "error")
        response.data = error_body(code, str(getattr(exc, "detail", exc)))
    return response
