"""The least value valid against a schema, carrying a text, within a size and a step budget
(:func:`schema_instance`): the third bound of :mod:`agents.structured`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from jsonschema.exceptions import best_match

from agents.structured.check import reference_target, schema_errors
from agents.structured.limits import (
    FILL_MAX_STEPS,
    Budget,
    FormatUnsupported,
    SchemaRefused,
    escaped_length,
    json_text,
    text_fitting,
)

NUMBER_MAX_BITS = 14_000  # an integer Python still writes in decimal (its limit: 4,300 digits)
MAX_DEPTH = 32  # a value deeper than this (a recursion every instance must follow) is not filled
# Values for strings of a known format (JSON Schema's "format"), valid by any checker.
FORMAT_SAMPLES = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00Z",
    "email": "offline@example.com",
    "uri": "https://example.com/",
    "uuid": "00000000-0000-0000-0000-000000000000",
}
# The string a schema's filling puts the text in: the first property named so (in this order of preference, at the
# shallowest level), else the schema's first free string.
TEXT_PROPERTIES = ("answer", "response", "reply", "text", "content", "message", "output", "result", "summary")
EXTRA_PROPERTY = "property_{index}"  # the names of the properties a minProperties asks beyond the schema's own


class Filled(NamedTuple):
    """A value :func:`schema_filled` made, and the characters of JSON its text lost to the room the rest of the
    value left it (0: the value carries the text whole, or the schema's own ``maxLength`` cut it shorter, or it
    carries none of it)."""

    value: Any
    lost: int


def schema_instance(schema: Mapping[str, Any], text: str, *, limit: int) -> Any:
    """A value valid against ``schema`` (one :func:`schema_problem` takes) whose JSON has at most ``limit``
    characters, carrying ``text``: in the answer-like string (:data:`TEXT_PROPERTIES`), else the first free string;
    every other value the least the schema allows (``const``, an enum's first value, 0 or the minimum, ``false``,
    strings and arrays as short as allowed, objects with every property that can be filled). Local references are
    followed. The least value is made first; the text is then cut (:func:`text_fitting`) to the room it leaves.

    Raises :class:`FormatUnsupported` when no value is made within ``limit`` or the value made is not valid (a
    ``pattern``, a recursion every instance must follow, keywords it does not read), :class:`SchemaTooCostly` past
    :data:`FILL_MAX_STEPS` or :data:`CHECK_MAX_STEPS`."""
    return schema_filled(schema, text, limit=limit).value


def schema_filled(schema: Mapping[str, Any], text: str, *, limit: int) -> Filled:
    """:func:`schema_instance`'s value, with what its text lost to ``limit`` (:class:`Filled`)."""
    least, _ = _filled(schema, "", limit)
    room = limit - len(json_text(least))
    if not text:
        return Filled(least, 0)
    fitted = text_fitting(text, room)
    try:
        value, whole = _filled(schema, fitted, limit)
    except SchemaRefused:  # the text itself breaks the schema (a "not" that names it): the least value stands
        return Filled(least, 0)
    return Filled(value, escaped_length(text) - escaped_length(fitted) if whole else 0)


def _filled(schema: Mapping[str, Any], text: str, limit: int) -> tuple[Any, bool]:
    """The value, and whether it carries ``text`` as it is."""
    filler = _Filler(schema, text, room=limit)
    try:
        value = filler.value(schema, 0)
    except RecursionError:
        raise FormatUnsupported("The schema refers to itself without end.") from None
    errors = schema_errors(schema, value)
    if errors:
        error = best_match(errors)
        where = "/".join(str(part) for part in error.absolute_path) or "(root)"
        raise FormatUnsupported(f"The platform cannot fill this schema at {where}: {error.message}")
    return value, filler.placed and filler.carried == text


class _Filler:
    """Builds the value, each node visited counted (:data:`FILL_MAX_STEPS`) and each character of its JSON taken
    from ``room`` as it is made (exactly: ``json.dumps``' separators)."""

    def __init__(self, root: Mapping[str, Any], text: str, *, room: int) -> None:
        self.root, self.text, self.placed = root, text, False
        self.carried = ""  # the string the text was placed in, as the schema's maxLength left it
        self.limit = self.room = room
        self.steps = Budget(FILL_MAX_STEPS, "Filling the schema")
        self.sizes: dict[int, int] = {}  # a const's or enum value's JSON length, by the schema's object

    def _take(self, chars: int) -> None:
        self.room -= chars
        if self.room < 0:
            raise FormatUnsupported(
                f"The least value the schema allows is longer than the answer's limit of {self.limit:,} characters."
            )

    def _fits(self, chars: int) -> None:
        """Refuse, before it is made, a value of at least ``chars`` characters the room left cannot take."""
        if chars > self.room:
            self._take(chars)

    def _merged(self, *parts: Mapping[str, Any]) -> dict[str, Any]:
        self.steps.spend(sum(len(part) for part in parts))
        merged: dict[str, Any] = {}
        for part in parts:
            merged.update(part)
        return merged

    def resolve(self, schema: Any, depth: int) -> Mapping[str, Any]:
        self.steps.spend()
        if schema is True or schema is None:
            return {}
        if schema is False:
            raise FormatUnsupported("The schema admits no value (false).")
        if not isinstance(schema, Mapping):
            raise FormatUnsupported("A schema must be an object.")
        if depth > MAX_DEPTH:
            raise FormatUnsupported(f"The schema nests deeper than {MAX_DEPTH} levels.")
        if "$ref" in schema:
            target = reference_target(self.root, schema["$ref"])
            if isinstance(target, str):
                raise FormatUnsupported(target)
            rest = {key: value for key, value in schema.items() if key != "$ref"}
            return self._merged(self.resolve(target, depth + 1), rest)
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and all_of:
            merged: dict[str, Any] = {key: value for key, value in schema.items() if key != "allOf"}
            for each in all_of:
                branch = self.resolve(each, depth + 1)
                merged = self._merged(
                    merged,
                    {key: value for key, value in branch.items() if key not in ("properties", "required")},
                    {"properties": self._merged(merged.get("properties", {}), branch.get("properties", {}))},
                    {"required": [*merged.get("required", []), *branch.get("required", [])]},
                )
            return merged
        return schema

    def value(self, schema: Any, depth: int) -> Any:
        schema = self.resolve(schema, depth)
        if "const" in schema:
            return self._literal(schema["const"])
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self._literal(schema["enum"][0])
        choices = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(choices, list) and choices:
            base = {key: value for key, value in schema.items() if key not in ("anyOf", "oneOf")}
            return self._choice(base, [self.resolve(choice, depth + 1) for choice in choices], depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((item for item in kind if item != "null"), "null")
        if kind is None:
            kind = "object" if "properties" in schema else "string"
        fill = {
            "object": self._object,
            "array": self._array,
            "string": self._string,
            "integer": self._integer,
            "number": self._number,
            "boolean": self._boolean,
            "null": self._null,
        }.get(kind)
        if fill is None:
            raise FormatUnsupported(f"Unknown type {kind!r}.")
        return fill(schema, depth)

    def _literal(self, value: Any) -> Any:
        size = self.sizes.get(id(value))
        if size is None:
            size = self.sizes[id(value)] = len(json_text(value))
        self._take(size)
        return value

    def _choice(self, base: Mapping[str, Any], choices: list[Mapping[str, Any]], depth: int) -> Any:
        """The least of ``choices``: null when it is one (an optional value stays empty, a recursive one ends),
        unless a string choice may still take the text (``Optional[str]``); the next choice when one cannot be
        filled (or does not fit)."""
        if not self.placed and any(choice.get("type") == "string" for choice in choices):
            ordered = sorted(choices, key=lambda choice: choice.get("type") != "string")
        else:
            ordered = sorted(choices, key=lambda choice: choice.get("type") != "null")
        for choice in ordered[:-1]:
            placed, room = self.placed, self.room
            try:
                return self.value(self._merged(base, choice), depth + 1)
            except FormatUnsupported:
                self.placed, self.room = placed, room
        return self.value(self._merged(base, ordered[-1]), depth + 1)

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        self.steps.spend(len(properties))
        # The answer-like property is filled first, so that it takes the text; the object keeps the schema's order.
        preferred = sorted(
            properties,
            key=lambda name: TEXT_PROPERTIES.index(name) if name in TEXT_PROPERTIES else len(TEXT_PROPERTIES),
        )
        self._take(2)  # {}
        values: dict[str, Any] = {}
        for name in preferred:
            placed, room = self.placed, self.room
            try:
                values[name] = self._member(name, properties[name], depth, first=not values)
            except FormatUnsupported:
                if name in required:
                    raise
                self.placed, self.room = placed, room  # an optional property that cannot be filled is left out
        extra = schema.get("additionalProperties", True)
        wanted = int(schema.get("minProperties") or 0) - len(values)
        if wanted > 0 and extra is not False:
            self._fits(wanted * len('"property_0": 0, ') - 2)
            names = (EXTRA_PROPERTY.format(index=index) for index in range(len(properties) + wanted))
            for name in [name for name in names if name not in properties][:wanted]:
                values[name] = self._member(name, extra, depth, first=not values)
        return {name: values[name] for name in [*properties, *values] if name in values}

    def _member(self, name: str, schema: Any, depth: int, *, first: bool) -> Any:
        self._take(escaped_length(name) + 4 + (0 if first else 2))  # "name": …, and the ", " before it
        return self.value(schema, depth + 1)

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        prefix = schema.get("prefixItems") or []
        count = max(int(schema.get("minItems") or 0), len(prefix))
        self._take(2)  # []
        self._fits(count * 3 - 2)  # each item a character at least, and a ", " between two
        items = []
        for index in range(count):
            self._take(0 if index == 0 else 2)
            items.append(self.value(prefix[index] if index < len(prefix) else schema.get("items", {}), depth + 1))
        return items

    def _string(self, schema: Mapping[str, Any], depth: int) -> str:
        value = FORMAT_SAMPLES.get(str(schema.get("format") or ""))
        if value is None:
            value = ""
            carries = not self.placed and "pattern" not in schema
            if carries:
                value, self.placed = self.text, True
            if "maxLength" in schema:
                value = value[: int(schema["maxLength"])]
            if carries:
                self.carried = value
            least = int(schema.get("minLength") or 0)
            self._fits(least + 2)
            value = value.ljust(least, "-")
        self._take(escaped_length(value) + 2)
        return value

    def _integer(self, schema: Mapping[str, Any], depth: int) -> int:
        value = int(self._least_number(schema, step=1))
        self._take(len(str(value)))
        return value

    def _number(self, schema: Mapping[str, Any], depth: int) -> float:
        value = self._least_number(schema, step=0.5)
        self._take(len(json_text(value)))
        return value

    def _least_number(self, schema: Mapping[str, Any], *, step: float) -> float:
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
        if not math.isfinite(value) or (isinstance(value, int) and value.bit_length() > NUMBER_MAX_BITS):
            raise FormatUnsupported("The schema asks for a number JSON cannot write.")
        return value

    def _boolean(self, schema: Mapping[str, Any], depth: int) -> bool:
        self._take(len("false"))
        return False

    def _null(self, schema: Mapping[str, Any], depth: int) -> None:
        self._take(len("null"))
        return None
