"""JSON encoded by orjson, as the standard library would encode it where it matters.

A turn's answer and its metadata are encoded twice per message, for the response and for the stored rows (a few
kilobytes each time): ``json.dumps`` took about 19 µs for a typical answer, orjson under 2. What the standard
library accepts and orjson does not (integers beyond 64 bits) falls back to it. Used by the API's renderer
(:mod:`common.infra.renderers`) and by the PostgreSQL backend for ``jsonb`` values (:mod:`common.infra.postgresql`).

Pure: imports no app.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

# Non-string keys written as strings, as json.dumps writes them.
OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(value: Any, *, default: Callable[[Any], Any] | None = None, option: int = OPTIONS) -> bytes:
    """``value`` as compact UTF-8 JSON; ``default`` converts what JSON has no type for (as ``json``'s)."""
    try:
        return orjson.dumps(value, default=default, option=option)
    except orjson.JSONEncodeError:
        # Beyond what orjson encodes (an integer over 64 bits, say): the standard library's encoding.
        return json.dumps(value, default=default, ensure_ascii=False, separators=(",", ":")).encode()
