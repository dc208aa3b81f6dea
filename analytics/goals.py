"""Goal mode's panel: its answers' statuses and latencies, per goal, and its plan steps per capability, read from
their rows over the window (:class:`conversations.models.GoalRun`, :class:`conversations.models.GoalStepRun`) on
indexes that lead with the window and hold every column read. The filters are :mod:`analytics.selectors`'.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import Count, QuerySet, Sum

from analytics.rollups import histogram_percentile, latency_bucket, slice_where
from analytics.selectors import percent, ranked_counts, rounded
from conversations.models import GoalRun, GoalRunStatus, GoalStepRun, GoalStepStatus
from tenants.public import TenantScope, tenant_scope_where


def _goal_rows(
    model: type[GoalRun] | type[GoalStepRun],
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> QuerySet:
    rows = model.objects.filter(created_at__gte=start, created_at__lt=end)
    rows = rows.filter(**tenant_scope_where("tenant_id", tenant_id))
    if profile_id is not None:
        rows = rows.filter(profile_id=profile_id)
    # A run is sliced by its answer's turn, a step by its run's answer.
    answer = "message__" if model is GoalRun else "run__message__"
    sliced = slice_where(cohort=cohort, version=version)
    rows = rows.filter(**{answer + lookup: value for lookup, value in sliced.items()})
    return rows.order_by()


def _percentiles(buckets: QuerySet, key: tuple[str, ...] = ()) -> dict[tuple, dict[int, int]]:
    """Latency buckets (rows of ``*key, bucket, n``) as ``{key: {bucket: count}}``."""
    found: dict[tuple, dict[int, int]] = {}
    for row in buckets:
        found.setdefault(tuple(row[name] for name in key), {})[row["bucket"]] = row["n"]
    return found


def _goal_run_groups(**scope: Any) -> list[dict[str, Any]]:
    """Goal runs grouped by domain, goal, status and clarification reason, with their step counts."""
    return list(
        _goal_rows(GoalRun, **scope)
        .values("domain", "goal", "status", "clarification_reason")
        .annotate(n=Count("*"), steps=Sum("step_count"), failed_steps=Sum("failed_step_count"))
    )


def _goal_summary(groups: list[dict[str, Any]], **scope: Any) -> dict[str, Any]:
    by_status = dict.fromkeys(GoalRunStatus.values, 0)
    reasons: dict[str, int] = {}
    for row in groups:
        by_status[row["status"]] = by_status.get(row["status"], 0) + row["n"]
        if row["status"] == GoalRunStatus.CLARIFICATION:
            reasons[row["clarification_reason"]] = reasons.get(row["clarification_reason"], 0) + row["n"]
    runs = sum(by_status.values())
    timed = _goal_rows(GoalRun, **scope).filter(plan_latency_ms__isnull=False)
    latency = timed.values(bucket=latency_bucket("plan_latency_ms")).annotate(n=Count("*"))
    counts = _percentiles(latency).get((), {})
    return {
        "runs": runs,
        "by_status": by_status,
        "clarification_rate_percentage": percent(by_status[GoalRunStatus.CLARIFICATION], runs),
        "failure_rate_percentage": percent(by_status[GoalRunStatus.FAILURE], runs),
        "clarification_reasons": ranked_counts(reasons, "reason"),
        "steps": sum(row["steps"] or 0 for row in groups),
        "failed_steps": sum(row["failed_steps"] or 0 for row in groups),
        "plans_run": sum(counts.values()),
        "p50_plan_latency_ms": rounded(histogram_percentile(counts, 0.5)),
        "p95_plan_latency_ms": rounded(histogram_percentile(counts, 0.95)),
    }


def _goal_breakdown(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    goals: dict[tuple[str, str], dict[str, Any]] = {}
    for row in groups:
        item = goals.setdefault(
            (row["domain"], row["goal"]),
            {"domain": row["domain"], "goal": row["goal"], "runs": 0, **dict.fromkeys(GoalRunStatus.values, 0)},
        )
        item["runs"] += row["n"]
        item[row["status"]] = item.get(row["status"], 0) + row["n"]
    return sorted(goals.values(), key=lambda item: (-item["runs"], item["domain"], item["goal"]))


def goal_summary(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> dict[str, Any]:
    """Goal-mode answers: ``{runs, by_status: {success, failure, clarification, general}, clarification_rate_percentage,
    failure_rate_percentage, clarification_reasons: [{reason, count}], steps, failed_steps, plans_run,
    p50_plan_latency_ms, p95_plan_latency_ms}``.

    ``runs`` counts every goal-mode answer, domain ``general`` included (status ``general``): both rates are of
    ``runs``. ``steps`` and ``failed_steps`` add up the plans' steps and those whose output was a failure. The
    plan latency is read over the answers whose plan ran (``plans_run``), p50 and p95 from latency buckets 5 %
    wide as :func:`cohort_comparison` reads them (``None`` when no plan ran). Two queries.
    """
    scope = {
        "start": start,
        "end": end,
        "tenant_id": tenant_id,
        "profile_id": profile_id,
        "cohort": cohort,
        "version": version,
    }
    return _goal_summary(_goal_run_groups(**scope), **scope)


def goal_breakdown(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> list[dict[str, Any]]:
    """Goal-mode answers per goal: ``[{domain, goal, runs, success, failure, clarification, general}]``, most runs
    first, then by domain and goal (answers in domain ``general`` are one more row). One query."""
    return _goal_breakdown(
        _goal_run_groups(
            start=start, end=end, tenant_id=tenant_id, profile_id=profile_id, cohort=cohort, version=version
        )
    )


def capability_stats(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> list[dict[str, Any]]:
    """Plan steps per capability: ``[{domain, capability, steps, success, failures, clarifications, skipped,
    failure_rate_percentage, avg_latency_ms, p95_latency_ms}]``, most steps first, then by domain and capability.

    ``skipped`` steps were planned and never ran (an optional step whose input failed, or the steps after a
    required one failed); ``failure_rate_percentage`` is of the steps that ran. Latencies are the steps' that
    ran, p95 from latency buckets 5 % wide (``None`` without one). Two queries.
    """
    rows = _goal_rows(
        GoalStepRun, start=start, end=end, tenant_id=tenant_id, profile_id=profile_id, cohort=cohort, version=version
    )
    grouped = rows.values("domain", "capability", "status").annotate(
        n=Count("*"), latency_sum=Sum("latency_ms", default=0.0), latency_n=Count("latency_ms")
    )
    capabilities: dict[tuple[str, str], dict[str, Any]] = {}
    for row in grouped:
        item = capabilities.setdefault(
            (row["domain"], row["capability"]),
            {"domain": row["domain"], "capability": row["capability"], "steps": 0, "ms": 0.0, "timed": 0}
            | {status: 0 for status in GoalStepStatus.values},
        )
        item["steps"] += row["n"]
        item[row["status"]] = item.get(row["status"], 0) + row["n"]
        item["ms"] += row["latency_sum"]
        item["timed"] += row["latency_n"]
    timed = rows.filter(latency_ms__isnull=False).values("domain", "capability", bucket=latency_bucket())
    buckets = _percentiles(timed.annotate(n=Count("*")), ("domain", "capability"))
    listed = []
    for key, item in sorted(capabilities.items(), key=lambda pair: (-pair[1]["steps"], *pair[0])):
        ms, timed_n = item.pop("ms"), item.pop("timed")
        ran = item["steps"] - item[GoalStepStatus.SKIPPED]
        listed.append(
            {
                "domain": item["domain"],
                "capability": item["capability"],
                "steps": item["steps"],
                "success": item[GoalStepStatus.SUCCESS],
                "failures": item[GoalStepStatus.FAILURE],
                "clarifications": item[GoalStepStatus.CLARIFICATION],
                "skipped": item[GoalStepStatus.SKIPPED],
                "failure_rate_percentage": percent(item[GoalStepStatus.FAILURE], ran),
                "avg_latency_ms": rounded(ms / timed_n) if timed_n else None,
                "p95_latency_ms": rounded(histogram_percentile(buckets.get(key, {}), 0.95)),
            }
        )
    return listed


def goal_analytics(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
) -> dict[str, Any]:
    """The analytics API's goal figures in one answer: ``{summary, goals, capabilities}``, as
    :func:`goal_summary`, :func:`goal_breakdown` and :func:`capability_stats` give them. Four queries."""
    scope = {
        "start": start,
        "end": end,
        "tenant_id": tenant_id,
        "profile_id": profile_id,
        "cohort": cohort,
        "version": version,
    }
    groups = _goal_run_groups(**scope)
    return {
        "summary": _goal_summary(groups, **scope),
        "goals": _goal_breakdown(groups),
        "capabilities": capability_stats(
            start=start, end=end, tenant_id=tenant_id, profile_id=profile_id, cohort=cohort, version=version
        ),
    }
