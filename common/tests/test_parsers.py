"""The bounded JSON decoding of common/parsers.py."""

from __future__ import annotations

import pytest

from common.parsers import JsonTooDeep, json_depth_check, json_loads_limited


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
