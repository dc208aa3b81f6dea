"""``GET /api/analytics/goals`` and the dashboard's Goals panel, against analytics/tests/goal_traffic.py.

Who may call the endpoint at all (401, 403, another tenant's slug) is checked with every endpoint in test_access.py.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders

from analytics import goals
from analytics.filters import ERROR_TENANT_NOT_FOUND, ERROR_UNKNOWN_PROFILE

pytestmark = pytest.mark.django_db

URL = "/api/analytics/goals"


def get(client, **params):
    response = client.get(URL, params)
    assert response.status_code == 200, response.content
    return response.json()


def test_a_key_reads_its_own_tenants_goal_figures_as_the_selector_counts_them(api, goal_traffic):
    body = get(api)
    end = dt.datetime.combine(goal_traffic.today + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC)
    assert body == goals.goal_analytics(start=end - dt.timedelta(days=30), end=end, tenant_id=goal_traffic.tenant_a.pk)
    assert (body["summary"]["runs"], body["summary"]["clarification_rate_percentage"]) == (5, 40.0)
    assert [(row["goal"], row["runs"]) for row in body["goals"]] == [("GET_QUOTE", 3), ("TOP_MOVERS", 1), ("", 1)]


def test_a_tenants_key_never_sees_the_other_tenants_goals(api, outsider_api, goal_traffic):
    outsider = get(outsider_api)
    assert outsider["summary"]["by_status"] == {"success": 1, "failure": 2, "clarification": 0, "general": 0}
    assert outsider["goals"] == [
        {
            "domain": "finance",
            "goal": "TOP_MOVERS",
            "runs": 2,
            "success": 0,
            "failure": 2,
            "clarification": 0,
            "general": 0,
        },
        {
            "domain": "finance",
            "goal": "GET_QUOTE",
            "runs": 1,
            "success": 1,
            "failure": 0,
            "clarification": 0,
            "general": 0,
        },
    ]
    # And A sees none of B's: one TOP_MOVERS answer, one get_top_gainers step.
    own = get(api)
    assert [row["runs"] for row in own["goals"] if row["goal"] == "TOP_MOVERS"] == [1]
    assert [row["steps"] for row in own["capabilities"] if row["capability"] == "get_top_gainers"] == [1]
    for client in (api, outsider_api):
        response = client.get(URL, {"tenant": "outsider" if client is api else "tenant_a"})
        assert response.status_code == 404
        assert response.json()["error"]["fields"] == {"tenant": [ERROR_TENANT_NOT_FOUND]}


def test_the_filters_narrow_to_a_profile_and_to_dates(api, goal_traffic):
    p2 = get(api, profile="finance_mercados")
    assert (p2["summary"]["runs"], p2["summary"]["failure_rate_percentage"]) == (1, 100.0)
    d1 = get(api, start=goal_traffic.day(1), end=goal_traffic.day(1))
    assert d1["summary"]["by_status"] == {"success": 1, "failure": 0, "clarification": 1, "general": 0}
    d40 = get(api, start=goal_traffic.day(40), end=goal_traffic.day(40))
    assert [(row["goal"], row["success"]) for row in d40["goals"]] == [("GET_QUOTE", 1)]
    assert get(api, days=90)["summary"]["runs"] == 6
    assert get(api, days=1)["summary"]["runs"] == 0


def test_bad_filters_are_a_400_naming_the_field(api, goal_traffic):
    response = api.get(URL, {"profile": "nobody"})
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"profile": [ERROR_UNKNOWN_PROFILE.format(profile="nobody")]}
    response = api.get(URL, {"days": "7", "start": goal_traffic.day(3)})
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["days"]


def test_staff_read_every_tenant_or_the_one_named(staff_api, goal_traffic):
    assert get(staff_api)["summary"]["runs"] == 8
    assert get(staff_api, tenant="outsider")["summary"]["runs"] == 3
    assert get(staff_api, tenant="tenant_a", profile="finance_assistente")["summary"]["runs"] == 4


def test_the_schema_describes_the_endpoint(staff_client):
    schema = staff_client.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"][URL]["get"]
    assert {parameter["name"] for parameter in operation["parameters"]} >= {"days", "start", "end", "profile", "tenant"}
    assert set(operation["responses"]) >= {"200", "400", "401", "403", "404"}
    body = schema["components"]["schemas"]["GoalAnalytics"]["properties"]
    assert set(body) == {"summary", "goals", "capabilities"}


def test_the_dashboard_has_a_goals_panel_that_its_script_fills_from_the_goals_endpoint(staff_client):
    html = staff_client.get("/analytics/").content.decode()
    assert 'id="panel-goals"' in html
    for element in ("goals-runs", "goals-clarification-rate", "goals-failure-rate", "goals-p50", "goals-p95"):
        assert f'id="{element}"' in html
    for element in ("chart-goals", "table-goals", "table-capabilities"):
        assert f'id="{element}"' in html
    script = Path(finders.find("analytics/dashboard.js")).read_text()
    assert 'goals: "goals"' in script
