"""The analytics API: ``GET /api/analytics/...``, JSON, read-only.

Who reads what: an API key reads its own tenant (``tenant=`` naming another one is a 404, as for an unknown
slug); a logged-in user with ``analytics.view_analytics`` reads every tenant, or one with ``tenant=``; staff whose
tenant grants let them read some tenants' conversations read those tenants (all of them together, or one with
``tenant=``; another is a 404); other users get 403, anonymous requests 401. Views parse the filters
(:mod:`analytics.filters`) and call one selector.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from analytics import goals, selectors
from analytics.filters import (
    BUCKETS,
    COHORT_CHOICES,
    DEFAULT_DAYS,
    DEFAULT_RECENT_LIMIT,
    ERROR_ANALYTICS_FORBIDDEN,
    FIRST_DATE,
    KINDS,
    LAST_DATE,
    MAX_DAYS,
    MAX_HOUR_BUCKET_DAYS,
    MAX_RECENT_LIMIT,
    AnalyticsFilters,
    analytics_filters_parse,
    analytics_may_read,
    bucket_parse,
    limit_parse,
)
from common.errors import error_responses
from common.language import LANGUAGES
from conversations.public import USAGE_DESCRIPTION, USAGE_FIELDS, usage_report
from tenants.public import ApiClient


def _or_empty(schema: dict) -> dict:
    """A query parameter's schema that also takes the empty string: ``?start=`` is read as not given (as a page's
    GET form sends it), so the schema says so."""
    return {"oneOf": [schema, {"type": "string", "maxLength": 0}]}


class CanViewAnalytics(permissions.BasePermission):
    """An API key (its own tenant only), or a user who may read some tenant's analytics
    (:func:`analytics.filters.analytics_tenant_scope`)."""

    message = ERROR_ANALYTICS_FORBIDDEN

    def has_permission(self, request, view) -> bool:
        return isinstance(request.user, ApiClient) or analytics_may_read(request.user)


FILTER_PARAMETERS = [
    OpenApiParameter(
        "days",
        _or_empty({"type": "integer", "minimum": 1, "maximum": MAX_DAYS}),
        description=(
            f"The last N UTC days, today included (1–{MAX_DAYS}, default {DEFAULT_DAYS}). **Either `days` or "
            "`start`/`end`, not both**: a request with both is a 400 naming `days` (OpenAPI 3.0 cannot state "
            "that two parameters exclude each other, so this text is the contract)."
        ),
    ),
    OpenApiParameter(
        "start",
        _or_empty({"type": "string", "format": "date"}),
        description=(
            f"First day (YYYY-MM-DD, UTC, from {FIRST_DATE} to {LAST_DATE}). Without it: {DEFAULT_DAYS} days up to "
            f"end. Not with `days`; not after `end`; at most {MAX_DAYS} days before it (else a 400 naming `start`)."
        ),
    ),
    OpenApiParameter(
        "end",
        _or_empty({"type": "string", "format": "date"}),
        description=(
            f"Last day, included (default today; from {FIRST_DATE} to {LAST_DATE}, else a 400 naming `end`). At most "
            f"{MAX_DAYS} days from start."
        ),
    ),
    OpenApiParameter("profile", OpenApiTypes.STR, description="An agent profile's agent_id, e.g. telecom_contas."),
    OpenApiParameter(
        "cohort",
        _or_empty({"type": "string", "enum": list(COHORT_CHOICES)}),
        description=(
            "Only the turns of one side of the multi_agent rollout flag: multi_agent, single_agent, or none (turns "
            "the flag did not decide). Messages, handoffs, goal runs: their own turn's cohort; route decisions and "
            "tool calls: their message's; conversations: the conversation's. Anything else is a 400 naming cohort."
        ),
    ),
    OpenApiParameter(
        "version",
        _or_empty(
            {"oneOf": [{"type": "integer", "minimum": 1, "maximum": 2**31 - 1}, {"type": "string", "enum": ["draft"]}]}
        ),
        description=(
            "Only the turns served by one published routing version (its number; numbers are per profile, so "
            "give `profile` too to read one profile's), or `draft`: turns served by no published version (an "
            "editor's draft, a profile never published, and rows stored before versions were recorded). "
            "Conversations: by the version that served their first user message. "
            "Anything else is a 400 naming version."
        ),
    ),
    OpenApiParameter(
        "tenant",
        OpenApiTypes.STR,
        description=(
            "A tenant's slug. Users with analytics.view_analytics: that tenant only (default: every tenant). Staff "
            "granted the reading of some tenants' conversations: one of those (default: all of them together); "
            "another slug is a 404. API keys: their own tenant only; any other slug is a 404."
        ),
    ),
]
KIND_PARAMETER = OpenApiParameter(
    "kind",
    OpenApiTypes.STR,
    many=True,
    description=f"Handoff kinds, repeated or comma-separated: {', '.join(KINDS)}.",
)
ERRORS = error_responses(400, 401, 403, 404, 429, 503)


def _counts(name: str, key: str, **extra: serializers.Field):
    return inline_serializer(
        name, {key: serializers.CharField(), "count": serializers.IntegerField(), **extra}, many=True
    )


def _per_agent(name: str):
    return inline_serializer(
        name,
        {"profile": serializers.CharField(), "agent": serializers.CharField(), "count": serializers.IntegerField()},
        many=True,
    )


HANDOFFS_RESPONSE = inline_serializer(
    "HandoffAnalytics",
    {
        "total_handoffs": serializers.IntegerField(),
        "handoff_paths": inline_serializer(
            "HandoffPath",
            {
                "profile": serializers.CharField(),
                "from": serializers.CharField(),
                "to": serializers.CharField(),
                "count": serializers.IntegerField(),
            },
            many=True,
        ),
        "conversations_with_handoffs": serializers.IntegerField(),
        "total_conversations": serializers.IntegerField(),
        "handoff_rate_percentage": serializers.FloatField(),
    },
)
AGENTS_RESPONSE = inline_serializer(
    "AgentUtilisation",
    {
        "profile": serializers.CharField(),
        "agent": serializers.CharField(),
        "path": serializers.ChoiceField(choices=["routed", "single_agent"]),
        "turns": serializers.IntegerField(),
        "share_percentage": serializers.FloatField(),
    },
    many=True,
)
METHODS_RESPONSE = inline_serializer(
    "RoutingMethods",
    {
        "methods": _counts("RoutingMethodCount", "method", share_percentage=serializers.FloatField()),
        "fallback_rate_percentage": serializers.FloatField(),
        "total": serializers.IntegerField(),
    },
)
TIMELINE_RESPONSE = inline_serializer(
    "HandoffTimelinePeriod",
    {
        "period": serializers.DateTimeField(),
        "count": serializers.IntegerField(),
        "by_kind": serializers.DictField(child=serializers.IntegerField()),
    },
    many=True,
)
STOPS_RESPONSE = inline_serializer(
    "LoopStops",
    {
        "total_stopped": serializers.IntegerField(),
        "by_outcome": _counts("LoopStopOutcome", "outcome"),
        "by_agent": _per_agent("LoopStopAgent"),
        "by_pair": inline_serializer(
            "LoopStopPair",
            {
                "profile": serializers.CharField(),
                "from": serializers.CharField(),
                "to": serializers.CharField(allow_blank=True),
                "count": serializers.IntegerField(),
                "by_outcome": serializers.DictField(child=serializers.IntegerField()),
            },
            many=True,
        ),
        "total_refused": serializers.IntegerField(),
        "refused_by_agent": _per_agent("RefusalAgent"),
    },
)
DELEGATIONS_RESPONSE = inline_serializer(
    "DelegationOutcomes",
    {
        "total_delegations": serializers.IntegerField(),
        "total_returns": serializers.IntegerField(),
        "returns_by_outcome": _counts("ReturnOutcome", "outcome", share_percentage=serializers.FloatField()),
        "returns_by_specialist": _per_agent("ReturnSpecialist"),
    },
)
TOOLS_RESPONSE = inline_serializer(
    "ToolCallStats",
    {
        "tools": inline_serializer(
            "ToolStats",
            {
                "tool": serializers.CharField(),
                "server": serializers.CharField(),
                "calls": serializers.IntegerField(),
                "ok": serializers.IntegerField(),
                "permission_asks": serializers.IntegerField(),
                "errors": serializers.IntegerField(),
                "errors_by_status": serializers.DictField(child=serializers.IntegerField()),
                "error_rate_percentage": serializers.FloatField(),
                "avg_latency_ms": serializers.FloatField(allow_null=True),
            },
            many=True,
        ),
        "total_calls": serializers.IntegerField(),
        "total_permission_asks": serializers.IntegerField(),
        "total_errors": serializers.IntegerField(),
        "error_statuses": serializers.ListField(child=serializers.CharField()),
    },
)
COHORTS_RESPONSE = inline_serializer(
    "CohortComparison",
    {
        "cohorts": inline_serializer(
            "Cohort",
            {
                "cohort": serializers.CharField(),
                "messages": serializers.IntegerField(),
                "answers": serializers.IntegerField(),
                "conversations": serializers.IntegerField(),
                "handoffs": serializers.IntegerField(),
                "conversations_with_handoffs": serializers.IntegerField(),
                "handoff_rate_percentage": serializers.FloatField(),
                "avg_judge_score": serializers.FloatField(allow_null=True),
                "avg_latency_ms": serializers.FloatField(allow_null=True),
                "p50_latency_ms": serializers.FloatField(allow_null=True),
                "p95_latency_ms": serializers.FloatField(allow_null=True),
            },
            many=True,
        ),
        "percentiles": serializers.BooleanField(),
    },
)
LANGUAGES_RESPONSE = inline_serializer(
    "LanguageMix",
    {
        "languages": inline_serializer(
            "LanguageFigures",
            {
                "language": serializers.CharField(),
                "conversations": serializers.IntegerField(),
                "messages": serializers.IntegerField(),
                "answers": serializers.IntegerField(),
                "avg_judge_score": serializers.FloatField(allow_null=True),
                "routed": serializers.IntegerField(),
                "fallbacks": serializers.IntegerField(),
                "fallback_rate_percentage": serializers.FloatField(),
            },
            many=True,
        ),
    },
)
GOALS_RESPONSE = inline_serializer(
    "GoalAnalytics",
    {
        "summary": inline_serializer(
            "GoalSummary",
            {
                "runs": serializers.IntegerField(),
                "by_status": serializers.DictField(child=serializers.IntegerField()),
                "clarification_rate_percentage": serializers.FloatField(),
                "failure_rate_percentage": serializers.FloatField(),
                "clarification_reasons": _counts("ClarificationReason", "reason"),
                "steps": serializers.IntegerField(),
                "failed_steps": serializers.IntegerField(),
                "plans_run": serializers.IntegerField(),
                "p50_plan_latency_ms": serializers.FloatField(allow_null=True),
                "p95_plan_latency_ms": serializers.FloatField(allow_null=True),
            },
        ),
        "goals": inline_serializer(
            "GoalRuns",
            {
                "domain": serializers.CharField(),
                "goal": serializers.CharField(),
                "runs": serializers.IntegerField(),
                "success": serializers.IntegerField(),
                "failure": serializers.IntegerField(),
                "clarification": serializers.IntegerField(),
                "general": serializers.IntegerField(),
            },
            many=True,
        ),
        "capabilities": inline_serializer(
            "CapabilityStats",
            {
                "domain": serializers.CharField(),
                "capability": serializers.CharField(),
                "steps": serializers.IntegerField(),
                "success": serializers.IntegerField(),
                "failures": serializers.IntegerField(),
                "clarifications": serializers.IntegerField(),
                "skipped": serializers.IntegerField(),
                "failure_rate_percentage": serializers.FloatField(),
                "avg_latency_ms": serializers.FloatField(allow_null=True),
                "p95_latency_ms": serializers.FloatField(allow_null=True),
            },
            many=True,
        ),
    },
)
RECENT_RESPONSE = inline_serializer(
    "RecentHandoff",
    {
        "id": serializers.IntegerField(),
        "conversation_id": serializers.IntegerField(),
        "conversation_key": serializers.CharField(),
        "tenant": serializers.CharField(),
        "profile": serializers.CharField(),
        "from_agent": serializers.CharField(),
        "to_agent": serializers.CharField(),
        "kind": serializers.CharField(),
        "status": serializers.CharField(),
        "outcome": serializers.CharField(),
        "reason": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
    },
    many=True,
)

USAGE_RESPONSE = inline_serializer("UsageAnalytics", USAGE_FIELDS)

COUNTED = (
    "Counted handoffs: completed moves of kind handoff, routing_handoff, delegation or backend_handoff (or of the "
    "kinds given)."
)


class AnalyticsApi(APIView):
    permission_classes = [permissions.IsAuthenticated, CanViewAnalytics]
    kinds_allowed = False

    def filters(self, request) -> AnalyticsFilters:
        return analytics_filters_parse(params=request.query_params, user=request.user, kinds_allowed=self.kinds_allowed)


class HandoffsApi(AnalyticsApi):
    kinds_allowed = True

    @extend_schema(
        summary="Handoff analytics: totals, paths between agents, handoff rate",
        description=(
            f"{COUNTED} `total_conversations`: conversations created in the window; `conversations_with_handoffs`: "
            "distinct conversations with a counted handoff in the window; `handoff_rate_percentage` = 100 × with / "
            "total, 2 decimals (0 without conversations). Paths: most frequent first, then by from and to."
        ),
        parameters=[*FILTER_PARAMETERS, KIND_PARAMETER],
        responses={200: HANDOFFS_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        return Response(selectors.handoff_summary(**filters.selector_kwargs(kinds=True)))


class HandoffTimelineApi(AnalyticsApi):
    kinds_allowed = True

    @extend_schema(
        summary="Counted handoffs per day or hour, with empty periods as 0",
        description=(
            f"{COUNTED} Periods are UTC days or hours, oldest first, from the window's start up to now; `by_kind` "
            f"names every kind counted. `bucket=hour` covers at most {MAX_HOUR_BUCKET_DAYS} days."
        ),
        parameters=[
            *FILTER_PARAMETERS,
            KIND_PARAMETER,
            OpenApiParameter(
                "bucket", _or_empty({"type": "string", "enum": list(BUCKETS)}), description="day (default) or hour."
            ),
        ],
        responses={200: TIMELINE_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        bucket = bucket_parse(params=request.query_params, filters=filters)
        return Response(selectors.handoff_timeline(**filters.selector_kwargs(kinds=True), bucket=bucket))


class RecentHandoffsApi(AnalyticsApi):
    kinds_allowed = True

    @extend_schema(
        summary="The latest handoff rows (every status), newest first",
        description=(
            "Each row names its conversation (`conversation_key`; `conversation_id` opens "
            "/admin/conversations/conversation/<id>/change/ for staff). Stops and refusals are listed too; "
            "`kind` narrows."
        ),
        parameters=[
            *FILTER_PARAMETERS,
            KIND_PARAMETER,
            OpenApiParameter(
                "limit",
                _or_empty({"type": "integer", "minimum": 1, "maximum": MAX_RECENT_LIMIT}),
                description=f"How many rows (1–{MAX_RECENT_LIMIT}, default {DEFAULT_RECENT_LIMIT}).",
            ),
        ],
        responses={200: RECENT_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        limit = limit_parse(params=request.query_params)
        return Response(selectors.handoff_list_recent(**filters.selector_kwargs(kinds=True), limit=limit))


class LoopStopsApi(AnalyticsApi):
    kinds_allowed = True

    @extend_schema(
        summary="Moves loop safety stopped (by cause, by agent and by from → to pair) and moves refused",
        description=(
            "Stopped rows: outcome ping_pong, path_repeated, handoff_limit or step_limit; refused rows: a target the "
            "agent may not reach. `agent` and `from` are the one that tried to move, `to` the target (blank for a "
            "step_limit stop); agents are named within their `profile`. `by_pair` splits each pair's stops by cause. "
            "`kind` narrows to the kinds of move tried."
        ),
        parameters=[*FILTER_PARAMETERS, KIND_PARAMETER],
        responses={200: STOPS_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        return Response(selectors.handoff_stops(**filters.selector_kwargs(kinds=True)))


class DelegationsApi(AnalyticsApi):
    @extend_schema(
        summary="Sub-conversations: delegations made and how they came back",
        description=(
            "Delegations: completed `delegation` rows. Returns: `return` rows by outcome (the status the specialist "
            "ended its sub-conversation with: completed, out_of_scope, ...) and by specialist."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: DELEGATIONS_RESPONSE, **ERRORS},
    )
    def get(self, request):
        return Response(selectors.delegation_outcomes(**self.filters(request).selector_kwargs()))


class AgentsApi(AnalyticsApi):
    @extend_schema(
        summary="Agent utilisation: share of answered turns per specialist of each profile, and how it came to answer",
        description=(
            "Assistant messages in the window per profile, specialist (`agent`: names are the profile's own, so two "
            "profiles' `billing_agent` are two rows) and `path`: `routed` (routing, a handoff or a supervisor chose "
            "it) or `single_agent` (the multi_agent flag's single_agent cohort, where the profile's general "
            "specialist answers every message whatever the router chose; not fallback routing, which "
            "routing-methods counts). Most turns first."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: AGENTS_RESPONSE, **ERRORS},
    )
    def get(self, request):
        return Response(selectors.agent_utilisation(**self.filters(request).selector_kwargs()))


class RoutingMethodsApi(AnalyticsApi):
    @extend_schema(
        summary="Routing-method mix and fallback rate",
        description=(
            "Stored route decisions by method (state, keyword, examples, llm, fallback always listed; followup, "
            "coordinator, sub_conversation, permission when they occur). `fallback_rate_percentage` is the fallback "
            "share."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: METHODS_RESPONSE, **ERRORS},
    )
    def get(self, request):
        return Response(selectors.route_method_mix(**self.filters(request).selector_kwargs()))


class ToolsApi(AnalyticsApi):
    @extend_schema(
        summary="MCP tool calls per tool: calls, permission asks, errors, error rate, average latency",
        description=(
            "`permission_asks`: calls waiting for the user's permission (status permission_required), not errors. "
            "An error is any status in `error_statuses` (every one but ok and permission_required); "
            "`errors_by_status` splits each tool's. `error_rate_percentage` is of the calls that were not asks, and "
            "`avg_latency_ms` averages them (null when every call was an ask)."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: TOOLS_RESPONSE, **ERRORS},
    )
    def get(self, request):
        return Response(selectors.tool_call_stats(**self.filters(request).selector_kwargs()))


class CohortsApi(AnalyticsApi):
    @extend_schema(
        summary="Rollout cohorts side by side: multi_agent vs single_agent",
        description=(
            "User messages, answers, conversations, counted handoffs and handoff rate, average judge score and "
            "latency (p50/p95 on PostgreSQL; `percentiles` false and null elsewhere) per side of the multi_agent "
            "flag. Turns the flag did not decide (blank cohort) are left out."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: COHORTS_RESPONSE, **ERRORS},
    )
    def get(self, request):
        return Response(selectors.cohort_comparison(**self.filters(request).selector_kwargs()))


class LanguagesApi(AnalyticsApi):
    @extend_schema(
        summary="Traffic per conversation language: conversations, messages, answers, judge score, fallback rate",
        description=(
            f"One row per language of the platform ({', '.join(LANGUAGES)}, in that order, even at 0), then "
            f"`{selectors.NO_LANGUAGE}` when some conversation's language was never told. `conversations`: created "
            "in the window; `messages` (user messages), `answers` (with their average judge score) and `routed` "
            "(stored route decisions; `fallbacks` those the fallback made, `fallback_rate_percentage` their share) "
            "in the window, each under its conversation's language as it is now."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: LANGUAGES_RESPONSE, **ERRORS},
    )
    def get(self, request):
        return Response(selectors.language_mix(**self.filters(request).selector_kwargs()))


class GoalsApi(AnalyticsApi):
    @extend_schema(
        summary="Goal mode: answers by status, clarification and failure rates, plan latency, goals, capabilities",
        description=(
            "`summary.runs` counts every goal-mode answer, domain `general` included (status `general`); "
            "`clarification_rate_percentage` and `failure_rate_percentage` are of `runs`. The plan latency's p50 "
            "and p95 are over the answers whose plan ran (`plans_run`), read from buckets 5 % wide (null when no "
            "plan ran). `goals`: answers per domain and goal by status, most first. `capabilities`: plan steps per "
            "capability by status; `skipped` steps never ran, `failure_rate_percentage` is of the steps that ran; "
            "latencies are of the steps that ran."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: GOALS_RESPONSE, **ERRORS},
    )
    def get(self, request):
        return Response(goals.goal_analytics(**self.filters(request).selector_kwargs()))


class UsageApi(AnalyticsApi):
    @extend_schema(
        summary="Token usage and cost per tenant, profile, day and model",
        description=(
            f"{USAGE_DESCRIPTION} Rows name their tenant (an API key reads its own). `cohort` and `version` do not "
            "slice it (the usage index holds neither): they are read and checked, and every answer counts."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: USAGE_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        return Response(
            usage_report(
                start=filters.start, end=filters.end, tenant_id=filters.tenant_id, profile_id=filters.profile_id
            )
        )
