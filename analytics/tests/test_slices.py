"""Every analytics view sliced by rollout cohort and by routing version (analytics/tests/traffic.py: c1, c2, c6,
c8, b1 version 2; c3, c5, c7 version 1; c4 a draft). Tenant A's API key, the default 30 days."""

from __future__ import annotations

import pytest

from analytics.filters import ERROR_COHORT, ERROR_VERSION

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("module_traffic")]  # built once (conftest.py)


def get(client, path, **params):
    response = client.get(f"/api/analytics/{path}", params)
    assert response.status_code == 200, response.content
    return response.json()


def test_handoffs_of_one_version_count_its_moves_and_the_conversations_it_served(api, traffic):
    # Version 2: h1, h2 (c1), h4, h6 (c2). Conversations created in the window whose first user message was served
    # by version 2: c1, c2 (c6, c7 and c8 have no messages yet: no version, counted with the drafts).
    body = get(api, "handoffs", version="2")
    assert (body["total_handoffs"], body["conversations_with_handoffs"], body["total_conversations"]) == (4, 2, 2)
    assert [path["count"] for path in body["handoff_paths"]] == [1, 1, 1, 1]
    # The draft: c4's h10, the only move served by no published version; conversations c4, c6, c7, c8.
    draft = get(api, "handoffs", version="draft")
    assert (draft["total_handoffs"], draft["conversations_with_handoffs"], draft["total_conversations"]) == (1, 1, 4)
    assert draft["handoff_paths"] == [
        {"profile": "retail_loja", "from": "billing_agent", "to": "orders_agent", "count": 1}
    ]
    # A version nobody was served by: nothing, not an error.
    assert get(api, "handoffs", version="7")["total_handoffs"] == 0


def test_handoffs_of_one_cohort_count_its_moves_and_conversations(api, traffic):
    single = get(api, "handoffs", cohort="single_agent")
    assert (single["total_handoffs"], single["conversations_with_handoffs"], single["total_conversations"]) == (0, 0, 2)
    undecided = get(api, "handoffs", cohort="none")  # c4: the flag did not decide
    assert (undecided["total_handoffs"], undecided["total_conversations"]) == (1, 1)
    both = get(api, "handoffs", cohort="multi_agent", version="2")
    assert (both["total_handoffs"], both["total_conversations"]) == (4, 2)


def test_utilisation_of_the_single_agent_cohort_is_the_general_agent_on_its_path(api, traffic):
    assert get(api, "agents", cohort="single_agent") == [
        {
            "profile": "telecom_contas",
            "agent": "support_agent",
            "path": "single_agent",
            "turns": 2,
            "share_percentage": 100.0,
        }
    ]
    # Version 1: c3's two answers and c5's D1 answer.
    assert [(row["agent"], row["path"], row["turns"]) for row in get(api, "agents", version="1")] == [
        ("support_agent", "single_agent", 2),
        ("orders_agent", "routed", 1),
    ]


def test_routing_methods_and_tool_calls_are_sliced_by_the_turn_of_their_message(api, traffic):
    assert get(api, "routing-methods", cohort="single_agent")["fallback_rate_percentage"] == 100.0  # c3 ×2
    methods = get(api, "routing-methods", version="2")  # c1 keyword ×2, c2 coordinator and sub_conversation
    assert methods["total"] == 4
    # c6's decision points at no message: counted under no version (the draft) and no cohort, with c4's.
    assert get(api, "routing-methods", version="draft")["total"] == 2
    tools = get(api, "tools", version="2")  # c1's three calls and c2's two
    assert [(t["tool"], t["calls"], t["errors"]) for t in tools["tools"]] == [
        ("consultar_fatura", 4, 2),
        ("consultar_pedido", 1, 0),
    ]
    asks = get(api, "tools", cohort="none")["tools"]  # c4's permission ask alone: no call ran
    assert asks == [
        {
            "tool": "consultar_pedido",
            "server": "retail",
            "calls": 1,
            "ok": 0,
            "permission_asks": 1,
            "errors": 0,
            "errors_by_status": {},
            "error_rate_percentage": 0.0,
            "avg_latency_ms": None,
        }
    ]


def test_loop_stops_delegations_and_recent_rows_are_sliced(api, traffic):
    stops = get(api, "loop-stops", version="2")
    assert (stops["total_stopped"], stops["total_refused"]) == (1, 1)  # h3, h8
    assert stops["by_pair"][0]["by_outcome"] == {"ping_pong": 1}
    assert get(api, "loop-stops", cohort="none")["by_pair"][0]["by_outcome"] == {"step_limit": 1}  # h11
    assert get(api, "delegations", version="1")["total_delegations"] == 0
    recent = get(api, "handoffs/recent", cohort="none")
    assert [row["id"] for row in recent] == [traffic.handoffs["h11"].pk, traffic.handoffs["h10"].pk]


def test_cohorts_of_one_version(api, traffic):
    multi, single = get(api, "cohorts", version="1")["cohorts"]
    # c5's D1 turn and h12 (c5 was created before the window); c3's two turns (c7 has none).
    assert (multi["messages"], multi["handoffs"], multi["conversations"]) == (1, 1, 0)
    assert (single["messages"], single["answers"], single["conversations"]) == (2, 2, 1)


def test_the_timeline_by_hour_is_sliced_too(api, traffic):
    body = get(api, "handoffs/timeline", start=traffic.day(2), end=traffic.day(2), bucket="hour", version="draft")
    assert sum(period["count"] for period in body) == 0
    body = get(api, "handoffs/timeline", start=traffic.day(2), end=traffic.day(2), bucket="hour", version="2")
    assert sum(period["count"] for period in body) == 2  # h1, h2


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"cohort": "everyone"}, "cohort", ERROR_COHORT),
        ({"cohort": "single"}, "cohort", ERROR_COHORT),
        ({"version": "0"}, "version", ERROR_VERSION),
        ({"version": "v2"}, "version", ERROR_VERSION),
        ({"version": "-1"}, "version", ERROR_VERSION),
        ({"version": "2.5"}, "version", ERROR_VERSION),
        ({"version": "99999999999"}, "version", ERROR_VERSION),
    ],
)
@pytest.mark.parametrize("path", ["handoffs", "agents", "tools", "cohorts", "goals", "handoffs/recent"])
def test_a_bad_cohort_or_version_gets_400_naming_it(api, path, params, field, message):
    response = api.get(f"/api/analytics/{path}", params)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {field: [message]}


def test_goals_take_the_slices(api, traffic):
    assert get(api, "goals", cohort="multi_agent", version="draft")["summary"]["runs"] == 0
