"""The API's JSON renderer: DRF's, encoding with orjson (:mod:`common.infra.fastjson`).

The same bytes as DRF's compact UTF-8 JSON wherever a client could tell: datetimes go through DRF's encoder (ISO
8601, ``Z`` for UTC), as do decimals, lazy strings and querysets; U+2028 and U+2029 are escaped. What differs is
how a float is spelled where either spelling is JSON (``1e-7`` for ``1e-07``), and ``NaN`` becomes ``null``
instead of an error. An indented rendering (the browsable API, ``; indent=``) is DRF's own.
"""

from __future__ import annotations

from typing import Any

import orjson
from rest_framework import renderers

from common.infra import fastjson

# Datetimes to DRF's encoder, for its ISO form; the rest as orjson writes it.
_OPTIONS = fastjson.OPTIONS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


class JSONRenderer(renderers.JSONRenderer):
    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if data is None or self.get_indent(accepted_media_type or "", renderer_context or {}) is not None:
            return super().render(data, accepted_media_type, renderer_context)
        rendered = fastjson.dumps(data, default=self.encoder_class().default, option=_OPTIONS)
        if b"\xe2\x80\xa8" in rendered or b"\xe2\x80\xa9" in rendered:  # a strict JavaScript subset, as DRF's
            rendered = rendered.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
        return rendered
