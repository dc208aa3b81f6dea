"""The gateway's calls to remote backends in the admin: a read-only list to find which backend fails, how and
for whom, and each conversation's calls and active backend on its page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from agents.models import AgentProfile
from conversations.models import BackendCall, BackendCallStatus, Conversation

pytestmark = pytest.mark.django_db

LIST = "/admin/conversations/backendcall/"


@pytest.fixture
def calls(tenant, telecom):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    conversation = Conversation.objects.create(
        conversation_key="tenant_a:telecom_contas:gw-1",
        tenant=tenant,
        profile=profile,
        session_id="gw-1",
        active_backend="partner_backend",
    )
    common = {"conversation": conversation, "tenant": tenant, "profile": profile}
    return conversation, [
        BackendCall.objects.create(
            **common, backend="partner_backend", remote_agent="billing_agent", status="ok", latency_ms=41.5
        ),
        BackendCall.objects.create(
            **common, backend="legacy_backend", status="timeout", latency_ms=5000.0, error="no answer within 5s"
        ),
        BackendCall.objects.create(
            **common, backend="legacy_backend", status="server_error", http_status=503, error="503 Service Unavailable"
        ),
    ]


def test_the_list_shows_every_call_with_its_status_and_filters_by_status_and_backend(staff_client, calls):
    response = staff_client.get(LIST)
    assert response.status_code == 200
    page = response.content.decode()
    assert "partner_backend" in page and "legacy_backend" in page
    assert BackendCallStatus.TIMEOUT.label in page and BackendCallStatus.SERVER_ERROR.label in page

    timeouts = staff_client.get(LIST, {"status__exact": "timeout"})
    assert list(timeouts.context["cl"].result_list) == [calls[1][1]]
    legacy = staff_client.get(LIST, {"backend": "legacy_backend"})
    assert {call.status for call in legacy.context["cl"].result_list} == {"timeout", "server_error"}
    found = staff_client.get(LIST, {"q": "Service Unavailable"})
    assert list(found.context["cl"].result_list) == [calls[1][2]]


def test_nobody_adds_or_edits_a_call_in_the_admin(staff_client, calls):
    assert staff_client.get(f"{LIST}add/").status_code == 403
    call = calls[1][0]
    response = staff_client.post(f"{LIST}{call.pk}/change/", {"backend": "changed", "status": "ok"})
    assert response.status_code == 403
    call.refresh_from_db()
    assert call.backend == "partner_backend"


def test_a_conversations_page_shows_its_active_backend_and_its_backend_calls(staff_client, calls):
    conversation, _ = calls
    page = staff_client.get(f"/admin/conversations/conversation/{conversation.pk}/change/").content.decode()

    assert "remote backend calls" in page.lower()
    assert "503 Service Unavailable" in page and "no answer within 5s" in page
    assert "partner_backend" in page  # the active backend, and the call that answered


def test_a_staff_member_without_the_view_right_does_not_see_the_calls(client, django_user_model, calls):
    user = django_user_model.objects.create_user("operator", password="x", is_staff=True)
    client.force_login(user)
    assert client.get(LIST).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_backendcall"))
    assert client.get(LIST).status_code == 200
