"""How a client asked the answer to be written, and the rules the platform keeps it by.

The OpenAI-compatible faces read what a client may ask of the answer's writing (``max_tokens``, ``temperature``,
``stop``, ``response_format`` …) into a :class:`Generation`, which travels with the turn to every model call that
writes the answer's text. An OpenAI-compatible endpoint gets it in its request (:meth:`Generation.request_options`);
the offline model, deterministic, writes the same text whatever the sampling and keeps the length, the stop
sequences and the answer's format itself, by the rules below — the same the turn applies to the answer it stores,
whoever wrote it (a consolidation, a person's queue notice):

* **length** (:func:`text_within`): at most ``max_tokens`` tokens, counted as the offline model counts its usage
  (:func:`agents.usage.text_tokens`: four characters a token), so the answer is its first ``4 × max_tokens``
  characters; cut, it finishes with ``"length"``;
* **stop sequences**: the answer ends before the first of them;
* **format** (:func:`answer_formatted`): ``json_object`` — a JSON object; ``json_schema`` — JSON valid against the
  schema. Text not in the format is put into it: ``{"answer": text}``, or the schema filled
  (:func:`agents.structured.schema_instance`: the text in its answer-like string, every other value the least the
  schema allows). Either way within ``ANSWER_MAX_CHARS``, the limit of every answer: the text is cut to the room
  the rest leaves, a cut the turn records as the limit's (:func:`answer_fitted` says it). A schema the platform does
  not take (:mod:`agents.structured`: its size, its keywords, the work checking and filling it would take), or
  whose least value does not fit in that limit, is refused when asked (:func:`format_problem`).

Pure: no database, no network (the answer's limit is a setting).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any, NamedTuple

from django.conf import settings

from agents.structured import (
    SchemaRefused,
    SchemaTooCostly,
    json_text,
    schema_errors,
    schema_filled,
    schema_instance,
    schema_problem,
    text_fitting,
)
from agents.usage import CHARS_PER_TOKEN
from common.parsers import JsonTooDeep, json_loads_limited

FINISH_STOP = "stop"
FINISH_LENGTH = "length"

FORMAT_TEXT = "text"
FORMAT_JSON_OBJECT = "json_object"
FORMAT_JSON_SCHEMA = "json_schema"
FORMATS = (FORMAT_TEXT, FORMAT_JSON_OBJECT, FORMAT_JSON_SCHEMA)
# json_object: text not written as a JSON object is put under this key.
ANSWER_KEY = "answer"


@dataclass(frozen=True)
class Generation:
    """What a client asked of the answer's writing; ``None`` (or empty) leaves the profile's model as configured.

    ``response_format`` is OpenAI's: ``{"type": "json_object"}`` or ``{"type": "json_schema", "json_schema":
    {"name", "schema", "strict"?}}`` (``None`` for prose). Sampling (temperature, top_p, penalties, seed) reaches a
    model endpoint; the offline model is deterministic and writes the same whatever it is.
    """

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    response_format: Mapping[str, Any] | None = None

    def sampling(self) -> dict[str, Any]:
        """The sampling parameters set, by their OpenAI names."""
        values = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "frequency_penalty": self.frequency_penalty,
            "presence_penalty": self.presence_penalty,
            "seed": self.seed,
        }
        return {name: value for name, value in values.items() if value is not None}

    def request_options(self) -> dict[str, Any]:
        """What an OpenAI-compatible endpoint's request gets, as keyword arguments of a langchain-openai call.

        The format goes in the request's body as it is (``extra_body``): langchain-openai would otherwise parse
        the reply with the openai client's ``parse``, which refuses the specialists' tools (they are not
        ``strict``). ``max_tokens`` is sent as ``max_completion_tokens`` (langchain-openai renames it)."""
        options = self.sampling()
        if self.max_tokens is not None:
            options["max_tokens"] = self.max_tokens
        if self.stop:
            options["stop"] = list(self.stop)
        if self.response_format is not None:
            options["extra_body"] = {"response_format": dict(self.response_format)}
        return options

    def offline_options(self) -> dict[str, Any]:
        """What the offline model's call gets: the rules it keeps (length, stop sequences, format)."""
        options: dict[str, Any] = {}
        if self.max_tokens is not None:
            options["max_tokens"] = self.max_tokens
        if self.stop:
            options["stop"] = list(self.stop)
        if self.response_format is not None:
            options["response_format"] = dict(self.response_format)
        return options

    def without_format(self) -> Generation:
        """The same, writing prose: for a supervisor's parts, which the turn merges before the format applies."""
        return replace(self, response_format=None)

    def as_dict(self) -> dict[str, Any]:
        """Plain data, as a plan's step crosses the broker (:meth:`from_dict` reads it back)."""
        data = asdict(self)
        data["stop"] = list(self.stop)
        data["response_format"] = dict(self.response_format) if self.response_format is not None else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Generation | None:
        if not data:
            return None
        return cls(**{**data, "stop": tuple(data.get("stop") or ())})


# --- length and stop sequences ------------------------------------------------------------------------------


def max_chars(max_tokens: int) -> int:
    """The most characters ``max_tokens`` tokens hold, as the platform counts them."""
    return max_tokens * CHARS_PER_TOKEN


def stop_cut(text: str, stop: tuple[str, ...] | list[str]) -> str:
    """``text`` up to (not including) the first of the ``stop`` sequences it holds."""
    ends = [found for sequence in stop if sequence and (found := text.find(sequence)) >= 0]
    return text[: min(ends)] if ends else text


def text_within(text: str, *, max_tokens: int | None, stop: tuple[str, ...] | list[str] = ()) -> tuple[str, str]:
    """``text`` ended at its first stop sequence and cut to ``max_tokens`` tokens, with its finish reason:
    ``"length"`` when the length cut it, else ``"stop"``."""
    text = stop_cut(text, stop)
    if max_tokens is not None and len(text) > max_chars(max_tokens):
        return text[: max_chars(max_tokens)], FINISH_LENGTH
    return text, FINISH_STOP


# --- the answer's format -----------------------------------------------------------------------------------


def format_type(response_format: Mapping[str, Any] | None) -> str:
    return str((response_format or {}).get("type") or FORMAT_TEXT)


def format_schema(response_format: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a ``json_schema`` format (``{}``: any JSON)."""
    schema = (response_format.get(FORMAT_JSON_SCHEMA) or {}).get("schema")
    return dict(schema) if isinstance(schema, Mapping) else {}


def format_problem(response_format: Mapping[str, Any]) -> str | None:
    """Why the platform cannot answer in ``response_format``'s JSON Schema (:func:`agents.structured.schema_problem`,
    or its least value over ``ANSWER_MAX_CHARS`` or its budgets: :func:`agents.structured.schema_instance`);
    ``None`` when it can."""
    if format_type(response_format) != FORMAT_JSON_SCHEMA:
        return None
    schema = format_schema(response_format)
    problem = schema_problem(schema)
    if problem is not None:
        return problem
    try:
        schema_instance(schema, "", limit=answer_limit())
    except SchemaRefused as exc:
        return str(exc)
    return None


def answer_limit() -> int:
    """The most characters any answer has (``ANSWER_MAX_CHARS``): a formatted one too."""
    return int(settings.ANSWER_MAX_CHARS)


def _json_read(text: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``text`` is JSON (nested within the API's depth), else ``(False, None)``."""
    try:
        return True, json_loads_limited(text)
    except (ValueError, JsonTooDeep):
        return False, None


def format_conforms(text: str, response_format: Mapping[str, Any] | None) -> bool:
    """Whether ``text`` is already in the format (prose always is) and within the answer's limit. Checking it
    against a schema is bounded (:func:`agents.structured.schema_errors`): a check over its steps is no."""
    kind = format_type(response_format)
    if kind == FORMAT_TEXT:
        return True
    if len(text) > answer_limit():
        return False
    is_json, value = _json_read(text)
    if not is_json:
        return False
    if kind == FORMAT_JSON_OBJECT:
        return isinstance(value, dict)
    try:
        return not schema_errors(format_schema(response_format or {}), value)
    except SchemaTooCostly:
        return False


class Formatted(NamedTuple):
    """An answer in its format, and the characters it would have had with its text whole: more than the answer's
    when the text was cut to the room the rest of the value leaves within the answer's limit."""

    answer: str
    asked: int


# What the offline model's reply reports (in its response metadata) when it put its text into the format cut:
# Formatted.asked, for the turn to record the cut (an endpoint's reply never holds it).
ANSWER_CHARS_ASKED = "answer_chars_asked"


def answer_fitted(text: str, response_format: Mapping[str, Any] | None) -> Formatted:
    """``text`` if it is in the format, else put into it (the module's docstring says how), within the answer's
    limit; with what the answer would have been with the text whole."""
    if format_conforms(text, response_format):
        return Formatted(text, len(text))
    limit = answer_limit()
    if format_type(response_format) == FORMAT_JSON_OBJECT:
        fitted = text_fitting(text, limit - len(json_text({ANSWER_KEY: ""})))
        answer = json_text({ANSWER_KEY: fitted})
        return Formatted(answer, len(answer) + len(json_text(text)) - len(json_text(fitted)))
    filled = schema_filled(format_schema(response_format or {}), text, limit=limit)
    answer = json_text(filled.value)
    return Formatted(answer, len(answer) + filled.lost)


def answer_formatted(text: str, response_format: Mapping[str, Any] | None) -> str:
    """``text`` if it is in the format, else put into it, within the answer's limit (:func:`answer_fitted`)."""
    return answer_fitted(text, response_format).answer


def json_answer(text: str, response_format: Mapping[str, Any] | None) -> tuple[bool, Any]:
    """``(True, value)`` when the format asks for JSON and ``text`` is JSON: an answer that is JSON by request, whose
    strings (not its shape) are what guardrails and judges read; else ``(False, None)``."""
    if format_type(response_format) == FORMAT_TEXT:
        return False, None
    return _json_read(text)


def strings_mapped(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` (JSON) with every string value passed through ``change`` (keys kept)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [strings_mapped(item, change) for item in value]
    if isinstance(value, dict):
        return {key: strings_mapped(item, change) for key, item in value.items()}
    return value


def strings_of(value: Any) -> list[str]:
    """The string values of ``value`` (JSON), in order."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [text for item in items for text in strings_of(item)]
