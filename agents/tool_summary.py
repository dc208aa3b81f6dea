"""A tool result told as text when nobody writes it: the offline model's answer, goal mode's steps.

A result's own sentence (``resumo``, ``summary``, ``message``, ``explanation``) tells it when it is in the
customer's language; else its data does, in any language: its values, the rows of its lists (flights found, payments
and their status), the fields of its records. Field names and values are the tool's, shown as they came.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from common.language import detect_language

SENTENCE_KEYS = ("resumo", "summary", "message", "explanation")
ROWS_SHOWN = 10  # of a list; a longer one ends with "…"
# A sentence of this many words or more in another language than the customer's is left out (the example servers'
# ``resumo`` is Portuguese); shorter values (names, codes, "confirmado") are data.
SENTENCE_WORDS = 4
_Fits = Callable[[str], bool]


def result_summary(payload: Any, language: str | None = None) -> str:
    """A tool result as text: its own sentence when it has one in ``language``, else its data — scalar fields on the
    first line, each list of records after it, one row a line. ``language`` ``None``: any sentence fits, and six
    scalar fields are shown (what the platform always said in Portuguese)."""

    def fits(text: str) -> bool:
        return language is None or len(text.split()) < SENTENCE_WORDS or detect_language(text) in (language, None)

    if isinstance(payload, Mapping) and _is_content(payload):
        return _content(payload, fits)
    if isinstance(payload, Mapping):
        for key in SENTENCE_KEYS:
            if isinstance(payload.get(key), str) and payload[key].strip() and fits(payload[key]):
                return payload[key].strip()
        return _record(payload, fits, limit=6 if language is None else 9)
    if isinstance(payload, list):
        return "\n".join(_rows(payload, fits))
    return str(payload)[:300]


CONTENT_KEYS = frozenset({"text", "attachments", "links"})  # a result of mixed content (agents.mcp)


def _is_content(payload: Mapping[str, Any]) -> bool:
    return "text" in payload and set(payload) <= CONTENT_KEYS


def _content(payload: Mapping[str, Any], fits: _Fits) -> str:
    """A result of mixed content: its text, then a line for each attachment and link — its name and where it is (an
    attachment not kept says why)."""
    lines = [text] if isinstance(text := payload.get("text"), str) and text.strip() and fits(text) else []
    for item in [*payload.get("attachments", ()), *payload.get("links", ())][:ROWS_SHOWN]:
        if isinstance(item, Mapping):
            name = item.get("title") or item.get("name") or ""
            lines.append(f"- {name}: {item.get('url') or item.get('uri') or item.get('omitted', '')}")
    return "\n".join(lines)


def _record(record: Mapping[str, Any], fits: _Fits, *, limit: int | None = None) -> str:
    """The record's values on one line, then each of its lists of records under its name."""
    inline = _fields(record, fits, limit=limit)
    lines = [inline] if inline else []
    for key, value in record.items():
        if key in SENTENCE_KEYS or not (isinstance(value, list) and any(isinstance(row, Mapping) for row in value)):
            continue
        rows = _rows(value, fits)
        if rows:
            lines += [f"{key}:", *rows]
    return "\n".join(lines)


def _rows(rows: list[Any], fits: _Fits) -> list[str]:
    shown = [_fields(row, fits) if isinstance(row, Mapping) else _value(row, fits) for row in rows[:ROWS_SHOWN]]
    lines = [f"- {line}" for line in shown if line]
    return [*lines, "- …"] if lines and len(rows) > ROWS_SHOWN else lines


def _fields(record: Mapping[str, Any], fits: _Fits, *, limit: int | None = None) -> str:
    """``key: value`` pairs of the record's values that read as one line (scalars, lists of them, small records)."""
    pairs = [
        f"{key}: {text}" for key, value in record.items() if key not in SENTENCE_KEYS and (text := _value(value, fits))
    ]
    return "; ".join(pairs[:limit])


def _value(value: Any, fits: _Fits) -> str:
    """A value as text on one line; ``""`` for what is not (a list of records, a sentence in another language)."""
    if isinstance(value, (bool, int, float)):
        return str(value)
    if isinstance(value, str):
        return value.strip() if fits(value) else ""
    if isinstance(value, list) and not any(isinstance(item, (Mapping, list)) for item in value):
        shown = [text for item in value[:ROWS_SHOWN] if (text := _value(item, fits))]
        return ", ".join([*shown, "…"] if shown and len(value) > ROWS_SHOWN else shown)
    if isinstance(value, Mapping):
        inner = _fields(value, fits)
        return f"({inner})" if inner else ""
    return ""
