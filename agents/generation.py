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
  (:func:`schema_instance`: the text in its answer-like string, every other value the least the schema allows).
  A schema the platform could not fill is refused when asked (:func:`format_problem`).

Pure: no database, no network.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from jsonschema import Draft202012Validator, SchemaError
from jsonschema.exceptions import best_match

from agents.usage import CHARS_PER_TOKEN

FINISH_STOP = "stop"
FINISH_LENGTH = "length"

FORMAT_TEXT = "text"
FORMAT_JSON_OBJECT = "json_object"
FORMAT_JSON_SCHEMA = "json_schema"
FORMATS = (FORMAT_TEXT, FORMAT_JSON_OBJECT, FORMAT_JSON_SCHEMA)
# json_object: text not written as a JSON object is put under this key.
ANSWER_KEY = "answer"
# The string a schema's filling puts the text in: the first property named so (in this order of preference, at the
# shallowest level), else the schema's first free string.
TEXT_PROPERTIES = ("answer", "response", "reply", "text", "content", "message", "output", "result", "summary")
# Values for strings of a known format (JSON Schema's "format"), valid by any checker.
FORMAT_SAMPLES = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00Z",
    "email": "offline@example.com",
    "uri": "https://example.com/",
    "uuid": "00000000-0000-0000-0000-000000000000",
}
MAX_DEPTH = 32  # a schema deeper than this (a recursion that every instance must follow) is not filled


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


class FormatUnsupported(ValueError):
    """A schema the platform cannot fill (the message says where)."""


def format_type(response_format: Mapping[str, Any] | None) -> str:
    return str((response_format or {}).get("type") or FORMAT_TEXT)


def format_schema(response_format: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a ``json_schema`` format (``{}``: any JSON)."""
    schema = (response_format.get(FORMAT_JSON_SCHEMA) or {}).get("schema")
    return dict(schema) if isinstance(schema, Mapping) else {}


def format_problem(response_format: Mapping[str, Any]) -> str | None:
    """Why the platform cannot answer in ``response_format``'s JSON Schema (not a valid schema, or one it cannot
    fill: :func:`schema_instance`); ``None`` when it can."""
    if format_type(response_format) != FORMAT_JSON_SCHEMA:
        return None
    schema = format_schema(response_format)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"Not a valid JSON Schema: {exc.message}"
    try:
        schema_instance(schema, "")
    except FormatUnsupported as exc:
        return str(exc)
    return None


def format_conforms(text: str, response_format: Mapping[str, Any] | None) -> bool:
    """Whether ``text`` is already in the format (prose always is)."""
    kind = format_type(response_format)
    if kind == FORMAT_TEXT:
        return True
    try:
        value = json.loads(text)
    except ValueError:
        return False
    if kind == FORMAT_JSON_OBJECT:
        return isinstance(value, dict)
    try:
        return Draft202012Validator(format_schema(response_format or {})).is_valid(value)
    except RecursionError:
        return False


def answer_formatted(text: str, response_format: Mapping[str, Any] | None) -> str:
    """``text`` if it is in the format, else put into it (the module's docstring says how)."""
    if format_conforms(text, response_format):
        return text
    if format_type(response_format) == FORMAT_JSON_OBJECT:
        return _dumps({ANSWER_KEY: text})
    return _dumps(schema_instance(format_schema(response_format or {}), text))


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def json_answer(text: str, response_format: Mapping[str, Any] | None) -> tuple[bool, Any]:
    """``(True, value)`` when the format asks for JSON and ``text`` is JSON: an answer that is JSON by request, whose
    strings (not its shape) are what guardrails and judges read; else ``(False, None)``."""
    if format_type(response_format) == FORMAT_TEXT:
        return False, None
    try:
        return True, json.loads(text)
    except ValueError:
        return False, None


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


def json_text(value: Any) -> str:
    """``value`` written as the answer's JSON."""
    return _dumps(value)


def schema_instance(schema: Mapping[str, Any], text: str) -> Any:
    """A value valid against ``schema`` that carries ``text``: in the answer-like string (:data:`TEXT_PROPERTIES`),
    else the first free string; every other value the least the schema allows (``const``, an enum's first value,
    0 or the minimum, ``false``, empty strings and arrays, objects with every property). Local references
    (``#/$defs/…``) are followed. Raises :class:`FormatUnsupported` when the value built is not valid (a
    ``pattern``, a recursion every instance must follow, keywords it does not read)."""
    filler = _Filler(schema, text)
    try:
        value = filler.value(schema, 0)
        errors = list(Draft202012Validator(schema).iter_errors(value))
    except RecursionError:  # a schema that refers to itself without end ({"anyOf": [{"$ref": "#"}, …]})
        raise FormatUnsupported("The schema refers to itself without end.") from None
    if errors:
        error = best_match(errors)
        where = "/".join(str(part) for part in error.absolute_path) or "(root)"
        raise FormatUnsupported(f"The platform cannot fill this schema at {where}: {error.message}")
    return value


class _Filler:
    def __init__(self, root: Mapping[str, Any], text: str) -> None:
        self.root, self.text, self.placed = root, text, False

    def resolve(self, schema: Any, depth: int) -> Mapping[str, Any]:
        if schema is True or schema is None:
            return {}
        if schema is False:
            raise FormatUnsupported("The schema admits no value (false).")
        if not isinstance(schema, Mapping):
            raise FormatUnsupported("A schema must be an object.")
        if depth > MAX_DEPTH:
            raise FormatUnsupported(f"The schema nests deeper than {MAX_DEPTH} levels.")
        reference = schema.get("$ref")
        if isinstance(reference, str):
            if not reference.startswith("#"):
                raise FormatUnsupported(f"Only references inside the schema are followed: {reference!r}.")
            target: Any = self.root
            for part in filter(None, reference[1:].split("/")):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or part not in target:
                    raise FormatUnsupported(f"The reference {reference!r} names nothing in the schema.")
                target = target[part]
            rest = {key: value for key, value in schema.items() if key != "$ref"}
            return {**self.resolve(target, depth + 1), **rest}
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and all_of:
            merged: dict[str, Any] = {key: value for key, value in schema.items() if key != "allOf"}
            for each in all_of:
                branch = self.resolve(each, depth + 1)
                merged["properties"] = {**merged.get("properties", {}), **branch.get("properties", {})}
                merged["required"] = [*merged.get("required", []), *branch.get("required", [])]
                merged.update({key: value for key, value in branch.items() if key not in ("properties", "required")})
            return merged
        return schema

    def value(self, schema: Any, depth: int) -> Any:
        schema = self.resolve(schema, depth)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return schema["enum"][0]
        choices = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(choices, list) and choices:
            base = {key: value for key, value in schema.items() if key not in ("anyOf", "oneOf")}
            return self._choice(base, [self.resolve(choice, depth + 1) for choice in choices], depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((item for item in kind if item != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in schema else "string"
        return getattr(self, f"_{kind}", self._unknown)(schema, depth)

    def _choice(self, base: Mapping[str, Any], choices: list[Mapping[str, Any]], depth: int) -> Any:
        """The least of ``choices``: null when it is one (an optional value stays empty, a recursive one ends),
        unless a string choice may still take the text (``Optional[str]``); the next choice when one cannot be
        filled."""
        if not self.placed and any(choice.get("type") == "string" for choice in choices):
            ordered = sorted(choices, key=lambda choice: choice.get("type") != "string")
        else:
            ordered = sorted(choices, key=lambda choice: choice.get("type") != "null")
        for choice in ordered[:-1]:
            placed = self.placed
            try:
                return self.value({**base, **choice}, depth + 1)
            except FormatUnsupported:
                self.placed = placed
        return self.value({**base, **ordered[-1]}, depth + 1)

    def _unknown(self, schema: Mapping[str, Any], depth: int) -> Any:
        raise FormatUnsupported(f"Unknown type {schema.get('type')!r}.")

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        # The answer-like property is filled first, so that it takes the text; the object keeps the schema's order.
        preferred = sorted(
            properties,
            key=lambda name: TEXT_PROPERTIES.index(name) if name in TEXT_PROPERTIES else len(TEXT_PROPERTIES),
        )
        values = {name: self.value(properties[name], depth + 1) for name in preferred}
        return {name: values[name] for name in properties}

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        prefix = schema.get("prefixItems") or []
        count = max(int(schema.get("minItems") or 0), len(prefix))
        return [
            self.value(prefix[index] if index < len(prefix) else schema.get("items", {}), depth + 1)
            for index in range(count)
        ]

    def _string(self, schema: Mapping[str, Any], depth: int) -> str:
        sample = FORMAT_SAMPLES.get(str(schema.get("format") or ""))
        if sample is not None:
            return sample
        value = ""
        if not self.placed and "pattern" not in schema:
            value, self.placed = self.text, True
        if "maxLength" in schema:
            value = value[: int(schema["maxLength"])]
        return value.ljust(int(schema.get("minLength") or 0), "-")

    def _integer(self, schema: Mapping[str, Any], depth: int) -> int:
        return int(self._number(schema, depth, step=1))

    def _number(self, schema: Mapping[str, Any], depth: int, step: float = 0.5) -> float:
        value: float = 0
        if "minimum" in schema and value < schema["minimum"]:
            value = schema["minimum"]
        if "maximum" in schema and value > schema["maximum"]:
            value = schema["maximum"]
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            value = schema["exclusiveMinimum"] + step
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            value = schema["exclusiveMaximum"] - step
        multiple = schema.get("multipleOf")
        if multiple:
            value = -(-value // multiple) * multiple  # the least multiple at or above it
        return value

    def _boolean(self, schema: Mapping[str, Any], depth: int) -> bool:
        return False

    def _null(self, schema: Mapping[str, Any], depth: int) -> None:
        return None
