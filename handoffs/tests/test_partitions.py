"""``agent_handoffs`` by month (handoffs/partitions.py): on PostgreSQL a row goes to its month's partition, or to the
DEFAULT one when its month has none; the maintenance makes the months ahead and moves the DEFAULT partition's rows
into months of their own, and a second run changes nothing; a dropped month takes its rows and no other. On SQLite
the table is a plain one and the maintenance does nothing."""

from __future__ import annotations

import datetime as dt
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from conversations.management.commands.periodic import periodic_jobs
from conversations.tests.stored_turns import conversation_of, stored_turn
from handoffs.models import Handoff
from handoffs.partitions import (
    DEFAULT_PARTITION,
    MONTHS_AHEAD,
    handoffs_partitioned,
    month_next,
    month_partitions,
    month_start,
    partition_drop,
    partition_name,
    partitions_ensure,
)
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

postgresql_only = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="partitions are PostgreSQL's; SQLite keeps the plain table"
)


def months_back(count: int) -> dt.datetime:
    start = month_start(timezone.now())
    for _ in range(count):
        start = month_start(start - dt.timedelta(days=1))
    return start


def handoff_at(when: dt.datetime, session: str = "s-1") -> Handoff:
    conversation = conversation_of(TenantFactory(slug="acme"), session=session)
    handoff = stored_turn(conversation, "minha fatura", handoff_to="orders_agent", when=when).handoff
    assert handoff is not None
    return handoff


def partition_of(handoff: Handoff) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM agent_handoffs WHERE id = %s", [handoff.pk])
        return cursor.fetchone()[0]


@postgresql_only
def test_the_table_is_partitioned_by_month_with_this_month_the_months_ahead_and_a_default():
    assert handoffs_partitioned()
    starts = [partition.start for partition in month_partitions()]
    this_month = month_start(timezone.now())
    ahead = [this_month]
    for _ in range(MONTHS_AHEAD):
        ahead.append(month_next(ahead[-1]))
    assert set(ahead) <= set(starts)
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [DEFAULT_PARTITION])
        assert cursor.fetchone()[0]
        cursor.execute(
            "SELECT array_agg(a.attname ORDER BY k.n) FROM pg_constraint c, unnest(c.conkey) WITH ORDINALITY k(num, n) "
            "JOIN pg_attribute a ON a.attnum = k.num WHERE c.conrelid = 'agent_handoffs'::regclass AND c.contype = 'p' "
            "AND a.attrelid = c.conrelid"
        )
        assert cursor.fetchone()[0] == ["id", "created_at"]


@postgresql_only
def test_a_row_goes_to_its_months_partition_and_a_month_without_one_to_the_default():
    now = timezone.now()
    this_month = handoff_at(now, session="now")
    long_ago = handoff_at(now - dt.timedelta(days=3650), session="ago")

    assert partition_of(this_month) == partition_name(month_start(now))
    assert partition_of(long_ago) == DEFAULT_PARTITION
    assert set(Handoff.objects.values_list("pk", flat=True)) == {this_month.pk, long_ago.pk}
    assert Handoff.objects.get(pk=long_ago.pk).created_at == long_ago.created_at


@postgresql_only
def test_the_maintenance_moves_the_defaults_rows_into_their_months_and_a_second_run_changes_nothing():
    old_month = months_back(5)
    old = handoff_at(old_month + dt.timedelta(days=3, hours=5), session="old")
    older = handoff_at(months_back(7) + dt.timedelta(days=1), session="older")
    assert partition_of(old) == partition_of(older) == DEFAULT_PARTITION

    made = partitions_ensure()

    assert made == sorted([partition_name(old_month), partition_name(months_back(7))])
    assert partition_of(old) == partition_name(old_month)
    assert partition_of(older) == partition_name(months_back(7))
    assert Handoff.objects.filter(pk__in=[old.pk, older.pk]).count() == 2
    assert partitions_ensure() == []
    out = StringIO()
    call_command("handoff_partitions", stdout=out)
    assert "nothing to make" in out.getvalue()


@postgresql_only
def test_the_maintenance_makes_a_month_that_comes_into_its_window():
    later = timezone.now() + dt.timedelta(days=31 * (MONTHS_AHEAD + 1))
    missing = partition_name(month_start(later))
    assert missing not in {partition.name for partition in month_partitions()}

    out = StringIO()
    call_command("handoff_partitions", "--ahead", str(MONTHS_AHEAD + 2), stdout=out)

    assert missing in {partition.name for partition in month_partitions()}
    assert missing in out.getvalue()


@postgresql_only
def test_a_dropped_month_takes_its_rows_and_no_other():
    old_month = months_back(4)
    gone = handoff_at(old_month + dt.timedelta(days=2), session="gone")
    stays = handoff_at(month_next(old_month) + dt.timedelta(days=2), session="stays")
    partitions_ensure()
    (dropped,) = [partition for partition in month_partitions() if partition.start == old_month]

    partition_drop(dropped)

    assert not Handoff.objects.filter(pk=gone.pk).exists() and Handoff.objects.filter(pk=stays.pk).exists()
    assert old_month not in {partition.start for partition in month_partitions()}


def test_on_sqlite_the_table_is_plain_and_the_maintenance_does_nothing():
    if connection.vendor == "postgresql":
        pytest.skip("the plain table is SQLite's")
    handoff = handoff_at(timezone.now() - dt.timedelta(days=3650))
    assert not handoffs_partitioned() and month_partitions() == [] and partitions_ensure() == []
    out = StringIO()
    call_command("handoff_partitions", stdout=out)
    assert "not partitioned" in out.getvalue()
    assert Handoff.objects.filter(pk=handoff.pk).exists()


def test_the_maintenance_is_a_periodic_job_the_embedded_runner_runs_too(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["handoff-partitions"]
    (job,) = periodic_jobs({"handoff-partitions": entry})
    assert job.task.name == "handoffs.partitions_ensure"
    assert job.run()  # on SQLite as on PostgreSQL: nothing missing, nothing made


@postgresql_only
def test_the_maintenance_makes_the_months_back_to_a_date_for_rows_about_to_be_written_back_dated():
    made = partitions_ensure(since=months_back(6) + dt.timedelta(days=12))

    assert made == [partition_name(months_back(n)) for n in range(6, 0, -1)]
    assert partitions_ensure(since=months_back(6)) == []
