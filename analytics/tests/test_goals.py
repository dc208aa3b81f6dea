"""The goal-mode figures (analytics.goals) against the answers of analytics/tests/goal_traffic.py.

Unless a test says otherwise the window is the last 30 days (D29..today) and the reader tenant A, which holds
every one of A's answers but the D40 one.
"""

from __future__ import annotations

import datetime as dt
import json
import math

import pytest

from analytics import goals
from analytics.rollups import LATENCY_BUCKET_RATIO

pytestmark = pytest.mark.django_db


def window(traffic, days: int = 30) -> dict:
    end = dt.datetime.combine(traffic.today + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC)
    return {"start": end - dt.timedelta(days=days), "end": end}


def placed(ms: float) -> float:
    """Where a latency is counted: the middle (on the log scale) of its bucket 5 % wide, alone in it."""
    return LATENCY_BUCKET_RATIO ** (math.floor(math.log(ms) / math.log(LATENCY_BUCKET_RATIO)) + 0.5)


def percentile(latencies: list[float], fraction: float) -> float:
    """As PostgreSQL's percentile_cont ranks, over the placed latencies (each alone in its bucket here)."""
    ranked = sorted(placed(ms) for ms in latencies)
    position = fraction * (len(ranked) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ranked) - 1)
    return round(ranked[low] + (position - low) * (ranked[high] - ranked[low]), 2)


def test_the_summary_counts_every_goal_mode_answer_by_status_with_both_rates_of_all_of_them(goal_traffic):
    summary = goals.goal_summary(**window(goal_traffic), tenant_id=goal_traffic.tenant_a.pk)
    # Plans that ran: quote_and_notify 160 ms, ambiguous_quote 30 ms, failed_movers 5000 ms.
    assert summary == {
        "runs": 5,
        "by_status": {"success": 1, "failure": 1, "clarification": 2, "general": 1},
        "clarification_rate_percentage": 40.0,
        "failure_rate_percentage": 20.0,
        "clarification_reasons": [{"reason": "ambiguous", "count": 1}, {"reason": "low_confidence", "count": 1}],
        "steps": 6,  # 3 + 1 + 0 + 2 + 0
        "failed_steps": 2,  # send_notification, get_top_gainers
        "plans_run": 3,
        "p50_plan_latency_ms": percentile([30.0, 160.0, 5000.0], 0.5),
        "p95_plan_latency_ms": percentile([30.0, 160.0, 5000.0], 0.95),
    }
    assert summary["p50_plan_latency_ms"] == pytest.approx(160.0, rel=0.05)
    json.dumps(summary)


def test_the_breakdown_lists_each_goal_by_status_most_answers_first(goal_traffic):
    assert goals.goal_breakdown(**window(goal_traffic), tenant_id=goal_traffic.tenant_a.pk) == [
        {
            "domain": "finance",
            "goal": "GET_QUOTE",
            "runs": 3,
            "success": 1,
            "failure": 0,
            "clarification": 2,
            "general": 0,
        },
        {
            "domain": "finance",
            "goal": "TOP_MOVERS",
            "runs": 1,
            "success": 0,
            "failure": 1,
            "clarification": 0,
            "general": 0,
        },
        {"domain": "general", "goal": "", "runs": 1, "success": 0, "failure": 0, "clarification": 0, "general": 1},
    ]


def test_capability_figures_count_steps_by_status_with_failure_rates_of_the_steps_that_ran(goal_traffic):
    assert goals.capability_stats(**window(goal_traffic), tenant_id=goal_traffic.tenant_a.pk) == [
        {
            "domain": "finance",
            "capability": "get_stock_price",
            "steps": 3,
            "success": 2,
            "failures": 0,
            "clarifications": 1,
            "skipped": 0,
            "failure_rate_percentage": 0.0,
            "avg_latency_ms": 76.67,  # (120 + 80 + 30) / 3
            "p95_latency_ms": percentile([30.0, 80.0, 120.0], 0.95),
        },
        {
            "domain": "finance",
            "capability": "send_notification",
            "steps": 2,
            "success": 0,
            "failures": 1,
            "clarifications": 0,
            "skipped": 1,  # failed_movers' notification never ran
            "failure_rate_percentage": 100.0,  # 1 of the 1 that ran
            "avg_latency_ms": 40.0,
            "p95_latency_ms": percentile([40.0], 0.95),
        },
        {
            "domain": "finance",
            "capability": "get_top_gainers",
            "steps": 1,
            "success": 0,
            "failures": 1,
            "clarifications": 0,
            "skipped": 0,
            "failure_rate_percentage": 100.0,
            "avg_latency_ms": 5000.0,
            "p95_latency_ms": percentile([5000.0], 0.95),
        },
    ]


def test_one_profile_counts_only_its_own_answers(goal_traffic):
    scope = {**window(goal_traffic), "tenant_id": goal_traffic.tenant_a.pk, "profile_id": goal_traffic.p2.pk}
    summary = goals.goal_summary(**scope)
    assert (summary["runs"], summary["by_status"]["failure"], summary["failure_rate_percentage"]) == (1, 1, 100.0)
    assert [(row["capability"], row["steps"]) for row in goals.capability_stats(**scope)] == [
        ("get_top_gainers", 1),
        ("send_notification", 1),
    ]


def test_the_window_holds_exactly_its_days(goal_traffic):
    start = dt.datetime.combine(goal_traffic.today - dt.timedelta(days=40), dt.time.min, tzinfo=dt.UTC)
    only_d40 = {"start": start, "end": start + dt.timedelta(days=1), "tenant_id": goal_traffic.tenant_a.pk}
    assert goals.goal_breakdown(**only_d40) == [
        {
            "domain": "finance",
            "goal": "GET_QUOTE",
            "runs": 1,
            "success": 1,
            "failure": 0,
            "clarification": 0,
            "general": 0,
        }
    ]
    assert goals.goal_summary(**window(goal_traffic, days=90), tenant_id=goal_traffic.tenant_a.pk)["runs"] == 6
    assert goals.goal_summary(**window(goal_traffic, days=1), tenant_id=goal_traffic.tenant_a.pk)["runs"] == 0


def test_a_tenant_sees_only_its_own_answers_and_every_tenant_adds_them_up(goal_traffic):
    summary = goals.goal_summary(**window(goal_traffic), tenant_id=goal_traffic.tenant_b.pk)
    assert (summary["runs"], summary["by_status"], summary["steps"], summary["failed_steps"]) == (
        3,
        {"success": 1, "failure": 2, "clarification": 0, "general": 0},
        7,  # 2 + 2 + 3
        3,  # get_top_gainers twice, send_notification once
    )
    everyone = goals.goal_summary(**window(goal_traffic), tenant_id=None)
    assert (everyone["runs"], everyone["by_status"]["failure"], everyone["plans_run"]) == (8, 3, 6)


def test_no_answers_give_zeros_and_no_percentiles(goal_traffic):
    empty = goals.goal_analytics(**window(goal_traffic, days=1), tenant_id=None)
    assert empty == {
        "summary": {
            "runs": 0,
            "by_status": {"success": 0, "failure": 0, "clarification": 0, "general": 0},
            "clarification_rate_percentage": 0.0,
            "failure_rate_percentage": 0.0,
            "clarification_reasons": [],
            "steps": 0,
            "failed_steps": 0,
            "plans_run": 0,
            "p50_plan_latency_ms": None,
            "p95_plan_latency_ms": None,
        },
        "goals": [],
        "capabilities": [],
    }


@pytest.mark.parametrize("one_tenant", [True, False])
def test_the_api_selector_reads_in_four_queries_however_many_rows(goal_traffic, one_tenant, django_assert_num_queries):
    tenant_id = goal_traffic.tenant_a.pk if one_tenant else None
    with django_assert_num_queries(4):
        body = goals.goal_analytics(**window(goal_traffic), tenant_id=tenant_id, profile_id=goal_traffic.p1.pk)
    assert body["summary"] == goals.goal_summary(
        **window(goal_traffic), tenant_id=tenant_id, profile_id=goal_traffic.p1.pk
    )
    assert body["goals"] == goals.goal_breakdown(
        **window(goal_traffic), tenant_id=tenant_id, profile_id=goal_traffic.p1.pk
    )
