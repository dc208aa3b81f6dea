"""Writing the daily totals (:mod:`analytics.rollups`): building closed days and unsealing days whose rows changed.

A day is *closed* once it ended ``ANALYTICS_ROLLUP_GRACE_SECONDS`` ago: no turn still running can write a row
dated that day any more. :func:`rollup_build` sums closed days into the daily tables and seals them; the
selectors call it for the closed days of the window they read (the first read after midnight sums yesterday),
and ``manage.py rollup_analytics`` does it ahead of time. Rows are never dated back, but a closed day's
totals can still go stale: a cleared session deletes its messages, a conversation counted on the day it
was created may later change cohort or language or have its first move of a kind (its messages and route decisions
keep the language their turn was read in). Those writers send the conversation
store's signals (:mod:`conversations.signals`) in their own transaction, and :class:`analytics.apps.AnalyticsConfig`
connects them to :func:`conversation_counted_again` and :func:`rollup_days_unseal`: nobody imports the
analytics. The day is read from its rows until it is built again.

A tenant's retention purge deletes old rows for good: it says so first (``store_rows_retiring``), and the closed days
it reaches are summed before any row goes. From then on every day before the latest purge's cutoff is *final*: its
totals are never summed again from what rows are left, nor unsealed (:func:`rollup_final_before`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction
from django.db.models import DateField, Expression, F, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from analytics.models import RollupDay
from analytics.rollups import DAY, FACTS, Window, day_ranges, day_start, fact_group, rollups_enabled, whole_days
from tenants.models import RetentionPurge

BUILD_BATCH_SIZE = 5000


def rollup_closed_before(now: dt.datetime | None = None) -> dt.date:
    """The first day that is not closed yet: every earlier day may be summed."""
    now = (now or timezone.now()).astimezone(dt.UTC)
    return (now - dt.timedelta(seconds=float(settings.ANALYTICS_ROLLUP_GRACE_SECONDS))).date()


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


def rollup_days_unseal(days: Iterable[dt.date]) -> int:
    """Mark the days' totals stale (call in the transaction that changes their rows), but for final ones. Returns how
    many were unsealed."""
    days = sorted(set(days))
    if not days:
        return 0
    return _unsealable().filter(day__in=days).update(sealed=False)


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
    elif day < rollup_closed_before():
        rollup_days_unseal([day])


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
    of days, see :func:`rollup_build`). Without rollups everything is read live."""
    if not rollups_enabled():
        return Window(start=start, end=end, sealed=(), live=((start, end),))
    days = whole_days(start, end)
    if not days:
        return Window(start=start, end=end, sealed=(), live=((start, end),))
    sealed = set(
        RollupDay.objects.filter(day__gte=days[0], day__lte=days[-1], sealed=True).values_list("day", flat=True)
    )
    sealed.update(_build_missing(days, sealed))
    return Window.split(start, end, sealed)
