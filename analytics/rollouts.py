"""The dashboard's rollout view: each rollout plan's cohorts over time, its stages and its decision log.

``GET /api/analytics/rollouts`` lists the plans; ``GET /api/analytics/rollouts/{id}?slices=N`` gives one plan, its
stage history, every decision with each guard's verdict, and a time series: the plan's span (start to finish, or
to now) cut into N equal slices, and per slice and per cohort what the guard reads
(:func:`releases.rollout.guard.cohorts_figures`) — samples and every guard metric. The pages
``/analytics/rollouts/`` and ``/analytics/rollouts/<id>/`` draw them (``analytics/static/analytics/rollout.js``).

A plan is configuration across tenants: only staff with ``analytics.view_analytics`` or the right to view rollout
plans (:func:`routing.rollout_plans.may_view_plans`: the routing editors who roll their changes out) read it; an API
key, which speaks for one tenant, gets 403. Stages, who decided and why are given in words too
(:mod:`routing.rollout_words`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.contrib import admin
from django.contrib.auth.mixins import PermissionRequiredMixin
from django.db.models import QuerySet
from django.http import Http404
from django.urls import path, reverse
from django.utils import timezone
from django.views.generic import TemplateView
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import permissions, serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from analytics.filters import ANALYTICS_PERMISSION, analytics_may_read, can_view_all_tenants, whole_number_between
from common.errors import DomainError, NotFound, error_responses
from releases.models import RolloutDecision, RolloutPlan
from releases.public import CANDIDATE, CONTROL, CohortWindow, cohorts_figures
from routing.public import GUARD_METRICS, actor_words, history_parse, limit_words, may_view_plans, plan_stage_words
from tenants.public import request_tenant_rights

DEFAULT_SLICES = 12
MAX_SLICES = 48
COHORTS = (CANDIDATE, CONTROL)
PLANS_PERMISSION = "releases.view_rolloutplan"
PLANS_CHANGE_PERMISSION = "releases.change_rolloutplan"  # the admin lets who may change a plan view it too
ERROR_ROLLOUTS_FORBIDDEN = (
    "Rollout plans are configuration across tenants: reading them needs a staff session with the permission "
    "analytics.view_analytics or releases.view_rolloutplan (an API key may not)."
)
ERROR_PLAN_NOT_FOUND = "No rollout plan with this id."
ERROR_SLICES = f"A whole number of slices from 1 to {MAX_SLICES} (default {DEFAULT_SLICES})."


def can_view_rollouts(user: Any) -> bool:
    """Staff who may read rollout plans (:func:`routing.rollout_plans.may_view_plans`, or change them in the admin)
    or every tenant's analytics (superusers have all); never an API key."""
    if not (getattr(user, "is_staff", False) and getattr(user, "is_active", False)):
        return False
    return can_view_all_tenants(user) or may_view_plans(user) or user.has_perm(PLANS_CHANGE_PERMISSION)


# -- reads ---------------------------------------------------------------------------------------------------


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def _plans() -> QuerySet[RolloutPlan]:
    return RolloutPlan.objects.select_related("profile", "candidate", "control")


def rollout_plan_summary(plan: RolloutPlan) -> dict[str, Any]:
    """One plan as the list and the view show it (``plan`` with profile, candidate and control loaded)."""
    return {
        "id": plan.pk,
        "name": plan.name,
        "target": plan.target,
        "profile": plan.profile.agent_id if plan.profile else None,
        "candidate": plan.candidate.number if plan.candidate else None,
        "control": plan.control.number if plan.control else None,
        "status": plan.status,
        "status_label": plan.get_status_display(),
        "stage": plan.stage,
        "stage_label": plan_stage_words(plan),
        "stages": list(plan.stages),
        "percentage": plan.percentage,
        "started_at": _iso(plan.started_at),
        "finished_at": _iso(plan.finished_at),
    }


def rollout_plan_list() -> list[dict[str, Any]]:
    """Every plan, newest first (two queries' worth: one)."""
    return [rollout_plan_summary(plan) for plan in _plans()]


def _cohort_point(figures: dict[str, Any]) -> dict[str, Any]:
    """A cohort's figures flattened for a chart: samples, and each guard metric's value and sample size."""
    values: dict[str, float | None] = {}
    samples: dict[str, int | None] = {}
    for name, metric in GUARD_METRICS.items():
        figure = figures[name]
        if metric.kind == "rate":
            values[name], samples[name] = figure["rate"], figure["n"]
        elif metric.kind == "mean":
            values[name], samples[name] = figure["mean"], figure["n"]
        else:
            values[name], samples[name] = figure, None
    return {
        "conversations": figures["conversations"],
        "turns": figures["turns"],
        "errors": figures["errors"],
        "values": values,
        "samples": samples,
    }


def rollout_series(plan: RolloutPlan, *, slices: int, now: dt.datetime | None = None) -> dict[str, Any]:
    """The plan's span — from its start to its finish, or to ``now`` while it runs — cut into ``slices`` equal
    windows ``[start, end)``, each with both cohorts' figures. A plan never started has no span and no points."""
    if plan.started_at is None:
        return {"start": None, "end": None, "slices": slices, "points": []}
    start = plan.started_at
    end = plan.finished_at or (now or timezone.now())
    end = max(end, start + dt.timedelta(seconds=1))
    width = (end - start) / slices
    spans = []
    for index in range(slices):
        since = start + width * index
        until = end if index == slices - 1 else start + width * (index + 1)
        if index == slices - 1 and plan.finished_at is None:
            until = until + dt.timedelta(seconds=1)  # a running plan's last slice takes in the turn of this second
        spans.append((since, until))
    # Every slice of both cohorts in one set of grouped queries.
    windows = [CohortWindow(plan, cohort, since, until) for since, until in spans for cohort in COHORTS]
    figures = iter(cohorts_figures(windows))
    points = [
        {
            "start": since.isoformat(),
            "end": until.isoformat(),
            **{cohort: _cohort_point(next(figures)) for cohort in COHORTS},
        }
        for since, until in spans
    ]
    return {"start": start.isoformat(), "end": end.isoformat(), "slices": slices, "points": points}


def _decision(decision: RolloutDecision) -> dict[str, Any]:
    figures = decision.figures or {}
    samples = {
        cohort: {"conversations": figures[cohort].get("conversations"), "turns": figures[cohort].get("turns")}
        for cohort in COHORTS
        if isinstance(figures.get(cohort), dict)
    }
    return {
        "id": decision.pk,
        "at": decision.created_at.isoformat(),
        "action": decision.action,
        "action_label": decision.get_action_display(),
        "stage": decision.stage,
        "percentage": decision.percentage,
        "reason": decision.reason,
        "actor": decision.actor,
        "by": actor_words(decision.actor),
        "webhook": decision.webhook,
        "samples": samples,
        "verdicts": list(figures.get("verdicts", [])),
    }


def rollout_view(plan_id: int, *, slices: int = DEFAULT_SLICES, now: dt.datetime | None = None) -> dict[str, Any]:
    """Everything the rollout view draws for one plan. Raises :class:`NotFound` for an unknown id."""
    plan = _plans().filter(pk=plan_id).first()
    if plan is None:
        raise NotFound(ERROR_PLAN_NOT_FOUND, fields={"id": [ERROR_PLAN_NOT_FOUND]})
    guards = {guard["metric"]: guard for guard in plan.guards}
    return {
        "plan": {
            **rollout_plan_summary(plan),
            "hold_minutes": plan.hold_minutes,
            "min_conversations": plan.min_conversations,
            "max_errors": plan.max_errors,
            "alpha": plan.alpha,
            "guards": list(plan.guards),
        },
        "metrics": [
            {
                "name": metric.name,
                "label": metric.label,
                "kind": metric.kind,
                "worse": metric.worse,
                "description": metric.description,
                "threshold": guards.get(metric.name, {}).get("threshold"),
                "absolute": guards.get(metric.name, {}).get("absolute"),
                "limit": limit_words(guards[metric.name]) if metric.name in guards else "",
            }
            for metric in GUARD_METRICS.values()
        ],
        "stages": [{"at": at.isoformat(), "percentage": percentage} for at, percentage in history_parse(plan.history)],
        "decisions": [_decision(decision) for decision in plan.decisions.order_by("-created_at", "-id")],
        "series": rollout_series(plan, slices=slices, now=now),
    }


def slices_parse(params: Any) -> int:
    """``slices`` (1..48, default 12); anything else is a 400 naming ``slices``."""
    raw = params.get("slices")
    raw = raw.strip() if isinstance(raw, str) else ""
    if not raw:
        return DEFAULT_SLICES
    slices = whole_number_between(raw, 1, MAX_SLICES)
    if slices is None:
        raise DomainError(ERROR_SLICES, fields={"slices": [ERROR_SLICES]})
    return slices


# -- the API -----------------------------------------------------------------------------------------------------


class CanViewRollouts(permissions.BasePermission):
    message = ERROR_ROLLOUTS_FORBIDDEN

    def has_permission(self, request, view) -> bool:
        return can_view_rollouts(request.user)


PLAN_FIELDS: dict[str, serializers.Field] = {
    "id": serializers.IntegerField(),
    "name": serializers.CharField(),
    "target": serializers.ChoiceField(choices=["version", "multi_agent"]),
    "profile": serializers.CharField(allow_null=True),
    "candidate": serializers.IntegerField(allow_null=True),
    "control": serializers.IntegerField(allow_null=True),
    "status": serializers.CharField(),
    "status_label": serializers.CharField(),
    "stage": serializers.IntegerField(),
    "stage_label": serializers.CharField(),
    "stages": serializers.ListField(child=serializers.IntegerField()),
    "percentage": serializers.IntegerField(),
    "started_at": serializers.DateTimeField(allow_null=True),
    "finished_at": serializers.DateTimeField(allow_null=True),
}
COHORT_POINT = inline_serializer(
    "RolloutCohortPoint",
    {
        "conversations": serializers.IntegerField(),
        "turns": serializers.IntegerField(),
        "errors": serializers.IntegerField(),
        "values": serializers.DictField(child=serializers.FloatField(allow_null=True)),
        "samples": serializers.DictField(child=serializers.IntegerField(allow_null=True)),
    },
)
ROLLOUT_RESPONSE = inline_serializer(
    "RolloutView",
    {
        "plan": inline_serializer(
            "RolloutPlanDetail",
            {
                **PLAN_FIELDS,
                "hold_minutes": serializers.IntegerField(),
                "min_conversations": serializers.IntegerField(),
                "max_errors": serializers.IntegerField(),
                "alpha": serializers.FloatField(),
                "guards": serializers.ListField(child=serializers.DictField()),
            },
        ),
        "metrics": inline_serializer(
            "RolloutMetric",
            {
                "name": serializers.CharField(),
                "label": serializers.CharField(),
                "kind": serializers.ChoiceField(choices=["rate", "mean", "latency"]),
                "worse": serializers.ChoiceField(choices=["higher", "lower"]),
                "description": serializers.CharField(),
                "threshold": serializers.FloatField(allow_null=True),
                "absolute": serializers.FloatField(allow_null=True),
                "limit": serializers.CharField(allow_blank=True),
            },
            many=True,
        ),
        "stages": inline_serializer(
            "RolloutStage", {"at": serializers.DateTimeField(), "percentage": serializers.IntegerField()}, many=True
        ),
        "decisions": inline_serializer(
            "RolloutDecisionRow",
            {
                "id": serializers.IntegerField(),
                "at": serializers.DateTimeField(),
                "action": serializers.CharField(),
                "action_label": serializers.CharField(),
                "stage": serializers.IntegerField(),
                "percentage": serializers.IntegerField(),
                "reason": serializers.CharField(),
                "actor": serializers.CharField(),
                "by": serializers.CharField(),
                "webhook": serializers.CharField(allow_blank=True),
                "samples": serializers.DictField(child=serializers.DictField()),
                "verdicts": serializers.ListField(child=serializers.DictField()),
            },
            many=True,
        ),
        "series": inline_serializer(
            "RolloutSeries",
            {
                "start": serializers.DateTimeField(allow_null=True),
                "end": serializers.DateTimeField(allow_null=True),
                "slices": serializers.IntegerField(),
                "points": inline_serializer(
                    "RolloutSlice",
                    {
                        "start": serializers.DateTimeField(),
                        "end": serializers.DateTimeField(),
                        CANDIDATE: COHORT_POINT,
                        CONTROL: COHORT_POINT,
                    },
                    many=True,
                ),
            },
        ),
    },
)


class RolloutPlansApi(APIView):
    permission_classes = [permissions.IsAuthenticated, CanViewRollouts]

    @extend_schema(
        summary="Rollout plans, newest first: what each rolls out, its status, stage and share of new conversations",
        description=(
            "Staff with releases.view_rolloutplan or analytics.view_analytics only: a plan spans tenants, so an API "
            "key gets 403."
        ),
        responses={
            200: inline_serializer("RolloutPlanSummary", PLAN_FIELDS, many=True),
            **error_responses(401, 403, 429, 503),
        },
    )
    def get(self, request):
        return Response(rollout_plan_list())


class RolloutPlanApi(APIView):
    permission_classes = [permissions.IsAuthenticated, CanViewRollouts]

    @extend_schema(
        summary="One rollout plan over time: stages, decisions with each guard's verdict, both cohorts per slice",
        description=(
            "`series`: the plan's span (started_at to finished_at, or to now while it runs) cut into `slices` equal "
            "windows [start, end); per window and cohort (`candidate`, `control`) the figures the guard reads: "
            "conversations and turns (the samples), errors, each guard metric's `values` (rates as fractions, the "
            "judge's mean score, p95 latency in ms; null without a sample) and `samples` (the count each value is "
            "of). `stages`: when each stage began and its percentage. `decisions`: newest first, with the samples "
            "and verdicts the guard recorded. Staff with releases.view_rolloutplan or analytics.view_analytics only."
        ),
        parameters=[
            OpenApiParameter(
                "slices",
                {
                    "oneOf": [
                        {"type": "integer", "minimum": 1, "maximum": MAX_SLICES},
                        {"type": "string", "maxLength": 0},
                    ]
                },
                description=f"How many windows (1–{MAX_SLICES}, default {DEFAULT_SLICES}); else a 400 naming slices.",
            )
        ],
        responses={200: ROLLOUT_RESPONSE, **error_responses(400, 401, 403, 404, 429, 503)},
    )
    def get(self, request, plan_id: int):
        return Response(rollout_view(plan_id, slices=slices_parse(request.query_params)))


# -- the pages ---------------------------------------------------------------------------------------------------


class RolloutPageMixin(PermissionRequiredMixin):
    """As the dashboard: anonymous visitors go to the admin login, others without the right get 403."""

    permission_required = ANALYTICS_PERMISSION

    def has_permission(self) -> bool:
        return can_view_rollouts(self.request.user)  # type: ignore[attr-defined]

    def page_context(self, title: str) -> dict[str, Any]:
        request = self.request  # type: ignore[attr-defined]
        return {
            **admin.site.each_context(request),
            "title": title,
            "is_nav_sidebar_enabled": False,
            # The breadcrumbs link the dashboard, and the view the plan's admin page, only for who may open them.
            "may_read_analytics": analytics_may_read(request.user, rights=request_tenant_rights(request)),
            "may_open_plans": any(request.user.has_perm(name) for name in (PLANS_PERMISSION, PLANS_CHANGE_PERMISSION)),
        }


def _shown(iso: str | None) -> str:
    """``2026-11-22T21:03:18.1+00:00`` as ``2026-11-22 21:03`` (the pages speak UTC)."""
    return iso[:16].replace("T", " ") if iso else "–"


class RolloutListView(RolloutPageMixin, TemplateView):
    template_name = "analytics/rollout_list.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {
            **super().get_context_data(**kwargs),
            **self.page_context("Rollout plans"),
            "plans": [
                {**row, "started": _shown(row["started_at"]), "finished": _shown(row["finished_at"])}
                for row in rollout_plan_list()
            ],
        }


class RolloutView(RolloutPageMixin, TemplateView):
    template_name = "analytics/rollout.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        plan = RolloutPlan.objects.filter(pk=kwargs["plan_id"]).first()
        if plan is None:
            raise Http404(ERROR_PLAN_NOT_FOUND)
        return {
            **super().get_context_data(**kwargs),
            **self.page_context(f"Rollout: {plan.name}"),
            "plan": plan,
            "api_url": reverse("analytics-rollout", args=[plan.pk]),
            "default_slices": DEFAULT_SLICES,
            "max_slices": MAX_SLICES,
        }


urlpatterns = [
    path("analytics/rollouts/", RolloutListView.as_view(), name="analytics-rollouts-page"),
    path("analytics/rollouts/<int:plan_id>/", RolloutView.as_view(), name="analytics-rollout-page"),
    path("api/analytics/rollouts", RolloutPlansApi.as_view(), name="analytics-rollouts"),
    path("api/analytics/rollouts/<int:plan_id>", RolloutPlanApi.as_view(), name="analytics-rollout"),
]
