"""Loop safety's rules on plain data (the graph's use of them is tested end to end elsewhere)."""

from __future__ import annotations

import pytest

from handoffs.safety import (
    STOP_HANDOFF_LIMIT,
    STOP_PATH_REPEATED,
    STOP_PING_PONG,
    STOP_STEP_LIMIT,
    move_check,
    stop_summary,
)

DEFAULTS = {"max_handoffs": 3, "block_ping_pong": True, "window": 5, "max_repeats": 3}


def check(chain, target, *, moves=0, recent=(), steps_left=10, **limits):
    return move_check(
        chain=chain,
        target=target,
        moves_this_turn=moves,
        recent_paths=list(recent),
        steps_left=steps_left,
        **{**DEFAULTS, **limits},
    )


def test_a_first_handoff_is_allowed():
    assert check(["a"], "b") is None


def test_going_straight_back_is_ping_pong_unless_the_profile_allows_it():
    assert check(["a", "b"], "a") == STOP_PING_PONG
    assert check(["a", "b"], "a", block_ping_pong=False) is None
    assert check(["a", "b", "c"], "a") is None  # not straight back


def test_the_handoff_limit_counts_this_turns_moves():
    assert check(["a", "b", "c", "d"], "e", moves=3) == STOP_HANDOFF_LIMIT
    assert check(["a", "b", "c"], "d", moves=2) is None
    assert check(["a"], "b", moves=1, max_handoffs=1) == STOP_HANDOFF_LIMIT


def test_a_path_that_would_appear_three_times_in_the_last_five_handoffs_is_stopped():
    twice = [("a", "b"), ("b", "c"), ("a", "b")]
    assert check(["a"], "b", recent=twice) == STOP_PATH_REPEATED
    assert check(["a"], "c", recent=twice) is None
    # Older than the window (the new one is the fifth): only one a → b is left in it.
    old = [("a", "b"), ("a", "b"), ("x", "y"), ("y", "z"), ("z", "w")]
    assert check(["a"], "b", recent=old) is None
    assert check(["a"], "b", recent=twice, max_repeats=4) is None


def test_a_target_without_steps_left_is_not_reached():
    assert check(["a"], "b", steps_left=0) == STOP_STEP_LIMIT


def test_the_checks_apply_in_the_documented_order():
    assert check(["a", "b"], "a", moves=3, steps_left=0) == STOP_HANDOFF_LIMIT
    assert check(["a", "b"], "a", recent=[("b", "a")] * 2, steps_left=0) == STOP_PING_PONG


def test_the_summary_keeps_what_was_found_and_never_reads_as_an_error():
    finding = "consultar_fatura: Fatura INV001 de R$ 289,90"
    text = stop_summary(reason=STOP_PING_PONG, answer="", findings=[finding], language="en")
    assert text.startswith("I'm stopping here")
    assert "R$ 289,90" in text and "go straight back" in text
    assert "error" not in text.lower()


@pytest.mark.parametrize(
    ("language", "stopped", "asked"),
    [
        ("pt", "Vou parar por aqui", "Pode me dizer em uma frase"),
        ("es", "Me detengo aquí", "¿Puede decirme en una frase"),
        ("en", "I'm stopping here", "could you tell me in one sentence"),
    ],
)
def test_the_summary_without_findings_asks_the_user_to_rephrase_in_the_conversations_language(language, stopped, asked):
    text = stop_summary(reason=STOP_HANDOFF_LIMIT, answer="", findings=[], language=language)
    assert text.startswith(stopped) and asked in text
    assert ("(" in text) is False  # one language, not one with another's gloss


def test_the_summary_keeps_the_specialists_own_words():
    assert "Seu pedido saiu." in stop_summary(reason=STOP_STEP_LIMIT, answer="Seu pedido saiu.", findings=[])
