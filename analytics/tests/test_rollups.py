"""The daily totals: which days (and the live day's hours) are summed, how a window is split, and percentiles read from
latency buckets."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from analytics.models import DailyConversations, DailyMessages, RollupDay, RollupHour
from analytics.rollups import (
    CONVERSATIONS,
    DECIDED,
    FACTS,
    MESSAGES,
    Window,
    fact_rows,
    histogram_percentile,
    latency_bucket,
    whole_days,
    without_jit,
)
from analytics.services import (
    rollup_build,
    rollup_closed_before,
    rollup_days_unseal,
    rollup_hours_build,
    rollup_hours_unseal,
    window_open,
)

D = dt.date(2026, 3, 10)


def at(day: dt.date, hour: int = 0) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(hour), tzinfo=dt.UTC)


def test_a_window_reads_sealed_whole_days_from_the_totals_and_everything_else_from_the_rows():
    days = [D + dt.timedelta(days=i) for i in range(6)]
    window = Window.split(at(days[0], 12), at(days[5]), sealed_days=[days[1], days[2], days[4], days[5]])
    # days[5] is outside [start, end); days[0] is only half inside.
    assert window.sealed == ((days[1], days[2]), (days[4], days[4]))
    assert window.live == ((at(days[0], 12), at(days[1])), (at(days[3]), at(days[4])))


def test_a_window_reads_each_tables_sealed_hours_of_a_live_day_from_the_totals_and_the_rest_from_the_rows():
    days = [D + dt.timedelta(days=i) for i in range(3)]
    hours = [("messages", at(days[2], h)) for h in (0, 1, 2, 5)] + [("handoffs", at(days[2], 1))]
    hours.append(("messages", at(days[1], 7)))  # inside a sealed day: the day's totals are read
    window = Window.split(at(days[0]), at(days[2] + dt.timedelta(days=1)), sealed_days=days[:2], sealed_hours=hours)

    assert window.of("messages") == (
        [(days[2], 0, 2), (days[2], 5, 5)],
        [(at(days[2], 3), at(days[2], 5)), (at(days[2], 6), at(days[2] + dt.timedelta(days=1)))],
    )
    assert window.of("handoffs") == (
        [(days[2], 1, 1)],
        [(at(days[2]), at(days[2], 1)), (at(days[2], 2), at(days[2] + dt.timedelta(days=1)))],
    )
    assert window.of("tool_calls") == ([], [(at(days[2]), at(days[2] + dt.timedelta(days=1)))])


def test_whole_days_are_those_wholly_inside_the_window():
    assert whole_days(at(D, 1), at(D + dt.timedelta(days=3))) == [D + dt.timedelta(days=1), D + dt.timedelta(days=2)]
    assert whole_days(at(D), at(D, 23)) == []


def exact_percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (position - low) * (ordered[high] - ordered[low])


@pytest.mark.parametrize("size", [1, 2, 7, 1000])
def test_percentiles_from_the_buckets_are_within_five_percent_of_the_exact_ones(size):
    import math

    rng = random.Random(size)
    values = [rng.lognormvariate(math.log(1200), 0.6) for _ in range(size)]
    counts: dict[int, int] = {}
    for value in values:
        bucket = math.floor(math.log(value) / math.log(1.05))
        counts[bucket] = counts.get(bucket, 0) + 1
    for fraction in (0.0, 0.5, 0.95, 1.0):
        assert histogram_percentile(counts, fraction) == pytest.approx(exact_percentile(values, fraction), rel=0.05)
    assert histogram_percentile({}, 0.5) is None


@pytest.mark.django_db
def test_the_database_puts_a_latency_in_the_bucket_python_expects():
    from conversations.models import Message
    from tests.factories import ConversationFactory

    conversation = ConversationFactory()
    for ms in (0, 0.5, 1, 99.9, 100, 1234.5, 60000):
        Message.objects.create(conversation=conversation, role="assistant", latency_ms=ms)
    buckets = list(Message.objects.order_by("id").annotate(b=latency_bucket()).values_list("latency_ms", "b"))
    import math

    for ms, bucket in buckets:
        expected = math.floor(math.log(max(ms, 0.001)) / math.log(1.05))
        assert bucket == expected, ms


@pytest.mark.django_db
def test_a_live_read_runs_without_postgresqls_jit_and_counts_the_same(tenant):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from conversations.models import Message
    from tests.factories import ConversationFactory

    conversation = ConversationFactory(tenant=tenant, cohort="multi_agent")
    for ms in (100, 300):
        Message.objects.create(conversation=conversation, role="assistant", cohort="multi_agent", latency_ms=ms)
    Message.objects.filter(conversation=conversation).update(created_at=at(D, 9))
    window = Window(start=at(D), end=at(D + dt.timedelta(days=1)), sealed=(), live=((at(D), at(D, 12)),))
    with CaptureQueriesContext(connection) as captured:
        [row] = fact_rows(MESSAGES, window, by=("cohort",), tenant_id=tenant.pk, profile_id=None)
    assert (row["cohort"], row["n"], row["latency_sum"], row["latency_n"]) == ("multi_agent", 2, 400.0, 2)
    statements = [query["sql"] for query in captured.captured_queries]
    read = next(i for i, sql in enumerate(statements) if "routing_message" in sql)
    if connection.vendor == "postgresql":
        assert "SET LOCAL jit = off" in statements[:read]
        with without_jit(), connection.cursor() as cursor:
            cursor.execute("SHOW jit")
            assert cursor.fetchone()[0] == "off"
    else:  # nothing to switch off
        assert not any("jit" in sql for sql in statements)


@pytest.mark.django_db
def test_only_closed_days_are_summed_and_a_build_seals_them(settings):
    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 600
    today = dt.datetime.now(dt.UTC).date()
    closed_before = rollup_closed_before()
    assert closed_before in (today, today - dt.timedelta(days=1))
    built = rollup_build(first=today - dt.timedelta(days=3), last=today)
    assert built == [today - dt.timedelta(days=i) for i in (3, 2, 1)][: (closed_before - today).days + 3]
    assert not RollupDay.objects.filter(day=today).exists()
    assert rollup_build(first=today - dt.timedelta(days=3), last=today) == []  # already sealed
    assert rollup_days_unseal([today - dt.timedelta(days=2)]) == 1
    assert rollup_build(first=today - dt.timedelta(days=3), last=today) == [today - dt.timedelta(days=2)]


@pytest.mark.django_db
def test_a_build_sums_each_group_once_and_a_rebuild_replaces_it(settings, tenant):
    from conversations.models import Message
    from tests.factories import ConversationFactory

    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
    conversation = ConversationFactory(tenant=tenant, cohort="multi_agent")
    for ms, score in ((100, 0.5), (300, 1.0)):
        Message.objects.create(
            conversation=conversation,
            role="assistant",
            agent="billing_agent",
            cohort="multi_agent",
            latency_ms=ms,
            judge_score=score,
        )
    Message.objects.filter(conversation=conversation).update(created_at=at(D, 9))
    assert rollup_build(first=D, last=D) == [D]
    [row] = DailyMessages.objects.all()
    assert (row.day, row.tenant_id, row.agent, row.n, row.latency_sum, row.latency_n, row.judge_sum) == (
        D,
        tenant.pk,
        "billing_agent",
        2,
        400.0,
        2,
        1.5,
    )
    assert rollup_build(first=D, last=D, rebuild=True) == [D]
    assert DailyMessages.objects.count() == 1


@pytest.mark.django_db
def test_rollup_analytics_sums_the_closed_days_and_says_how_many(settings):
    from io import StringIO

    from django.core.management import CommandError, call_command

    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
    out = StringIO()
    before = dt.datetime.now(dt.UTC)
    call_command("rollup_analytics", "--days", "3", stdout=out)
    after = dt.datetime.now(dt.UTC)
    assert out.getvalue().startswith("Summed 3 of the 3 closed days")
    # Today's closed hours, with no grace: as many as the hours begun since midnight, read before or after the command
    # (the clock may strike an hour while it runs).
    said = [f"then the {moment.hour} closed hours of {moment.date()}" in out.getvalue() for moment in (before, after)]
    assert any(said), out.getvalue()
    assert RollupDay.objects.filter(sealed=True).count() == 3
    out = StringIO()
    call_command("rollup_analytics", "--days", "5", stdout=out)
    assert out.getvalue().startswith("Summed 2 of the 5 closed days") and "(3 already sealed)" in out.getvalue()
    out = StringIO()
    call_command("rollup_analytics", "--days", "5", "--rebuild", stdout=out)
    assert out.getvalue().startswith("Summed 5 of the 5")
    with pytest.raises(CommandError, match="--days must be"):
        call_command("rollup_analytics", "--days", "0")


def _live_day_at(settings, moment: dt.datetime) -> None:
    """Days and hours closed up to ``moment`` (by the grace): its day is the live day, its earlier hours closed."""
    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = (dt.datetime.now(dt.UTC) - moment).total_seconds()


def _answers(tenant, moments: list[dt.datetime]):
    from conversations.models import Message
    from tests.factories import ConversationFactory

    conversation = ConversationFactory(tenant=tenant, cohort="multi_agent")
    for i, moment in enumerate(moments):
        message = Message.objects.create(
            conversation=conversation, role="assistant", cohort="multi_agent", latency_ms=100 * (i + 1)
        )
        Message.objects.filter(pk=message.pk).update(created_at=moment)
    type(conversation).objects.filter(pk=conversation.pk).update(created_at=moments[0])
    return conversation


@pytest.mark.django_db
def test_only_the_live_days_closed_hours_are_summed_each_table_apart(settings, tenant):
    yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    _answers(tenant, [at(yesterday, 11).replace(minute=15), at(yesterday, 11).replace(minute=40)])
    _live_day_at(settings, at(yesterday, 12).replace(minute=30))

    asked = [at(yesterday, 11), at(yesterday, 12), at(yesterday - dt.timedelta(days=1), 11)]
    assert rollup_hours_build(asked) == {(fact.name, at(yesterday, 11)) for fact in FACTS}  # 12:00 is not closed
    [row] = DailyMessages.objects.all()
    assert (row.day, row.hour, row.n, row.latency_sum) == (yesterday, 11, 2, 300.0)
    [conversations] = DailyConversations.objects.all()
    assert (conversations.hour, conversations.n) == (11, 1)
    assert rollup_hours_build(asked) == set()  # already sealed

    rollup_hours_unseal([at(yesterday, 11).replace(minute=15)], facts=[CONVERSATIONS])
    rollup_hours_unseal([at(yesterday, 11).replace(minute=50)], facts=[DECIDED])
    assert rollup_hours_build(asked) == {("conversations", at(yesterday, 11)), ("outcomes", at(yesterday, 11))}
    assert DailyMessages.objects.count() == DailyConversations.objects.count() == 1


@pytest.mark.django_db
def test_a_summed_hour_is_read_from_its_totals_and_the_current_hour_from_the_rows(settings, tenant):
    from conversations.models import Message

    yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    conversation = _answers(tenant, [at(yesterday, 11).replace(minute=15), at(yesterday, 12).replace(minute=10)])
    _live_day_at(settings, at(yesterday, 12).replace(minute=30))
    window = window_open(at(yesterday), at(yesterday + dt.timedelta(days=1)))
    assert ("messages", at(yesterday, 11)) in window.hours and ("messages", at(yesterday, 12)) not in window.hours
    # Both answers' latencies changed behind the totals' back (no writer does so): 11:00 is read from its totals.
    Message.objects.filter(conversation=conversation).update(latency_ms=1000)

    [row] = fact_rows(MESSAGES, window, by=("cohort",), tenant_id=tenant.pk, profile_id=None)
    assert (row["n"], row["latency_sum"]) == (2, 100.0 + 1000.0)
    settings.ANALYTICS_ROLLUPS = False
    [row] = fact_rows(
        MESSAGES,
        window_open(at(yesterday), at(yesterday + dt.timedelta(days=1))),
        by=("cohort",),
        tenant_id=tenant.pk,
        profile_id=None,
    )
    assert (row["n"], row["latency_sum"]) == (2, 2000.0)


@pytest.mark.django_db
def test_once_the_live_day_closes_it_is_summed_whole_and_its_hours_go(settings, tenant):
    yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    _answers(tenant, [at(yesterday, 9), at(yesterday, 10), at(yesterday, 13)])
    _live_day_at(settings, at(yesterday, 12).replace(minute=30))
    window_open(at(yesterday), at(yesterday + dt.timedelta(days=1)))  # sums 00:00-11:00
    assert sorted(DailyMessages.objects.values_list("hour", "n")) == [(9, 1), (10, 1)]

    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
    window = window_open(at(yesterday), at(yesterday + dt.timedelta(days=1)))

    assert window.sealed == ((yesterday, yesterday),) and window.hours == ()
    assert list(DailyMessages.objects.values_list("hour", "n")) == [(None, 3)]
    assert not RollupHour.objects.exists()
    [row] = fact_rows(MESSAGES, window, by=("day",), tenant_id=tenant.pk, profile_id=None)
    assert row["n"] == 3


@pytest.mark.django_db
def test_the_periodic_task_sums_the_closed_days_and_the_live_days_closed_hours(settings, tenant):
    from analytics.tasks import analytics_rollup

    yesterday = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
    _answers(tenant, [at(yesterday, 9), at(yesterday - dt.timedelta(days=1), 9)])
    _live_day_at(settings, at(yesterday, 12).replace(minute=30))  # yesterday live, its hours up to 11:00 closed

    assert analytics_rollup() == 90 + 12 * len(FACTS)
    assert RollupDay.objects.filter(sealed=True).count() == 90
    assert RollupHour.objects.filter(sealed=True).count() == 12 * len(FACTS)
    assert list(DailyMessages.objects.order_by("day").values_list("day", "hour", "n")) == [
        (yesterday - dt.timedelta(days=1), None, 1),
        (yesterday, 9, 1),
    ]
    assert analytics_rollup() == 0  # nothing left for the reads
