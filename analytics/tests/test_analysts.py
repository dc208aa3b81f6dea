"""The "Analysts" role: staff who read the analytics and the conversations of the tenants they are granted
(``TenantGrant.read_conversations``), and never another tenant's.

``tenant_analyst`` may read ``tenant_a``: on every endpoint its figures are exactly what ``tenant_a``'s own API key
reads (the hand-built traffic of :mod:`analytics.tests.traffic`, where every figure of the other tenant differs).
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from rest_framework.test import APIClient

import analytics.urls
from analytics.filters import ERROR_ANALYTICS_FORBIDDEN, ERROR_TENANT_NOT_FOUND
from tenants.models import TenantGrant

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("module_traffic")]  # built once (conftest.py)

# Every analytics endpoint that reads a tenant's turns.
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
    "usage",
    "feedback",
    "feedback/timeline",
    "feedback/breakdown",
    "feedback/recent",
    "knowledge/gaps",
    "outcomes",
    "outcomes/timeline",
    "quality",
]
DASHBOARD = "/analytics/"


def url(path: str) -> str:
    return f"/api/analytics/{path}"


@pytest.fixture
def analyst_api(tenant_analyst) -> APIClient:
    client = APIClient()
    client.force_login(tenant_analyst)
    return client


def test_the_analysts_group_reads_the_conversation_store_and_may_change_nothing(tenant_analyst):
    codenames = set(
        Permission.objects.filter(group__name="Analysts").values_list("content_type__app_label", "codename")
    )

    assert codenames == {
        ("conversations", "view_conversation"),
        ("conversations", "view_message"),
        ("conversations", "view_routedecisionrecord"),
        ("conversations", "view_toolcall"),
        ("conversations", "view_messagefeedback"),
        ("handoffs", "view_handoff"),
    }
    assert not tenant_analyst.has_perm("analytics.view_analytics")


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_granted_analyst_reads_exactly_the_granted_tenants_figures(analyst_api, api, path, traffic):
    mine = analyst_api.get(url(path))
    named = analyst_api.get(url(path), {"tenant": "tenant_a"})

    assert mine.status_code == 200, mine.content
    assert mine.json() == named.json() == api.get(url(path)).json()


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_granted_analyst_naming_another_tenant_gets_404_naming_tenant_like_an_unknown_slug(
    analyst_api, path, stored_traffic
):
    other = analyst_api.get(url(path), {"tenant": "outsider"})
    unknown = analyst_api.get(url(path), {"tenant": "no-such-tenant"})

    assert other.status_code == unknown.status_code == 404
    assert other.json() == unknown.json()
    assert other.json()["error"]["fields"] == {"tenant": [ERROR_TENANT_NOT_FOUND]}


def test_the_granted_figures_never_hold_the_other_tenants_rows(analyst_api, outsider_api, traffic):
    # Tenant B's five billing→orders handoffs, its product_agent answer and its conversation b1 stay out.
    assert analyst_api.get(url("handoffs")).json()["total_handoffs"] == 6
    assert "product_agent" not in {row["agent"] for row in analyst_api.get(url("agents")).json()}
    recent = analyst_api.get(url("handoffs/recent"), {"limit": 100}).json()
    assert recent and all(row["tenant"] == "tenant_a" for row in recent)
    assert outsider_api.get(url("handoffs")).json()["total_handoffs"] == 5


@pytest.mark.parametrize("path", ENDPOINTS)
def test_an_analyst_granted_every_tenant_reads_what_staff_read(analyst_api, staff_api, tenant_analyst, path, traffic):
    TenantGrant.objects.create(tenant=traffic.tenant_b, user=tenant_analyst, read_conversations=True)

    assert analyst_api.get(url(path)).json() == staff_api.get(url(path)).json()


def test_a_grant_through_a_group_scopes_the_same_way(django_user_model, api, traffic):
    from tests.fixtures import group_from_migrations

    group = group_from_migrations("Analysts")
    TenantGrant.objects.create(tenant=traffic.tenant_a, group=group, read_conversations=True)
    member = django_user_model.objects.create_user("member", password="pw", is_staff=True)
    member.groups.add(group)
    client = APIClient()
    client.force_login(member)

    assert client.get(url("handoffs")).json() == api.get(url("handoffs")).json()


def test_an_analyst_without_a_grant_or_with_another_right_only_gets_403(tenant_analyst, stored_traffic):
    grant = TenantGrant.objects.get(user=tenant_analyst)
    grant.read_conversations, grant.act_for_tenant, grant.debug_tenant = False, True, True
    grant.save()
    client = APIClient()
    client.force_login(tenant_analyst)

    response = client.get(url("handoffs"))

    assert response.status_code == 403
    assert response.json()["error"]["message"] == ERROR_ANALYTICS_FORBIDDEN


def test_a_grant_to_a_user_who_is_not_staff_opens_no_analytics(tenant_analyst, stored_traffic):
    tenant_analyst.is_staff = False
    tenant_analyst.save(update_fields=["is_staff"])
    client = APIClient()
    client.force_login(tenant_analyst)

    assert client.get(url("handoffs")).status_code == 403
    assert client.get(DASHBOARD).status_code in (302, 403)


def test_rollout_plans_stay_closed_to_an_analyst(analyst_api, stored_traffic):
    assert analyst_api.get(url("rollouts")).status_code == 403


# -- the dashboard ---------------------------------------------------------------------------------------------


def test_the_dashboard_opens_for_a_granted_analyst_and_offers_only_the_granted_tenants(
    client, tenant_analyst, tenant, outsider
):
    client.force_login(tenant_analyst)

    response = client.get(DASHBOARD)

    assert response.status_code == 200
    html = response.content.decode()
    assert f'<option value="{tenant.slug}">' in html
    assert f'<option value="{outsider.slug}">' not in html
    assert "All the tenants you may read" in html
    assert 'id="rollouts-link"' not in html


def test_the_admin_links_the_dashboard_for_a_granted_analyst(client, tenant_analyst):
    client.force_login(tenant_analyst)

    index = client.get(reverse("admin:index")).content.decode()

    assert 'id="analytics-link"' in index and 'id="analytics-module"' in index
    assert 'href="/chat/"' not in index


def test_every_analytics_endpoint_of_a_tenants_turns_is_checked_here():
    paths = {
        str(pattern.pattern).removeprefix("api/analytics/")
        for pattern in analytics.urls.urlpatterns
        if str(pattern.pattern).startswith("api/analytics/")
    }
    rollouts = {path for path in paths if path.startswith("rollouts")}  # plans: configuration, not a tenant's turns
    assert paths - rollouts == set(ENDPOINTS)
