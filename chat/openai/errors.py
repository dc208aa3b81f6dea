"""The OpenAI-compatible faces' errors: OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``, for
their own refusals (:class:`OpenAIError`), DRF's (authentication, parsing, throttling) and the front door's
(:func:`front_door_error`), and the views that answer them (:class:`OpenAIView`)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.response import Response

from chat.asyncapi import AsyncAPIView
from chat.intake import PreviewForbidden, TextTooLong, UnknownProfile
from common.errors import (
    DATABASE_UNAVAILABLE,
    ERROR_DESCRIPTIONS,
    ERROR_INVALID_KEY,
    ERROR_MALFORMED_JSON,
    ERROR_NOT_AUTHENTICATED,
    DomainError,
    database_unavailable_body,
    database_unavailable_response,
)
from common.parsers import ERROR_NUL_CHARACTER, BodyTooLarge, JsonTooDeep, NulCharacter

ROUTE_HEADER = "X-Agent-Route"
ERROR_UNKNOWN_MODEL = "The model {model!r} does not exist."


class OpenAIError(Exception):
    """An error answered in OpenAI's shape."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        type_: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.message, self.status, self.param, self.code, self.type = message, status, param, code, type_

    def as_dict(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def invalid(param: str, message: str, code: str | None = "invalid_value") -> OpenAIError:
    """A 400 naming ``param``."""
    return OpenAIError(message, param=param, code=code)


def not_found(param: str, message: str, code: str = "not_found") -> OpenAIError:
    """A 404 naming ``param``."""
    return OpenAIError(message, status=404, param=param, code=code)


def key_required() -> OpenAIError:
    """A staff session has no tenant: these faces are for API keys."""
    return OpenAIError(ERROR_INVALID_KEY, status=401, code="invalid_api_key", type_="authentication_error")


def front_door_error(exc: DomainError, *, model: str, text_param: str) -> OpenAIError:
    """The front door's refusal (:mod:`chat.intake`) in OpenAI's words: its parameter names and codes;
    ``text_param`` is where the face's request holds the message's text."""
    if isinstance(exc, UnknownProfile):
        return not_found("model", ERROR_UNKNOWN_MODEL.format(model=model), code="model_not_found")
    if isinstance(exc, TextTooLong):
        message = f"The last user message is longer than {exc.limit} characters."
        return invalid(text_param, message, code="context_length_exceeded")
    if isinstance(exc, PreviewForbidden):
        return OpenAIError(
            exc.message, status=403, param=ROUTE_HEADER, code="permission_denied", type_="permission_error"
        )
    return invalid(next(iter(exc.fields), "body"), exc.message)


def openai_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's errors (auth, parse, throttling) and ours, in OpenAI's error shape."""
    if isinstance(exc, OpenAIError):
        return Response(exc.as_dict(), status=exc.status)
    if isinstance(exc, exceptions.NotAuthenticated):
        error = OpenAIError(ERROR_NOT_AUTHENTICATED, status=401, code="invalid_api_key", type_="authentication_error")
    elif isinstance(exc, exceptions.AuthenticationFailed):
        error = key_required()
    elif isinstance(exc, NulCharacter):
        error = invalid(exc.field, ERROR_NUL_CHARACTER)
    elif isinstance(exc, JsonTooDeep | BodyTooLarge):
        error = OpenAIError(str(exc.detail), status=exc.status_code, param="body", code=exc.default_code)
    elif isinstance(exc, RequestDataTooBig):
        return openai_exception_handler(BodyTooLarge(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0), context)
    elif isinstance(exc, DATABASE_UNAVAILABLE):
        request = context.get("request")
        body = database_unavailable_body(exc, f"{request.method} {request.path}" if request else "a completion")
        error = OpenAIError(body["error"]["message"], status=503, code="service_unavailable", type_="server_error")
        return database_unavailable_response(error.as_dict())
    elif isinstance(exc, exceptions.ParseError):
        error = OpenAIError(ERROR_MALFORMED_JSON, code="invalid_json")
    elif isinstance(exc, exceptions.APIException):
        error = OpenAIError(
            str(exc.detail), status=exc.status_code, code=exc.default_code, type_=_error_type(exc.status_code)
        )
    else:
        return None
    response = Response(error.as_dict(), status=error.status)
    if error.status == 401:
        response["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, exceptions.Throttled) and (wait := getattr(exc, "wait", None)):  # the stubs omit .wait
        response["Retry-After"] = str(wait)  # tenants/throttles.py; OpenAI's clients wait this long
    return response


def _error_type(status: int) -> str:
    return {
        401: "authentication_error",
        403: "permission_error",
        404: "invalid_request_error",
        429: "rate_limit_error",
    }.get(status, "invalid_request_error" if status < 500 else "server_error")


class OpenAIView(AsyncAPIView):
    def get_exception_handler(self):
        return openai_exception_handler


# --- the schema ----------------------------------------------------------------------------------------------

OPENAI_ERROR_RESPONSE = inline_serializer(
    "OpenAIError",
    {
        "error": inline_serializer(
            "OpenAIErrorBody",
            {
                "message": serializers.CharField(),
                "type": serializers.CharField(),
                "param": serializers.CharField(allow_null=True),
                "code": serializers.CharField(allow_null=True),
            },
        )
    },
)


def openai_errors(*codes: int) -> dict[int, OpenApiResponse]:
    """The schema's error answers for ``codes``, in OpenAI's shape."""
    return {code: OpenApiResponse(OPENAI_ERROR_RESPONSE, description=ERROR_DESCRIPTIONS[code]) for code in codes}
