"""Typed validation of the JSON fields that hold configuration (agents/schemas.py)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from agents.schemas import validate_tool_args_schema


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"type": "object", "properties": {"code": {"type": "string", "pattern": "(?=a)b"}}}, "RE2"),
        ({"type": "object", "properties": {"code": {"$ref": "https://example.com/code.json"}}}, "references"),
        ({"type": "object", "unevaluatedProperties": False}, "unevaluatedProperties"),
    ],
)
def test_a_tools_schema_the_platform_cannot_check_arguments_against_within_its_bounds_is_refused(schema, why):
    with pytest.raises(ValidationError, match=why):
        validate_tool_args_schema(schema)


def test_a_tools_schema_it_can_check_against_is_taken():
    validate_tool_args_schema({"type": "object", "properties": {"msisdn": {"type": "string", "pattern": "^[0-9]+$"}}})
