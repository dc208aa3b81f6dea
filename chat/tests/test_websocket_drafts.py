"""Trying a profile's draft over the WebSocket chat (``?version=draft``).

A session that may chat as the tenant and holds the debug right over it is answered by the draft: its routing,
its specialists, and the stored answer says so (``metadata.version == "draft"``); the live socket next to it still
routes the old way. Without the debug right, with an unknown version, or with the draft disabled, the socket is
refused at the handshake naming ``version``.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from agents.models import AgentProfile
from chat.consumers import CLOSE_BAD_REQUEST, CLOSE_FORBIDDEN
from chat.drafts import ERROR_DRAFT_DISABLED, ERROR_DRAFT_FORBIDDEN, ERROR_UNKNOWN_VERSION
from chat.tests.test_websocket import chat, open_socket, path, refused_with, session_cookie
from conversations.models import Message
from releases.versions import version_publish
from routing.models import Keyword
from tenants.models import TenantGrant, TenantRight
from tests.factories import TenantFactory

pytestmark = pytest.mark.django_db(transaction=True)

MODEM = {"text": "meu modem chegou quebrado"}  # no keyword of the live version; "modem" in the edited draft


@pytest.fixture
def published(telecom):
    """telecom_contas published as version 1, then "modem" added to retail_order_tracking in its draft only."""
    version_publish(profile=telecom, note="first")
    Keyword.objects.create(intent=telecom.intents.get(name="retail_order_tracking"), text="modem")
    return telecom


def granted_user(django_user_model, tenant, *rights: TenantRight):
    user = django_user_model.objects.create_user("agent", "agent@example.com", "agent-password", is_staff=True)
    TenantGrant.objects.create(tenant=tenant, user=user, **{right.value: True for right in rights})
    return user


def refusal(url: str, headers) -> tuple[dict, int]:
    async def go():
        communicator = await open_socket(url, headers=headers)
        return await refused_with(communicator)

    return asyncio.run(go())


def test_a_draft_socket_is_answered_by_the_drafts_routing_while_live_still_routes_the_old_way(
    staff_user, tenant, published
):
    cookie = session_cookie(staff_user)

    (draft,) = chat(path(tenant="tenant_a", session_id="d-1", route="profile", version="draft"), MODEM, headers=cookie)
    (live,) = chat(path(tenant="tenant_a", session_id="l-1", route="profile", version="live"), MODEM, headers=cookie)
    (default,) = chat(path(tenant="tenant_a", session_id="l-2", route="profile"), MODEM, headers=cookie)

    assert (draft[0]["type"], draft[0]["agent"], draft[0]["intent"]) == (
        "route",
        "orders_agent",
        "retail_order_tracking",
    )
    assert draft[-1]["agent"] == "orders_agent"
    assert draft[-1]["metadata"]["version"] == "draft"
    for turn in (live, default):
        assert turn[-1]["metadata"]["intent"] != "retail_order_tracking"
        assert turn[-1]["metadata"]["version"] == 1
    stored = Message.objects.get(conversation__session_id="d-1", role="assistant")
    assert stored.agent == "orders_agent" and stored.metadata["version"] == "draft"


def test_a_draft_unchanged_since_the_release_still_says_it_was_the_draft(staff_user, tenant, telecom):
    version_publish(profile=telecom, note="first")

    (draft,) = chat(
        path(tenant="tenant_a", route="profile", version="draft"), MODEM, headers=session_cookie(staff_user)
    )
    (live,) = chat(
        path(tenant="tenant_a", session_id="l-1", route="profile"), MODEM, headers=session_cookie(staff_user)
    )

    assert draft[-1]["metadata"]["version"] == "draft"
    assert live[-1]["metadata"]["version"] == 1
    assert draft[-1]["agent"] == live[-1]["agent"]


def test_a_session_that_may_chat_and_debug_for_the_tenant_tries_the_draft(django_user_model, tenant, published):
    user = granted_user(django_user_model, tenant, TenantRight.ACT, TenantRight.DEBUG)

    (events,) = chat(path(tenant="tenant_a", route="profile", version="draft"), MODEM, headers=session_cookie(user))

    assert events[-1]["agent"] == "orders_agent" and events[-1]["metadata"]["version"] == "draft"


def test_without_the_debug_right_over_the_tenant_the_draft_is_refused_4403(django_user_model, tenant, published):
    other = TenantFactory(slug="tenant_b")
    user = granted_user(django_user_model, tenant, TenantRight.ACT)
    TenantGrant.objects.create(tenant=other, user=user, **{TenantRight.DEBUG.value: True})  # elsewhere only

    error, code = refusal(path(tenant="tenant_a", version="draft"), session_cookie(user))

    assert code == CLOSE_FORBIDDEN
    message = ERROR_DRAFT_FORBIDDEN.format(slug="tenant_a")
    assert error["error"] == {"code": "permission_denied", "message": message, "fields": {"version": [message]}}
    (live,) = chat(path(tenant="tenant_a", route="profile", version="live"), MODEM, headers=session_cookie(user))
    assert live[-1]["metadata"]["version"] == 1


def test_an_api_key_tries_the_draft_only_when_it_is_a_debug_key(tenant_key, debug_key, published):
    error, code = refusal(path(tenant_key.raw, version="draft"), [])
    assert code == CLOSE_FORBIDDEN and list(error["error"]["fields"]) == ["version"]

    (events,) = chat(path(debug_key.raw, route="profile", version="draft"), MODEM)
    assert events[-1]["metadata"]["version"] == "draft"


def test_an_unknown_version_is_refused_4400(staff_user, tenant, published):
    error, code = refusal(path(tenant="tenant_a", version="staging"), session_cookie(staff_user))

    assert code == CLOSE_BAD_REQUEST
    assert error["error"]["fields"] == {"version": [ERROR_UNKNOWN_VERSION.format(version="staging")]}


def test_a_disabled_draft_is_refused_with_a_clear_message(staff_user, tenant, published):
    AgentProfile.objects.filter(pk=published.pk).update(enabled=False)
    from common.config_version import config_version_bump

    config_version_bump()  # QuerySet.update bypasses the signals

    error, code = refusal(path(tenant="tenant_a", version="draft"), session_cookie(staff_user))

    assert code == CLOSE_BAD_REQUEST
    message = ERROR_DRAFT_DISABLED.format(agent_id="telecom_contas")
    assert error["error"]["message"] == message and error["error"]["fields"] == {"version": [message]}
    (live,) = chat(path(tenant="tenant_a", route="profile"), MODEM, headers=session_cookie(staff_user))
    assert live[-1]["metadata"]["version"] == 1  # customers keep the released version


def test_a_draft_disabled_while_the_socket_is_open_answers_the_next_frame_with_an_error(staff_user, tenant, published):
    from common.config_version import config_version_bump

    cookie = session_cookie(staff_user)

    async def go():
        communicator = await open_socket(path(tenant="tenant_a", version="draft"), headers=cookie)
        try:
            await database_sync_to_async(AgentProfile.objects.filter(pk=published.pk).update)(enabled=False)
            await database_sync_to_async(config_version_bump)()
            await communicator.send_json_to(MODEM)
            return await communicator.receive_json_from(timeout=10)
        finally:
            await communicator.disconnect()

    event = asyncio.run(go())

    message = ERROR_DRAFT_DISABLED.format(agent_id="telecom_contas")
    assert event == {
        "type": "error",
        "error": {"code": "invalid", "message": message, "fields": {"version": [message]}},
    }
    assert not Message.objects.exists()
