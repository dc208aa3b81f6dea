"""The masking walk over a JSON value never recurses: no nesting depth raises RecursionError."""

from __future__ import annotations

from conversations.guardrails import MaskVault

CPF = "123.456.789-09"


def nested(levels: int, leaf):
    value = leaf
    for _ in range(levels):
        value = {"a": [value]}
    return value


def innermost(value, levels: int):
    for _ in range(levels):
        value = value["a"][0]
    return value


def test_a_value_nested_far_past_the_recursion_limit_is_masked_and_restored_with_its_shape():
    vault = MaskVault()
    masked = vault.mask_value(nested(20_000, f"CPF {CPF}"))

    assert innermost(masked, 20_000) == "CPF [CPF_1]"
    assert innermost(vault.unmask(masked), 20_000) == f"CPF {CPF}"


def test_the_walk_keeps_tuples_lists_dicts_and_numbers_as_they_were():
    vault = MaskVault()
    value = {"list": [CPF, ("tuple", CPF)], "n": 7, "flag": True, "none": None, "t": (1, [CPF])}

    masked = vault.mask_value(value)

    assert masked == {
        "list": ["[CPF_1]", ("tuple", "[CPF_1]")],
        "n": 7,
        "flag": True,
        "none": None,
        "t": (1, ["[CPF_1]"]),
    }
