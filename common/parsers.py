"""JSON in, bounded: the API's one request parser and the WebSocket's frame decoder.

Python's ``json`` decodes nested arrays and objects recursively, so a body nested a few thousand levels deep
raises ``RecursionError`` (a 500) and anything that walks the result afterwards recurses as deep. Here the
nesting is counted *before* decoding, in one pass over the brackets outside strings, and a body deeper than
``API_JSON_MAX_DEPTH`` is refused as :class:`JsonTooDeep` (400). A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``
bytes, or over the smaller limit of a view that knows its bodies' size (:func:`body_limit`), is refused as
:class:`BodyTooLarge` (413) by its announced length, without being read or parsed. A string holding U+0000,
which no PostgreSQL text or JSON can store, is refused as :class:`NulCharacter` (400 naming where it is).
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

from common.text import whole_number

ERROR_JSON_TOO_DEEP = "The JSON is nested more than {limit} levels deep."
ERROR_BODY_TOO_LARGE = "The request body is larger than the limit of {limit} bytes."
ERROR_NUL_CHARACTER = "Null characters are not allowed."

# A JSON string, escapes included; an unterminated one runs to the end, so the scan stays linear.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+"?', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_NUL_ESCAPE = "\\u0000"


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


class NulCharacter(exceptions.ValidationError, ValueError):
    """A JSON string, value or key, holding U+0000, which no PostgreSQL text or JSON can store (400 naming
    ``field``: where it is, dotted, ``body`` for the document itself). A ``ValueError`` too, as any text that
    cannot be read."""

    def __init__(self, field: str) -> None:
        super().__init__({field: [ERROR_NUL_CHARACTER]})
        self.field = field

    def __str__(self) -> str:
        return f"{self.field}: {ERROR_NUL_CHARACTER}"


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
    """``json.loads`` for untrusted text: raises :class:`JsonTooDeep` for text nested too deep,
    :class:`NulCharacter` for a string holding U+0000, ``ValueError`` for text that is not JSON."""
    json_depth_check(text, limit)
    try:
        value = json.loads(text, parse_constant=parse_constant)
    except RecursionError:  # only if the limit is set above what the decoder can nest
        raise JsonTooDeep(max_depth() if limit is None else limit) from None
    # The decoder refuses a raw NUL in a string, so only the escape can make one: the walk runs only then.
    if _NUL_ESCAPE in text and (field := nul_field(value)) is not None:
        raise NulCharacter(field)
    return value


def nul_field(value: Any) -> str | None:
    """Where a string (value or key) holding U+0000 is in decoded JSON, dotted (``payload.context.note``, list
    items by index, a NUL in a key written ``\\u0000``; ``body`` for a string at the top), or ``None``."""
    stack: list[tuple[tuple[str, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            return _dotted(path)
        if isinstance(item, dict):
            for key in item:
                if "\x00" in key:
                    return _dotted((*path, key))
            stack.extend(((*path, key), child) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend(((*path, str(index)), child) for index, child in enumerate(item))
    return None


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(part.replace("\x00", _NUL_ESCAPE) for part in path) or "body"


def body_limit(view: Any) -> int | None:
    """The most bytes a body sent to ``view`` may have: ``DATA_UPLOAD_MAX_MEMORY_SIZE``, or less where the view
    knows its bodies' size (its ``body_limit()``); ``None``: no limit."""
    limits = [settings.DATA_UPLOAD_MAX_MEMORY_SIZE, view.body_limit() if hasattr(view, "body_limit") else None]
    return min((limit for limit in limits if limit is not None), default=None)


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser with a body size limit (413: :func:`body_limit`, by the announced length before anything
    is read) and a nesting limit (400), both before decoding."""

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        encoding = parsers.get_encoding(parser_context)  # type: ignore[attr-defined]  # DRF 3.18; stubs lag
        limit = body_limit(parser_context.get("view"))
        request = parser_context.get("request")
        announced = whole_number(request.META.get("CONTENT_LENGTH") or "") if request is not None else None
        if limit is not None and announced is not None and announced > limit:
            raise BodyTooLarge(limit)
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
        except (JsonTooDeep, NulCharacter):
            raise
        except ValueError as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
