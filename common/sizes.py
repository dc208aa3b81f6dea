"""Values cut to a size the platform sets, with a marker where they were cut.

What an outside party sends — a tool's result, a plan's outputs, an answer written from them — reaches the
answer, the stored rows and the response; each has a size the platform sets, whatever the party sent.

* :func:`text_cut` — a text's start and :data:`CUT_MARK`, within a number of characters;
* :func:`json_bounded` — a JSON-ready value whose UTF-8 JSON fits in a number of bytes. It keeps the value's shape
  where it can: every string longer than one common length is cut to it (with :data:`CUT_MARK`), every list
  longer than a length that goes with it keeps its first items and a :data:`CUT_ITEMS` item; the length is the
  largest that fits (a binary search over real encodings, about fifteen of them for a 3 MB string). A value that
  does not fit even then (thousands of keys) becomes its JSON text, cut;
* :func:`limit_hit` — a limit that bit, as an answer's ``metadata.limits`` (and ``metadata.goal.limits``) list it.

Pure: imports no app.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common.infra import fastjson

CUT_MARK = "…[cut: {dropped} more characters]"
CUT_ITEMS = "…[cut: {dropped} more items]"
SHORTEST = 16  # the shortest a string is cut to before the whole value becomes its cut JSON text
ITEMS_PER_CHARACTER = 1 / 32  # a list keeps one item per 32 characters its strings keep, at least MIN_ITEMS
MIN_ITEMS = 4


def limit_hit(limit: str, setting: str, value: float, asked: float, ran: float, **more: Any) -> dict[str, Any]:
    """A limit that bit: its name and the setting that sets it, its value, what was asked for and what ran (in the
    limit's unit: bytes, characters, steps, items, seconds), and what else says how."""
    return {"limit": limit, "setting": setting, "value": value, "asked": asked, "ran": ran, **more}


def json_size(value: Any) -> int:
    """The size of ``value``'s compact UTF-8 JSON, in bytes (what the API writes; anything else as its text)."""
    return len(fastjson.dumps(value, default=str))


def text_cut(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else its start and :data:`CUT_MARK`: at most ``limit``
    characters in all (the mark alone when ``limit`` leaves no room for more)."""
    if len(text) <= limit:
        return text
    mark = CUT_MARK.format(dropped=len(text))
    kept = max(limit - len(mark), 0)
    mark = CUT_MARK.format(dropped=len(text) - kept)
    return text[:kept] + mark


def _shrunk(value: Any, chars: int, items: int) -> Any:
    if isinstance(value, str):
        return text_cut(value, chars)
    if isinstance(value, Mapping):
        return {key: _shrunk(item, chars, items) for key, item in value.items()}
    if isinstance(value, list | tuple):
        kept = [_shrunk(item, chars, items) for item in value[:items]]
        if len(value) > items:
            kept.append(CUT_ITEMS.format(dropped=len(value) - items))
        return kept
    return value


def _longest(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return max((_longest(item) for item in value.values()), default=0)
    if isinstance(value, list | tuple):
        return max([len(value) * 32, *(_longest(item) for item in value)])
    return 0


def _shrunk_to(value: Any, chars: int) -> Any:
    return _shrunk(value, chars, max(MIN_ITEMS, int(chars * ITEMS_PER_CHARACTER)))


def json_bounded(value: Any, limit: int) -> tuple[Any, int]:
    """``value`` cut so that its JSON takes at most ``limit`` bytes (see the module's docstring), and the size
    it had when it was cut (``0``: it fitted and is returned as it is)."""
    size = json_size(value)
    if size <= limit:
        return value, 0
    low, high = SHORTEST, max(_longest(value), SHORTEST)
    best = None
    while low <= high:
        middle = (low + high) // 2
        candidate = _shrunk_to(value, middle)
        if json_size(candidate) <= limit:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    if best is not None:
        return best, size
    return _bytes_cut(fastjson.dumps(value, default=str).decode(), limit), size


def _bytes_cut(text: str, limit: int) -> str:
    """``text``'s start and :data:`CUT_MARK` in at most ``limit`` bytes of UTF-8."""
    room = limit - len(CUT_MARK.format(dropped=len(text)).encode())
    if room <= 0:
        return text.encode()[:limit].decode(errors="ignore")
    head = text.encode()[:room].decode(errors="ignore")
    return head + CUT_MARK.format(dropped=len(text) - len(head))
