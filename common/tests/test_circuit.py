"""The one circuit breaker: short calls that every caller reports, long calls admitted one trial at a time."""

from __future__ import annotations

import logging
import time

import pytest

from common.infra.circuit import CLOSED, TRIAL, Circuit


class Down(Exception):
    pass


def fail() -> int:
    raise Down("no answer")


def test_a_short_call_that_finds_the_service_down_gets_the_fallback_and_later_calls_skip_it_for_the_pause():
    circuit = Circuit("thing", pause=60.0)
    assert circuit.call(fail, -1, down=(Down,)) == -1
    assert circuit.is_open and not circuit.allows()
    assert circuit.call(lambda: 1, -1, down=(Down,)) == -1  # skipped, not called


def test_after_the_pause_every_caller_may_try_and_the_first_success_closes_it():
    circuit = Circuit("thing", pause=0.05)
    circuit.call(fail, -1, down=(Down,))
    time.sleep(0.06)
    assert circuit.allows() and circuit.allows()  # no trial to hold: each may try
    assert circuit.call(lambda: 1, -1, down=(Down,)) == 1
    assert not circuit.is_open


def test_an_error_that_is_not_an_outage_propagates_and_leaves_the_circuit_closed():
    circuit = Circuit("thing", pause=60.0)
    with pytest.raises(ZeroDivisionError):
        circuit.call(lambda: 1 // 0, -1, down=(Down,))
    assert not circuit.is_open and circuit.failures == 0


def test_it_opens_at_the_stated_failures_in_a_row_and_a_success_forgets_them():
    circuit = Circuit("thing", pause=60.0, failures_to_open=lambda: 3)
    assert not circuit.failed("one") and not circuit.failed("two")
    circuit.succeeded()
    assert not circuit.failed("one") and not circuit.failed("two")
    assert circuit.failed("three") and circuit.admit() is None


def test_a_trial_that_fails_opens_the_circuit_again_whatever_the_count():
    circuit = Circuit("thing", pause=0.0, failures_to_open=3)
    for _ in range(3):
        circuit.failed("down")
    assert circuit.admit() == TRIAL
    assert circuit.failed("still down")
    assert circuit.admit() == TRIAL  # pause 0: the next call is the next trial
    circuit.trial_done()
    assert circuit.admit() == CLOSED


def test_an_outage_is_logged_once_when_it_opens_and_once_when_it_closes_by_the_owners_logger(caplog):
    owner = logging.getLogger("owner.module")
    opened, closed = [], []
    circuit = Circuit(
        "thing", pause=0.0, logger=owner, on_open=lambda: opened.append(1), on_close=lambda: closed.append(1)
    )
    with caplog.at_level(logging.INFO, logger="owner.module"):
        for _ in range(5):
            circuit.call(fail, None, down=(Down,))
        circuit.call(lambda: 1, None, down=(Down,))
    lines = [r.getMessage() for r in caplog.records if r.name == "owner.module"]
    assert len(lines) == 2
    assert "thing unreachable (Down: no answer)" in lines[0] and "reachable again" in lines[1]
    assert opened == [1] and closed == [1]
