"""Who reads which tenant's analytics: keys their own tenant only, analysts any, editors and anonymous none."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from analytics.filters import ERROR_ANALYTICS_FORBIDDEN, ERROR_TENANT_NOT_FOUND
from common.errors import ERROR_NOT_AUTHENTICATED

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("module_traffic")]  # built once (conftest.py)

ENDPOINTS = [
    "handoffs",
    "handoffs/timeline",
    "handoffs/recent",
    "loop-stops",
    "delegations",
    "agents",
    "routing-methods",
    "tools",
    "cohorts",
    "languages",
    "goals",
]


def url(path: str) -> str:
    return f"/api/analytics/{path}"


@pytest.mark.parametrize("path", ENDPOINTS)
def test_an_anonymous_request_gets_401(client, path, stored_traffic):
    response = APIClient().get(url(path))
    assert response.status_code == 401
    assert response.json()["error"]["message"] == ERROR_NOT_AUTHENTICATED


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_routing_editor_gets_403(editor_api, path, stored_traffic):
    response = editor_api.get(url(path))
    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "permission_denied",
        "message": ERROR_ANALYTICS_FORBIDDEN,
        "fields": {},
    }


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_key_naming_another_tenant_gets_404_naming_tenant_like_an_unknown_slug(api, path, stored_traffic):
    other = api.get(url(path), {"tenant": "outsider"})
    unknown = api.get(url(path), {"tenant": "no-such-tenant"})
    assert other.status_code == unknown.status_code == 404
    assert other.json() == unknown.json()
    assert other.json()["error"]["fields"] == {"tenant": [ERROR_TENANT_NOT_FOUND]}


def test_a_key_may_name_its_own_tenant(api, traffic):
    assert api.get(url("handoffs"), {"tenant": "tenant_a"}).json()["total_handoffs"] == 6


def test_a_tenants_key_never_sees_the_other_tenants_rows(api, outsider_api, traffic):
    # Tenant A's own figures are in test_apis.py; B's are b1's: five billing→orders handoffs, a stop, a return.
    assert outsider_api.get(url("handoffs")).json() == {
        "total_handoffs": 5,
        "handoff_paths": [{"profile": "telecom_contas", "from": "billing_agent", "to": "orders_agent", "count": 5}],
        "conversations_with_handoffs": 1,
        "total_conversations": 1,
        "handoff_rate_percentage": 100.0,
    }
    assert outsider_api.get(url("agents")).json() == [
        {"profile": "telecom_contas", "agent": "billing_agent", "path": "routed", "turns": 1, "share_percentage": 50.0},
        {"profile": "telecom_contas", "agent": "product_agent", "path": "routed", "turns": 1, "share_percentage": 50.0},
    ]
    assert outsider_api.get(url("loop-stops")).json()["by_outcome"] == [{"outcome": "ping_pong", "count": 1}]
    assert [row["conversation_key"] for row in outsider_api.get(url("handoffs/recent")).json()] == [
        "outsider:telecom_contas:b1"
    ] * 7
    # And A sees none of B's: no product_agent answer, no 7000 ms tool error, no b1 in the recent rows.
    assert "product_agent" not in {row["agent"] for row in api.get(url("agents")).json()}
    fatura = api.get(url("tools")).json()["tools"][0]
    assert (fatura["tool"], fatura["calls"], fatura["errors"]) == ("consultar_fatura", 4, 2)
    assert all(row["tenant"] == "tenant_a" for row in api.get(url("handoffs/recent"), {"limit": 100}).json())
    methods = {m["method"]: m["count"] for m in api.get(url("routing-methods")).json()["methods"]}
    assert methods["fallback"] == 2
    multi = api.get(url("cohorts")).json()["cohorts"][0]
    assert (multi["messages"], multi["answers"], multi["avg_latency_ms"]) == (5, 5, 300.0)


def test_staff_see_every_tenant_or_the_one_they_name(staff_api, traffic):
    # Every tenant: A's six counted handoffs and B's five; conversations A's seven and b1; with handoffs 3 + 1.
    # Paths per profile: B's five and A's two on telecom_contas, A's h10 on retail_loja.
    assert staff_api.get(url("handoffs")).json() == {
        "total_handoffs": 11,
        "handoff_paths": [
            {"profile": "telecom_contas", "from": "billing_agent", "to": "orders_agent", "count": 7},
            {"profile": "retail_loja", "from": "billing_agent", "to": "orders_agent", "count": 1},
            {"profile": "telecom_contas", "from": "coordinator", "to": "billing_agent", "count": 1},
            {"profile": "telecom_contas", "from": "coordinator", "to": "orders_agent", "count": 1},
            {"profile": "telecom_contas", "from": "orders_agent", "to": "billing_agent", "count": 1},
        ],
        "conversations_with_handoffs": 4,
        "total_conversations": 8,
        "handoff_rate_percentage": 50.0,
    }
    body = staff_api.get(url("handoffs"), {"tenant": "outsider"}).json()
    assert (body["total_handoffs"], body["total_conversations"], body["handoff_rate_percentage"]) == (5, 1, 100.0)
    assert staff_api.get(url("handoffs"), {"tenant": "tenant_a"}).json()["total_handoffs"] == 6
    delegations = staff_api.get(url("delegations"), {"tenant": "outsider"}).json()
    assert (delegations["total_delegations"], delegations["total_returns"]) == (0, 1)


def test_staff_naming_an_unknown_tenant_get_404_naming_tenant(staff_api, stored_traffic):
    response = staff_api.get(url("handoffs"), {"tenant": "no-such-tenant"})
    assert response.status_code == 404
    assert response.json()["error"]["fields"] == {"tenant": [ERROR_TENANT_NOT_FOUND]}


def test_a_user_given_the_analytics_permission_reads_every_tenant(django_user_model, traffic):
    analyst = django_user_model.objects.create_user("analyst2", password="pw", is_staff=True)
    analyst.user_permissions.add(Permission.objects.get(codename="view_analytics", content_type__app_label="analytics"))
    client = APIClient()
    client.force_login(analyst)
    assert client.get(url("handoffs")).json()["total_handoffs"] == 11


def test_a_logged_in_user_without_the_permission_gets_403_even_with_a_tenant(django_user_model, stored_traffic):
    user = django_user_model.objects.create_user("someone", password="pw", is_staff=True)
    client = APIClient()
    client.force_login(user)
    assert client.get(url("handoffs"), {"tenant": "tenant_a"}).status_code == 403
