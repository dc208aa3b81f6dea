"""A tenant's retention (conversations/customer_data/retention.py), on PostgreSQL and SQLite: a conversation past the
window goes with every row it left, a newer one and another tenant's stay, a tenant without a window keeps
everything, and a purge stopped midway leaves whole batches purged and the rest as it was, its record saying which."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations.customer_data import retention, retention_purge
from conversations.customer_data.registry import HOLDERS
from conversations.customer_data.retention import conversations_expired, retention_cutoff
from conversations.models import Conversation, CustomerFact, Message
from conversations.tests.stored_turns import conversation_of, stored_turn
from tenants.models import RetentionPurge
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

WINDOW = 30


def aged(conversation: Conversation, days: int, *, turns: int = 1) -> Conversation:
    """``turns`` turns of every kind of row, written ``days`` ago, and the conversation last updated then."""
    when = timezone.now() - dt.timedelta(days=days)
    for n in range(turns):
        stored_turn(
            conversation,
            f"minha fatura {conversation.session_id} {n}",
            rating="down",
            comment="veio alta",
            tool="consultar_fatura",
            handoff_to="orders_agent",
            backend="partner_backend",
            when=when,
        )
    Conversation.objects.filter(pk=conversation.pk).update(created_at=when, updated_at=when)
    return conversation


def rows_of(conversation_pk: int) -> dict[str, int]:
    """Rows every holder keeps of the conversation (the conversation itself included)."""
    conversation = Conversation.objects.select_related("profile").filter(pk=conversation_pk).first()
    if conversation is None:
        return {}
    return {
        holder.label: holder.rows(holder.of_conversations((conversation,))).count()
        for holder in HOLDERS
        if holder.of_conversations is not None
    } | {"conversations.Conversation": 1}


@pytest.fixture
def alpha(db):
    return TenantFactory(slug="tenant_a", retention_days=WINDOW)


def test_a_conversation_past_the_window_goes_with_its_rows_and_a_newer_one_and_another_tenants_stay(alpha):
    old = aged(conversation_of(alpha, session="old"), WINDOW + 2, turns=2)
    newer = aged(conversation_of(alpha, session="newer"), WINDOW - 2)
    outsider = TenantFactory(slug="outsider", retention_days=WINDOW + 10)
    theirs = aged(conversation_of(outsider, session="theirs"), WINDOW + 2)
    kept = {pk: rows_of(pk) for pk in (newer.pk, theirs.pk)}
    old_rows = rows_of(old.pk)
    assert old_rows["conversations.Message"] == 4 and old_rows["handoffs.Handoff"] == 2

    purge = retention_purge(tenant=alpha, pause_seconds=0)

    assert purge is not None and rows_of(old.pk) == {}
    for label in ("conversations.Message", "conversations.RouteDecisionRecord", "conversations.ToolCall"):
        assert purge.counts[label] == old_rows[label], label
    assert purge.counts["conversations.Conversation"] == 1 and purge.counts["handoffs.Handoff"] == 2
    assert {pk: rows_of(pk) for pk in kept} == kept
    record = RetentionPurge.objects.get()
    assert (record.tenant, record.window_days, record.counts) == (alpha, WINDOW, purge.counts)
    assert record.finished_at is not None and record.seconds is not None
    assert record.cutoff == retention_cutoff(window_days=WINDOW) and record.cutoff.time() == dt.time.min


def test_a_conversation_with_a_message_since_the_cutoff_is_kept_however_old_its_update(alpha):
    late = aged(conversation_of(alpha, session="late"), WINDOW + 5)
    stored_turn(late, "uma pessoa respondeu depois", when=timezone.now() - dt.timedelta(days=1))
    before = rows_of(late.pk)

    purge = retention_purge(tenant=alpha, pause_seconds=0)

    assert purge is not None and purge.counts == {} and rows_of(late.pk) == before
    assert not RetentionPurge.objects.exists()  # nothing had expired: nothing to record


@pytest.mark.parametrize("days, setting", [(None, 0), (0, 7)])
def test_a_tenant_without_a_window_keeps_everything(settings, days, setting):
    settings.RETENTION_DAYS = setting
    forever = TenantFactory(slug="forever", retention_days=days)
    ancient = aged(conversation_of(forever, session="ancient"), 3650)
    before = rows_of(ancient.pk)

    assert forever.retention_window_days() is None
    assert retention_purge(tenant=forever) is None
    assert rows_of(ancient.pk) == before and not RetentionPurge.objects.exists()


def test_a_blank_window_is_the_settings(settings):
    settings.RETENTION_DAYS = 7
    tenant = TenantFactory(slug="by_setting", retention_days=None)
    old = aged(conversation_of(tenant, session="old"), 9)

    purge = retention_purge(tenant=tenant, pause_seconds=0)

    assert purge is not None and purge.window_days == 7 and rows_of(old.pk) == {}


def test_a_dry_run_counts_the_rows_and_changes_nothing(alpha):
    old = aged(conversation_of(alpha, session="old"), WINDOW + 2)
    before = rows_of(old.pk)

    purge = retention_purge(tenant=alpha, dry_run=True, pause_seconds=0)

    assert purge is not None and purge.record_id is None
    assert purge.counts == {label: count for label, count in sorted(before.items()) if count}
    assert rows_of(old.pk) == before and not RetentionPurge.objects.exists()


def _stop_deleting_messages_of(conversation_pk: int) -> None:
    """A database that refuses, mid-purge, to delete one conversation's messages: a real failure inside a batch."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION retention_test_stop() RETURNS trigger AS $$ "
                "BEGIN RAISE EXCEPTION 'the disk is full'; END $$ LANGUAGE plpgsql"
            )
            cursor.execute(
                "CREATE TRIGGER retention_test_stop BEFORE DELETE ON routing_message FOR EACH ROW "
                f"WHEN (OLD.conversation_id = {int(conversation_pk)}) EXECUTE FUNCTION retention_test_stop()"
            )
        else:
            cursor.execute(
                "CREATE TRIGGER retention_test_stop BEFORE DELETE ON routing_message "
                f"WHEN OLD.conversation_id = {int(conversation_pk)} BEGIN SELECT RAISE(ABORT, 'the disk is full'); END"
            )


def _stop_no_more() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "DROP TRIGGER retention_test_stop" + (" ON routing_message" if connection.vendor == "postgresql" else "")
        )


def test_a_purge_stopped_midway_leaves_whole_batches_purged_and_the_rest_as_it_was(alpha):
    first, second, third = (aged(conversation_of(alpha, session=f"s{n}"), WINDOW + 3) for n in range(3))
    first_rows = rows_of(first.pk)
    untouched = {pk: rows_of(pk) for pk in (second.pk, third.pk)}
    _stop_deleting_messages_of(second.pk)

    with pytest.raises(DatabaseError, match="disk is full"):
        retention_purge(tenant=alpha, batch_size=1, pause_seconds=0)

    assert rows_of(first.pk) == {}
    assert {pk: rows_of(pk) for pk in untouched} == untouched  # the second batch's deletes were all undone
    stopped = RetentionPurge.objects.get()
    assert stopped.finished_at is None and stopped.batches == 1
    assert stopped.counts["conversations.Conversation"] == 1
    assert stopped.counts["conversations.Message"] == first_rows["conversations.Message"]

    _stop_no_more()
    finished = retention_purge(tenant=alpha, batch_size=1, pause_seconds=0)

    assert finished is not None and finished.batches == 2 and finished.counts["conversations.Conversation"] == 2
    assert not conversations_expired(tenant_id=alpha.pk, cutoff=finished.cutoff).exists()
    assert not Message.objects.filter(conversation__tenant=alpha).exists()


class Clock:
    """The purge's clock: ``batch`` seconds pass between two readings (a batch's start and end); what the purge
    sleeps is recorded."""

    def __init__(self, batch: float) -> None:
        self.now, self.batch, self.slept = 0.0, batch, []

    def monotonic(self) -> float:
        self.now += self.batch
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))


@pytest.mark.parametrize(
    ("share", "batch", "pause", "rests"), [(0.25, 0.2, 0.05, 0.6), (0.5, 0.02, 0.05, 0.05), (0.25, 36.0, 0.05, 5.0)]
)
def test_a_purge_rests_after_each_batch_so_that_batches_keep_to_their_share_of_its_time(
    alpha, settings, monkeypatch, share, batch, pause, rests
):
    settings.RETENTION_PURGE_SHARE, settings.RETENTION_PURGE_ROWS_PER_SECOND = share, 0  # the share alone
    for n in range(2):
        aged(conversation_of(alpha, session=f"r{n}"), WINDOW + 3)
    clock = Clock(batch)
    monkeypatch.setattr("conversations.customer_data.retention.time", clock)

    purge = retention_purge(tenant=alpha, batch_size=1, pause_seconds=pause)

    assert purge is not None and purge.batches == 2
    # A batch of 0.2 s at a quarter: 0.6 s; a short one: the pause; one that seemed to take 36 s (its process was
    # stopped): 5 s at most.
    assert clock.slept == [rests, rests]


@pytest.mark.parametrize(
    ("per_second", "batches", "rests"), [(2, [1, 2, 2], [0.5, 1.0, 0.5]), (100, [1, 100], [0.05, 0.05])]
)
def test_a_paced_purge_deletes_no_more_rows_a_second_than_its_rate_in_batches_of_about_a_second(
    alpha, settings, monkeypatch, per_second, batches, rests
):
    conversations = [aged(conversation_of(alpha, session=f"p{n}"), WINDOW + 3) for n in range(4)]
    rows = sum(rows_of(conversations[0].pk).values())  # every conversation holds as many
    settings.RETENTION_PURGE_ROWS_PER_SECOND = per_second * rows
    clock = Clock(0.01)
    monkeypatch.setattr("conversations.customer_data.retention.time", clock)
    sizes: list[int] = []
    batch = retention._batch

    def counted(**kwargs):
        sizes.append(kwargs["size"])
        return batch(**kwargs)

    monkeypatch.setattr(retention, "_batch", counted)

    purge = retention_purge(tenant=alpha, pause_seconds=0.05)

    assert purge is not None and purge.counts["conversations.Conversation"] == 4
    # Two conversations' rows a second: one first (half a second's rest), then two (a second), then two asked and the
    # last found; at a hundred, one and then a hundred asked (the batch's most), resting the pause (the rows take less).
    assert sizes[: len(batches)] == batches and purge.batches == len(batches)
    assert clock.slept == rests


def test_a_fact_told_in_a_purged_conversation_stays_and_no_longer_points_at_its_message(alpha):
    old = aged(conversation_of(alpha, session="told"), WINDOW + 2)
    told = Message.objects.filter(conversation=old, role="user").first()
    fact = CustomerFact.objects.create(
        tenant=alpha, user_id=old.user_id, text="prefers e-mail", source_message=told, expires_at=None
    )

    retention_purge(tenant=alpha, pause_seconds=0)

    assert not Conversation.objects.filter(pk=old.pk).exists()
    fact.refresh_from_db()
    assert (fact.text, fact.source_message_id) == ("prefers e-mail", None)


def test_a_batch_deletes_in_the_same_few_statements_however_many_rows_its_conversations_hold(alpha, settings):
    settings.RETENTION_PURGE_ROWS_PER_SECOND = 0  # one batch of every conversation
    small = aged(conversation_of(alpha, session="small"), WINDOW + 2)
    cutoff = retention_cutoff(window_days=WINDOW)

    def statements(conversation: Conversation) -> int:
        with CaptureQueriesContext(connection) as queries, transaction.atomic():
            retention._batch(tenant_id=alpha.pk, cutoff=cutoff, after=0, size=10, dry_run=False)
        assert not Conversation.objects.filter(pk=conversation.pk).exists()
        return len(queries)

    few = statements(small)
    large = aged(conversation_of(alpha, session="large"), WINDOW + 2, turns=6)

    assert statements(large) == few <= 26  # each holder's rows in one statement; none read back to be deleted again
