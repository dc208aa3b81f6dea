"""How conversations ended, and how well the routing and the agents do: the outcomes and quality analytics.

``GET /api/analytics/outcomes``: conversations decided in the window — resolved, escalated, abandoned, their share of
the decided ones, and the CSAT of their rated answers — in total and grouped ``by`` profile, intent (a goal-mode
conversation's goal), agent, cohort or routing version. ``GET /api/analytics/outcomes/timeline``: the same per UTC day
or hour. Both read :class:`~conversations.models.ConversationOutcome` by ``decided_at``: closed days from their daily
totals (:data:`analytics.rollups.DECIDED`), the rest from the rows (their covering indexes).

``GET /api/analytics/quality`` (docs/analytics.md): *routing accuracy (initial agent selection)* three ways — the
saved routing tests run against each profile's live version, the decisions editors turned into routing tests and
corrected, and the share of rated answers rated up by the agent the routing chose — and *response quality by agent*:
the rule-based judge's mean score, the share of rated answers rated up, and the conversations each agent handed to a
person.

The rules of an outcome are in :mod:`conversations.outcomes` (docs/analytics.md, "Outcomes").
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Trunc
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from agents.models import AgentProfile
from analytics.apis import ERRORS, FILTER_PARAMETERS, AnalyticsApi
from analytics.filters import BUCKETS, bucket_parse
from analytics.rollups import DECIDED, DRAFT, HANDOFFS, MESSAGES, NO_COHORT, RATINGS, day_start, fact_rows, slice_where
from analytics.selectors import timeline_periods, window_rows
from analytics.services import window_open
from common.errors import DomainError
from conversations.models import ConversationOutcome, Message, MessageRole, Outcome
from handoffs.models import PERSON, HandoffKind, HandoffStatus
from releases.models import RoutingTestCase
from releases.public import RoutingTestData, routing_tests_run
from routing.public import snapshot_current
from tenants.public import TenantScope, tenant_scope_where

GROUPINGS = ("profile", "intent", "agent", "cohort", "version")
DEFAULT_GROUPING = "profile"
ERROR_BY = f"by must be one of {', '.join(GROUPINGS)}."
OUTCOMES = (Outcome.RESOLVED, Outcome.ESCALATED, Outcome.ABANDONED)
TESTS_CACHE_SECONDS = 3600  # a run is kept while the profile's live version and its tests stay the same


def _percent(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def outcome_figures(resolved: int = 0, escalated: int = 0, abandoned: int = 0, up: int = 0, down: int = 0) -> dict:
    """Counts, their share of the decided conversations, and the CSAT (``100 × up / (up + down)`` over the rated
    answers of those conversations); shares and CSAT are ``None`` without a conversation or a rating."""
    decided = resolved + escalated + abandoned
    return {
        "decided": decided,
        "resolved": resolved,
        "escalated": escalated,
        "abandoned": abandoned,
        "resolved_percentage": _percent(resolved, decided),
        "escalated_percentage": _percent(escalated, decided),
        "abandoned_percentage": _percent(abandoned, decided),
        "rated": up + down,
        "up": up,
        "down": down,
        "csat_percentage": _percent(up, up + down),
    }


def _decided(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> QuerySet[ConversationOutcome]:
    return window_rows(
        ConversationOutcome.objects.all(),
        time_field="decided_at",
        start=start,
        end=end,
        tenant_id=tenant_id,
        profile_id=profile_id,
        cohort=cohort,
        version=version,
    )


# The counts of a group of outcome rows, in one aggregate (the outcome indexes cover every column read).
COUNTS: dict[str, Any] = {
    **{str(outcome): Count("outcome", filter=Q(outcome=outcome)) for outcome in OUTCOMES},
    "up": Sum("rated_up", default=0),
    "down": Sum("rated_down", default=0),
}


def _counted(row: Mapping[str, Any]) -> dict[str, Any]:
    return outcome_figures(
        resolved=row.get(Outcome.RESOLVED) or 0,
        escalated=row.get(Outcome.ESCALATED) or 0,
        abandoned=row.get(Outcome.ABANDONED) or 0,
        up=row.get("up") or 0,
        down=row.get("down") or 0,
    )


def _names(ids: Iterable[int]) -> dict[int, str]:
    """The agent_id of each profile (one query; none without ids)."""
    wanted = set(ids)
    return dict(AgentProfile.objects.filter(pk__in=wanted).values_list("pk", "agent_id")) if wanted else {}


def _group_value(by: str, value: Any) -> str:
    """A group's value as the matching filter takes it: a cohort ``none`` for the flag's undecided turns, a version
    ``draft`` for turns no published version served."""
    if by == "cohort":
        return value or NO_COHORT
    if by == "version":
        return DRAFT if value is None else str(value)
    return value or ""


# The daily columns each grouping reads, the last one its group's value (intent: a goal-mode conversation's goal,
# else its intent, from the two columns).
GROUP_COLUMNS: dict[str, tuple[str, ...]] = {
    "profile": ("profile_id",),
    "intent": ("profile_id", "intent", "goal"),
    "agent": ("profile_id", "agent"),
    "cohort": ("cohort",),
    "version": ("profile_id", "routing_version"),
}


def _tally(totals: dict[Any, dict[str, int]], key: Any, row: Mapping[str, Any]) -> None:
    """Add a grouped row of :data:`~analytics.rollups.DECIDED` (``outcome``, ``n``, ``rated_up``, ``rated_down``)
    to ``key``'s counts, in the shape :func:`_counted` reads."""
    counts = totals.setdefault(key, {**{str(outcome): 0 for outcome in OUTCOMES}, "up": 0, "down": 0})
    if row["outcome"] in counts:
        counts[row["outcome"]] += row["n"]
    counts["up"] += row["rated_up"]
    counts["down"] += row["rated_down"]


def outcome_summary(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
    by: str = DEFAULT_GROUPING,
) -> dict[str, Any]:
    """Conversations decided in ``[start, end)``: ``{total, by, groups}``, each figure as :func:`outcome_figures`.
    ``groups`` are per profile, per intent (a goal-mode conversation's goal), per agent (the assistant that
    answered last), per cohort, or per routing version of the last turn — ``[{profile, group, ...}]`` where intents,
    agents and versions are named within their ``profile`` (``None`` for cohorts); most decided first. Closed days
    from the daily totals, the rest from the outcome rows (:func:`analytics.rollups.fact_rows`): two queries at
    most, and the profile names."""
    if by not in GROUPINGS:
        raise ValueError(ERROR_BY)
    columns = GROUP_COLUMNS[by]
    grouped = fact_rows(
        DECIDED,
        window_open(start, end),
        by=("outcome", *columns),
        tenant_id=tenant_id,
        profile_id=profile_id,
        cohort=cohort,
        version=version,
    )
    totals: dict[Any, dict[str, int]] = {}
    per_group: dict[tuple, dict[str, int]] = {}
    for row in grouped:
        _tally(totals, None, row)
        value = (row["goal"] or row["intent"]) if by == "intent" else row[columns[-1]]
        _tally(per_group, (row.get("profile_id"), value), row)
    names = _names(profile for profile, _ in per_group if profile is not None)
    groups = []
    for (profile_pk, value), counts in per_group.items():
        profile = names.get(profile_pk, "") if "profile_id" in columns else None
        shown = profile if by == "profile" else _group_value(by, value)
        groups.append({"profile": profile, "group": shown, **_counted(counts)})
    groups.sort(key=lambda group: (-group["decided"], group["profile"] or "", group["group"]))
    return {"total": _counted(totals.get(None, {})), "by": by, "groups": groups}


def outcome_timeline(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
    bucket: str = "day",
    now: dt.datetime | None = None,
) -> list[dict[str, Any]]:
    """Conversations decided per UTC day or hour, oldest first, every period up to ``now`` listed (empty ones with
    zeros): ``[{period, ...outcome_figures}]``. Days as :func:`outcome_summary` reads them (two queries at most);
    hours from the outcome rows (one query: the daily totals have no hours, and hourly windows are short)."""
    if bucket not in BUCKETS:
        raise ValueError(f"bucket must be 'day' or 'hour', not {bucket!r}")
    found: dict[dt.datetime, dict[str, Any]] = {}
    if bucket == "day":
        per_day: dict[dt.date, dict[str, int]] = {}
        for row in fact_rows(
            DECIDED,
            window_open(start, end),
            by=("day", "outcome"),
            tenant_id=tenant_id,
            profile_id=profile_id,
            cohort=cohort,
            version=version,
        ):
            _tally(per_day, row["day"], row)
        found = {day_start(day): _counted(counts) for day, counts in per_day.items()}
    else:
        rows = _decided(
            start=start, end=end, tenant_id=tenant_id, profile_id=profile_id, cohort=cohort, version=version
        )
        grouped = rows.annotate(period=Trunc("decided_at", bucket, tzinfo=dt.UTC)).values("period").annotate(**COUNTS)
        found = {row["period"].astimezone(dt.UTC): _counted(row) for row in grouped}
    until = min(end, now or timezone.now())
    return [
        {"period": period.isoformat(), **found.get(period, outcome_figures())}
        for period in timeline_periods(start, until, bucket)
    ]


# -- routing accuracy and response quality ------------------------------------------------------------------------


def _tests_run(agent_id: str, spec: Any, cases: list[RoutingTestData], config: int) -> dict[str, int]:
    """``{total, passed}`` of ``cases`` against ``spec``, kept in the cache while the live version and the tests
    stay the same (a profile whose classifier calls a model is not asked again on every page load)."""
    fingerprint = repr((agent_id, spec.version, config, [(case.name, case.message, case.expect) for case in cases]))
    key = "analytics:routing-tests:" + hashlib.sha256(fingerprint.encode()).hexdigest()
    held = cache.get(key)
    if held is None:
        run = routing_tests_run(spec, cases)
        held = {"total": run.total, "passed": run.passed}
        cache.set(key, held, TESTS_CACHE_SECONDS)
    return held


def routing_tests_accuracy(*, profile_id: int | None = None) -> dict[str, Any]:
    """Every served profile's enabled saved routing tests (or ``profile_id``'s) run against its live version:
    ``{total, passed, failed, accuracy_percentage, profiles: [{profile, version, total, passed, failed,
    accuracy_percentage}]}``. Tests are configuration, shared by the tenants a profile serves; one query, then the
    runner (no query)."""
    # What a run reads of a test, and its profile's name alone (a profile's JSON settings are many, per row).
    tests = (
        RoutingTestCase.objects.filter(enabled=True)
        .select_related("profile")
        .only("name", "message", "expect", "state", "active_specialist", "turns", "profile__agent_id")
        .order_by("profile_id", "name")
    )
    if profile_id is not None:
        tests = tests.filter(profile_id=profile_id)
    cases: dict[str, list[RoutingTestData]] = {}
    for row in tests:
        cases.setdefault(row.profile.agent_id, []).append(RoutingTestData.of(row))
    snapshot = snapshot_current() if cases else None  # nothing to run: the compiled profiles are not needed
    served = snapshot.profiles if snapshot is not None else {}
    config = snapshot.version if snapshot is not None else 0
    profiles: list[dict[str, Any]] = []
    for agent_id in sorted(cases):
        spec = served.get(agent_id)
        if spec is None:  # not served (disabled): no live decision to test
            continue
        run = _tests_run(agent_id, spec, cases[agent_id], config)
        failed = run["total"] - run["passed"]
        profiles.append(
            {
                "profile": agent_id,
                "version": spec.version,
                "total": run["total"],
                "passed": run["passed"],
                "failed": failed,
                "accuracy_percentage": _percent(run["passed"], run["total"]),
            }
        )
    total, passed = sum(row["total"] for row in profiles), sum(row["passed"] for row in profiles)
    return {
        "total": total,
        "passed": passed,
        "failed": total - passed,
        "accuracy_percentage": _percent(passed, total),
        "profiles": profiles,
    }


def routing_corrections(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> dict[str, Any]:
    """The decisions editors reviewed — customers' messages of the window turned into routing tests ("Add as routing
    test case") — and how many they corrected (the test expects another intent or agent than was decided):
    ``{reviewed, corrected, accuracy_percentage}``, the share left as decided. The messages' tenant, time, cohort and
    version slice them. One query."""
    source = Message.objects.filter(
        pk=OuterRef("source_message_id"),
        created_at__gte=start,
        created_at__lt=end,
        **tenant_scope_where("conversation__tenant_id", tenant_id),
        **slice_where(cohort=cohort, version=version),
    )
    tests = RoutingTestCase.objects.filter(Exists(source), source_message_id__isnull=False).exclude(
        source_intent="", source_agent=""
    )
    if profile_id is not None:
        tests = tests.filter(profile_id=profile_id)
    tests = tests.annotate(expected_intent=KT("expect__intent"), expected_agent=KT("expect__agent"))
    corrected = Q(expected_intent__isnull=False) & ~Q(expected_intent=F("source_intent")) | (
        Q(expected_agent__isnull=False) & ~Q(expected_agent=F("source_agent"))
    )
    counts = tests.aggregate(reviewed=Count("pk"), corrected=Count("pk", filter=corrected))
    reviewed, wrong = counts["reviewed"], counts["corrected"]
    return {"reviewed": reviewed, "corrected": wrong, "accuracy_percentage": _percent(reviewed - wrong, reviewed)}


def _ratings(up: int, down: int) -> dict[str, Any]:
    return {"rated": up + down, "up": up, "down": down, "up_percentage": _percent(up, up + down)}


def routing_quality(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> dict[str, Any]:
    """Routing accuracy (initial agent selection) and response quality by agent over ``[start, end)``:

    ``routing_accuracy``: ``tests`` (:func:`routing_tests_accuracy`: the live versions against the saved tests, not
    windowed), ``corrections`` (:func:`routing_corrections`) and ``ratings`` — rated answers by the agent the routing
    chose for the turn (its route decision), ``{rated, up, down, accuracy_percentage, agents: [{profile, agent,
    rated, up, down, up_percentage}]}``.

    ``agents``: per profile and specialist, ``[{profile, agent, answers, judged, judge_mean, rated, up, down,
    up_percentage, escalations}]`` — answers written and the judge's mean score of them, the answers rated and the
    share rated up, and the conversations handed from it to a person; most answers first. Every figure is grouped in
    the database; the ratings, answers and escalations are read from the daily totals where their days and hours are
    summed (:func:`analytics.rollups.fact_rows`)."""
    slices: dict[str, Any] = {"tenant_id": tenant_id, "profile_id": profile_id, "cohort": cohort, "version": version}
    window = window_open(start, end)
    # Each rating repeats its answer's agent and its turn's route decision (conversations.feedback.feedback_give):
    # the window's ratings grouped by both (the daily totals', and the rows' where none are summed), read by the agent
    # chosen and by the one that wrote.
    grouped = fact_rows(RATINGS, window, by=("profile_id", "route_agent", "agent"), **slices)
    answers = fact_rows(
        MESSAGES,
        window,
        by=("profile_id", "agent"),
        where={"role": MessageRole.ASSISTANT},
        **slices,
    )
    escalated = fact_rows(
        HANDOFFS,
        window,
        by=("profile_id", "from_agent"),
        where={"kind": HandoffKind.HUMAN, "status": HandoffStatus.COMPLETED, "to_agent": PERSON},
        **slices,
    )
    names = _names(row["profile_id"] for rows in (grouped, answers, escalated) for row in rows)

    by_choice: dict[tuple[str, str], list[int]] = {}
    for row in grouped:
        if not row["route_agent"]:
            continue  # a rated answer whose turn stored no decision: routing chose nothing to judge
        key = (names.get(row["profile_id"], ""), row["route_agent"])
        pair = by_choice.setdefault(key, [0, 0])
        pair[0] += row["up"]
        pair[1] += row["down"]
    up, down = sum(item[0] for item in by_choice.values()), sum(item[1] for item in by_choice.values())
    ratings = {
        "rated": up + down,
        "up": up,
        "down": down,
        "accuracy_percentage": _percent(up, up + down),
        "agents": [
            {"profile": profile, "agent": chosen_agent, **_ratings(*pair)}
            for (profile, chosen_agent), pair in sorted(by_choice.items(), key=lambda item: (-sum(item[1]), *item[0]))
        ],
    }

    agents: dict[tuple[str, str], dict[str, Any]] = {}

    def agent(profile_pk: int, name: str) -> dict[str, Any]:
        key = (names.get(profile_pk, ""), name or "")
        return agents.setdefault(key, {"answers": 0, "judged": 0, "judge_sum": 0.0, "up": 0, "down": 0, "escalated": 0})

    for row in answers:
        figures = agent(row["profile_id"], row["agent"])
        figures["answers"] += row["n"]
        figures["judged"] += row["judge_n"]
        figures["judge_sum"] += row["judge_sum"]
    for row in grouped:
        figures = agent(row["profile_id"], row["agent"])
        figures["up"] += row["up"]
        figures["down"] += row["down"]
    for row in escalated:
        agent(row["profile_id"], row["from_agent"])["escalated"] += row["n"]
    quality = [
        {
            "profile": profile,
            "agent": name,
            "answers": figures["answers"],
            "judged": figures["judged"],
            "judge_mean": round(figures["judge_sum"] / figures["judged"], 3) if figures["judged"] else None,
            **_ratings(figures["up"], figures["down"]),
            "escalations": figures["escalated"],
        }
        for (profile, name), figures in agents.items()
    ]
    quality.sort(key=lambda row: (-row["answers"], -row["escalations"], row["profile"], row["agent"]))
    return {
        "routing_accuracy": {
            "tests": routing_tests_accuracy(profile_id=profile_id),
            "corrections": routing_corrections(start=start, end=end, **slices),
            "ratings": ratings,
        },
        "agents": quality,
    }


# -- the API --------------------------------------------------------------------------------------------------------


def by_parse(*, params: Mapping[str, Any]) -> str:
    """``by``: profile (default), intent, agent, cohort or version. Raises DomainError naming it."""
    raw = params.get("by")
    value = raw.strip() if isinstance(raw, str) else ""
    if not value:
        return DEFAULT_GROUPING
    if value not in GROUPINGS:
        raise DomainError(ERROR_BY, fields={"by": [ERROR_BY]})
    return value


OUTCOME_FIELDS: dict[str, serializers.Field] = {
    "decided": serializers.IntegerField(),
    "resolved": serializers.IntegerField(),
    "escalated": serializers.IntegerField(),
    "abandoned": serializers.IntegerField(),
    "resolved_percentage": serializers.FloatField(allow_null=True),
    "escalated_percentage": serializers.FloatField(allow_null=True),
    "abandoned_percentage": serializers.FloatField(allow_null=True),
    "rated": serializers.IntegerField(),
    "up": serializers.IntegerField(),
    "down": serializers.IntegerField(),
    "csat_percentage": serializers.FloatField(allow_null=True),
}
OUTCOMES_RESPONSE = inline_serializer(
    "OutcomeAnalytics",
    {
        "total": inline_serializer("OutcomeTotal", OUTCOME_FIELDS),
        "by": serializers.ChoiceField(choices=GROUPINGS),
        "groups": inline_serializer(
            "OutcomeGroup",
            {
                "profile": serializers.CharField(allow_null=True),
                "group": serializers.CharField(allow_blank=True),
                **OUTCOME_FIELDS,
            },
            many=True,
        ),
    },
)
OUTCOME_TIMELINE_RESPONSE = inline_serializer(
    "OutcomeTimelinePeriod", {"period": serializers.DateTimeField(), **OUTCOME_FIELDS}, many=True
)
RATINGS_FIELDS: dict[str, serializers.Field] = {
    "rated": serializers.IntegerField(),
    "up": serializers.IntegerField(),
    "down": serializers.IntegerField(),
    "up_percentage": serializers.FloatField(allow_null=True),
}
QUALITY_RESPONSE = inline_serializer(
    "QualityAnalytics",
    {
        "routing_accuracy": inline_serializer(
            "RoutingAccuracy",
            {
                "tests": inline_serializer(
                    "RoutingAccuracyTests",
                    {
                        "total": serializers.IntegerField(),
                        "passed": serializers.IntegerField(),
                        "failed": serializers.IntegerField(),
                        "accuracy_percentage": serializers.FloatField(allow_null=True),
                        "profiles": inline_serializer(
                            "RoutingAccuracyProfile",
                            {
                                "profile": serializers.CharField(),
                                "version": serializers.IntegerField(allow_null=True),
                                "total": serializers.IntegerField(),
                                "passed": serializers.IntegerField(),
                                "failed": serializers.IntegerField(),
                                "accuracy_percentage": serializers.FloatField(allow_null=True),
                            },
                            many=True,
                        ),
                    },
                ),
                "corrections": inline_serializer(
                    "RoutingAccuracyCorrections",
                    {
                        "reviewed": serializers.IntegerField(),
                        "corrected": serializers.IntegerField(),
                        "accuracy_percentage": serializers.FloatField(allow_null=True),
                    },
                ),
                "ratings": inline_serializer(
                    "RoutingAccuracyRatings",
                    {
                        "rated": serializers.IntegerField(),
                        "up": serializers.IntegerField(),
                        "down": serializers.IntegerField(),
                        "accuracy_percentage": serializers.FloatField(allow_null=True),
                        "agents": inline_serializer(
                            "RoutingAccuracyChosenAgent",
                            {"profile": serializers.CharField(), "agent": serializers.CharField(), **RATINGS_FIELDS},
                            many=True,
                        ),
                    },
                ),
            },
        ),
        "agents": inline_serializer(
            "AgentQuality",
            {
                "profile": serializers.CharField(),
                "agent": serializers.CharField(allow_blank=True),
                "answers": serializers.IntegerField(),
                "judged": serializers.IntegerField(),
                "judge_mean": serializers.FloatField(allow_null=True),
                **RATINGS_FIELDS,
                "escalations": serializers.IntegerField(),
            },
            many=True,
        ),
    },
)
BY_PARAMETER = OpenApiParameter(
    "by",
    # Empty is read as not given, as the analytics' other parameters are (a page's GET form sends it so).
    {"oneOf": [{"type": "string", "enum": list(GROUPINGS)}, {"type": "string", "maxLength": 0}]},
    description="How `groups` are made: profile (default), intent (a goal-mode conversation's goal), agent (the "
    "assistant that answered last), cohort, or version (the routing version of the last turn). Anything else is a "
    "400 naming `by`.",
)
OUTCOMES_DESCRIPTION = (
    "Conversations decided in the window (by when the outcome was decided): `resolved` (the customer's last message "
    "closed it — thanks, goodbye, the profile's closing words — or its latest rating was up), `escalated` (handed to "
    "a person: a `human` handoff; final), `abandoned` (no customer message for the profile's "
    "`abandon_after_minutes`, or its session ended unresolved). `*_percentage` = 100 × count / decided, 2 decimals "
    "(null when none was decided); `csat_percentage` = 100 × up / (up + down) over the rated answers of the decided "
    "conversations (null when none was rated). Open conversations, and those stored before outcomes were recorded, "
    "count nowhere. `cohort` and `version` slice by the conversation's cohort and the version of its last turn."
)


class OutcomesApi(AnalyticsApi):
    @extend_schema(
        summary="Outcomes: resolved, escalated and abandoned conversations and CSAT, by profile, intent, agent, cohort "
        "or version",
        description=(
            f"{OUTCOMES_DESCRIPTION} `groups`: one row per value of `by`, most decided first; `group` is the value "
            "as its filter takes it (a cohort `none`: the flag did not decide; a version `draft`: no published "
            "version; blank: no intent or agent), named within its `profile` (null when grouped by cohort)."
        ),
        parameters=[*FILTER_PARAMETERS, BY_PARAMETER],
        responses={200: OUTCOMES_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        by = by_parse(params=request.query_params)
        return Response(outcome_summary(**filters.selector_kwargs(), by=by))


class OutcomesTimelineApi(AnalyticsApi):
    @extend_schema(
        summary="Outcomes per day or hour: resolved, escalated, abandoned, CSAT",
        description=(
            f"{OUTCOMES_DESCRIPTION} Periods are UTC days or hours of the decision, oldest first, from the window's "
            "start up to now, empty ones with zeros."
        ),
        parameters=[
            *FILTER_PARAMETERS,
            OpenApiParameter("bucket", OpenApiTypes.STR, description="day (default) or hour (at most 31 days)."),
        ],
        responses={200: OUTCOME_TIMELINE_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        bucket = bucket_parse(params=request.query_params, filters=filters)
        return Response(outcome_timeline(**filters.selector_kwargs(), bucket=bucket))


class QualityApi(AnalyticsApi):
    @extend_schema(
        summary="Routing accuracy (initial agent selection) and response quality by agent",
        description=(
            "`routing_accuracy.tests`: each served profile's enabled saved routing tests run against its live "
            "version now (not windowed; `profile` narrows it; tests are the profile's configuration, the same for "
            "every tenant it serves). `routing_accuracy.corrections`: customers' messages of the window that editors "
            'turned into routing tests ("Add as routing test case"), and how many of those tests expect another '
            "intent or agent than was decided; `accuracy_percentage` is the share left as decided (of the decisions "
            "editors looked at, which lean to the doubtful ones). `routing_accuracy.ratings`: rated answers by the "
            "agent the turn's route decision chose; `accuracy_percentage` = 100 × up / rated. `agents`: per profile "
            "and specialist, the answers written in the window and the rule-based judge's mean score of them "
            "(`judged` of them scored), the answers rated and `up_percentage` = 100 × up / rated, and `escalations`: "
            "the conversations it handed to a person (completed `human` handoffs from it). Null percentages and means: "
            "nothing to count."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: QUALITY_RESPONSE, **ERRORS},
    )
    def get(self, request):
        return Response(routing_quality(**self.filters(request).selector_kwargs()))
