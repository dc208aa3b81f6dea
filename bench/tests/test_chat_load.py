"""bench/chat_load.py's report, where it can be checked without a server."""

from __future__ import annotations

from bench.chat_load import ratio_to_ideal


def test_the_rate_is_shown_against_what_the_clients_could_do_waiting_only_for_the_model():
    assert ratio_to_ideal(180.0, 200, 1000) == "90% of 200"
    assert ratio_to_ideal(118.8, 64, 1) == "0% of 64000"


def test_with_no_model_latency_there_is_no_ideal_and_no_division_by_zero():
    assert ratio_to_ideal(400.0, 8, 0) == "— (no model latency)"
