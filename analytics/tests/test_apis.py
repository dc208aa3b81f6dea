"""Every analytics endpoint against the hand-built traffic (analytics/tests/traffic.py), numbers worked by hand.

Unless a test says otherwise the reader is tenant A's API key and the window the default 30 days (D29..today),
which holds every row of the table except c5's creation, h13 and the D40 messages, decision and tool call.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("module_traffic")]  # built once (conftest.py)


def get(client, path, **params):
    response = client.get(f"/api/analytics/{path}", params)
    assert response.status_code == 200, response.content
    return response.json()


# -- /api/analytics/handoffs -----------------------------------------------------------------------------------------


def test_it_counts_completed_handoffs_routing_handoffs_and_delegations_with_their_paths_and_rate(api, traffic):
    # Counted: h1, h2, h4, h6, h10, h12 (h3/h11 stopped, h8 refused, h5/h7 returns, h9 fan-out, h13 too old).
    # Created in the window: c1, c2, c3, c4, c6, c7, c8; of them with a counted move: c1, c2, c4 → 3 / 7 (c5 has
    # one in the window, h12, but was created before it).
    assert get(api, "handoffs") == {
        "total_handoffs": 6,
        # Per profile: P1's billing_agent and P2's are different specialists.
        "handoff_paths": [
            {"profile": "telecom_contas", "from": "billing_agent", "to": "orders_agent", "count": 2},  # h1, h12
            {"profile": "retail_loja", "from": "billing_agent", "to": "orders_agent", "count": 1},  # h10
            {"profile": "telecom_contas", "from": "coordinator", "to": "billing_agent", "count": 1},
            {"profile": "telecom_contas", "from": "coordinator", "to": "orders_agent", "count": 1},
            {"profile": "telecom_contas", "from": "orders_agent", "to": "billing_agent", "count": 1},
        ],
        "conversations_with_handoffs": 3,
        "total_conversations": 7,
        "handoff_rate_percentage": 42.86,
    }


def test_it_counts_only_the_given_profiles_handoffs_and_conversations(api, traffic):
    # P1: h1, h2, h4, h6, h12; P1 conversations created: c1, c2, c3, c6, c7, c8, with a counted move c1, c2 → 2 / 6.
    body = get(api, "handoffs", profile="telecom_contas")
    assert (body["total_handoffs"], body["conversations_with_handoffs"], body["total_conversations"]) == (5, 2, 6)
    assert body["handoff_rate_percentage"] == 33.33
    # P2: h10 in c4, the only P2 conversation.
    assert get(api, "handoffs", profile="retail_loja") == {
        "total_handoffs": 1,
        "handoff_paths": [{"profile": "retail_loja", "from": "billing_agent", "to": "orders_agent", "count": 1}],
        "conversations_with_handoffs": 1,
        "total_conversations": 1,
        "handoff_rate_percentage": 100.0,
    }


def test_the_kind_filter_counts_exactly_the_kinds_named(api, traffic):
    # h1, h10 in c1, c4 → 2 / 7.
    body = get(api, "handoffs", kind="routing_handoff")
    assert body["total_handoffs"] == 2
    assert body["handoff_paths"] == [
        {"profile": "retail_loja", "from": "billing_agent", "to": "orders_agent", "count": 1},
        {"profile": "telecom_contas", "from": "billing_agent", "to": "orders_agent", "count": 1},
    ]
    assert body["handoff_rate_percentage"] == 28.57
    # Returns only when asked: h5, h7 in c2 → 1 / 7.
    body = get(api, "handoffs", kind="return")
    assert body["handoff_paths"] == [
        {"profile": "telecom_contas", "from": "billing_agent", "to": "coordinator", "count": 1},
        {"profile": "telecom_contas", "from": "orders_agent", "to": "coordinator", "count": 1},
    ]
    assert (body["conversations_with_handoffs"], body["handoff_rate_percentage"]) == (1, 14.29)
    # Repeated or comma-separated: h2, h12 (handoff) and h4, h6 (delegation); of the conversations created in
    # the window c1 (h2) and c2 (h4, h6) had one → 2 / 7 (c4's only move is a routing handoff).
    for params in ({"kind": "handoff,delegation"}, {"kind": ["handoff", "delegation"]}):
        body = get(api, "handoffs", **params)
        assert (body["total_handoffs"], body["conversations_with_handoffs"]) == (4, 2)
        assert body["handoff_rate_percentage"] == 28.57


def test_days_and_start_end_choose_the_window(api, traffic):
    # days=2 is D1 and today: h4, h6, h12; created: c2, c3, c7, c8, with a counted move c2 → 1 / 4.
    body = get(api, "handoffs", days=2)
    assert (body["total_handoffs"], body["conversations_with_handoffs"], body["total_conversations"]) == (3, 1, 4)
    assert body["handoff_rate_percentage"] == 25.0
    # D3..D2, both included: h10, h1, h2 in c4, c1; created: c4, c1, c6 → 2 / 3.
    body = get(api, "handoffs", start=traffic.day(3), end=traffic.day(2))
    assert (body["total_handoffs"], body["conversations_with_handoffs"], body["total_conversations"]) == (3, 2, 3)
    assert body["handoff_rate_percentage"] == 66.67
    # 90 days reach D40: h13 too, and c5 is created in the window → 4 / 8.
    body = get(api, "handoffs", days=90)
    assert (body["total_handoffs"], body["conversations_with_handoffs"], body["total_conversations"]) == (7, 4, 8)
    assert body["handoff_rate_percentage"] == 50.0
    # Nothing on D10: a rate of 0, not a division by zero.
    assert get(api, "handoffs", start=traffic.day(10), end=traffic.day(10)) == {
        "total_handoffs": 0,
        "handoff_paths": [],
        "conversations_with_handoffs": 0,
        "total_conversations": 0,
        "handoff_rate_percentage": 0.0,
    }


# -- /api/analytics/handoffs/timeline --------------------------------------------------------------------------------


def test_the_daily_timeline_counts_handoffs_per_kind_and_fills_empty_days_with_zero(api, traffic):
    body = get(api, "handoffs/timeline", start=traffic.day(5), end=traffic.day(1))
    zero = {"handoff": 0, "routing_handoff": 0, "delegation": 0, "backend_handoff": 0}
    assert body == [
        {"period": f"{traffic.day(5)}T00:00:00+00:00", "count": 0, "by_kind": zero},
        {"period": f"{traffic.day(4)}T00:00:00+00:00", "count": 0, "by_kind": zero},
        {"period": f"{traffic.day(3)}T00:00:00+00:00", "count": 1, "by_kind": {**zero, "routing_handoff": 1}},  # h10
        {
            "period": f"{traffic.day(2)}T00:00:00+00:00",
            "count": 2,
            "by_kind": {**zero, "handoff": 1, "routing_handoff": 1},
        },
        {"period": f"{traffic.day(1)}T00:00:00+00:00", "count": 3, "by_kind": {**zero, "handoff": 1, "delegation": 2}},
    ]


def test_the_default_timeline_has_one_period_per_day_of_the_window_up_to_today(api, traffic):
    body = get(api, "handoffs/timeline")
    assert len(body) == 30
    assert body[-1]["period"] == f"{traffic.day(0)}T00:00:00+00:00"
    assert sum(period["count"] for period in body) == 6


def test_the_hourly_timeline_lists_every_hour_of_the_range(api, traffic):
    body = get(api, "handoffs/timeline", start=traffic.day(2), end=traffic.day(2), bucket="hour", kind="handoff")
    assert len(body) == 24
    counts = {period["period"][11:13]: period["count"] for period in body if period["count"]}
    assert counts == {"10": 1}  # h2 (h1 is a routing handoff, h3 was stopped)
    assert body[10]["by_kind"] == {"handoff": 1}


# -- /api/analytics/loop-stops and /api/analytics/delegations --------------------------------------------------------


def test_loop_stops_are_grouped_by_cause_agent_and_pair_with_the_refusals_apart(api, traffic):
    assert get(api, "loop-stops") == {
        "total_stopped": 2,  # h3, h11
        "by_outcome": [{"outcome": "ping_pong", "count": 1}, {"outcome": "step_limit", "count": 1}],
        "by_agent": [
            {"profile": "retail_loja", "agent": "billing_agent", "count": 1},  # h11
            {"profile": "telecom_contas", "agent": "billing_agent", "count": 1},  # h3
        ],
        "by_pair": [
            # A step_limit stop names no target.
            {"profile": "retail_loja", "from": "billing_agent", "to": "", "count": 1, "by_outcome": {"step_limit": 1}},
            {
                "profile": "telecom_contas",
                "from": "billing_agent",
                "to": "orders_agent",
                "count": 1,
                "by_outcome": {"ping_pong": 1},
            },
        ],
        "total_refused": 1,  # h8
        "refused_by_agent": [{"profile": "telecom_contas", "agent": "coordinator", "count": 1}],
    }
    # h8 was a delegation: asking for handoffs leaves it out.
    body = get(api, "loop-stops", kind="handoff")
    assert (body["total_stopped"], body["total_refused"]) == (2, 0)
    assert get(api, "loop-stops", days=2)["total_stopped"] == 0


def test_delegations_count_and_their_returns_by_outcome(api, traffic):
    assert get(api, "delegations") == {
        "total_delegations": 2,  # h4, h6 (h8 refused)
        "total_returns": 2,  # h5, h7
        "returns_by_outcome": [
            {"outcome": "completed", "count": 1, "share_percentage": 50.0},
            {"outcome": "out_of_scope", "count": 1, "share_percentage": 50.0},
        ],
        "returns_by_specialist": [
            {"profile": "telecom_contas", "agent": "billing_agent", "count": 1},
            {"profile": "telecom_contas", "agent": "orders_agent", "count": 1},
        ],
    }


# -- /api/analytics/handoffs/recent ----------------------------------------------------------------------------------


def test_recent_handoffs_are_the_latest_rows_of_every_status_with_their_conversation(api, traffic):
    body = get(api, "handoffs/recent", limit=3)
    assert [row["id"] for row in body] == [traffic.handoffs[name].pk for name in ("h12", "h9", "h7")]
    c2 = traffic.conversations["c2"]
    assert body[2] == {
        "id": traffic.handoffs["h7"].pk,
        "conversation_id": c2.pk,
        "conversation_key": "tenant_a:telecom_contas:c2",
        "tenant": "tenant_a",
        "profile": "telecom_contas",
        "from_agent": "orders_agent",
        "to_agent": "coordinator",
        "kind": "return",
        "status": "completed",
        "outcome": "out_of_scope",
        "reason": "h7: orders_agent → coordinator",
        "created_at": traffic.handoffs["h7"].created_at.isoformat().replace("+00:00", "Z"),
    }
    # 12 rows in the window (h1–h12), 20 by default; kind and profile narrow.
    assert len(get(api, "handoffs/recent")) == 12
    stopped = get(api, "handoffs/recent", kind="handoff", profile="retail_loja")
    assert [(row["id"], row["status"]) for row in stopped] == [(traffic.handoffs["h11"].pk, "stopped")]


# -- agents, routing methods, tools ----------------------------------------------------------------------------------


def test_agent_utilisation_is_the_share_of_answers_per_specialist_of_each_profile_and_path(api, traffic):
    # Answers in 30 days: P1 billing c1×2 + c2; P1 orders c2 + c5; P2 orders c4 (a different specialist of the
    # same name); c3's two answers are the single-agent path's general agent, not routing → 3, 2, 2, 1 of 8.
    assert get(api, "agents") == [
        {"profile": "telecom_contas", "agent": "billing_agent", "path": "routed", "turns": 3, "share_percentage": 37.5},
        {"profile": "telecom_contas", "agent": "orders_agent", "path": "routed", "turns": 2, "share_percentage": 25.0},
        {
            "profile": "telecom_contas",
            "agent": "support_agent",
            "path": "single_agent",
            "turns": 2,
            "share_percentage": 25.0,
        },
        {"profile": "retail_loja", "agent": "orders_agent", "path": "routed", "turns": 1, "share_percentage": 12.5},
    ]
    assert get(api, "agents", profile="retail_loja") == [
        {"profile": "retail_loja", "agent": "orders_agent", "path": "routed", "turns": 1, "share_percentage": 100.0}
    ]


def test_routing_methods_give_each_methods_share_and_the_fallback_rate(api, traffic):
    # keyword c1×2 + c4; fallback c3×2; coordinator, sub_conversation, llm, state once each → 9.
    assert get(api, "routing-methods") == {
        "methods": [
            {"method": "keyword", "count": 3, "share_percentage": 33.33},
            {"method": "fallback", "count": 2, "share_percentage": 22.22},
            {"method": "coordinator", "count": 1, "share_percentage": 11.11},
            {"method": "llm", "count": 1, "share_percentage": 11.11},
            {"method": "state", "count": 1, "share_percentage": 11.11},
            {"method": "sub_conversation", "count": 1, "share_percentage": 11.11},
            {"method": "examples", "count": 0, "share_percentage": 0.0},
        ],
        "fallback_rate_percentage": 22.22,
        "total": 9,
    }
    # P2 only routed by keyword; the core methods stay listed at 0.
    assert get(api, "routing-methods", profile="retail_loja") == {
        "methods": [
            {"method": "keyword", "count": 1, "share_percentage": 100.0},
            {"method": "examples", "count": 0, "share_percentage": 0.0},
            {"method": "fallback", "count": 0, "share_percentage": 0.0},
            {"method": "llm", "count": 0, "share_percentage": 0.0},
            {"method": "state", "count": 0, "share_percentage": 0.0},
        ],
        "fallback_rate_percentage": 0.0,
        "total": 1,
    }


def test_tool_calls_give_errors_permission_asks_error_rate_and_average_latency_per_tool(api, traffic):
    body = get(api, "tools")
    assert body["tools"] == [
        {
            "tool": "consultar_fatura",
            "server": "telecom",
            "calls": 4,
            "ok": 2,
            "permission_asks": 0,
            "errors": 2,
            "errors_by_status": {"error": 1, "timeout": 1},
            "error_rate_percentage": 50.0,
            "avg_latency_ms": 837.5,  # (100 + 200 + 3000 + 50) / 4
        },
        {
            "tool": "consultar_pedido",
            "server": "retail",
            "calls": 3,
            "ok": 2,
            "permission_asks": 1,  # c4's call waited for the user: not an error
            "errors": 0,
            "errors_by_status": {},
            "error_rate_percentage": 0.0,
            "avg_latency_ms": 100.0,  # (120 + 80) / 2: the ask never ran
        },
        {
            "tool": "diagnosticar_linha",
            "server": "telecom",
            "calls": 1,
            "ok": 0,
            "permission_asks": 0,
            "errors": 1,
            "errors_by_status": {"not_offered": 1},
            "error_rate_percentage": 100.0,
            "avg_latency_ms": 0.0,
        },
    ]
    assert (body["total_calls"], body["total_permission_asks"], body["total_errors"]) == (8, 1, 3)
    assert body["error_statuses"] == ["error", "timeout", "invalid_arguments", "unavailable", "not_offered"]


def test_a_tool_mostly_waiting_for_permission_is_not_shown_as_failing(api, traffic):
    # The review's diagnosticar_linha: 2 of 3 calls were permission asks, and the dashboard said 67 % errors.
    from conversations.models import ToolCall

    for status in ("permission_required", "permission_required", "ok"):
        ToolCall.objects.create(
            conversation=traffic.conversations["c8"],
            agent="support_agent",
            tool="diagnosticar_linha",
            server="telecom",
            status=status,
            latency_ms=0 if status != "ok" else 40,
        )
    tool = next(t for t in get(api, "tools")["tools"] if t["tool"] == "diagnosticar_linha")
    # With the traffic's not_offered call: 4 calls, 2 asks, 1 ok, 1 error → 1 error of the 2 calls that ran.
    assert (tool["calls"], tool["permission_asks"], tool["ok"], tool["errors"]) == (4, 2, 1, 1)
    assert tool["error_rate_percentage"] == 50.0
    assert tool["errors_by_status"] == {"not_offered": 1}


# -- /api/analytics/cohorts ------------------------------------------------------------------------------------------


def test_cohorts_compare_the_multi_agent_and_single_agent_sides(api, traffic):
    body = get(api, "cohorts")
    assert body["percentiles"] is True
    multi, single = body["cohorts"]
    # Percentiles come from latency buckets 5 % wide: within 5 % of percentile_cont's exact values.
    assert multi.pop("p50_latency_ms") == pytest.approx(300.0, rel=0.05)
    assert multi.pop("p95_latency_ms") == pytest.approx(480.0, rel=0.05)  # 400 + 0.8 × (500 − 400)
    assert single.pop("p50_latency_ms") == pytest.approx(60.0, rel=0.05)
    assert single.pop("p95_latency_ms") == pytest.approx(69.0, rel=0.05)  # 50 + 0.95 × 20
    assert multi == {
        "cohort": "multi_agent",
        "messages": 5,  # user messages of c1 ×2, c2 ×2, c5 (its D40 turn is too old)
        "answers": 5,
        "conversations": 4,  # c1, c2, c6, c8 (c5 was created on D40)
        "handoffs": 5,  # h1, h2 (c1), h4, h6 (c2), h12 (c5)
        "conversations_with_handoffs": 2,  # c1, c2 (c5's h12 is in the window, c5 is not)
        "handoff_rate_percentage": 50.0,
        "avg_judge_score": 0.66,  # (.8 + .6 + 1 + .4 + .5) / 5
        "avg_latency_ms": 300.0,  # 100, 300, 200, 500, 400
    }
    assert single == {
        "cohort": "single_agent",
        "messages": 2,
        "answers": 2,
        "conversations": 2,  # c3, c7
        "handoffs": 0,
        "conversations_with_handoffs": 0,
        "handoff_rate_percentage": 0.0,
        "avg_judge_score": 0.8,
        "avg_latency_ms": 60.0,
    }


def test_a_cohort_without_traffic_is_still_listed_with_zeros(api, traffic):
    body = get(api, "cohorts", start=traffic.day(3), end=traffic.day(3))  # only c4, whose cohort is blank
    assert [(c["cohort"], c["messages"], c["conversations"], c["avg_latency_ms"]) for c in body["cohorts"]] == [
        ("multi_agent", 0, 0, None),
        ("single_agent", 0, 0, None),
    ]
