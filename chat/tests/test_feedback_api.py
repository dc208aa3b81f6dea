"""Rating an answer through ``POST /api/sessions/{conversation_key}/feedback``: with a key, with a staff session,
and everything it refuses."""

from __future__ import annotations

import pytest
from django.test import AsyncClient, Client

from agents.models import AgentProfile
from chat.intake import ERROR_UNKNOWN_FIELD
from common.errors import ERROR_CONVERSATION_NOT_FOUND
from conversations.feedback import ERROR_NOT_AN_ANSWER
from conversations.models import Conversation, Message, MessageFeedback
from releases.versions import version_publish
from tenants.models import TenantGrant, TenantRight
from tests.factories import TenantFactory
from tests.streaming import run, sse_events

pytestmark = pytest.mark.django_db

PRODUCT = "Qual o melhor plano de internet?"  # the product specialist answers; no MCP tool is called


def say(api, text: str = PRODUCT, *, session_id: str = "fb-1", route: str = "gateway/message") -> dict:
    response = api.post(
        f"/api/{route}",
        {
            "channel": "web",
            "agent_id": "telecom_contas",
            "payload": {"text": text, "session_id": session_id, "user_id": "u7"},
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def rate(client, key: str, body: dict):
    return client.post(f"/api/sessions/{key}/feedback", body, format="json")


def test_the_answer_names_its_stored_message_and_a_first_rating_is_201_with_the_answers_cohort_and_version(
    api, telecom, multi_agent_for_everyone
):
    version_publish(profile=AgentProfile.objects.get(agent_id="telecom_contas"), note="first")
    answer = say(api, route="chat/message")
    stored = Message.objects.get(pk=answer["message_id"])
    assert (stored.role, stored.content) == ("assistant", answer["answer"])

    response = rate(api, answer["conversation_key"], {"message_id": answer["message_id"], "rating": "down"})

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["rating"], body["comment"], body["replaced"]) == ("down", "", False)
    assert (body["cohort"], body["routing_version"]) == ("multi_agent", 1)
    feedback = MessageFeedback.objects.get()
    conversation = Conversation.objects.get(conversation_key=answer["conversation_key"])
    assert feedback.message_id == stored.pk and feedback.conversation_id == conversation.pk
    assert (feedback.tenant_id, feedback.profile_id) == (conversation.tenant_id, conversation.profile_id)
    assert (feedback.cohort, feedback.routing_version, feedback.answered_at) == (
        stored.cohort,
        stored.routing_version,
        stored.created_at,
    )
    assert feedback.user_id == conversation.user_id != ""  # the user id as the conversation keeps it
    assert feedback.staff_user_id is None


@pytest.mark.django_db(transaction=True)
def test_the_streams_done_event_names_the_answer_to_rate(tenant_key, api, telecom):
    async def streamed() -> bytes:
        response = await AsyncClient().post(
            "/api/gateway/message/stream",
            {"agent_id": "telecom_contas", "payload": {"text": PRODUCT, "session_id": "fb-sse"}},
            content_type="application/json",
            headers={"Authorization": f"Bearer {tenant_key.raw}"},
        )
        return b"".join([chunk async for chunk in response.streaming_content])

    name, done = sse_events(run(streamed()))[-1]
    assert name == "done"
    assert Message.objects.get(pk=done["message_id"]).content == done["answer"]
    assert rate(api, done["conversation_key"], {"message_id": done["message_id"], "rating": "up"}).status_code == 201


def test_the_sessions_api_names_each_message_so_an_earlier_answer_can_be_rated(api, telecom):
    answer = say(api)
    listed = api.get(f"/api/sessions/{answer['conversation_key']}/messages").json()["messages"]
    assert [(m["role"], m["id"]) for m in listed][-1] == ("assistant", answer["message_id"])
    assert rate(api, answer["conversation_key"], {"message_id": listed[-1]["id"], "rating": "up"}).status_code == 201


def test_rating_the_same_answer_again_replaces_the_rating_and_the_comment_and_answers_200(api, telecom):
    answer = say(api)
    key, message_id = answer["conversation_key"], answer["message_id"]
    first = rate(api, key, {"message_id": message_id, "rating": "down", "comment": "Não respondeu."})
    assert first.status_code == 201
    again = rate(api, key, {"message_id": message_id, "rating": "up"})
    assert again.status_code == 200, again.content
    assert (again.json()["rating"], again.json()["comment"], again.json()["replaced"]) == ("up", "", True)
    feedback = MessageFeedback.objects.get()
    assert (feedback.rating, feedback.comment) == ("up", "")
    assert again.json()["created_at"] == first.json()["created_at"]  # when it was first rated


def test_each_answer_of_a_conversation_keeps_its_own_rating(api, telecom):
    first, second = say(api), say(api, "E a minha fatura?")
    rate(api, first["conversation_key"], {"message_id": first["message_id"], "rating": "up"})
    rate(api, second["conversation_key"], {"message_id": second["message_id"], "rating": "down"})
    ratings = dict(MessageFeedback.objects.values_list("message_id", "rating"))
    assert ratings == {first["message_id"]: "up", second["message_id"]: "down"}


def test_another_tenants_conversation_is_a_404_like_an_unknown_key(api, outsider_api, telecom):
    answer = say(api)
    response = rate(outsider_api, answer["conversation_key"], {"message_id": answer["message_id"], "rating": "up"})
    assert response.status_code == 404
    assert response.json()["error"]["fields"] == {"conversation_key": [ERROR_CONVERSATION_NOT_FOUND]}
    unknown = rate(outsider_api, "outsider:telecom_contas:nobody", {"message_id": answer["message_id"], "rating": "up"})
    assert unknown.json() == response.json()
    assert not MessageFeedback.objects.exists()


def test_a_message_id_that_is_no_answer_of_this_conversation_is_a_400_naming_message_id(api, telecom):
    answer, other = say(api), say(api, session_id="fb-other")
    question = Message.objects.get(conversation__conversation_key=answer["conversation_key"], role="user")
    for message_id in (question.pk, other["message_id"], answer["message_id"] + 1000):
        response = rate(api, answer["conversation_key"], {"message_id": message_id, "rating": "up"})
        assert response.status_code == 400, message_id
        assert response.json()["error"]["fields"] == {"message_id": [ERROR_NOT_AN_ANSWER]}
    assert not MessageFeedback.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"message_id": 1, "rating": "meh"}, "rating"),
        ({"message_id": 1}, "rating"),
        ({"message_id": 1, "rating": True}, "rating"),
        ({"rating": "up"}, "message_id"),
        ({"message_id": "one", "rating": "up"}, "message_id"),
        ({"message_id": 0, "rating": "up"}, "message_id"),
        ({"message_id": 1, "rating": "up", "comment": "x" * 1001}, "comment"),
        ({"message_id": 1, "rating": "up", "comment": 5}, "comment"),
        ({"message_id": 1, "rating": "up", "stars": 5}, "stars"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(api, telecom, body, field):
    answer = say(api)
    body = {**body, "message_id": answer["message_id"]} if body.get("message_id") == 1 else body
    response = rate(api, answer["conversation_key"], body)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    if field == "stars":
        assert response.json()["error"]["fields"]["stars"] == [ERROR_UNKNOWN_FIELD]
    assert not MessageFeedback.objects.exists()


# -- staff sessions (the chat page) ----------------------------------------------------------------------------


def staff_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/chat/")  # sets the CSRF cookie, as the page does
    return client


def staff_rate(client: Client, key: str, body: dict, *, csrf: bool = True):
    headers = {"X-CSRFToken": client.cookies["csrftoken"].value} if csrf else {}
    return client.post(f"/api/sessions/{key}/feedback", body, content_type="application/json", headers=headers)


def test_a_staff_session_that_may_chat_as_the_tenant_rates_its_answers_with_the_csrf_token(
    api, telecom, django_user_model
):
    answer = say(api)
    user = django_user_model.objects.create_user("agent", "agent@example.com", "agent-password", is_staff=True)
    TenantGrant.objects.create(tenant=Conversation.objects.get().tenant, user=user, act_for_tenant=True)
    client = staff_client(user)
    body = {"message_id": answer["message_id"], "rating": "up", "comment": "Clara."}

    refused = staff_rate(client, answer["conversation_key"], body, csrf=False)
    assert refused.status_code == 403
    assert "CSRF" in refused.json()["error"]["message"]

    response = staff_rate(client, answer["conversation_key"], body)
    assert response.status_code == 201, response.content
    feedback = MessageFeedback.objects.get()
    assert (feedback.staff_user_id, feedback.comment) == (user.pk, "Clara.")


@pytest.mark.parametrize("right", [None, TenantRight.READ, TenantRight.MANAGE])
def test_a_staff_session_without_the_right_to_chat_as_the_tenant_gets_a_404(api, telecom, django_user_model, right):
    answer = say(api)
    user = django_user_model.objects.create_user("agent", "agent@example.com", "agent-password", is_staff=True)
    TenantGrant.objects.create(
        tenant=Conversation.objects.get().tenant, user=user, **({right.value: True} if right else {})
    )
    TenantGrant.objects.create(tenant=TenantFactory(slug="tenant_b"), user=user, act_for_tenant=True)
    response = staff_rate(
        staff_client(user), answer["conversation_key"], {"message_id": answer["message_id"], "rating": "up"}
    )
    assert response.status_code == 404
    assert not MessageFeedback.objects.exists()


def test_without_a_key_or_session_it_is_a_401(client, api, telecom):
    answer = say(api)
    response = client.post(
        f"/api/sessions/{answer['conversation_key']}/feedback",
        {"message_id": answer["message_id"], "rating": "up"},
        content_type="application/json",
    )
    assert response.status_code == 401
