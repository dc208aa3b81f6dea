"""The bounds of structured output (:mod:`agents.structured`): the limits, the errors, the step budget, and the
size of a value as an answer's JSON."""

from __future__ import annotations

import json
from typing import Any

from common.sizes import text_cut

SCHEMA_MAX_NODES = 2_000  # the metaschema's check alone costs about 0.2 ms a value
SCHEMA_MAX_CHARS = 64_000
SCHEMA_MAX_DEPTH = 32
SCHEMA_MAX_PATTERNS = 100
FILL_MAX_STEPS = 20_000
CHECK_MAX_STEPS = 100_000


class SchemaRefused(ValueError):
    """A schema the platform does not take, or cannot answer in (the message says where and why)."""


class FormatUnsupported(SchemaRefused):
    """A schema, or a branch of one, the platform cannot fill (within the room it has)."""


class SchemaTooCostly(SchemaRefused):
    """Filling or checking against a schema would take more steps than its budget."""


class Budget:
    """Steps counted against a limit: :meth:`spend` raises :class:`SchemaTooCostly` past it."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit, self.what, self.spent = limit, what, 0

    def spend(self, steps: int = 1) -> None:
        self.spent += steps
        if self.spent > self.limit:
            raise SchemaTooCostly(f"{self.what} takes more than {self.limit:,} steps.")


def json_text(value: Any) -> str:
    """``value`` written as an answer's JSON (the size every bound here counts, in characters)."""
    return json.dumps(value, ensure_ascii=False)


def escaped_length(text: str) -> int:
    """The characters ``text`` takes inside a JSON string (quotes not counted)."""
    return len(json_text(text)) - 2


def text_fitting(text: str, room: int) -> str:
    """``text``, cut with :data:`common.sizes.CUT_MARK` if need be, so that it takes at most ``room`` characters
    written in a JSON string (``""`` when not even the mark fits)."""
    if len(text) <= room and escaped_length(text) <= room:
        return text
    low, high, best = 0, room, ""
    while low <= high:  # the longest cut that fits: a binary search over real encodings
        middle = (low + high) // 2
        cut = text_cut(text, middle)
        if escaped_length(cut) <= room:
            best, low = cut, middle + 1
        else:
            high = middle - 1
    return best
