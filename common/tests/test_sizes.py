"""Values cut to a size the platform sets: the marker where they were cut, the shape kept, the size never passed."""

from __future__ import annotations

import pytest

from common.sizes import CUT_ITEMS, CUT_MARK, json_bounded, json_size, limit_hit, text_cut


def test_a_text_within_its_limit_is_left_as_it_is():
    assert text_cut("abc", 3) == "abc"


def test_a_longer_text_keeps_its_start_and_says_how_much_was_cut_within_the_limit():
    cut = text_cut("x" * 1000, 100)

    assert len(cut) <= 100
    assert cut.endswith(CUT_MARK.format(dropped=1000 - cut.index("…")))
    assert cut.startswith("x" * 60)


def test_a_value_that_fits_is_returned_as_it_is_and_said_uncut():
    value = {"a": [1, 2, 3], "b": "short"}

    assert json_bounded(value, 1000) == (value, 0)


def test_a_huge_string_inside_a_result_is_cut_and_the_result_keeps_its_shape():
    value = {"explanation": "R" * 3_000_000, "rows": 3, "matches": [{"item": "a"}]}

    bounded, size = json_bounded(value, 16_384)

    assert size == json_size(value)
    assert json_size(bounded) <= 16_384
    assert bounded["rows"] == 3 and bounded["matches"] == [{"item": "a"}]
    assert bounded["explanation"].startswith("R" * 1000) and "…[cut:" in bounded["explanation"]


def test_a_long_list_keeps_its_first_items_and_says_how_many_were_cut():
    bounded, _ = json_bounded(list(range(100_000)), 2_000)

    assert json_size(bounded) <= 2_000
    assert bounded[:3] == [0, 1, 2]
    assert bounded[-1] == CUT_ITEMS.format(dropped=100_000 - (len(bounded) - 1))


@pytest.mark.parametrize("text", ["é" * 50_000, "😀" * 50_000])
def test_the_limit_is_in_bytes_whatever_the_characters(text):
    bounded, _ = json_bounded({"text": text}, 1_000)

    assert json_size(bounded) <= 1_000


def test_a_value_whose_shape_alone_is_too_big_becomes_its_json_text_cut():
    value = {f"key-{number}": number for number in range(10_000)}

    bounded, size = json_bounded(value, 500)

    assert isinstance(bounded, str) and bounded.startswith('{"key-0":0')
    assert len(bounded.encode()) <= 500 and size == json_size(value)


def test_a_limit_that_bit_says_which_its_setting_what_was_asked_and_what_ran():
    assert limit_hit("answer_chars", "ANSWER_MAX_CHARS", 8000, 9000, 8000) == {
        "limit": "answer_chars",
        "setting": "ANSWER_MAX_CHARS",
        "value": 8000,
        "asked": 9000,
        "ran": 8000,
    }
