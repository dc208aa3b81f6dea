"""Writing the daily totals (:mod:`analytics.rollups`): building closed days and the live day's closed hours, and
unsealing days and hours whose rows changed.

A day is *closed* once it ended ``ANALYTICS_ROLLUP_GRACE_SECONDS`` ago: no turn still running can write a row
dated that day any more. :func:`rollup_build` sums closed days into the daily tables and seals them; the
selectors call it for the closed days of the window they read (the first read after midnight sums yesterday),
and ``manage.py rollup_analytics`` does it ahead of time. The hours of the day not closed yet close the same way,
an hour after they started and the grace: :func:`rollup_hours_build` sums them into the same tables at hour grain
(each table's hour sealed apart, :class:`analytics.models.RollupHour`), so a read of today takes only the current
hour from the rows; the first read after an hour closes sums it. Once the day closes it is summed whole and its
hours' rows and marks go. Rows are never dated back, but a closed day's
totals can still go stale: a cleared session deletes its messages, a conversation counted on the day it
was created may later change cohort or language or have its first move of a kind (its messages and route decisions
keep the language their turn was read in). Those writers send the conversation
store's signals (:mod:`conversations.signals`) in their own transaction, and :class:`analytics.apps.AnalyticsConfig`
connects them to :func:`conversation_counted_again` and :func:`rollup_hours_unseal`: nobody imports the
analytics. The day (or hour) is read from its rows until it is built again. On the live day the
mark is the hour's, and only the tables whose rows changed: a conversation counted again unseals the conversations'
hour it was created in, an outcome changed the outcomes' hour it was decided in, a rating given or changed the ratings'
hour its answer was given in (:data:`analytics.rollups.RATINGS`).

A tenant's retention purge deletes old rows for good: it says so first (``store_rows_retiring``), and the closed days
it reaches are summed before any row goes. From then on every day before the latest purge's cutoff is *final*: its
totals are never summed again from what rows are left, nor unsealed (:func:`rollup_final_before`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction
from django.db.models import DateField, Expression, F, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from analytics.models import RollupDay, RollupHour
from analytics.rollups import (
    CONVERSATIONS,
    DAY,
    DECIDED,
    FACTS,
    HOUR,
    RATINGS,
    Fact,
    Window,
    day_ranges,
    day_start,
    fact_group,
    rollups_enabled,
    utc_hour,
    whole_days,
)
from tenants.models import RetentionPurge

BUILD_BATCH_SIZE = 5000


def rollup_closed_before(now: dt.datetime | None = None) -> dt.date:
    """The first day that is not closed yet: every earlier day may be summed."""
    now = (now or timezone.now()).astimezone(dt.UTC)
    return (now - dt.timedelta(seconds=float(settings.ANALYTICS_ROLLUP_GRACE_SECONDS))).date()


def rollup_hour_closed_before(now: dt.datetime | None = None) -> dt.datetime:
    """The first hour that is not closed yet (its start): every earlier hour may be summed."""
    now = (now or timezone.now()).astimezone(dt.UTC)
    return (now - dt.timedelta(seconds=float(settings.ANALYTICS_ROLLUP_GRACE_SECONDS))).replace(
        minute=0, second=0, microsecond=0
    )


def rollup_live_hours(start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    """The closed hours of the day not closed yet that lie wholly inside ``[start, end)`` (their starts)."""
    closed_before = rollup_hour_closed_before()
    hour = max(start.astimezone(dt.UTC), day_start(closed_before.date()))
    if hour.minute or hour.second or hour.microsecond:
        hour = hour.replace(minute=0, second=0, microsecond=0) + HOUR
    hours = []
    while hour + HOUR <= min(end, closed_before):
        hours.append(hour)
        hour += HOUR
    return hours


def rollup_final_before() -> Expression:
    """The SQL of the first day whose totals may still be summed again: the day of the latest retention purge's cutoff
    (the rows of earlier days may be gone), or the first day of the calendar when nothing was ever purged."""
    latest = RetentionPurge.objects.order_by("-cutoff").values(day=TruncDate("cutoff", tzinfo=dt.UTC))[:1]
    return Coalesce(Subquery(latest, output_field=DateField()), Value(dt.date.min), output_field=DateField())


def _days(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def rollup_build(*, first: dt.date, last: dt.date, rebuild: bool = False) -> list[dt.date]:
    """Sum the closed days from ``first`` to ``last`` (both included) into the daily tables and seal them, in one
    transaction; with ``rebuild`` sealed days are summed again too. Returns the days sealed by this call.

    The days' :class:`RollupDay` rows are locked while they are summed, so two readers never sum the same day
    twice and an unseal waits for the build and then wins. A final sealed day is never summed again, ``rebuild`` or
    not (:func:`rollup_final_before`).
    """
    last = min(last, rollup_closed_before() - DAY)
    if last < first:
        return []
    with transaction.atomic():
        RollupDay.objects.bulk_create([RollupDay(day=day) for day in _days(first, last)], ignore_conflicts=True)
        locked = (
            RollupDay.objects.select_for_update()
            .filter(day__gte=first, day__lte=last)
            .annotate(final_before=rollup_final_before())
            .order_by("day")
        )
        days = [row.day for row in locked if not row.sealed or (rebuild and row.day >= row.final_before)]
        if not days:
            return []
        # The days' hours summed while they were live give way to the whole days (marks first: a build of those hours
        # still running is waited for, and its rows are then deleted with the rest).
        RollupHour.objects.filter(hour__gte=day_start(days[0]), hour__lt=day_start(days[-1]) + DAY).delete()
        for fact in FACTS:
            fact.rollup.objects.filter(day__in=days).delete()
            span = {f"{fact.time}__gte": day_start(days[0]), f"{fact.time}__lt": day_start(days[-1]) + DAY}
            rows = fact.rows().filter(**span)
            by = ("day", "tenant_id", "profile_id", *fact.dimensions)
            wanted = set(days)
            fact.rollup.objects.bulk_create(
                (fact.rollup(**row) for row in fact_group(fact, rows, by).iterator() if row["day"] in wanted),
                batch_size=BUILD_BATCH_SIZE,
            )
        RollupDay.objects.filter(day__in=days).update(sealed=True, built_at=timezone.now())
    return days


def rollup_hours_build(hours: Iterable[dt.datetime]) -> set[tuple[str, dt.datetime]]:
    """Sum the closed ``hours`` (UTC hour starts) of the day not closed yet into the daily tables at hour grain and seal
    them, each table apart, in one transaction; hours of another day, or not closed, are left. Returns the
    ``(fact name, hour)`` sealed by this call.

    The hours' :class:`RollupHour` marks are locked while they are summed, as :func:`rollup_build` locks days.
    """
    closed_before = rollup_hour_closed_before()
    wanted = sorted({hour.astimezone(dt.UTC) for hour in hours})
    wanted = [hour for hour in wanted if hour + HOUR <= closed_before and hour.date() == closed_before.date()]
    if not wanted:
        return set()
    with transaction.atomic():
        marks = [RollupHour(hour=hour, fact=fact.name) for hour in wanted for fact in FACTS]
        RollupHour.objects.bulk_create(marks, ignore_conflicts=True)
        locked = RollupHour.objects.select_for_update().filter(hour__in=wanted, sealed=False).order_by("hour", "fact")
        missing: dict[str, list[dt.datetime]] = {}
        for mark in locked:
            missing.setdefault(mark.fact, []).append(mark.hour.astimezone(dt.UTC))
        for fact in FACTS:
            if fact.name in missing:
                _hours_sum(fact, missing[fact.name])
        built = {(name, hour) for name, fact_hours in missing.items() for hour in fact_hours}
        if built:
            RollupHour.objects.filter(hour__in=wanted, sealed=False).update(sealed=True, built_at=timezone.now())
    return built


def _hours_sum(fact: Fact, hours: list[dt.datetime]) -> None:
    """One table's rows of ``hours`` (one day's) summed again, at hour grain."""
    day, numbers = hours[0].date(), {hour.hour for hour in hours}
    fact.rollup.objects.filter(day=day, hour__in=numbers).delete()
    span = {f"{fact.time}__gte": min(hours), f"{fact.time}__lt": max(hours) + HOUR}
    rows = fact.rows().annotate(hour=utc_hour(fact.time)).filter(**span)
    by = ("day", "hour", "tenant_id", "profile_id", *fact.dimensions)
    fact.rollup.objects.bulk_create(
        (fact.rollup(**row) for row in fact_group(fact, rows, by).iterator() if row["hour"] in numbers),
        batch_size=BUILD_BATCH_SIZE,
    )


def rollup_days_unseal(days: Iterable[dt.date]) -> int:
    """Mark the days' totals stale (call in the transaction that changes their rows), but for final ones; every hour
    of theirs summed while the day is live too. Returns how many days were unsealed."""
    days = sorted(set(days))
    if not days:
        return 0
    _hours_unseal(_any_day(days))
    return _unsealable().filter(day__in=days).update(sealed=False)


def rollup_hours_unseal(hours: Iterable[dt.datetime], *, facts: Iterable[Fact] = FACTS) -> None:
    """The rows written (or decided) in these hours changed: mark their days' totals stale, and on the live day those
    hours of the ``facts``' tables alone. Call in the transaction that changes the rows."""
    starts = {hour.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0) for hour in hours}
    if not starts:
        return
    live_day, open_hour = rollup_closed_before(), rollup_hour_closed_before()
    rollup_days_unseal(hour.date() for hour in starts if hour.date() < live_day)
    # An hour not closed yet is not summed: nothing to unseal (a turn's recount mostly falls in the hour it began).
    live = [hour for hour in starts if hour.date() >= live_day and hour < open_hour]
    if live:
        _hours_unseal(Q(hour__in=live), facts=facts)


def outcomes_decided_again(hours: Iterable[dt.datetime]) -> None:
    """Outcome rows decided in these hours change or go: their days' totals are stale, and on the live day those hours
    of the outcomes' table alone. Call in the transaction that changes them."""
    rollup_hours_unseal(hours, facts=[DECIDED])


def ratings_given_again(hours: Iterable[dt.datetime]) -> None:
    """Ratings of answers given in these hours were given or changed: their days' totals are stale, and on the live day
    those hours of the ratings' table alone. Call in the transaction that changes them."""
    rollup_hours_unseal(hours, facts=[RATINGS])


def _any_day(days: Iterable[dt.date]) -> Q:
    spans = [Q(hour__gte=day_start(first), hour__lt=day_start(last) + DAY) for first, last in day_ranges(days)]
    condition = spans[0]
    for span in spans[1:]:
        condition |= span
    return condition


def _hours_unseal(where: Q, *, facts: Iterable[Fact] = FACTS) -> None:
    names = [fact.name for fact in facts]
    RollupHour.objects.filter(where, sealed=True, fact__in=names).update(sealed=False)


def _unsealable() -> QuerySet[RollupDay]:
    final = RollupDay.objects.filter(sealed=True).alias(final_before=rollup_final_before())
    return final.filter(day__gte=F("final_before"))


def conversation_counted_again(created_at: dt.datetime | None, *, every_day: bool = False) -> None:
    """A conversation changed what it is counted under (its cohort, language, or the kinds of move it has had):
    unseal the day it was created, if that day may be summed already. ``every_day``: what its rows of every day are
    counted under changed too, so every closed day since then is unsealed. Call in the transaction that changes
    it."""
    if created_at is None:
        return
    day = created_at.astimezone(dt.UTC).date()
    if every_day:
        _unsealable().filter(day__gte=day).update(sealed=False)
        _hours_unseal(Q(hour__gte=created_at.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)))
    elif day < rollup_closed_before():
        rollup_days_unseal([day])
    else:
        # On the live day only the conversations' hour: the conversation's other rows keep what they were counted
        # under (its messages their turn's language and cohort).
        rollup_hours_unseal([created_at], facts=[CONVERSATIONS])


def rollup_ahead(*, days: int, rebuild: bool = False) -> tuple[list[dt.date], set[tuple[str, dt.datetime]]]:
    """Sum the last ``days`` closed days (sealed ones too with ``rebuild``), then the live day's closed hours not summed
    yet: what the reads would sum themselves (``rollup_analytics``, the periodic task). Returns what was summed."""
    last = rollup_closed_before() - DAY
    summed = rollup_build(first=last - dt.timedelta(days=days - 1), last=last, rebuild=rebuild)
    live_day = day_start(rollup_closed_before())
    return summed, rollup_hours_build(rollup_live_hours(live_day, live_day + DAY))


def _build_missing(days: list[dt.date], sealed: set[dt.date]) -> set[dt.date]:
    closed_before = rollup_closed_before()
    missing = [day for day in days if day not in sealed and day < closed_before]
    built: set[dt.date] = set()
    for first, last in day_ranges(missing):
        built.update(rollup_build(first=first, last=last))
    return built


def rollup_seal_before(*, since: dt.datetime, before: dt.datetime) -> None:
    """Sum the closed days from ``since`` to the day before ``before`` that are not summed yet (one transaction each
    run of days): rows of that span are about to be deleted for good. Nothing without rollups."""
    if not rollups_enabled():
        return
    first, last = since.astimezone(dt.UTC).date(), before.astimezone(dt.UTC).date() - DAY
    if last < first:
        return
    days = _days(first, last)
    sealed = set(RollupDay.objects.filter(day__gte=first, day__lte=last, sealed=True).values_list("day", flat=True))
    _build_missing(days, sealed)


def window_open(start: dt.datetime, end: dt.datetime) -> Window:
    """The window ``[start, end)``, after summing its closed days that are not yet (one transaction each run
    of days, see :func:`rollup_build`) and the live day's closed hours that are not yet (one transaction, see
    :func:`rollup_hours_build`). Without rollups everything is read live."""
    if not rollups_enabled():
        return Window(start=start, end=end, sealed=(), live=((start, end),))
    days = whole_days(start, end)
    sealed: set[dt.date] = set()
    if days:
        sealed.update(
            RollupDay.objects.filter(day__gte=days[0], day__lte=days[-1], sealed=True).values_list("day", flat=True)
        )
        sealed.update(_build_missing(days, sealed))
    return Window.split(start, end, sealed, _sealed_hours(start, end))


def _sealed_hours(start: dt.datetime, end: dt.datetime) -> set[tuple[str, dt.datetime]]:
    """The ``(fact name, hour)`` summed inside ``[start, end)``, after summing the live day's closed hours there that
    are not yet. One query when every one is summed already."""
    marks = RollupHour.objects.filter(hour__gte=start, hour__lt=end, sealed=True).values_list("fact", "hour")
    sealed = {(fact, hour.astimezone(dt.UTC)) for fact, hour in marks}
    wanted = rollup_live_hours(start, end)
    if any((fact.name, hour) not in sealed for hour in wanted for fact in FACTS):
        sealed.update(rollup_hours_build(wanted))
    return sealed
