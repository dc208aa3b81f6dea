"""A JSON Schema from outside, bounded (agents/structured/): the schema taken or refused, a value checked within its
steps, the least value filled within its steps and the answer's room."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from jsonschema import Draft202012Validator

from agents.structured import (
    CHECK_MAX_STEPS,
    FILL_MAX_STEPS,
    SCHEMA_MAX_CHARS,
    SCHEMA_MAX_DEPTH,
    SCHEMA_MAX_NODES,
    SCHEMA_MAX_PATTERNS,
    FormatUnsupported,
    SchemaTooCostly,
    json_text,
    schema_errors,
    schema_instance,
    schema_problem,
    schema_valid,
)
from tests.hostile_schemas import fan_out


def nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"not": schema}
    return schema


# --- the schema itself -----------------------------------------------------------------------------------------


def test_a_schema_over_its_values_characters_or_depth_is_refused_before_it_is_checked():
    assert (
        schema_problem({"enum": list(range(SCHEMA_MAX_NODES))})
        == f"The schema has more than {SCHEMA_MAX_NODES:,} values."
    )
    assert schema_problem({"description": "x" * SCHEMA_MAX_CHARS}) == (
        f"The schema is longer than {SCHEMA_MAX_CHARS:,} characters."
    )
    assert schema_problem(nested(SCHEMA_MAX_DEPTH)) == f"The schema nests deeper than {SCHEMA_MAX_DEPTH} levels."
    assert schema_problem(nested(SCHEMA_MAX_DEPTH - 2)) is None
    assert "JSON cannot write" in schema_problem({"minimum": float("inf")})


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "object", "unevaluatedProperties": False}, "unevaluatedProperties is not supported"),
        ({"items": {"unevaluatedItems": False}}, "unevaluatedItems is not supported"),
        ({"$dynamicRef": "#meta"}, "$dynamicRef is not supported"),
        # Reached only through a reference to a place no keyword names: followed all the same.
        ({"x-hidden": {"unevaluatedProperties": False}, "$ref": "#/x-hidden"}, "unevaluatedProperties"),
        ({"properties": {"a": {"$schema": "http://json-schema.org/draft-07/schema#"}}}, "$schema is read at the"),
        ({"$defs": {"a": {"$id": "https://example.com/a"}}}, "$id is read at the schema's root only"),
        ({"$ref": "https://example.com/schema.json"}, "Only references inside the schema"),
        ({"$ref": "#anchor"}, "written as #/"),
        ({"$ref": "#/$defs/missing"}, "names nothing"),
        ({"pattern": "(a)\\1"}, "not one the platform runs"),
        ({"patternProperties": {"(?<=a)b": {}}}, "not one the platform runs"),
        ({"anyOf": [{"pattern": f"^{index}$"} for index in range(SCHEMA_MAX_PATTERNS + 1)]}, "more than 100 patterns"),
        ({"type": "strng"}, "Not a valid JSON Schema"),
    ],
)
def test_a_schema_whose_work_the_count_cannot_bound_is_refused_wherever_it_says_it(schema, why):
    assert why in (schema_problem(schema) or "")


def test_a_schema_as_clients_and_libraries_write_it_is_taken():
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/invoice",
        "type": "object",
        "$defs": {"line": {"type": "object", "properties": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"}}}},
        "properties": {
            "answer": {"type": "string", "description": "the reply"},
            "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}, "uniqueItems": True},
            "tags": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}, "additionalProperties": False},
        },
        "required": ["answer"],
        "additionalProperties": False,
    }

    assert schema_problem(schema) is None
    assert schema_instance(schema, "Olá", limit=8_000) == {"answer": "Olá", "lines": [], "tags": {}}


# --- checking a value against it -------------------------------------------------------------------------------


def test_a_check_stops_at_its_steps_whatever_the_references_fan_out_to():
    schema = fan_out(24, "anyOf", {"type": "integer", "minimum": 1})  # 0 is tried along each of 2**24 paths

    with pytest.raises(SchemaTooCostly, match=f"more than {CHECK_MAX_STEPS:,} steps"):
        schema_errors(schema, 0)
    assert not schema_valid(schema, 0)
    assert schema_valid(schema, 1)  # a value valid on the first path costs that path
    with pytest.raises(SchemaTooCostly, match="references too deep"):
        schema_errors({"anyOf": [{"$ref": "#"}, {"type": "string"}]}, 0)  # a cycle no value ends


def test_a_pattern_runs_in_time_linear_in_its_text_on_names_and_values():
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^(a|aa)*$"}},
        "patternProperties": {"^(b|bb)*$": {"type": "integer"}},
        "additionalProperties": False,
    }
    hostile = {"code": "a" * 5_000 + "!", "b" * 5_000 + "!": 0}  # exponential for a backtracking engine

    messages = sorted(error.message for error in schema_errors(schema, hostile))

    assert len(messages) == 2
    assert messages[0].startswith("'" + "a" * 50) and "does not match" in messages[0]
    assert "do" in messages[1] and "not match any of the regexes" in messages[1]


def test_a_lone_surrogate_is_matched_as_its_bytes_and_refused_in_a_pattern():
    assert [error.validator for error in schema_errors({"pattern": "^a"}, "\ud800a")] == ["pattern"]
    assert schema_errors({"pattern": "a$"}, "\ud800a") == []
    assert "not one the platform runs" in schema_problem({"pattern": "\ud800"})


CANARY = [
    ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "b"]}, {"a": "x"}),
    ({"type": "string", "pattern": "^[a-z]+$", "minLength": 2}, "A"),
    ({"patternProperties": {"^x-": {"type": "string"}, "^y": {}}, "additionalProperties": False}, {"x-a": 1, "z": 2}),
    ({"properties": {"a": {}}, "patternProperties": {"^x-": {}}, "additionalProperties": False}, {"b": 1, "c": 2}),
    ({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}, {"a": "x", "b": "y", "c": 3}),
    ({"propertyNames": {"pattern": "^[a-z]+$"}}, {"ok": 1, "Not": 2}),
    ({"uniqueItems": True}, [{"a": 1}, {"a": 1.0}]),
    ({"uniqueItems": True}, [1, True, [1], [True], {"a": [1]}, {"a": [True]}]),
    ({"uniqueItems": True}, [[1, {"b": None}], [1, {"b": None}]]),
    ({"$defs": {"n": {"type": "number"}}, "items": {"$ref": "#/$defs/n"}, "contains": {"const": 2}}, [1, "x"]),
    ({"anyOf": [{"type": "string"}, {"type": "integer", "multipleOf": 3}]}, 4),
    ({"oneOf": [{"minimum": 1}, {"maximum": 5}]}, 3),
    ({"if": {"minimum": 10}, "then": {"multipleOf": 2}, "else": {"enum": [1, 2]}}, 11),
    ({"dependentRequired": {"a": ["b"]}, "dependentSchemas": {"c": {"required": ["d"]}}}, {"a": 1, "c": 2}),
]


@pytest.mark.parametrize(("schema", "instance"), CANARY)
def test_the_counted_check_finds_what_jsonschema_itself_finds(schema, instance):
    def found(errors) -> list:
        return sorted((list(error.absolute_path), error.validator, error.message) for error in errors)

    assert found(schema_errors(schema, instance)) == found(Draft202012Validator(schema).iter_errors(instance))


# --- filling it ------------------------------------------------------------------------------------------------


def required(properties: dict, **more) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties), **more}


EXACT = [
    {"type": "string", "minLength": 40},
    {"type": "array", "minItems": 7, "items": {"type": "integer", "minimum": 12}},
    required({'a "quoted" key': {"type": "boolean"}, "b": {"type": "null"}}),
    required({"answer": {"type": "string"}}, minProperties=4),
    required({"answer": {"type": "string"}, "n": {"type": "number", "exclusiveMinimum": 2}}),
    {"type": "array", "prefixItems": [{"const": {"x": [1, "é"]}}, {"enum": ["z\n", "y"]}], "items": False},
    {"allOf": [{"$ref": "#/$defs/a"}, required({"b": {"format": "date"}})], "$defs": {"a": {"properties": {}}}},
]


@pytest.mark.parametrize("schema", EXACT)
def test_the_filler_takes_every_character_of_its_value_from_the_room_it_has(schema):
    size = len(json_text(schema_instance(schema, "", limit=10_000)))

    assert len(json_text(schema_instance(schema, "", limit=size))) == size
    with pytest.raises(FormatUnsupported, match=f"longer than the answer's limit of {size - 1:,} characters"):
        schema_instance(schema, "", limit=size - 1)


def test_a_value_too_long_is_refused_before_it_is_made():
    tracemalloc.start()
    try:
        for schema in (
            {"type": "string", "minLength": 4_000_000_000},
            {"type": "array", "minItems": 4_000_000_000},
            {"type": "object", "minProperties": 4_000_000_000},
        ):
            with pytest.raises(FormatUnsupported, match="longer than the answer's limit"):
                schema_instance(schema, "", limit=8_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert peak < 1_000_000  # bytes: not a string, list or object of four billion


def test_the_filler_stops_at_its_steps_whatever_the_references_fan_out_to():
    with pytest.raises(SchemaTooCostly, match=f"Filling the schema takes more than {FILL_MAX_STEPS:,} steps"):
        schema_instance(fan_out(14, "allOf", {"type": "integer"}), "", limit=8_000)


def test_the_text_is_cut_to_the_room_the_least_value_leaves_and_optional_values_that_do_not_fit_are_left_out():
    schema = {
        "type": "object",
        "properties": {
            "answer": {"type": "string"},
            "note": {"type": "string", "minLength": 500},  # optional: left out rather than over the limit
            "pad": {"type": "string", "minLength": 50},
        },
        "required": ["answer", "pad"],
    }
    text = 'Sua fatura "subiu"\n' * 40

    value = schema_instance(schema, text, limit=300)

    assert len(json_text(value)) <= 300 and Draft202012Validator(schema).is_valid(value)
    assert list(value) == ["answer", "pad"] and value["answer"].startswith('Sua fatura "subiu"\nSua fatura')
    assert value["answer"].endswith("more characters]")
    assert json.loads(json_text(value)) == value
