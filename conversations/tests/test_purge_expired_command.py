"""``manage.py purge_expired [--tenant T] [--dry-run]``, on PostgreSQL and SQLite: what the periodic job does, by hand,
reported per tenant and model."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from common.priority import NICEST, lowered_here_possible, thread_niceness
from conversations.models import Conversation, Message
from conversations.signals import store_rows_retiring
from conversations.tests.stored_turns import conversation_of, stored_turn
from tenants.models import RetentionPurge
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("purge_expired", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def expired(db):
    return _expired()


def _expired() -> Conversation:
    tenant = TenantFactory(slug="tenant_a", retention_days=10)
    when = timezone.now() - dt.timedelta(days=12)
    conversation = conversation_of(tenant, session="old")
    stored_turn(conversation, "minha fatura veio alta", when=when)
    Conversation.objects.filter(pk=conversation.pk).update(created_at=when, updated_at=when)
    return conversation


def test_a_dry_run_counts_and_changes_nothing_then_the_purge_reports_what_went(expired):
    dry = run("--tenant", "tenant_a", "--dry-run")

    assert "tenant_a: 10 days" in dry and "would purge" in dry and "conversations.Message: 2" in dry
    assert Message.objects.count() == 2 and not RetentionPurge.objects.exists()

    done = run()

    assert "purged 4 rows in 1 batch " in done and "conversations.Conversation: 1" in done
    assert not Conversation.objects.exists() and RetentionPurge.objects.get().batches == 1
    assert "purged 0 rows" in run("--tenant", "tenant_a")


def test_a_tenant_without_a_window_or_an_unknown_one_is_said_so(db, settings):
    settings.RETENTION_DAYS = 0
    TenantFactory(slug="forever")

    assert "kept forever" in run("--tenant", "forever")
    assert "No tenant has a retention window" in run()
    with pytest.raises(CommandError, match="nowhere"):
        run("--tenant", "nowhere")


def test_the_periodic_job_runs_the_purge(expired):
    from django.conf import settings

    assert settings.CELERY_BEAT_SCHEDULE["retention-purge"]["task"] == "conversations.retention_purge"
    call_command("periodic", "--once", stdout=io.StringIO())  # every job of the beat's schedule, in this process

    assert not Conversation.objects.filter(pk=expired.pk).exists()


@pytest.mark.skipif(not lowered_here_possible(), reason="a thread's own niceness is Linux's")
def test_the_purge_runs_at_a_lower_cpu_priority_than_its_caller_whose_own_stays(transactional_db, settings):
    settings.RETENTION_PURGE_NICE = 7
    gone = _expired()
    before, seen = thread_niceness(), []

    def record(**_):
        seen.append(thread_niceness())

    store_rows_retiring.connect(record, sender=Conversation)
    try:
        run()
    finally:
        store_rows_retiring.disconnect(record, sender=Conversation)

    assert not Conversation.objects.filter(pk=gone.pk).exists()
    in_memory = connection.vendor == "sqlite" and connection.is_in_memory_db()  # one connection: the caller's thread
    # Every retirement of the purge ran at the lowered priority: rows another test of this worker left expired are
    # retired beside this test's, so the count is not this test's to know.
    assert seen and set(seen) == {before if in_memory else min(before + 7, NICEST)}
    assert thread_niceness() == before
