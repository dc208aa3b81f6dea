"""The dashboard's figures after a tenant's retention purge: the days whose rows were purged keep their totals — summed
before the rows went, whether or not a read had summed them — and stay final when a writer later unseals or a
rebuild sums days again."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from analytics.selectors import agent_utilisation, handoff_summary, route_method_mix, tool_call_stats
from analytics.services import conversation_counted_again, rollup_build, rollup_days_unseal
from conversations.customer_data import retention_purge
from conversations.models import Conversation, Message
from conversations.tests.stored_turns import conversation_of, stored_turn
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

WINDOW = 30


def figures() -> dict:
    end = timezone.now()
    window = {"start": end - dt.timedelta(days=60), "end": end, "tenant_id": None}
    return {
        "handoffs": handoff_summary(**window),
        "routes": route_method_mix(**window),
        "agents": agent_utilisation(**window),
        "tools": tool_call_stats(**window),
    }


def turns(conversation: Conversation, when: dt.datetime, count: int) -> None:
    for n in range(count):
        stored_turn(conversation, f"fatura {n}", tool="consultar_fatura", handoff_to="orders_agent", when=when)


@pytest.mark.parametrize("read_before", [True, False], ids=["days-summed-by-a-read", "days-never-read"])
def test_a_purge_leaves_the_dashboards_figures_as_they_were(settings, read_before):
    tenant = TenantFactory(slug="tenant_a", retention_days=WINDOW)
    then = timezone.now() - dt.timedelta(days=WINDOW + 5)
    expired = conversation_of(tenant, session="expired")
    turns(expired, then, 3)
    # A conversation of the same day still going (a message yesterday): it stays, and will change language later.
    going = conversation_of(tenant, session="going")
    turns(going, then, 1)
    turns(going, timezone.now() - dt.timedelta(days=1), 1)
    Conversation.objects.filter(pk__in=[expired.pk, going.pk]).update(created_at=then)
    Conversation.objects.filter(pk=expired.pk).update(updated_at=then)
    if read_before:
        expected = figures()
    else:
        settings.ANALYTICS_ROLLUPS = False  # read from the rows, summing nothing
        expected = figures()
        settings.ANALYTICS_ROLLUPS = True
    assert expected["handoffs"]["total_handoffs"] == 5 and expected["tools"]["total_calls"] == 5

    purge = retention_purge(tenant=tenant, pause_seconds=0)

    assert purge is not None and purge.counts["handoffs.Handoff"] == 3
    assert not Message.objects.filter(conversation_id=expired.pk).exists()
    assert figures() == expected

    # Later writers and a rebuild: the purged day's totals are final.
    day = then.astimezone(dt.UTC).date()
    going.refresh_from_db()
    conversation_counted_again(going.created_at, every_day=True)
    rollup_days_unseal([day])
    rollup_build(first=day, last=day, rebuild=True)
    assert figures() == expected
