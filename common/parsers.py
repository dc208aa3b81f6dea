"""JSON in, bounded: the API's one request parser and the WebSocket's frame decoder.

Python's ``json`` decodes nested arrays and objects recursively, so a body nested a few thousand levels deep
raises ``RecursionError`` (a 500) and anything that walks the result afterwards recurses as deep. Here the
nesting is counted *before* decoding, in one pass over the brackets outside strings, and a body deeper than
``API_JSON_MAX_DEPTH`` is refused as :class:`JsonTooDeep` (400). A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``
bytes is refused as :class:`BodyTooLarge` (413) without being read past the limit.
"""

from __future__ import annotations

import codecs
import json
import re
from itertools import accumulate
from typing import Any

from django.conf import settings
from rest_framework import exceptions, parsers, status
from rest_framework.utils import json as drf_json

ERROR_JSON_TOO_DEEP = "The JSON is nested more than {limit} levels deep."
ERROR_BODY_TOO_LARGE = "The request body is larger than the limit of {limit} bytes."

# A JSON string, escapes included; an unterminated one runs to the end, so the scan stays linear.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+"?', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JsonTooDeep(exceptions.ParseError):
    """A JSON document nested deeper than the limit (400, code ``json_too_deep``)."""

    default_code = "json_too_deep"

    def __init__(self, limit: int) -> None:
        super().__init__(ERROR_JSON_TOO_DEEP.format(limit=limit), code=self.default_code)
        self.limit = limit


class BodyTooLarge(exceptions.APIException):
    """A request body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (413, code ``body_too_large``)."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "body_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(ERROR_BODY_TOO_LARGE.format(limit=limit), code=self.default_code)
        self.limit = limit


def max_depth() -> int:
    return int(getattr(settings, "API_JSON_MAX_DEPTH", 32))


def json_depth_check(text: str, limit: int | None = None) -> None:
    """Raise :class:`JsonTooDeep` if ``text`` nests arrays/objects more than ``limit`` levels deep.

    One pass in C over the brackets outside strings; malformed text is left for the decoder to refuse.
    """
    limit = max_depth() if limit is None else limit
    brackets = _NOT_A_BRACKET.sub("", _STRING.sub("", text))  # strings first: brackets in them do not count
    if len(brackets) <= limit:
        return  # too few brackets to nest that deep
    if max(accumulate(map(_DEPTH_STEP.__getitem__, brackets))) > limit:
        raise JsonTooDeep(limit)


def json_loads_limited(text: str, *, limit: int | None = None, parse_constant: Any = None) -> Any:
    """``json.loads`` for untrusted text: raises :class:`JsonTooDeep` for text nested too deep, ``ValueError``
    for text that is not JSON."""
    json_depth_check(text, limit)
    try:
        return json.loads(text, parse_constant=parse_constant)
    except RecursionError:  # only if the limit is set above what the decoder can nest
        raise JsonTooDeep(max_depth() if limit is None else limit) from None


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser with a body size limit (413) and a nesting limit (400), both before decoding."""

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        encoding = parsers.get_encoding(parser_context)  # type: ignore[attr-defined]  # DRF 3.18; stubs lag
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise BodyTooLarge(limit)
        try:
            text = codecs.decode(raw, encoding)
        except (UnicodeDecodeError, LookupError) as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        parse_constant = drf_json.strict_constant if self.strict else None
        try:
            return json_loads_limited(text, parse_constant=parse_constant)
        except JsonTooDeep:
            raise
        except ValueError as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
