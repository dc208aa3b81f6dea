"""Customers are served a profile's released version; editors try its draft.

A profile never published is served its draft. Once published, an edit changes only the draft — the next
customer message still follows the released version — until it is published; a revert brings the old behaviour
back on the next message. Every answer says which version answered.
"""

from __future__ import annotations

import pytest

from agents.models import AgentProfile
from common.config_version import config_version_bump
from conversations.models import Conversation, Message
from releases.versions import version_publish, version_revert
from routing.models import Keyword

pytestmark = pytest.mark.django_db


def say(api, text, session="v-1"):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def route(debug_api, text, **extra):
    response = debug_api.post(
        "/api/debug/route", {"agent_id": "telecom_contas", "payload": {"text": text}, **extra}, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def add_keyword(word: str, intent: str = "retail_order_tracking") -> None:
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    Keyword.objects.create(intent=profile.intents.get(name=intent), text=word)


def test_a_profile_never_published_is_served_its_draft(api, telecom):
    add_keyword("modem")

    body = say(api, "meu modem")

    assert body["metadata"]["intent"] == "retail_order_tracking"
    assert body["metadata"]["version"] is None


def test_after_publishing_an_edit_reaches_the_draft_only_until_it_is_published(api, debug_api, telecom):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="first")
    add_keyword("modem")

    live = say(api, "meu modem")
    assert live["metadata"]["version"] == 1
    assert live["metadata"]["intent"] != "retail_order_tracking"
    assert route(debug_api, "meu modem")["intent"] != "retail_order_tracking"
    draft = route(debug_api, "meu modem", version="draft")
    assert (draft["intent"], draft["version"]) == ("retail_order_tracking", "draft")

    version_publish(profile=profile, note="modem routes to orders", based_on=1)

    published = say(api, "meu modem", session="v-2")
    assert (published["metadata"]["intent"], published["metadata"]["version"]) == ("retail_order_tracking", 2)

    version_revert(profile=profile, to=1)

    reverted = say(api, "meu modem", session="v-3")
    assert reverted["metadata"]["version"] == 3
    assert reverted["metadata"]["intent"] != "retail_order_tracking"


@pytest.mark.sqlite_too
def test_a_conversation_keeps_the_version_its_first_message_was_served_by_when_a_later_one_is_served_by_another(
    api, telecom
):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    draft = say(api, "minha fatura", session="v-draft")
    version_publish(profile=profile, note="first")
    first = say(api, "minha fatura")
    add_keyword("modem")
    version_publish(profile=profile, note="modem routes to orders", based_on=1)

    later = say(api, "meu modem")

    assert (first["metadata"]["version"], later["metadata"]["version"]) == (1, 2)
    assert Conversation.objects.get(conversation_key=later["conversation_key"]).routing_version == 1
    # The draft's conversation has a message served by no version: none, as a conversation with no message yet.
    assert say(api, "e agora?", session="v-draft")["metadata"]["version"] == 2
    assert Conversation.objects.get(conversation_key=draft["conversation_key"]).routing_version is None
    versions = Message.objects.filter(conversation__conversation_key=later["conversation_key"], role="user")
    assert list(versions.order_by("id").values_list("routing_version", flat=True)) == [1, 2]


def test_debug_names_a_version_it_does_not_know(debug_api, telecom):
    response = debug_api.post(
        "/api/debug/route",
        {"agent_id": "telecom_contas", "payload": {"text": "oi"}, "version": "staging"},
        format="json",
    )

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"version": ["Must be one of: live, draft."]}


def test_debug_says_draft_for_a_draft_unchanged_since_the_release(debug_api, telecom):
    version_publish(profile=AgentProfile.objects.get(agent_id="telecom_contas"), note="first")

    assert route(debug_api, "minha fatura", version="draft")["version"] == "draft"
    assert route(debug_api, "minha fatura")["version"] == 1


def test_debug_refuses_a_disabled_draft_naming_the_version(debug_api, telecom):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="first")
    AgentProfile.objects.filter(pk=profile.pk).update(enabled=False)
    config_version_bump()  # a bulk update sends no signal

    response = debug_api.post(
        "/api/debug/route",
        {"agent_id": "telecom_contas", "payload": {"text": "oi"}, "version": "draft"},
        format="json",
    )

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["version"]
    assert route(debug_api, "oi")["version"] == 1  # customers still get the released version


def test_every_row_of_a_turn_records_the_version_that_served_it(api, telecom):
    from conversations.models import Message
    from handoffs.models import Handoff

    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    say(api, "Minha fatura veio alta", session="before")
    version_publish(profile=profile, note="first")
    say(api, "Minha fatura veio alta", session="after")
    say(api, "Na verdade, meu pedido P100 atrasou", session="after")  # billing hands over to orders

    def versions(session):
        return set(Message.objects.filter(conversation__session_id=session).values_list("routing_version", flat=True))

    assert versions("before") == {None}  # never published: the draft served
    assert versions("after") == {1}
    moves = Handoff.objects.filter(conversation__session_id="after")
    assert moves.exists() and set(moves.values_list("routing_version", flat=True)) == {1}
