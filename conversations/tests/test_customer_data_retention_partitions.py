"""The retention purge and ``agent_handoffs``' months (conversations/customer_data/retention.py,
handoffs/partitions.py): on PostgreSQL a month whose every tenant's cutoff has passed it, and none of whose handoffs
belongs to a conversation the purge keeps, is dropped whole instead of its rows deleted; a tenant that keeps its
history, a tenant whose window reaches into the month, or one kept conversation keeps the month, and its rows go in
batches as before. The record counts what the dropped month held. SQLite: the batches alone, as before."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from conversations.customer_data import retention_purge_all
from conversations.models import Conversation
from conversations.tests.stored_turns import conversation_of, stored_turn
from handoffs.models import Handoff
from handoffs.partitions import month_partitions, month_start, partitions_ensure
from tenants.models import RetentionPurge, Tenant
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

WINDOW = 30


def months_back(count: int) -> dt.datetime:
    start = month_start(timezone.now())
    for _ in range(count):
        start = month_start(start - dt.timedelta(days=1))
    return start


OLD_MONTH = months_back(3)  # ends at least two months ago: past a 30-day window's cutoff, whatever today is


def old_conversation(tenant: Tenant, session: str, *, moves: int = 2) -> Conversation:
    """A conversation whose every turn (each with a handoff) and last update were in the old month."""
    conversation = conversation_of(tenant, session=session)
    when = OLD_MONTH + dt.timedelta(days=10)
    for n in range(moves):
        stored_turn(conversation, f"minha fatura {n}", handoff_to="orders_agent", when=when + dt.timedelta(hours=n))
    Conversation.objects.filter(pk=conversation.pk).update(created_at=when, updated_at=when)
    return conversation


def old_month_there() -> bool:
    return OLD_MONTH in {partition.start for partition in month_partitions()}


@pytest.fixture
def alpha(db):
    return TenantFactory(slug="tenant_a", retention_days=WINDOW)


@pytest.fixture
def postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("partitions are PostgreSQL's")


def test_a_month_past_every_tenants_cutoff_is_dropped_whole_and_counted(alpha, postgresql):
    beta = TenantFactory(slug="tenant_b", retention_days=WINDOW + 10)
    ours = [old_conversation(alpha, "a1"), old_conversation(alpha, "a2", moves=3)]
    theirs = old_conversation(beta, "b1")
    recent = conversation_of(alpha, session="recent")
    stored_turn(recent, "e agora?", handoff_to="orders_agent")
    partitions_ensure()
    assert old_month_there()

    purges = {purge.tenant: purge for purge in retention_purge_all(now=timezone.now())}

    assert not old_month_there()
    assert not Conversation.objects.filter(pk__in=[c.pk for c in [*ours, theirs]]).exists()
    assert Handoff.objects.filter(conversation=recent).count() == 1
    assert purges["tenant_a"].handoff_months == (f"{OLD_MONTH:%Y-%m}",)
    assert purges["tenant_a"].counts["handoffs.Handoff"] == 5
    assert purges["tenant_b"].counts["handoffs.Handoff"] == 2
    assert RetentionPurge.objects.get(tenant=alpha).counts["handoffs.Handoff"] == 5


def test_a_tenant_that_keeps_its_history_keeps_the_month(alpha, postgresql):
    forever = TenantFactory(slug="forever", retention_days=0)
    ours = old_conversation(alpha, "a1")
    kept = old_conversation(forever, "f1")
    partitions_ensure()

    purges = retention_purge_all(now=timezone.now())

    assert old_month_there()
    assert not Conversation.objects.filter(pk=ours.pk).exists()  # gone in batches, its handoffs with it
    assert not Handoff.objects.filter(conversation_id=ours.pk).exists()
    assert Handoff.objects.filter(conversation=kept).count() == 2
    assert [purge.handoff_months for purge in purges] == [()]


def test_a_tenant_whose_window_reaches_into_the_month_keeps_it(alpha, postgresql):
    TenantFactory(slug="long", retention_days=3650)
    old_conversation(alpha, "a1")
    long_kept = old_conversation(Tenant.objects.get(slug="long"), "l1")
    partitions_ensure()

    retention_purge_all(now=timezone.now())

    assert old_month_there() and Handoff.objects.filter(conversation=long_kept).count() == 2


def test_one_kept_conversation_keeps_the_month_and_its_rows(alpha, postgresql):
    gone = old_conversation(alpha, "a1")
    going_on = old_conversation(alpha, "a2")
    stored_turn(going_on, "voltei", when=timezone.now() - dt.timedelta(days=1))  # a late message: kept
    partitions_ensure()

    purge = retention_purge_all(now=timezone.now())[0]

    assert old_month_there() and purge.handoff_months == ()
    assert Handoff.objects.filter(conversation=going_on).count() == 2
    assert not Conversation.objects.filter(pk=gone.pk).exists()
    assert purge.counts["handoffs.Handoff"] == 2  # the gone conversation's, deleted in its batch


def test_a_dry_run_names_the_month_and_drops_nothing(alpha, postgresql):
    old_conversation(alpha, "a1")
    partitions_ensure()
    out = StringIO()

    call_command("purge_expired", "--dry-run", stdout=out)

    assert old_month_there() and Handoff.objects.count() == 2
    assert f"would drop agent_handoffs' month {OLD_MONTH:%Y-%m}" in out.getvalue()


def test_without_partitions_the_rows_go_in_batches_as_before(alpha):
    ours = old_conversation(alpha, "a1")

    purges = retention_purge_all(now=timezone.now())

    assert not Conversation.objects.filter(pk=ours.pk).exists()
    assert purges[0].counts["handoffs.Handoff"] == 2 and purges[0].handoff_months == ()
