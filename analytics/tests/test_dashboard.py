"""The dashboard page at /analytics/: who reaches it, what it offers, and where the admin links it.

What it draws is checked in a real browser (``test_dashboard_browser.py``); these need no browser.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.templatetags.static import static
from django.urls import reverse

from tests.factories import AgentProfileFactory

pytestmark = pytest.mark.django_db

DASHBOARD = "/analytics/"
ECHARTS = "analytics/vendor/echarts-6.1.0/echarts.min.js"


@pytest.fixture
def analyst(django_user_model):
    """Staff with the permission alone, not a superuser."""
    user = django_user_model.objects.create_user("viewer", "viewer@example.com", "viewer-password", is_staff=True)
    user.user_permissions.add(Permission.objects.get(content_type__app_label="analytics", codename="view_analytics"))
    return user


def test_it_is_routed_at_analytics():
    assert reverse("analytics-dashboard") == DASHBOARD


def test_an_anonymous_visitor_is_sent_to_the_admin_login(client):
    response = client.get(DASHBOARD)
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('admin:login')}?next={DASHBOARD}"


def test_a_routing_editor_gets_403(editor_client):
    assert editor_client.get(DASHBOARD).status_code == 403


def test_a_user_with_the_permission_who_is_not_staff_gets_403(client, analyst):
    analyst.is_staff = False
    analyst.save(update_fields=["is_staff"])
    client.force_login(analyst)
    assert client.get(DASHBOARD).status_code == 403


def test_staff_with_the_permission_alone_see_it(client, analyst):
    client.force_login(analyst)
    assert client.get(DASHBOARD).status_code == 200


def test_the_page_sits_in_the_admins_frame_and_loads_its_scripts_from_its_own_static_files(staff_client):
    response = staff_client.get(DASHBOARD)
    assert response.status_code == 200
    names = [template.name for template in response.templates]
    assert "analytics/dashboard.html" in names
    assert "admin/base_site.html" in names
    html = response.content.decode()
    assert static(ECHARTS) in html
    assert static("analytics/dashboard.js") in html
    assert "://" not in html.split(static(ECHARTS))[0].rsplit("<script", 1)[1]  # same origin, no CDN


def test_the_page_points_its_script_at_the_analytics_api_and_the_conversation_pages(staff_client):
    html = staff_client.get(DASHBOARD).content.decode()
    assert 'data-api-base="/api/analytics/"' in html
    assert 'data-conversation-url="/admin/conversations/conversation/0/change/"' in html


def test_the_filters_offer_the_day_presets_every_profile_and_every_tenant(staff_client, tenant, outsider):
    AgentProfileFactory(agent_id="telecom_contas", name="Agente Telecom Contas")
    AgentProfileFactory(agent_id="retail_loja", name="Loja")
    html = staff_client.get(DASHBOARD).content.decode()
    for days in (7, 30, 90):
        assert f'data-days="{days}"' in html
    assert '<option value="telecom_contas">Agente Telecom Contas (telecom_contas)</option>' in html
    assert '<option value="retail_loja">Loja (retail_loja)</option>' in html
    assert f'<option value="{tenant.slug}">' in html
    assert f'<option value="{outsider.slug}">' in html
    assert 'id="filter-start"' in html
    assert 'id="filter-end"' in html


def test_the_filters_offer_every_cohort_and_every_published_version_number(staff_client, tenant):
    from routing.models import RoutingVersion

    for agent_id, numbers in (("telecom_contas", (1, 2, 3)), ("retail_loja", (1,))):
        profile = AgentProfileFactory(agent_id=agent_id)
        for number in numbers:
            RoutingVersion.objects.create(profile=profile, number=number, document={})
    html = staff_client.get(DASHBOARD).content.decode()
    cohorts = html.split('id="filter-cohort"')[1].split("</select>")[0]
    assert [part.split('"')[1] for part in cohorts.split("<option value=")[1:]] == [
        "",
        "multi_agent",
        "single_agent",
        "none",
    ]
    versions = html.split('id="filter-version"')[1].split("</select>")[0]
    # Each number once (v1 of two profiles), newest first, after every version and the draft.
    assert [part.split('"')[1] for part in versions.split("<option value=")[1:]] == ["", "draft", "3", "2", "1"]


def test_the_admin_links_the_dashboard_on_its_index_and_in_the_user_tools_for_staff(staff_client):
    html = staff_client.get(reverse("admin:index")).content.decode()
    assert 'id="analytics-module"' in html
    assert 'id="analytics-link"' in html
    assert f'href="{DASHBOARD}"' in html
    other_page = staff_client.get(reverse("admin:conversations_conversation_changelist")).content.decode()
    assert 'id="analytics-link"' in other_page


def test_the_admin_does_not_link_it_for_a_routing_editor(editor_client):
    html = editor_client.get(reverse("admin:index")).content.decode()
    assert 'id="analytics-module"' not in html
    assert 'id="analytics-link"' not in html
    assert DASHBOARD not in html


def test_the_ratings_panel_links_the_inbox_and_conversations_only_for_who_may_open_them(client, analyst):
    client.force_login(analyst)
    html = client.get(DASHBOARD).content.decode()
    assert 'id="panel-feedback"' in html
    assert 'data-inbox-url="" data-conversation-url=""' in html
    assert 'id="feedback-inbox-link"' not in html

    analyst.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="conversations", codename__in=["view_messagefeedback", "view_conversation"]
        )
    )
    html = client.get(DASHBOARD).content.decode()
    assert (
        'data-inbox-url="/admin/conversations/messagefeedback/" '
        'data-conversation-url="/admin/conversations/conversation/0/change/"'
    ) in html
    assert 'href="/admin/conversations/messagefeedback/" id="feedback-inbox-link"' in html


def test_the_rollout_section_points_at_each_plans_view_and_the_list_of_plans(staff_client):
    html = staff_client.get(DASHBOARD).content.decode()
    assert 'id="panel-rollouts"' in html
    assert 'data-rollout-url="/analytics/rollouts/0/"' in html
    assert 'href="/analytics/rollouts/" id="rollouts-all-link"' in html
