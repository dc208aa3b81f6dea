"""Staff rights over tenants on every face: the probe's "Routing editors member" table, row by row.

Each row: a routing editor (staff, for the admin) is refused; a user granted that one right over ``tenant_b``
is let through there and refused on ``tenant_a``; a right does not stand in for another. Superusers keep
everything (the rest of chat/tests uses ``staff_user``, a superuser).
"""

from __future__ import annotations

import asyncio

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import Group, Permission
from django.test import Client

from chat.consumers import CLOSE_FORBIDDEN
from chat.intake import ERROR_TENANT_FORBIDDEN
from common.errors import ERROR_CONVERSATION_NOT_FOUND, ERROR_DEBUG_FORBIDDEN, ERROR_PREVIEW_FORBIDDEN
from conversations.models import Conversation, Message
from platform.asgi import application
from tenants.models import TenantGrant, TenantRight
from tests.factories import ConversationFactory, TenantFactory

PRODUCT = "Qual o melhor plano de internet?"  # the product specialist answers; no MCP tool is called


@pytest.fixture
def tenants(db):
    return TenantFactory(slug="tenant_a"), TenantFactory(slug="tenant_b")


@pytest.fixture
def conversations(tenants, telecom):
    """One conversation of each tenant, with one message."""
    made = {}
    for tenant in tenants:
        conversation = ConversationFactory(tenant=tenant, profile=telecom, session_id="iso")
        Message.objects.create(conversation=conversation, role="user", content="oi")
        made[tenant.slug] = conversation
    return made


@pytest.fixture
def granted(django_user_model, tenants):
    """A staff user (not superuser) with ``right`` over ``tenant_b`` only: ``granted(right)``."""

    def make(*rights: TenantRight):
        user = django_user_model.objects.create_user("agent", "agent@example.com", "agent-password", is_staff=True)
        TenantGrant.objects.create(tenant=tenants[1], user=user, **{right.value: True for right in rights})
        return user

    return make


def as_user(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def message(tenant_id: str, session_id: str = "iso") -> dict:
    return {
        "channel": "web",
        "agent_id": "telecom_contas",
        "tenant_id": tenant_id,
        "payload": {"text": PRODUCT, "session_id": session_id},
    }


def post(client: Client, path: str, body: dict | None = None):
    return client.post(path, body or {}, content_type="application/json")


def forbidden_fields(right: TenantRight, slug: str) -> dict:
    message = ERROR_TENANT_FORBIDDEN.format(right=right.label, codename=right.value, slug=slug)
    return {"tenant_id": [message]}


# -- reading conversations ---------------------------------------------------------------------------------------


def messages_url(conversations, slug: str) -> str:
    return f"/api/sessions/{conversations[slug].conversation_key}/messages"


@pytest.mark.django_db
def test_an_editor_cannot_read_any_tenants_conversation(editor, conversations):
    response = as_user(editor).get(messages_url(conversations, "tenant_b"))
    assert response.status_code == 404
    assert response.json()["error"]["message"] == ERROR_CONVERSATION_NOT_FOUND


@pytest.mark.django_db
def test_the_read_right_over_one_tenant_reads_that_tenants_conversations_only(granted, conversations):
    client = as_user(granted(TenantRight.READ))
    response = client.get(messages_url(conversations, "tenant_b"))
    assert response.status_code == 200
    assert [m["content"] for m in response.json()["messages"]] == ["oi"]
    other = client.get(messages_url(conversations, "tenant_a"))
    assert other.status_code == 404  # indistinguishable from an unknown key
    assert other.json() == client.get("/api/sessions/tenant_b:telecom_contas:nobody/messages").json()


@pytest.mark.django_db
def test_the_right_to_end_conversations_does_not_read_them(granted, conversations):
    assert as_user(granted(TenantRight.MANAGE)).get(messages_url(conversations, "tenant_b")).status_code == 404


# -- ending and clearing conversations ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_editor_can_neither_end_nor_clear_any_tenants_conversation(editor, conversations):
    client = as_user(editor)
    key = conversations["tenant_b"].conversation_key
    assert client.delete(f"/api/sessions/{key}").status_code == 404
    assert post(client, f"/api/sessions/{key}/clear").status_code == 404
    conversation = Conversation.objects.get(pk=conversations["tenant_b"].pk)
    assert conversation.ended_at is None and conversation.messages.count() == 1


@pytest.mark.django_db
def test_the_manage_right_over_one_tenant_ends_and_clears_that_tenants_conversations_only(granted, conversations):
    client = as_user(granted(TenantRight.MANAGE))
    key_b, key_a = conversations["tenant_b"].conversation_key, conversations["tenant_a"].conversation_key
    assert post(client, f"/api/sessions/{key_b}/clear").json()["cleared"]["messages"] == 1
    assert client.delete(f"/api/sessions/{key_b}").json()["ended"] is True
    assert client.delete(f"/api/sessions/{key_a}").status_code == 404
    assert post(client, f"/api/sessions/{key_a}/clear").status_code == 404
    assert Conversation.objects.get(pk=conversations["tenant_a"].pk).messages.count() == 1


@pytest.mark.django_db
def test_the_read_right_does_not_end_or_clear(granted, conversations):
    client = as_user(granted(TenantRight.READ))
    key = conversations["tenant_b"].conversation_key
    assert client.delete(f"/api/sessions/{key}").status_code == 404
    assert post(client, f"/api/sessions/{key}/clear").status_code == 404


# -- acting as a tenant: messages over HTTP and SSE, the preview, the chat page ---------------------------------

MESSAGE_ROUTES = ["/api/gateway/message", "/api/chat/message", "/api/gateway/message/stream"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", [*MESSAGE_ROUTES, "/api/chat/multi-agent/message"])
def test_an_editor_cannot_send_messages_as_any_tenant(editor, tenants, telecom, path):
    response = post(as_user(editor), path, message("tenant_b"))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert not Conversation.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("path", MESSAGE_ROUTES)
def test_the_act_right_over_one_tenant_sends_as_that_tenant_only(granted, tenants, telecom, path):
    client = as_user(granted(TenantRight.ACT))
    response = post(client, path, message("tenant_b"))
    assert response.status_code == 200
    if path.endswith("/stream"):
        assert response["Content-Type"].startswith("text/event-stream")  # the turn runs once the stream is read
    else:
        assert response.json()["conversation_key"] == "tenant_b:telecom_contas:iso"
    refused = post(client, path, message("tenant_a", session_id="other"))
    assert refused.status_code == 403
    assert refused.json()["error"]["fields"] == forbidden_fields(TenantRight.ACT, "tenant_a")
    assert not Conversation.objects.filter(tenant=tenants[0]).exists()


@pytest.mark.django_db
def test_an_unknown_tenant_looks_like_a_forbidden_one_to_a_session_granted_tenant_by_tenant(granted, tenants, telecom):
    client = as_user(granted(TenantRight.ACT))
    unknown = post(client, "/api/gateway/message", message("nowhere"))
    assert unknown.status_code == 403
    assert unknown.json()["error"]["fields"] == forbidden_fields(TenantRight.ACT, "nowhere")


@pytest.mark.django_db
def test_the_act_right_opens_the_multi_agent_preview_for_that_tenant_only(granted, tenants, telecom):
    client = as_user(granted(TenantRight.ACT))
    assert post(client, "/api/chat/multi-agent/message", message("tenant_b")).status_code == 200
    assert post(client, "/api/chat/multi-agent/message", message("tenant_a", "x")).status_code == 403


@pytest.mark.django_db
def test_other_rights_do_not_act_as_the_tenant(granted, tenants, telecom):
    client = as_user(granted(TenantRight.READ, TenantRight.MANAGE, TenantRight.DEBUG))
    assert post(client, "/api/gateway/message", message("tenant_b")).status_code == 403
    preview = post(client, "/api/chat/multi-agent/message", message("tenant_b"))
    assert preview.status_code == 403 and preview.json()["error"]["message"] == ERROR_PREVIEW_FORBIDDEN


@pytest.mark.django_db
def test_the_chat_page_tells_an_editor_without_the_right_what_is_missing_in_words(editor, tenants):
    response = as_user(editor).get("/chat/")

    assert response.status_code == 403
    page = response.content.decode()
    assert "You may not chat as any tenant yet" in page and "Act for tenant" in page
    assert 'id="chat-setup"' not in page
    assert "admin/base_site.html" in [template.name for template in response.templates]


@pytest.mark.django_db
def test_the_chat_link_is_not_shown_to_an_editor_without_the_right(editor, tenants):
    client = as_user(editor)
    for page in (client.get("/admin/").content.decode(), client.get("/admin/routing/intent/").content.decode()):
        assert 'href="/chat/"' not in page


@pytest.mark.django_db
def test_the_chat_link_is_shown_to_who_may_act_for_a_tenant_and_opens_the_page(granted, tenants):
    client = as_user(granted(TenantRight.ACT))
    index = client.get("/admin/").content.decode()

    assert 'id="chat-link"' in index and 'id="chat-module"' in index
    assert client.get("/chat/").status_code == 200


@pytest.mark.django_db
def test_a_tenant_named_by_the_link_is_picked_and_one_not_granted_is_named_in_words(granted, tenants, telecom):
    client = as_user(granted(TenantRight.ACT))

    picked = client.get("/chat/", {"tenant": "tenant_b", "profile": "telecom_contas"})
    refused = client.get("/chat/", {"tenant": "tenant_a"})

    assert picked.status_code == 200
    assert '<option value="tenant_b" data-drafts="false" selected>' in picked.content.decode()
    assert '<option value="telecom_contas" data-mode="router" selected>' in picked.content.decode()
    assert refused.status_code == 200
    assert "You may not chat as the tenant tenant_a" in refused.content.decode()
    assert refused.context["tenants"] == [("tenant_b", tenants[1].name)]


@pytest.mark.django_db
def test_the_chat_page_offers_the_tenants_the_user_may_act_for(granted, tenants):
    response = as_user(granted(TenantRight.ACT)).get("/chat/")
    assert response.status_code == 200
    assert response.context["tenants"] == [("tenant_b", tenants[1].name)]


# -- debug routes ------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_editor_cannot_use_the_debug_routes(editor, tenants, telecom):
    client = as_user(editor)
    for response in (
        client.get("/api/debug/mcp/tools"),
        post(client, "/api/debug/mcp/call/consultar_fatura", {"msisdn": "5511999999999", "invoice_id": "INV001"}),
        post(client, "/api/debug/route", message("tenant_b")),
    ):
        assert response.status_code == 403
        assert response.json()["error"]["message"] == ERROR_DEBUG_FORBIDDEN


@pytest.mark.django_db
def test_the_debug_right_over_one_tenant_debugs_that_tenants_routing_only(granted, tenants, telecom):
    client = as_user(granted(TenantRight.DEBUG))
    assert post(client, "/api/debug/route", message("tenant_b")).json()["conversation_key"] == (
        "tenant_b:telecom_contas:iso"
    )
    refused = post(client, "/api/debug/route", message("tenant_a"))
    assert refused.status_code == 403
    assert refused.json()["error"]["fields"] == forbidden_fields(TenantRight.DEBUG, "tenant_a")


@pytest.mark.django_db
def test_the_debug_right_lists_and_calls_mcp_tools_as_a_debug_key_does(granted, tenants, telecom):
    client = as_user(granted(TenantRight.DEBUG))
    assert "consultar_fatura" in [tool["name"] for tool in client.get("/api/debug/mcp/tools").json()["tools"]]
    assert post(client, "/api/debug/mcp/call/no_such_tool", {}).status_code == 404  # past the permission


@pytest.mark.django_db
def test_the_act_right_does_not_open_the_debug_routes(granted, tenants, telecom):
    client = as_user(granted(TenantRight.ACT))
    assert client.get("/api/debug/mcp/tools").status_code == 403
    assert post(client, "/api/debug/route", message("tenant_b")).status_code == 403


# -- where rights come from: groups, the permission on every tenant ----------------------------------------------


@pytest.mark.django_db
def test_a_groups_grant_gives_its_members_the_right(django_user_model, conversations, tenants):
    group = Group.objects.create(name="Support tenant_b")
    TenantGrant.objects.create(tenant=tenants[1], group=group, read_conversations=True)
    user = django_user_model.objects.create_user("member", is_staff=True)
    user.groups.add(group)
    client = as_user(user)
    assert client.get(messages_url(conversations, "tenant_b")).status_code == 200
    assert client.get(messages_url(conversations, "tenant_a")).status_code == 404


@pytest.mark.django_db
def test_the_tenant_permission_gives_the_right_over_every_tenant(django_user_model, conversations, telecom):
    user = django_user_model.objects.create_user("auditor", is_staff=True)
    user.user_permissions.add(Permission.objects.get(content_type__app_label="tenants", codename="read_conversations"))
    client = as_user(user)
    assert client.get(messages_url(conversations, "tenant_a")).status_code == 200
    assert client.get(messages_url(conversations, "tenant_b")).status_code == 200
    assert post(client, "/api/gateway/message", message("tenant_a")).status_code == 403


@pytest.mark.django_db
def test_a_grant_to_a_user_who_is_not_staff_gives_nothing(django_user_model, conversations, tenants):
    user = django_user_model.objects.create_user("clerk")
    TenantGrant.objects.create(tenant=tenants[1], user=user, read_conversations=True)
    assert as_user(user).get(messages_url(conversations, "tenant_b")).status_code == 404


# -- the WebSocket -----------------------------------------------------------------------------------------------


def session_cookie(user) -> list[tuple[bytes, bytes]]:
    return [(b"cookie", f"sessionid={as_user(user).cookies['sessionid'].value}".encode())]


def ws_chat(user, tenant: str, session_id: str) -> tuple[list[dict], int | None]:
    """Open ``?tenant=``, send one frame; the events up to ``done``, or the refusal and its close code."""

    headers = session_cookie(user)

    async def go():
        url = f"/ws/chat/telecom_contas/{session_id}/?tenant={tenant}"
        communicator = WebsocketCommunicator(application, url, headers=headers)
        connected, _ = await communicator.connect(timeout=5)
        assert connected
        try:
            await communicator.send_json_to({"text": PRODUCT})
            events = [await communicator.receive_json_from(timeout=20)]
            if events[0]["type"] == "error":
                closing = await communicator.receive_output(timeout=5)
                return events, closing["code"]
            while events[-1]["type"] != "done":
                events.append(await communicator.receive_json_from(timeout=20))
            return events, None
        finally:
            await communicator.disconnect()

    return asyncio.run(go())


@pytest.mark.django_db(transaction=True)
def test_an_editor_cannot_chat_as_any_tenant_over_the_websocket(editor, tenants, telecom):
    events, code = ws_chat(editor, "tenant_b", "editor-ws")
    assert code == CLOSE_FORBIDDEN
    assert events[0]["error"]["code"] == "permission_denied"
    assert not Conversation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_act_right_chats_over_the_websocket_as_that_tenant_only(granted, tenants, telecom):
    user = granted(TenantRight.ACT)
    events, code = ws_chat(user, "tenant_b", "granted-ws")
    assert code is None and events[-1]["conversation_key"] == "tenant_b:telecom_contas:granted-ws"
    events, code = ws_chat(user, "tenant_a", "granted-ws")
    assert code == CLOSE_FORBIDDEN
    refusal = ERROR_TENANT_FORBIDDEN.format(right=TenantRight.ACT.label, codename="act_for_tenant", slug="tenant_a")
    assert events[0]["error"]["fields"] == {"tenant": [refusal]}
