"""Content negotiation of the routes that answer Server-Sent Events.

DRF picks a renderer from the ``Accept`` header before the view runs, and its renderers are JSON's: a client that
says ``Accept: text/event-stream`` (as an EventSource does, and most SSE clients) was refused with 406 before the
stream could start. On these routes such a client gets the stream, and an error before the stream starts (bad
input, no key, a throttle) in JSON, as on every route; a client accepting neither is still refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rest_framework.exceptions import NotAcceptable
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.utils.mediatypes import media_type_matches

from common.infra.negotiation import RememberingNegotiation

EVENT_STREAM = "text/event-stream"


class EventStreamNegotiation(RememberingNegotiation):
    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> Any:
        renderers = list(renderers)
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            accepted = [part.strip() for part in request.META.get("HTTP_ACCEPT", "").split(",")]
            if not format_suffix and any(media_type_matches(EVENT_STREAM, part) for part in accepted if part):
                return renderers[0], renderers[0].media_type  # the stream's errors: JSON, as everywhere
            raise
