"""The lists' cursors: opaque to the client, written by the list, read back checked.

A cursor comes back from the client, so it is read as untrusted input: whatever it holds, it is a value the
database can compare or a ``ValueError`` (which the lists answer with a 400 naming ``cursor``), never a query that
fails. Two values need care beyond their type: a time, which must be one every database stores once it is in UTC
(``9999-12-31T23:59:59-12:00`` is year 10000 there, which SQLite's adapter cannot write), and a whole number, which
must fit the 64-bit columns it is compared with.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
from collections.abc import Sequence
from typing import Any

ERROR_CURSOR = "Not a cursor of this list: use the `next` link of the page before, with the same filters."

BIGINT_MAX = 2**63 - 1  # the largest value of a 64-bit column, on PostgreSQL and SQLite alike
_WHOLE = re.compile(r"-?[0-9]{1,19}")  # ASCII digits only (str.isdigit takes "²" too, which int() refuses)


def cursor_encode(values: Sequence[Any]) -> str:
    """The opaque text of a page's ``after`` key: its values, as JSON, in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(json.dumps(list(values)).encode()).decode().rstrip("=")


def cursor_decode(cursor: str, *, length: int) -> list[Any]:
    """The ``length`` values of a cursor :func:`cursor_encode` wrote; raises ``ValueError``."""
    try:
        values = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, UnicodeDecodeError, RecursionError) as exc:
        raise ValueError(cursor) from exc
    if not isinstance(values, list) or len(values) != length:
        raise ValueError(cursor)
    return values


def cursor_time(value: Any) -> dt.datetime:
    """A cursor's time: ISO 8601 with its zone, returned in UTC; raises ``ValueError`` for anything else, a time
    without a zone, or one outside the years 1–9999 once in UTC."""
    if not isinstance(value, str):
        raise ValueError(value)
    when = dt.datetime.fromisoformat(value)
    if when.tzinfo is None:
        raise ValueError(value)
    try:
        return when.astimezone(dt.UTC)
    except OverflowError:
        raise ValueError(value) from None


def cursor_whole(value: Any, *, lowest: int = 0, highest: int = BIGINT_MAX) -> int:
    """A cursor's whole number (an int, or its ASCII digits as text) within ``lowest``–``highest``; raises
    ``ValueError`` for anything else (a bool, a float, ``"²"``, a number no 64-bit column holds)."""
    if isinstance(value, str) and _WHOLE.fullmatch(value):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not lowest <= value <= highest:
        raise ValueError(value)
    return value
