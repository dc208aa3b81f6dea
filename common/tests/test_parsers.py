"""The bounded JSON decoding of common/parsers.py."""

from __future__ import annotations

import pytest

from common.parsers import ERROR_NUL_CHARACTER, JsonTooDeep, NulCharacter, json_depth_check, json_loads_limited


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ("[]", 1),
        ('{"a": [1, {"b": []}]}', 4),
        ('{"a": "[[[[[[[[[[[[["}', 1),
        ('["\\"[[[[", "]"]', 1),
        ("[" * 40 + "]" * 40, 40),
        ("[]" * 1000, 1),
    ],
)
def test_the_depth_counts_brackets_outside_strings_only(text, depth):
    json_depth_check(text, depth)
    if depth:
        with pytest.raises(JsonTooDeep):
            json_depth_check(text, depth - 1)


def test_text_nested_past_what_python_can_decode_is_refused_as_too_deep_not_a_recursion_error():
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(JsonTooDeep):
        json_loads_limited(text, limit=32)


def test_an_unterminated_string_full_of_escaped_quotes_is_scanned_once():
    # A regex that restarts at every quote would take quadratic time here; this one finishes (and the
    # decoder then refuses the text).
    text = '"' + '\\"' * 1_000_000
    json_depth_check(text, 32)
    with pytest.raises(ValueError):
        json_loads_limited(text, limit=32)


def test_malformed_json_is_a_value_error():
    with pytest.raises(ValueError):
        json_loads_limited("{nope", limit=32)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('"a\\u0000"', "body"),
        ('{"a": ["x", "y\\u0000z"]}', "a.1"),
        ('{"a": {"b\\u0000": 1}}', "a.b\\u0000"),
        ('[{"k": 1}, {"k": "\\u0000"}]', "1.k"),
    ],
)
def test_a_nul_character_in_any_string_is_refused_naming_where_it_is(text, field):
    with pytest.raises(NulCharacter) as refused:
        json_loads_limited(text, limit=32)

    assert refused.value.field == field
    assert refused.value.detail == {field: [ERROR_NUL_CHARACTER]}


@pytest.mark.parametrize("text", [r'"C:\\u0000"', r'{"\\u0000": ["\\\\\\u0000"]}'])
def test_an_escaped_backslash_before_u0000_is_text_not_a_nul(text):
    assert "\x00" not in str(json_loads_limited(text, limit=32))


def test_a_nul_escaped_after_other_escapes_is_found():
    with pytest.raises(NulCharacter):
        json_loads_limited(r'"\u0001\\\u0000"', limit=32)
