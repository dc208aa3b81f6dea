"""The ticket wait a turn spends behind an earlier message of its conversation reaches the metrics."""

from __future__ import annotations

import asyncio
import threading

import pytest

from common.infra.metrics import REGISTRY
from conversations import ordering


def waits() -> tuple[float, float]:
    count = REGISTRY.get_sample_value("platform_ticket_wait_seconds_count") or 0.0
    total = REGISTRY.get_sample_value("platform_ticket_wait_seconds_sum") or 0.0
    return count, total


@pytest.mark.django_db(transaction=True)
def test_a_turn_that_waits_for_its_ticket_is_observed_with_the_seconds_it_waited(tenant, telecom):
    key = f"{tenant.slug}:telecom_contas:waiting"
    defaults = {"tenant_id": tenant.pk, "profile_id": telecom.pk, "session_id": "waiting"}
    pk, first, state = ordering.ticket_take(conversation_key=key, defaults=defaults)
    assert state is not None  # the first message runs at once: no wait to observe
    _, second, state = ordering.ticket_take(conversation_key=key, defaults=defaults)
    assert state is None
    count, total = waits()

    passing = threading.Timer(0.2, ordering.ticket_pass, args=(pk, first))
    passing.start()
    try:
        waited = asyncio.run(ordering.ticket_wait(conversation_pk=pk, ticket=second))
    finally:
        passing.join()

    after_count, after_total = waits()
    assert after_count == count + 1
    assert after_total - total == pytest.approx(waited)
    assert waited >= 0.2
