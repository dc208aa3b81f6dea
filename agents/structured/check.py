"""A schema taken or refused (:func:`schema_problem`), and a value checked against it within a step budget
(:func:`schema_errors`): the first two bounds of :mod:`agents.structured`."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

import re2
from jsonschema import Draft202012Validator, FormatChecker, SchemaError, ValidationError, validators
from referencing.jsonschema import DRAFT202012

from agents.structured.limits import (
    CHECK_MAX_STEPS,
    SCHEMA_MAX_CHARS,
    SCHEMA_MAX_DEPTH,
    SCHEMA_MAX_NODES,
    SCHEMA_MAX_PATTERNS,
    Budget,
    SchemaTooCostly,
)

PATTERN_MAX_MEMORY = 256 * 1024  # bytes RE2 may use for one pattern (its default, 8 MiB, compiles for ~80 ms)
# Keywords whose work jsonschema does outside the keywords it counts (its own walks, Python's regular expressions)
# or that resolve outside the document.
NOT_COUNTED = ("unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef")


def schema_problem(schema: Any) -> str | None:
    """Why the platform does not take ``schema`` (:mod:`agents.structured` lists the reasons); ``None`` when it does.
    Bounded: the document is measured before anything reads it, and only then checked."""
    problem = _document_problem(schema)
    if problem is not None:
        return problem
    return _checked_problem(json.dumps(schema, sort_keys=True))


def _document_problem(schema: Any) -> str | None:
    nodes = chars = 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > SCHEMA_MAX_NODES:
            return f"The schema has more than {SCHEMA_MAX_NODES:,} values."
        if depth > SCHEMA_MAX_DEPTH:
            return f"The schema nests deeper than {SCHEMA_MAX_DEPTH} levels."
        if isinstance(value, Mapping):
            chars += sum(len(str(key)) for key in value)
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list | tuple):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, str):
            chars += len(value)
        elif isinstance(value, float) and not math.isfinite(value):
            return "The schema holds a number JSON cannot write (infinite, or not a number)."
        elif isinstance(value, int) and not isinstance(value, bool):
            chars += value.bit_length() // 3 + 1  # its digits, near enough, without writing them
        if chars > SCHEMA_MAX_CHARS:
            return f"The schema is longer than {SCHEMA_MAX_CHARS:,} characters."
    return None


@lru_cache(maxsize=64)
def _checked_problem(document: str) -> str | None:
    """The checks of a measured schema, as its JSON text (a client sends the same schema again and again; an MCP tool
    is called with the same one)."""
    schema = json.loads(document)
    try:
        # No formats checked: "regex" would compile the client's patterns with Python's engine (RE2 does, below).
        Draft202012Validator.check_schema(schema, format_checker=FormatChecker(formats=()))
    except SchemaError as exc:
        return f"Not a valid JSON Schema: {exc.message}"
    return _positions_problem(schema)


def _positions_problem(root: Any) -> str | None:
    """Every place of ``root`` that is a schema — its subschemas and the targets of its references — held to what
    the count can bound; its patterns compiled by RE2."""
    patterns: set[str] = set()
    seen: set[int] = set()
    stack = [root]
    while stack:
        schema = stack.pop()
        if not isinstance(schema, Mapping) or id(schema) in seen:
            continue
        seen.add(id(schema))
        for keyword in NOT_COUNTED:
            if keyword in schema:
                return f"{keyword} is not supported in a schema the platform checks answers against."
        if schema is not root:
            for keyword in ("$schema", "$id"):
                if keyword in schema:
                    return f"{keyword} is read at the schema's root only."
        if "$ref" in schema:
            target = reference_target(root, schema["$ref"])
            if isinstance(target, str):
                return target
            stack.append(target)
        if isinstance(schema.get("pattern"), str):
            patterns.add(schema["pattern"])
        patterns.update(schema.get("patternProperties") or {})
        if len(patterns) > SCHEMA_MAX_PATTERNS:
            return f"The schema has more than {SCHEMA_MAX_PATTERNS} patterns."
        stack.extend(DRAFT202012.subresources_of(schema))
    for pattern in sorted(patterns):
        try:
            _regex(pattern)
        except (re2.error, UnicodeEncodeError):
            return (
                f"The pattern {pattern!r} is not one the platform runs: RE2's syntax, without backreferences or "
                f"lookarounds, within {PATTERN_MAX_MEMORY // 1024} KiB."
            )
    return None


def reference_target(root: Any, reference: Any) -> Any:
    """What a ``$ref`` inside ``root`` points to, or why it points to nothing (a ``str``)."""
    if not isinstance(reference, str) or not reference.startswith("#"):
        return f"Only references inside the schema are followed: {reference!r}."
    target = root
    pointer = unquote(reference[1:])
    if pointer and not pointer.startswith("/"):
        return f"Only references inside the schema written as #/… are followed: {reference!r}."
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return f"The reference {reference!r} names nothing in the schema."
    return target


@lru_cache(maxsize=512)
def _regex(pattern: str) -> Any:
    # A schema's patterns are ECMA-262's, whose \w, \d and \b are ASCII as RE2's are: compiled as written, not
    # through common.patterns, which reads patterns written for Python's re (its \w takes any script).
    options = re2.Options()
    options.max_mem = PATTERN_MAX_MEMORY
    options.log_errors = False
    return re2.compile(pattern, options)


# --- checking a value against it -----------------------------------------------------------------------------

DESCEND_STEPS = 20  # a subschema applied: a validator made and run, a reference looked up: about twenty plain keywords
_steps: ContextVar[Budget | None] = ContextVar("schema_check_steps", default=None)  # the check running here


def _width(value: Any) -> int:
    return len(value) if isinstance(value, list | dict) else 0


def _applied(keyword: str, value: Any, instance: Any, schema: Any) -> int:
    """How many subschemas ``keyword`` applies to ``instance`` (at most), each pattern matched counted as one."""
    if keyword in ("$ref", "$dynamicRef", "not"):
        return 1
    if keyword in ("allOf", "anyOf", "oneOf", "if"):
        return _width(value) or 2  # if: then or else too
    if keyword in ("properties", "prefixItems", "dependentSchemas"):
        return min(_width(value), _width(instance))
    if keyword in ("items", "contains", "propertyNames"):
        return _width(instance)
    if keyword == "patternProperties":
        return _width(value) * _width(instance)
    if keyword == "additionalProperties":  # each name not a property matched against every patternProperties
        return _width(instance) * (1 + _width(schema.get("patternProperties")))
    return 0


def _cost(keyword: str, value: Any, instance: Any, schema: Any) -> int:
    """The steps a keyword takes: one, its value's and the instance's items it loops over, the text a pattern
    reads, and :data:`DESCEND_STEPS` for each subschema it applies."""
    read = len(instance) if keyword == "pattern" and isinstance(instance, str) else _width(instance)
    return 1 + _width(value) + read + DESCEND_STEPS * _applied(keyword, value, instance, schema)


def _counted(keyword: str, check: Any) -> Any:
    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = _steps.get()
        if budget is not None:
            budget.spend(_cost(keyword, value, instance, schema))
        return check(validator, value, instance, schema)

    return counted


def _found(pattern: str, text: str) -> bool:
    # RE2 reads UTF-8: a lone surrogate (JSON's "\ud800") is passed through as its bytes rather than refused.
    return _regex(pattern).search(text.encode("utf-8", "surrogatepass")) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _found(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if _found(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """jsonschema's, with the names that ``patternProperties`` take matched by RE2."""
    if not validator.is_type(instance, "object"):
        return
    properties, patterns = schema.get("properties", {}), schema.get("patternProperties", {})
    extras = [
        name for name in instance if name not in properties and not any(_found(pattern, name) for pattern in patterns)
    ]
    if validator.is_type(extra, "object"):
        for name in extras:
            yield from validator.descend(instance[name], extra, path=name)
    elif not extra and extras:
        names = ", ".join(repr(name) for name in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            regexes = ", ".join(repr(pattern) for pattern in sorted(patterns))
            yield ValidationError(f"{names} {verb} not match any of the regexes: {regexes}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({names} {verb} unexpected)")


def _same(value: Any) -> Any:
    """A hashable stand-in for a JSON value, equal where JSON Schema says values are equal (``1`` and ``1.0``, but
    not ``true`` and ``1``)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, list):
        return ("array", tuple(_same(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _same(item)) for key, item in value.items()))
    return ("value", value)


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """jsonschema's compares unsortable items pairwise; here each item once."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[Any] = set()
    for item in instance:
        same = _same(item)
        if same in seen:
            yield ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(same)


_OWN_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}
_CountedValidator = validators.extend(
    Draft202012Validator,
    {name: _counted(name, _OWN_KEYWORDS.get(name, check)) for name, check in Draft202012Validator.VALIDATORS.items()},
)


def schema_errors(schema: Mapping[str, Any], instance: Any, *, steps: int = CHECK_MAX_STEPS) -> list[ValidationError]:
    """The errors of ``instance`` against ``schema``, a schema :func:`schema_problem` takes, within ``steps``
    (:func:`_cost` says how they are counted). Raises :class:`SchemaTooCostly` past them."""
    # The root's $schema would switch a reference back to the root onto jsonschema's own (uncounted) validator.
    root = {key: value for key, value in schema.items() if key != "$schema"}
    token = _steps.set(Budget(steps, "Checking a value against the schema"))
    try:
        return list(_CountedValidator(root).iter_errors(instance))
    except RecursionError:
        raise SchemaTooCostly("Checking a value against the schema follows references too deep.") from None
    finally:
        _steps.reset(token)


def schema_valid(schema: Mapping[str, Any], instance: Any) -> bool:
    """Whether ``instance`` is valid against ``schema``; a check over its steps counts as not valid."""
    try:
        return not schema_errors(schema, instance)
    except SchemaTooCostly:
        return False
