"""What a program gets for a path no route takes under the prefixes programs talk to (``/api/``, ``/v1/``,
``/a2a/``): a 404 in JSON whatever the method — the API's error shape, OpenAI's under ``/v1/`` — in debug mode too,
where Django would answer its HTML debug page.

These views are the last routes of those prefixes (``chat/unknown_path_urls.py``, included last by
``platform/urls.py``), so every route added under a prefix comes before them and keeps its own answers, its 405 for
a wrong method among them. A path one trailing slash away from a route is told that route (``/api/health/`` →
``/api/health``): each route has one path, and a client is told which rather than redirected (a redirected POST
loses its body).
"""

from __future__ import annotations

from typing import Any

from django.urls import Resolver404, resolve
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.views import APIView

from chat.openai.errors import OpenAIError, openai_exception_handler
from common.errors import ERROR_PATH_MEANT, ERROR_PATH_NOT_FOUND, NotFound
from common.infra.renderers import JSONRenderer

ERROR_OPENAI_PATH = "Invalid URL ({method} {path})."
ERROR_OPENAI_PATH_MEANT = "Invalid URL ({method} {path}); the route is {meant} (the trailing slash differs)."


class PathNotFoundApi(APIView):
    """Any method on a path no route under ``/api/`` or ``/a2a/`` takes: 404 ``not_found`` naming ``path``."""

    authentication_classes: list[Any] = []  # nothing to guard: the answer is the same for everyone
    permission_classes = [AllowAny]
    throttle_classes: list[Any] = []
    renderer_classes = [JSONRenderer]
    schema = None  # not an operation of the API
    unmatched = True  # its requests are counted as matching no route (platform.middleware.route_label)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        meant = route_meant(request.path)
        message = ERROR_PATH_MEANT.format(path=meant) if meant else ERROR_PATH_NOT_FOUND
        raise NotFound(message, fields={"path": [message]})


class OpenAIPathNotFoundApi(PathNotFoundApi):
    """The same under ``/v1/``, in OpenAI's error shape (``invalid_request_error``, code ``unknown_url``)."""

    def get_exception_handler(self) -> Any:
        return openai_exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        meant = route_meant(request.path)
        template = ERROR_OPENAI_PATH_MEANT if meant else ERROR_OPENAI_PATH
        message = template.format(method=request.method, path=request.path, meant=meant)
        raise OpenAIError(message, status=404, code="unknown_url")


NOT_FOUND_VIEWS = (PathNotFoundApi, OpenAIPathNotFoundApi)


def route_meant(path: str) -> str | None:
    """The path of the route ``path`` was likely meant for: ``path`` with its trailing slash removed or added, when
    a route other than these takes it; ``None`` otherwise."""
    other = path[:-1] if path.endswith("/") else path + "/"
    try:
        match = resolve(other)
    except Resolver404:
        return None
    return None if getattr(match.func, "cls", None) in NOT_FOUND_VIEWS else other
