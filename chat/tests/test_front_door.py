"""One front door for every face: the same message reaches the engine the same way from REST, SSE, a WebSocket frame
and an OpenAI completion, and every face a customer's client talks through follows the ``multi_agent`` flag."""

from __future__ import annotations

import json

import pytest
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient, Client

from chat.consumers import CLOSE_BAD_REQUEST, CLOSE_FORBIDDEN
from chat.intake import (
    ERROR_TENANT_REQUIRED,
    MessageIn,
    Route,
    TextTooLong,
    UnknownProfile,
    UnknownTenant,
    message_intake,
    tenant_resolve,
    turn_input_build,
)
from common.errors import DomainError
from conversations.models import Conversation
from platform.asgi import application
from routing.models import RolloutFlag
from routing.services import rollout_flag_set
from tests.factories import TenantFactory
from tests.streaming import run, sse_events

pytestmark = pytest.mark.django_db(transaction=True)

FLAG = "multi_agent"
TEXT = "Minha fatura veio alta"
USER = "u-front-door"


def body(text: str = TEXT, **payload) -> dict:
    return {"agent_id": "telecom_contas", "payload": {"text": text, "user_id": USER, **payload}}


# -- each face, one message, the answer's metadata -------------------------------------------------------------


def rest(key, path: str = "/api/chat/message") -> dict:
    response = Client().post(
        path, json.dumps(body(session_id="rest")), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 200, response.content
    return response.json()["metadata"]


def sse(key, path: str = "/api/chat/message/stream") -> dict:
    async def go():
        response = await AsyncClient().post(
            path,
            body(session_id="sse"),
            content_type="application/json",
            headers={"Authorization": f"Bearer {key}"},
        )
        assert response.status_code == 200
        return b"".join([chunk async for chunk in response.streaming_content])

    event, data = sse_events(run(go()))[-1]
    assert event == "done"
    return data["metadata"]


def websocket(key, query: str = "") -> dict:
    async def go():
        communicator = WebsocketCommunicator(application, f"/ws/chat/telecom_contas/ws/?key={key}{query}")
        connected, _ = await communicator.connect(timeout=5)
        assert connected
        await communicator.send_json_to({"text": TEXT, "user_id": USER})
        event = {}
        while event.get("type") not in ("done", "error"):
            event = await communicator.receive_json_from(timeout=20)
        await communicator.disconnect()
        return event

    event = run(go())
    assert event["type"] == "done", event
    return event["metadata"]


def openai(key, **headers) -> dict:
    response = Client().post(
        "/v1/chat/completions",
        json.dumps({"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}], "user": USER}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
        **{f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()},
    )
    assert response.status_code == 200, response.content
    return response.json()["x_agent_routing"]


FACES = {"rest": rest, "sse": sse, "websocket": websocket, "openai": openai}


@pytest.mark.parametrize("face", FACES)
def test_every_face_a_customer_talks_through_follows_the_multi_agent_flag(face, tenant_key, telecom):
    rollout_flag_set(key=FLAG, actor="test", percentage=0, create=True)
    outside = FACES[face](tenant_key.raw)
    rollout_flag_set(key=FLAG, actor="test", percentage=100)
    # A conversation keeps the cohort it started in: the face's next message starts a new one.
    Conversation.objects.all().delete()
    inside = FACES[face](tenant_key.raw)

    assert (outside["cohort"], inside["cohort"]) == ("single_agent", "multi_agent")
    assert outside["flags"][FLAG]["enabled"] is False and inside["flags"][FLAG]["enabled"] is True
    assert outside["flags"][FLAG]["reason"] == inside["flags"][FLAG]["reason"] == "bucket"
    assert outside["flags"][FLAG]["route"] == inside["flags"][FLAG]["route"] == "rollout"
    assert outside["mode"] == "single_agent" and inside["mode"] == "router"


@pytest.mark.parametrize("face", FACES)
def test_with_no_multi_agent_flag_nothing_is_rolled_out_and_each_face_runs_the_profiles_mode(face, tenant_key, telecom):
    RolloutFlag.objects.filter(key=FLAG).delete()  # a transactional test's database may still hold the migration's

    metadata = FACES[face](tenant_key.raw)

    assert metadata["mode"] == "router" and metadata["cohort"] == ""
    flag = metadata["flags"][FLAG]
    assert (flag["enabled"], flag["reason"], flag["route"]) == (True, "unknown_flag", "rollout")


@pytest.mark.parametrize("face", ["rest", "sse"])
def test_the_gateway_runs_the_profiles_mode_and_says_what_the_flag_would_have_given(face, tenant_key, telecom):
    rollout_flag_set(key=FLAG, actor="test", percentage=0, create=True)

    metadata = FACES[face](tenant_key.raw, f"/api/gateway/message{'/stream' if face == 'sse' else ''}")

    assert metadata["mode"] == "router" and metadata["cohort"] == ""
    flag = metadata["flags"][FLAG]
    assert (flag["enabled"], flag["reason"], flag["route"]) == (True, "profile_route", "profile")
    assert flag["flag_result"] is False


def test_a_socket_and_a_completion_may_name_another_route(tenant_key, telecom):
    rollout_flag_set(key=FLAG, actor="test", percentage=0, create=True)

    assert websocket(tenant_key.raw, "&route=profile")["flags"][FLAG]["route"] == "profile"
    assert openai(tenant_key.raw, **{"X-Agent-Route": "profile"})["mode"] == "router"


@pytest.mark.parametrize("face", ["rest", "sse"])
def test_the_preview_routes_need_a_key_allowed_to_preview(face, tenant_key, telecom):
    path = f"/api/chat/multi-agent/message{'/stream' if face == 'sse' else ''}"
    response = Client().post(
        path, json.dumps(body()), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {tenant_key.raw}"
    )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"


def test_a_socket_asking_for_the_preview_without_the_right_is_closed_4403_and_an_unknown_route_4400(
    tenant_key, telecom
):
    async def refused(query: str) -> tuple[dict, int]:
        communicator = WebsocketCommunicator(application, f"/ws/chat/telecom_contas/ws/?key={tenant_key.raw}{query}")
        await communicator.connect(timeout=5)
        error = await communicator.receive_json_from(timeout=5)
        closing = await communicator.receive_output(timeout=5)
        return error, closing["code"]

    error, code = run(refused("&route=multi_agent"))
    assert code == CLOSE_FORBIDDEN and error["error"]["fields"] == {"route": [error["error"]["message"]]}
    error, code = run(refused("&route=everyone"))
    assert code == CLOSE_BAD_REQUEST and "route" in error["error"]["fields"]


def test_a_completion_asking_for_the_preview_without_the_right_is_refused_in_openais_shape(tenant_key, telecom):
    response = Client().post(
        "/v1/chat/completions",
        json.dumps({"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}]}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {tenant_key.raw}",
        HTTP_X_AGENT_ROUTE="multi_agent",
    )
    assert response.status_code == 403
    assert response.json()["error"]["param"] == "X-Agent-Route"


# -- the front door itself ------------------------------------------------------------------------------------


def test_the_intake_names_the_field_of_each_mistake_before_anything_is_stored(tenant_key, telecom, settings):
    settings.MAX_INPUT_CHARS = 10
    with pytest.raises(TextTooLong) as too_long:
        message_intake(principal=_client(tenant_key), data=body(), route=Route.ROLLOUT)
    assert too_long.value.fields == {"payload.text": ["Text is longer than the limit of 10 characters."]}
    with pytest.raises(UnknownProfile) as unknown:
        message_intake(principal=_client(tenant_key), data={**body(), "agent_id": "nobody"}, route=Route.PROFILE)
    assert list(unknown.value.fields) == ["agent_id"]

    from conversations.models import Conversation

    assert not Conversation.objects.exists()


def test_a_staff_session_acts_for_the_active_tenant_it_names(staff_user, telecom):
    acme = TenantFactory(slug="acme")
    TenantFactory(slug="gone", is_active=False)

    assert tenant_resolve(principal=staff_user, tenant_slug="acme") == acme
    with pytest.raises(UnknownTenant):
        tenant_resolve(principal=staff_user, tenant_slug="gone")
    with pytest.raises(DomainError) as missing:
        tenant_resolve(principal=staff_user, tenant_slug="", field_name="tenant")
    assert missing.value.fields == {"tenant": [ERROR_TENANT_REQUIRED.format(field="tenant")]}


def test_an_api_key_acts_for_its_own_tenant_whatever_the_body_names(tenant_key, outsider, telecom):
    turn_input = message_intake(
        principal=_client(tenant_key), data={**body(), "tenant_id": outsider.slug}, route=Route.PROFILE
    )
    assert turn_input.tenant_slug == "tenant_a"
    assert turn_input.conversation_key.startswith("tenant_a:telecom_contas:")


def test_a_message_without_a_session_gets_a_new_one(tenant_key, telecom):
    first = turn_input_build(tenant=tenant_key.tenant, message=MessageIn("telecom_contas", TEXT), route=Route.PROFILE)
    second = turn_input_build(tenant=tenant_key.tenant, message=MessageIn("telecom_contas", TEXT), route=Route.PROFILE)
    assert first.session_id and second.session_id and first.session_id != second.session_id


def _client(tenant_key):
    from tenants.auth import api_client_for_key

    return api_client_for_key(tenant_key.raw)
