"""Impact preview before publishing: the profile's real user messages of the last days, replayed with
their conversation's state against the live version and the draft — how many would route differently, grouped by
old → new intent, with samples that open their conversation."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from agents.models import AgentProfile
from conversations.models import Conversation, Message, RouteDecisionRecord
from releases.impact import impact_preview
from releases.versions import version_publish
from routing.models import Keyword

pytestmark = pytest.mark.django_db

PAGE = "/admin/conversations/conversation/impact/"


def say(api, text, session):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content


def stored_intent(text: str) -> str:
    return RouteDecisionRecord.objects.get(message__content=text).intent


@pytest.fixture
def traffic(api, telecom):
    """Four stored messages in three conversations, version 1 published, then the draft routes "modem" to orders."""
    say(api, "Minha fatura veio alta", "s-1")
    say(api, "meu modem não liga", "s-1")
    say(api, "o modem pisca vermelho", "s-2")
    say(api, "quero rastrear meu pedido", "s-3")
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="first")
    Keyword.objects.create(intent=profile.intents.get(name="retail_order_tracking"), text="modem")
    return profile


def test_the_preview_counts_exactly_the_messages_the_draft_moves_grouped_old_to_new(traffic):
    before = stored_intent("meu modem não liga")
    assert before != "retail_order_tracking"

    result = impact_preview(agent_id="telecom_contas")

    assert (result["messages"], result["changed"], result["share_changed"]) == (4, 2, 0.5)
    [group] = result["groups"]
    assert (group["old_intent"], group["new_intent"], group["count"]) == (before, "retail_order_tracking", 2)
    assert group["new_agent"] == "orders_agent"
    assert {sample["text"] for sample in group["samples"]} == {"meu modem não liga", "o modem pisca vermelho"}
    keys = {sample["conversation_key"] for sample in group["samples"]}
    assert keys == set(
        Conversation.objects.filter(session_id__in=["s-1", "s-2"]).values_list("conversation_key", flat=True)
    )


def test_samples_are_capped_per_group(traffic):
    [group] = impact_preview(agent_id="telecom_contas", samples=1)["groups"]

    assert group["count"] == 2
    assert len(group["samples"]) == 1


def test_nothing_moves_when_the_draft_is_the_live_version(api, telecom):
    say(api, "meu modem não liga", "s-1")
    version_publish(profile=AgentProfile.objects.get(agent_id="telecom_contas"), note="first")

    result = impact_preview(agent_id="telecom_contas")

    assert (result["messages"], result["changed"], result["groups"]) == (1, 0, [])


def test_messages_older_than_the_window_are_left_out(traffic):
    old = timezone.now() - timedelta(days=10)
    Message.objects.filter(content="o modem pisca vermelho").update(created_at=old)

    assert impact_preview(agent_id="telecom_contas", days=7)["changed"] == 1
    assert impact_preview(agent_id="telecom_contas", days=30)["changed"] == 2


def test_a_message_is_replayed_in_the_state_its_conversation_had(api, telecom):
    """A state policy keeps a short reply with the intent the previous message left: with the state rebuilt from
    the stored decisions, the reply routes as it did; replayed without it, it would have gone elsewhere."""
    from routing.models import StatePolicy

    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    orders = profile.intents.get(name="retail_order_tracking")
    orders.next_state = "awaiting_order_id"
    orders.save()
    StatePolicy.objects.create(profile=profile, state="awaiting_order_id", intent=orders, specialist=orders.specialist)
    say(api, "quero rastrear meu pedido", "s-1")
    say(api, "12345", "s-1")
    assert stored_intent("12345") == "retail_order_tracking"
    version_publish(profile=profile, note="first")
    StatePolicy.objects.all().delete()

    result = impact_preview(agent_id="telecom_contas")

    assert result["changed"] == 1
    [group] = result["groups"]
    assert group["old_intent"] == "retail_order_tracking"
    assert [sample["text"] for sample in group["samples"]] == ["12345"]


def test_the_page_shows_the_totals_and_groups_with_samples_opening_their_conversation(client, admin_user, traffic):
    client.force_login(admin_user)

    page = client.get(PAGE, {"profile": "telecom_contas", "days": 7}).content.decode()

    assert re.search(r"<strong>2</strong> of <strong>4</strong> message", page)
    assert "50.0%" in page
    conversation = Conversation.objects.get(session_id="s-2")
    assert f'href="/admin/conversations/conversation/{conversation.pk}/change/" class="impact-sample"' in page
    assert "retail_order_tracking" in page


def test_the_conversation_list_links_to_the_page(client, admin_user, traffic):
    client.force_login(admin_user)

    page = client.get("/admin/conversations/conversation/").content.decode()

    assert f'href="{PAGE}" id="impact-preview-link"' in page


def test_a_bad_days_value_is_named_and_nothing_is_replayed(client, admin_user, traffic):
    client.force_login(admin_user)

    page = client.get(PAGE, {"profile": "telecom_contas", "days": "many"}).content.decode()

    assert "Days must be a whole number." in page
    assert 'id="impact-totals"' not in page


def test_staff_without_the_rights_are_refused(client, django_user_model, traffic):
    user = django_user_model.objects.create_user("clerk", "clerk@example.com", "pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_conversation"))
    client.force_login(user)

    assert client.get(PAGE, {"profile": "telecom_contas"}).status_code == 403

    user.user_permissions.add(Permission.objects.get(codename="view_intent"))
    user = django_user_model.objects.get(pk=user.pk)
    client.force_login(user)
    assert client.get(PAGE, {"profile": "telecom_contas"}).status_code == 200


# -- whose messages: the tenants the user may read --------------------------------------------------------------


@pytest.fixture
def two_tenants_traffic(traffic, outsider_api):
    """``traffic``'s four messages of ``tenant_a``, and two of ``outsider`` the draft moves too."""
    say(outsider_api, "meu modem queimou", "b-1")
    say(outsider_api, "o modem não conecta", "b-2")
    return traffic


def test_the_preview_replays_only_the_tenants_it_is_given(two_tenants_traffic, tenant, outsider):
    everyone = impact_preview(agent_id="telecom_contas")
    only_a = impact_preview(agent_id="telecom_contas", tenant_ids={tenant.pk})
    nobody = impact_preview(agent_id="telecom_contas", tenant_ids=set())

    assert (everyone["messages"], everyone["changed"]) == (6, 4)
    assert (only_a["messages"], only_a["changed"]) == (4, 2)
    assert all(sample["conversation_key"].startswith("tenant_a:") for sample in only_a["groups"][0]["samples"])
    assert (nobody["messages"], nobody["changed"]) == (0, 0)


def test_an_editor_opens_the_impact_preview_from_the_profile_page_and_sees_only_the_tenants_granted(
    editor_client, editor, two_tenants_traffic, tenant
):
    from tenants.models import TenantGrant

    TenantGrant.objects.create(tenant=tenant, user=editor, read_conversations=True)
    profile_page = editor_client.get(f"/admin/agents/agentprofile/{two_tenants_traffic.pk}/change/").content.decode()
    link = f'href="{PAGE}?profile=telecom_contas"'
    assert link in profile_page

    response = editor_client.get(PAGE, {"profile": "telecom_contas"})

    assert response.status_code == 200
    page = response.content.decode()
    assert re.search(r"<strong>2</strong> of <strong>4</strong> message", page)
    assert "outsider:" not in page


def test_an_editor_who_may_read_no_tenant_is_told_why_the_preview_is_empty(editor_client, two_tenants_traffic):
    response = editor_client.get(PAGE, {"profile": "telecom_contas"})

    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="impact-no-tenant"' in page and "so there is nothing to replay" in page
    assert 'id="impact-totals"' not in page


def test_the_preview_is_not_linked_for_staff_who_may_not_open_it(client, tenant_analyst, two_tenants_traffic):
    client.force_login(tenant_analyst)

    conversations = client.get("/admin/conversations/conversation/")

    assert conversations.status_code == 200
    assert 'id="impact-preview-link"' not in conversations.content.decode()
    assert client.get(PAGE, {"profile": "telecom_contas"}).status_code == 403
