"""Customers' ratings of answers, for the analytics API and the dashboard's ratings panel.

``GET /api/analytics/feedback``: ratings per cohort and per routing version, counted by
:func:`conversations.feedback.feedback_rates`. ``GET /api/analytics/feedback/timeline``: ratings up and down per UTC
day or hour. ``GET /api/analytics/feedback/breakdown``: the share rated down per profile, per intent (the route
decision of the rated answer's turn) and per agent (who wrote the answer). ``GET /api/analytics/feedback/recent``:
the latest answers rated down, with the comment, the customer's message, the answer and how it was routed.

Ratings count by when their answer was given (``answered_at``), as everywhere else; the timeline, breakdown and
recent rows take every filter of the analytics (tenant, profile, cohort, version) from the rows' own columns.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import Trunc
from django.template.defaultfilters import truncatechars
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from agents.models import AgentProfile
from analytics.apis import ERRORS, FILTER_PARAMETERS, AnalyticsApi
from analytics.filters import BUCKETS, DEFAULT_RECENT_LIMIT, MAX_RECENT_LIMIT, bucket_parse, limit_parse
from analytics.selectors import timeline_periods, window_rows
from conversations.models import FeedbackRating, MessageFeedback
from conversations.public import FeedbackRate, feedback_rates, feedback_with_turn
from knowledge.models import KnowledgeDocument
from tenants.public import TenantScope

EXCERPT = 300  # characters of the customer's message and of the answer in a recent row
UP, DOWN = Q(rating=FeedbackRating.UP), Q(rating=FeedbackRating.DOWN)


def _order(group: Any) -> tuple[bool, Any]:
    """Cohorts by name, versions by number, ``None`` (a draft's version) last."""
    return (group is None, group or (0 if isinstance(group, int) else ""))


def feedback_summary(rates: Iterable[FeedbackRate]) -> dict[str, Any]:
    """The window's figures per (cohort, version) pair, merged per cohort, per version and in total."""
    pairs = list(rates)

    def merged(key: str | None) -> list[dict[str, Any]]:
        groups: dict[Any, list[int]] = {}
        for rate in pairs:
            group = getattr(rate, key) if key else None
            figures = groups.setdefault(group, [0, 0, 0])
            figures[0] += rate.answers
            figures[1] += rate.up
            figures[2] += rate.down
        return [
            FeedbackRate(answers=answers, up=up, down=down, **({key: group} if key else {})).as_dict()
            for group, (answers, up, down) in sorted(groups.items(), key=lambda item: _order(item[0]))
        ]

    total = merged(None) or [FeedbackRate(answers=0, up=0, down=0).as_dict()]
    return {
        "total": total[0],
        "cohorts": merged("cohort"),
        "versions": merged("routing_version"),
        "pairs": [rate.as_dict() for rate in pairs],
    }


def _rate(name: str) -> serializers.Serializer:
    return inline_serializer(
        name,
        {
            "cohort": serializers.CharField(allow_null=True, allow_blank=True),
            "routing_version": serializers.IntegerField(allow_null=True),
            "answers": serializers.IntegerField(),
            "rated": serializers.IntegerField(),
            "up": serializers.IntegerField(),
            "down": serializers.IntegerField(),
            "negative_rate_percentage": serializers.FloatField(allow_null=True),
        },
        many=name != "FeedbackTotal",
    )


FEEDBACK_RESPONSE = inline_serializer(
    "FeedbackAnalytics",
    {
        "total": _rate("FeedbackTotal"),
        "cohorts": _rate("FeedbackByCohort"),
        "versions": _rate("FeedbackByVersion"),
        "pairs": _rate("FeedbackByCohortAndVersion"),
    },
)


class FeedbackApi(AnalyticsApi):
    @extend_schema(
        summary="Users' feedback on answers per cohort and per routing version: answers, up, down, negative rate",
        description=(
            "Answers given in the window (assistant messages) and the ratings they got (POST "
            "/api/sessions/{conversation_key}/feedback), counted by when the answer was given. `rated` = up + down; "
            "`negative_rate_percentage` = 100 × down / rated, 2 decimals (null when nothing was rated). `cohorts`: "
            "per side of the multi_agent flag (multi_agent, single_agent, blank: not decided); `versions`: per "
            "published routing version (null: a draft, or a profile never published); `pairs`: per cohort and "
            "version; `total`: everything. In `cohorts` the version is null, in `versions` the cohort is."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: FEEDBACK_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        rates = feedback_rates(
            start=filters.start, end=filters.end, tenant_id=filters.tenant_id, profile_id=filters.profile_id
        )
        return Response(feedback_summary(rates))


# -- over time, per profile / intent / agent, the latest rated down ----------------------------------------------


def _rated(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> QuerySet[MessageFeedback]:
    return window_rows(
        MessageFeedback.objects.all(),
        time_field="answered_at",
        start=start,
        end=end,
        tenant_id=tenant_id,
        profile_id=profile_id,
        cohort=cohort,
        version=version,
    )


def _figures(up: int, down: int) -> dict[str, Any]:
    rated = up + down
    return {
        "rated": rated,
        "up": up,
        "down": down,
        "negative_rate_percentage": round(100 * down / rated, 2) if rated else None,
    }


def feedback_timeline(
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
    """Ratings per UTC day or hour of the answers' time, oldest first, every period up to ``now`` listed (empty
    ones with zeros): ``[{period, rated, up, down, negative_rate_percentage}]``. One query."""
    if bucket not in BUCKETS:
        raise ValueError(f"bucket must be 'day' or 'hour', not {bucket!r}")
    rows = _rated(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id, cohort=cohort, version=version)
    grouped = (
        rows.annotate(period=Trunc("answered_at", bucket, tzinfo=dt.UTC))
        .values("period")
        .annotate(up=Count("pk", filter=UP), down=Count("pk", filter=DOWN))
    )
    found = {row["period"].astimezone(dt.UTC): (row["up"], row["down"]) for row in grouped}
    until = min(end, now or timezone.now())
    return [
        {"period": period.isoformat(), **_figures(*found.get(period, (0, 0)))}
        for period in timeline_periods(start, until, bucket)
    ]


def _ranked(rows: Iterable[Mapping[str, Any]], names: dict[int, str], key: str = "", field: str = "") -> list[dict]:
    """Ratings grouped by profile (and by ``field``, shown as ``key``) as ``[{profile, [key,] rated, up, down,
    negative_rate_percentage}]``: most rated down first, then the highest share, then by name."""
    merged: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        figures = merged.setdefault((names.get(row["profile_id"], ""), (row[field] or "") if key else ""), [0, 0])
        figures[0] += row["up"]
        figures[1] += row["down"]
    ranked = sorted(merged.items(), key=lambda item: (-item[1][1], -item[1][1] / sum(item[1]), *item[0]))
    return [
        {"profile": profile, **({key: name} if key else {}), **_figures(up, down)}
        for (profile, name), (up, down) in ranked
    ]


def feedback_breakdown(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The share rated down per profile, per intent, per agent and per document cited, each named within its
    profile: ``{profiles: [{profile, ...}], intents: [{profile, intent, ...}], agents: [{profile, agent, ...}],
    documents: [{profile, document, title, ...}]}``, each row with ``rated``, ``up``, ``down``,
    ``negative_rate_percentage``; most rated down first. The intent is the route decision's of the rated answer's turn
    ("" when the turn stored none); the agent is the one that wrote the answer; the documents those its citations name
    (:func:`_per_document`). Six queries."""
    rows = _rated(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id, cohort=cohort, version=version)
    counts = {"up": Count("pk", filter=UP), "down": Count("pk", filter=DOWN)}
    per_profile = list(rows.values("profile_id").annotate(**counts))
    # Each rating repeats its answer's agent and its turn's intent (conversations.feedback.feedback_give).
    per_intent = list(rows.values("profile_id", "route_intent").annotate(**counts))
    per_agent = list(rows.values("profile_id", "agent").annotate(**counts))
    ids = {row["profile_id"] for row in per_profile}
    names = dict(AgentProfile.objects.filter(pk__in=ids).values_list("pk", "agent_id")) if ids else {}
    return {
        "profiles": _ranked(per_profile, names),
        "intents": _ranked(per_intent, names, "intent", "route_intent"),
        "agents": _ranked(per_agent, names, "agent", "agent"),
        "documents": _per_document(rows, names),
    }


def _per_document(rows: QuerySet[MessageFeedback], names: dict[int, str]) -> list[dict[str, Any]]:
    """Ratings of the answers that cite the profile's documents (``metadata.knowledge.citations``), per document
    cited, each answer counted once per document: ``[{profile, document, title, ...}]``, most rated down first. Reads
    the citations of the rated answers given from knowledge only; a document deleted since keeps its id, titled
    "(deleted)"."""
    cited = rows.filter(message__metadata__knowledge__answered_from_knowledge=True).values_list(
        "profile_id", "rating", "message__metadata__knowledge__citations"
    )
    merged: dict[tuple[int, int], list[int]] = {}
    for profile_id, rating, citations in cited:
        documents = {
            c["document"] for c in citations or () if isinstance(c, dict) and isinstance(c.get("document"), int)
        }
        for document in documents:
            figures = merged.setdefault((profile_id, document), [0, 0])
            figures[rating == FeedbackRating.DOWN] += 1
    titles = dict(KnowledgeDocument.objects.filter(pk__in={key[1] for key in merged}).values_list("pk", "title"))
    ranked = sorted(merged.items(), key=lambda item: (-item[1][1], -item[1][1] / sum(item[1]), item[0][1]))
    return [
        {
            "profile": names.get(profile_id, ""),
            "document": document,
            "title": titles.get(document, "(deleted)"),
            **_figures(up, down),
        }
        for (profile_id, document), (up, down) in ranked
    ]


def feedback_list_recent(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
    limit: int = DEFAULT_RECENT_LIMIT,
) -> list[dict[str, Any]]:
    """The latest ``limit`` answers rated down in the window, newest answer first, each with its comment, the
    customer's message and the answer (the first :data:`EXCERPT` characters), who served it and how the message was
    routed. One query."""
    rows = _rated(start=start, end=end, tenant_id=tenant_id, profile_id=profile_id, cohort=cohort, version=version)
    latest = (
        feedback_with_turn(rows.filter(DOWN))
        .select_related("message", "conversation", "tenant", "profile")
        .order_by("-answered_at", "-id")[:limit]
    )
    return [
        {
            "id": rating.pk,
            "conversation_id": rating.conversation_id,
            "conversation_key": rating.conversation.conversation_key,
            "message_id": rating.message_id,
            "tenant": rating.tenant.slug,
            "profile": rating.profile.agent_id,
            "routing_version": rating.routing_version,
            "cohort": rating.cohort,
            "comment": rating.comment,
            "question": truncatechars(rating.question_text or "", EXCERPT),
            "answer": truncatechars(rating.message.content, EXCERPT),
            "agent": rating.message.agent,
            "intent": rating.decision_intent or "",
            "method": rating.decision_method or "",
            "answered_at": rating.answered_at.isoformat(),
            "rated_at": rating.updated_at.isoformat(),
        }
        for rating in latest
    ]


RATINGS_FIELDS: dict[str, serializers.Field] = {
    "rated": serializers.IntegerField(),
    "up": serializers.IntegerField(),
    "down": serializers.IntegerField(),
    "negative_rate_percentage": serializers.FloatField(allow_null=True),
}
TIMELINE_RESPONSE = inline_serializer(
    "FeedbackTimelinePeriod", {"period": serializers.DateTimeField(), **RATINGS_FIELDS}, many=True
)
BREAKDOWN_RESPONSE = inline_serializer(
    "FeedbackBreakdown",
    {
        "profiles": inline_serializer(
            "FeedbackByProfile", {"profile": serializers.CharField(), **RATINGS_FIELDS}, many=True
        ),
        "intents": inline_serializer(
            "FeedbackByIntent",
            {"profile": serializers.CharField(), "intent": serializers.CharField(allow_blank=True), **RATINGS_FIELDS},
            many=True,
        ),
        "agents": inline_serializer(
            "FeedbackByAgent",
            {"profile": serializers.CharField(), "agent": serializers.CharField(allow_blank=True), **RATINGS_FIELDS},
            many=True,
        ),
        "documents": inline_serializer(
            "FeedbackByDocument",
            {
                "profile": serializers.CharField(),
                "document": serializers.IntegerField(),
                "title": serializers.CharField(),
                **RATINGS_FIELDS,
            },
            many=True,
        ),
    },
)
RECENT_RESPONSE = inline_serializer(
    "FeedbackRatedDown",
    {
        "id": serializers.IntegerField(),
        "conversation_id": serializers.IntegerField(),
        "conversation_key": serializers.CharField(),
        "message_id": serializers.IntegerField(),
        "tenant": serializers.CharField(),
        "profile": serializers.CharField(),
        "routing_version": serializers.IntegerField(allow_null=True),
        "cohort": serializers.CharField(allow_blank=True),
        "comment": serializers.CharField(allow_blank=True),
        "question": serializers.CharField(allow_blank=True),
        "answer": serializers.CharField(allow_blank=True),
        "agent": serializers.CharField(allow_blank=True),
        "intent": serializers.CharField(allow_blank=True),
        "method": serializers.CharField(allow_blank=True),
        "answered_at": serializers.DateTimeField(),
        "rated_at": serializers.DateTimeField(),
    },
    many=True,
)


class FeedbackTimelineApi(AnalyticsApi):
    @extend_schema(
        summary="Ratings of answers per day or hour: rated, up, down, negative rate",
        description=(
            "Ratings of the answers given in each UTC period (by when the answer was given), oldest first; every "
            "period from the window's start up to now is listed, empty ones with zeros. `negative_rate_percentage` = "
            "100 × down / rated (null when nothing was rated)."
        ),
        parameters=[
            *FILTER_PARAMETERS,
            OpenApiParameter("bucket", OpenApiTypes.STR, description="day (default) or hour (at most 31 days)."),
        ],
        responses={200: TIMELINE_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        bucket = bucket_parse(params=request.query_params, filters=filters)
        return Response(feedback_timeline(**filters.selector_kwargs(), bucket=bucket))


class FeedbackBreakdownApi(AnalyticsApi):
    @extend_schema(
        summary="The share of rated answers rated down, per profile, intent, agent and document cited",
        description=(
            "`intents`: by the route decision of the rated answer's turn (blank: the turn stored none); `agents`: "
            "by the specialist that wrote the answer; `documents`: by the knowledge documents the answer cites (an "
            'answer citing two counts for each; `title` is "(deleted)" for a document deleted since). Intents, '
            "agents and documents are named within their `profile`. Most rated down first."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: BREAKDOWN_RESPONSE, **ERRORS},
    )
    def get(self, request):
        return Response(feedback_breakdown(**self.filters(request).selector_kwargs()))


class FeedbackRecentApi(AnalyticsApi):
    @extend_schema(
        summary="The latest answers rated down, with the comment, the customer's message and how it was routed",
        description=(
            f"Newest answer first. `question` and `answer` are the first {EXCERPT} characters of the customer's "
            "message and of the answer; `intent` and `method` are the turn's route decision's (blank: none stored), "
            "`agent` wrote the answer. `conversation_id` and `message_id` open "
            "/admin/conversations/conversation/<conversation_id>/change/#answer-<message_id> for staff who may read "
            "the conversation."
        ),
        parameters=[
            *FILTER_PARAMETERS,
            OpenApiParameter(
                "limit",
                OpenApiTypes.INT,
                description=f"How many rows (1–{MAX_RECENT_LIMIT}, default {DEFAULT_RECENT_LIMIT}).",
            ),
        ],
        responses={200: RECENT_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        limit = limit_parse(params=request.query_params)
        return Response(feedback_list_recent(**filters.selector_kwargs(), limit=limit))
