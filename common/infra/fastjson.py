"""JSON encoded by orjson, as the standard library would encode it where it matters.

A turn's answer and its metadata are encoded twice per message, for the response and for the stored rows (a few
kilobytes each time): ``json.dumps`` took about 19 µs for a typical answer, orjson under 2. What the standard
library accepts and orjson does not (integers beyond 64 bits) falls back to it. Used by the API's renderer
(:mod:`common.infra.renderers`) and by the PostgreSQL backend for ``jsonb`` values (:mod:`common.infra.postgresql`).

Pure: imports no app.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
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


def dumps_plain(value: Any) -> bytes | None:
    """``value``'s JSON as :func:`dumps` writes it with no ``default``; ``None`` when it holds something JSON has no
    type for."""
    try:
        return dumps(value)
    except TypeError:  # orjson's JSONEncodeError is one
        return None


class Encoded(dict[str, Any]):
    """A JSON object that carries the bytes :func:`dumps` wrote for it, once it is final: a turn's metadata, encoded
    for its size, is not encoded again for its ``jsonb`` column (:mod:`common.infra.postgresql`). Everything else reads
    it as the ``dict`` it is (orjson and ``json`` write it as one). Made for a value that no one changes any more."""

    __slots__ = ("json",)

    def __init__(self, value: Mapping[str, Any], json: bytes) -> None:
        super().__init__(value)
        self.json = json


def encoded(value: Encoded) -> bytes:
    """The bytes an :class:`Encoded` value carries (a ``dumps`` function for psycopg's ``Jsonb``)."""
    return value.json
