"""What the daily totals hold, and reading a window from them and from the rows of days not summed.

Each :class:`Fact` names a source of rows (messages, latencies of answers, route decisions, tool calls, handoffs,
conversations, outcomes, ratings), the path from a row to its tenant and profile, the dimensions it is grouped by and
the measures summed. The same definition builds the daily table (:func:`fact_group` over closed days, and over the live
day's closed hours at hour grain, see :mod:`analytics.services`) and reads a window (:func:`fact_rows`): sealed days and
sealed hours from the daily table, every other part of the window from the source rows, grouped the same way and added
up, so a figure never depends on which days or hours happen to be summed. Python only adds up grouped rows, never source
rows.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F, FloatField, Func, IntegerField, Q, QuerySet, Sum, Value
from django.db.models.expressions import Combinable
from django.db.models.functions import Cast, ExtractHour, Floor, Greatest, Ln, TruncDate

from analytics.models import (
    DailyConversations,
    DailyHandoffs,
    DailyLatencies,
    DailyMessages,
    DailyOutcomes,
    DailyRatings,
    DailyRouteMethods,
    DailyToolCalls,
    DailyTotal,
)
from conversations.models import (
    Conversation,
    ConversationOutcome,
    FeedbackRating,
    Message,
    MessageFeedback,
    MessageRole,
    RouteDecisionRecord,
    ToolCall,
)
from handoffs.models import Handoff
from tenants.public import TenantScope, tenant_scope_where

DAY = dt.timedelta(days=1)
HOUR = dt.timedelta(hours=1)
# The ``version`` slice that reads rows served by no published version (a draft, or a profile never published):
# their routing_version is null.
DRAFT = "draft"
NO_COHORT = "none"  # the ``cohort`` slice of turns the multi_agent flag did not decide (a blank cohort)
# Answers' latencies are counted in buckets 5 % wide on a log scale: bucket b holds [R**b, R**(b+1)) ms, so a
# percentile read from the buckets is within 5 % of the exact one (:func:`histogram_percentile`).
LATENCY_BUCKET_RATIO = 1.05
LATENCY_FLOOR_MS = 0.001  # latencies at or under it (0 ms: a call that never left) share the lowest bucket


def _utc_day(field: str) -> Func:
    return TruncDate(field, tzinfo=dt.UTC)


def utc_hour(field: str) -> Func:
    """The SQL of a time's UTC hour of its day, 0-23 (the daily tables' ``hour``)."""
    return ExtractHour(field, tzinfo=dt.UTC)


def latency_bucket(field: str = "latency_ms") -> Func:
    """The SQL of a latency's bucket: ``floor(ln(max(ms, floor)) / ln(ratio))`` as an integer."""
    log_ms = Ln(Greatest(Cast(field, FloatField()), Value(LATENCY_FLOOR_MS)))
    return Cast(Floor(log_ms / Value(math.log(LATENCY_BUCKET_RATIO))), IntegerField())


@dataclass(frozen=True)
class Fact:
    """A kind of source row and its daily table.

    ``dimensions`` map a daily table column to the source expression grouped by (``None``: the source field of
    the same name); ``measures`` a daily column to the aggregate over source rows (read back with ``Sum``).
    """

    name: str
    rollup: type[DailyTotal]
    source: Callable[[], QuerySet]
    tenant: str
    profile: str
    dimensions: Mapping[str, Any]
    measures: Mapping[str, Any]
    time: str = "created_at"

    def rows(self, needed: Iterable[str] | None = None) -> QuerySet:
        """Source rows with ``day`` and the computed dimensions annotated (only those ``needed``, when given: an
        annotation's join stays in the query even when it is not selected); no ordering."""
        rows = self.source().order_by()
        computed: dict[str, Combinable] = {"day": _utc_day(self.time)}
        computed.update(
            {
                name: expr
                for name, expr in self.dimensions.items()
                if expr is not None and (needed is None or name in needed)
            }
        )
        # A fact whose rows do not repeat the tenant would join it (a build groups by it; a read filters by the path
        # itself, see _scoped).
        scope = (("tenant_id", self.tenant), ("profile_id", self.profile))
        computed.update({name: F(path) for name, path in scope if path != name and (needed is None or name in needed)})
        return rows.annotate(**computed)


# Messages, route decisions and tool calls repeat their turn's tenant (conversations migration 0030), and messages and
# route decisions the language their turn was read in, which they are counted under: a live day's read joins no
# conversation. A conversation is counted under its language as it is now, and under the routing version that served
# its first user message, stored on it with that message (conversations migration 0031; None: a draft, no published
# version, or no message yet).

MESSAGES = Fact(
    name="messages",
    rollup=DailyMessages,
    source=Message.objects.all,
    tenant="tenant_id",
    profile="profile_id",  # repeated on the message (conversations migration 0007)
    dimensions={"cohort": None, "routing_version": None, "role": None, "agent": None, "language": None},
    measures={
        "n": Count("*"),
        "latency_sum": Sum("latency_ms", default=0.0),
        "latency_n": Count("latency_ms"),
        "judge_sum": Sum("judge_score", default=0.0),
        "judge_n": Count("judge_score"),
    },
)
LATENCIES = Fact(
    name="latencies",
    rollup=DailyLatencies,
    source=lambda: Message.objects.filter(role=MessageRole.ASSISTANT, latency_ms__isnull=False),
    tenant="tenant_id",
    profile="profile_id",
    dimensions={"cohort": None, "routing_version": None, "bucket": latency_bucket()},
    measures={"n": Count("*")},
)
ROUTE_METHODS = Fact(
    name="route_methods",
    rollup=DailyRouteMethods,
    source=RouteDecisionRecord.objects.all,
    tenant="tenant_id",
    # Route decisions and tool calls carry their turn's profile, cohort and routing version (conversations 0008).
    profile="profile_id",
    dimensions={"method": None, "cohort": None, "routing_version": None, "language": None},
    measures={"n": Count("*")},
)
TOOL_CALLS = Fact(
    name="tool_calls",
    rollup=DailyToolCalls,
    source=ToolCall.objects.all,
    tenant="tenant_id",
    profile="profile_id",
    dimensions={"tool": None, "server": None, "status": None, "cohort": None, "routing_version": None},
    measures={"n": Count("*"), "latency_sum": Sum("latency_ms", default=0.0)},
)
HANDOFFS = Fact(
    name="handoffs",
    rollup=DailyHandoffs,
    source=Handoff.objects.all,
    tenant="tenant_id",
    profile="profile_id",
    dimensions={
        "cohort": None,
        "routing_version": None,
        "from_agent": None,
        "to_agent": None,
        "kind": None,
        "status": None,
        "outcome": None,
    },
    measures={"n": Count("*")},
)
CONVERSATIONS = Fact(
    name="conversations",
    rollup=DailyConversations,
    source=Conversation.objects.all,
    tenant="tenant_id",
    profile="profile_id",
    dimensions={"cohort": None, "routing_version": None, "handoff_kinds": None, "language": None},
    measures={"n": Count("*")},
)
# Outcomes by the day they were decided. A row of a closed day changes when its conversation is rated again or
# reopened, or its outcome is replaced: the conversation store says so (conversations.signals.outcomes_changed).
DECIDED = Fact(
    name="outcomes",
    rollup=DailyOutcomes,
    source=ConversationOutcome.objects.all,
    tenant="tenant_id",
    profile="profile_id",
    dimensions={"cohort": None, "routing_version": None, "outcome": None, "intent": None, "goal": None, "agent": None},
    measures={"n": Count("*"), "rated_up": Sum("rated_up", default=0), "rated_down": Sum("rated_down", default=0)},
    time="decided_at",
)
# Ratings by when the rated answer was given (``answered_at``), as every reader of ratings counts them: a rating given
# later lands in that answer's day or hour, whose totals the feedback service unseals (conversations.signals
# .ratings_changed); a rating's counted columns never change but its ``rating``.
RATINGS = Fact(
    name="ratings",
    rollup=DailyRatings,
    source=MessageFeedback.objects.all,
    tenant="tenant_id",
    profile="profile_id",
    dimensions={"cohort": None, "routing_version": None, "agent": None, "route_agent": None},
    measures={
        "n": Count("*"),
        "up": Count("pk", filter=Q(rating=FeedbackRating.UP)),
        "down": Count("pk", filter=Q(rating=FeedbackRating.DOWN)),
    },
    time="answered_at",
)
FACTS: tuple[Fact, ...] = (MESSAGES, LATENCIES, ROUTE_METHODS, TOOL_CALLS, HANDOFFS, CONVERSATIONS, DECIDED, RATINGS)


# -- the window -----------------------------------------------------------------------------------------------


def day_ranges(days: Iterable[dt.date]) -> list[tuple[dt.date, dt.date]]:
    """Sorted days folded into ``(first, last)`` runs of consecutive days."""
    runs: list[tuple[dt.date, dt.date]] = []
    for day in sorted(days):
        if runs and runs[-1][1] + DAY == day:
            runs[-1] = (runs[-1][0], day)
        else:
            runs.append((day, day))
    return runs


def rollups_enabled() -> bool:
    return bool(settings.ANALYTICS_ROLLUPS)


def day_start(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)


def whole_days(start: dt.datetime, end: dt.datetime) -> list[dt.date]:
    """The UTC days lying wholly inside ``[start, end)``."""
    first = start.astimezone(dt.UTC).date()
    if day_start(first) < start:
        first += DAY
    days = []
    while day_start(first + DAY) <= end:
        days.append(first)
        first += DAY
    return days


@dataclass(frozen=True)
class Window:
    """``[start, end)`` split into sealed days (read from the daily tables) and datetime ranges read live, within
    which ``hours`` names the hours a daily table holds summed (``(fact name, hour start)``, see :meth:`of`)."""

    start: dt.datetime
    end: dt.datetime
    sealed: tuple[tuple[dt.date, dt.date], ...]
    live: tuple[tuple[dt.datetime, dt.datetime], ...]
    hours: tuple[tuple[str, dt.datetime], ...] = ()

    @classmethod
    def split(
        cls,
        start: dt.datetime,
        end: dt.datetime,
        sealed_days: Iterable[dt.date],
        sealed_hours: Iterable[tuple[str, dt.datetime]] = (),
    ) -> Window:
        sealed = day_ranges(day for day in sealed_days if start <= day_start(day) and day_start(day) + DAY <= end)
        live: list[tuple[dt.datetime, dt.datetime]] = []
        cursor = start
        for first, last in sealed:
            if cursor < day_start(first):
                live.append((cursor, day_start(first)))
            cursor = day_start(last) + DAY
        if cursor < end:
            live.append((cursor, end))
        hours = sorted(
            (name, hour) for name, hour in sealed_hours if any(lo <= hour and hour + HOUR <= hi for lo, hi in live)
        )
        return cls(start=start, end=end, sealed=tuple(sealed), live=tuple(live), hours=tuple(hours))

    def of(self, fact: str) -> tuple[list[tuple[dt.date, int, int]], list[tuple[dt.datetime, dt.datetime]]]:
        """For one daily table: its sealed hours of the live ranges as ``(day, first hour, last hour)`` runs, and
        what is left of the live ranges without them (read from the rows)."""
        runs: list[tuple[dt.date, int, int]] = []
        spans: list[tuple[dt.datetime, dt.datetime]] = []
        for name, hour in self.hours:
            if name != fact:
                continue
            if spans and spans[-1][1] == hour and runs[-1][0] == hour.date():
                spans[-1] = (spans[-1][0], hour + HOUR)
                runs[-1] = (runs[-1][0], runs[-1][1], hour.hour)
            else:
                spans.append((hour, hour + HOUR))
                runs.append((hour.date(), hour.hour, hour.hour))
        live: list[tuple[dt.datetime, dt.datetime]] = []
        for lo, hi in self.live:
            cursor = lo
            for first, last in spans:
                if lo <= first and last <= hi:
                    if cursor < first:
                        live.append((cursor, first))
                    cursor = last
            if cursor < hi:
                live.append((cursor, hi))
        return runs, live


# -- reading --------------------------------------------------------------------------------------------------


def _scoped(rows: QuerySet, fact: Fact | None, *, tenant_id: TenantScope, profile_id: int | None) -> QuerySet:
    tenant, profile = ("tenant_id", "profile_id") if fact is None else (fact.tenant, fact.profile)
    rows = rows.filter(**tenant_scope_where(tenant, tenant_id))
    if profile_id is not None:
        rows = rows.filter(**{profile: profile_id})
    return rows


def _any(conditions: Iterable[Q]) -> Q | None:
    combined = None
    for condition in conditions:
        combined = condition if combined is None else combined | condition
    return combined


def slice_where(*, cohort: str | None, version: int | str | None) -> dict[str, Any]:
    """Lookups on the daily columns ``cohort`` and ``routing_version`` for a slice: ``cohort`` multi_agent,
    single_agent or :data:`NO_COHORT` (blank), ``version`` a published version number or :data:`DRAFT` (null);
    ``None``: every one."""
    where: dict[str, Any] = {}
    if cohort is not None:
        where["cohort"] = "" if cohort == NO_COHORT else cohort
    if version is not None:
        if version == DRAFT:
            where["routing_version__isnull"] = True
        else:
            where["routing_version"] = int(version)
    return where


def fact_group(fact: Fact, rows: QuerySet, by: Sequence[str]) -> QuerySet:
    """Source ``rows`` of ``fact`` grouped by ``by`` (daily columns) with the fact's measures."""
    return rows.values(*by).annotate(**fact.measures).order_by()


def fact_rows(
    fact: Fact,
    window: Window,
    *,
    by: Sequence[str],
    tenant_id: TenantScope,
    profile_id: int | None,
    where: Mapping[str, Any] | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> list[dict[str, Any]]:
    """The fact's measures over ``window`` grouped by ``by`` (daily column names, ``day`` included), filtered by
    ``where`` (lookups on daily column names): sealed days and the fact's sealed hours from the daily table, the rest
    from source rows, added up per group. Two queries at most; rows in no particular order.

    ``cohort`` and ``version`` slice the rows by the turn that wrote them (:func:`slice_where`).
    """
    where = {**(where or {}), **slice_where(cohort=cohort, version=version)}
    totals: dict[tuple, dict[str, Any]] = {}

    def add(grouped: Iterable[dict[str, Any]]) -> None:
        for row in grouped:
            key = tuple(row[name] for name in by)
            total = totals.get(key)
            if total is None:
                totals[key] = {name: row[name] for name in by} | {m: row[m] or 0 for m in fact.measures}
            else:
                for measure in fact.measures:
                    total[measure] += row[measure] or 0

    hours, live_ranges = window.of(fact.name)
    sealed = _any(
        [
            *(Q(day__gte=first, day__lte=last, hour__isnull=True) for first, last in window.sealed),
            *(Q(day=day, hour__gte=first, hour__lte=last) for day, first, last in hours),
        ]
    )
    if sealed is not None:
        rows = _scoped(fact.rollup.objects.filter(sealed, **where), None, tenant_id=tenant_id, profile_id=profile_id)
        add(rows.values(*by).annotate(**{m: Sum(m) for m in fact.measures}).order_by())
    live = _any(Q(**{f"{fact.time}__gte": lo, f"{fact.time}__lt": hi}) for lo, hi in live_ranges)
    if live is not None:
        needed = {*by, *(lookup.split("__")[0] for lookup in where)}
        rows = _scoped(fact.rows(needed).filter(live, **where), fact, tenant_id=tenant_id, profile_id=profile_id)
        with without_jit():
            add(fact_group(fact, rows, by))
    return list(totals.values())


@contextlib.contextmanager
def without_jit() -> Iterator[None]:
    """Queries run inside without PostgreSQL's JIT compilation (``SET LOCAL jit = off``, in a transaction; nothing
    on other databases).

    The planner compiles a query whose estimated cost passes ``jit_above_cost``; a live day's read at ten million
    handoffs' daily density is estimated past it and runs in 100–300 ms, of which compiling took 45–80 ms (and up
    to 156 ms) in ``EXPLAIN (ANALYZE)``. Such a read gains nothing from compiled expressions: a few columns summed
    over tens of thousands of index entries.
    """
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")
        yield


# -- latency percentiles --------------------------------------------------------------------------------------


def histogram_percentile(counts: Mapping[int, int], fraction: float) -> float | None:
    """The ``fraction`` percentile of the latencies counted in ``counts`` (bucket → answers), ranked as
    PostgreSQL's ``percentile_cont`` ranks (position ``fraction × (n − 1)``, interpolated between the two
    answers around it); ``None`` without answers.

    The j-th of a bucket's n answers is taken to lie at ``R ** (bucket + (j + 0.5) / n)``, spread evenly over
    the bucket on the log scale, so every answer is placed within its bucket's width (5 %) of its latency and
    the percentile too.
    """
    total = sum(counts.values())
    if not total:
        return None
    position = fraction * (total - 1)
    low = math.floor(position)
    wanted = {low, min(low + 1, total - 1)}
    placed: dict[int, float] = {}
    seen = 0
    for bucket in sorted(counts):
        n = counts[bucket]
        for rank in wanted:
            if seen <= rank < seen + n:
                placed[rank] = LATENCY_BUCKET_RATIO ** (bucket + (rank - seen + 0.5) / n)
        seen += n
    below, above = placed[low], placed[min(low + 1, total - 1)]
    return below + (position - low) * (above - below)
