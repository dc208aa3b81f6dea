"""A thumbs-down becomes a regression test in one click and a save: "Add as conversation test" in the ratings inbox
and on each answer of a conversation's page opens the conversation test's add form filled in with the
conversation's customer turns up to that answer — each expecting the specialist and intent it was routed to and an
answer in the conversation's language —, the rated answer shown on its turn for the editor to mark what was wrong,
and the customer message it came from kept. Only users who may add conversation tests see the link or open it."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.utils.html import escape

from conversations.feedback import feedback_give
from conversations.models import Conversation, Message, RouteDecisionRecord
from releases.evals.forms import MORE_FIELD, TURN_PREFIX
from releases.models import ConversationTest
from tenants.models import TenantGrant
from tests.adminkit import error_messages, form_data

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

INBOX = "/admin/conversations/messagefeedback/"
LINK = re.compile(r'<a href="([^"]+)" class="addlink (?:rating|timeline)-add(?:-conversation)?-test"')


def say(api, text, session="t-1"):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content


@pytest.fixture
def rated(api, telecom):
    """A conversation of two customer messages, its second answer rated down."""
    say(api, "Minha fatura veio alta")
    say(api, "quero a segunda via da fatura")
    conversation = Conversation.objects.get()
    answer = conversation.messages.filter(role="assistant").order_by("id").last()
    feedback_give(conversation=conversation, message_id=answer.pk, rating="down", comment="Não mandou o boleto.")
    return answer


@pytest.fixture
def reader(editor, tenant):
    """A routing editor who may read tenant_a's conversations and their ratings."""
    codenames = ["view_conversation", "view_messagefeedback", "view_message"]
    editor.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    TenantGrant.objects.create(tenant=tenant, user=editor, read_conversations=True)
    return editor


def opened(client, url: str):
    """The add page a link leads to (through its redirect)."""
    response = client.get(url.replace("&amp;", "&"), follow=True)
    assert response.status_code == 200
    return response


def decided(text: str) -> RouteDecisionRecord:
    return RouteDecisionRecord.objects.get(message__content=text)


def test_the_inboxs_link_opens_the_form_filled_with_the_turns_up_to_the_rated_answer(client, reader, rated):
    client.force_login(reader)
    inbox = client.get(INBOX).content.decode()

    page = opened(client, LINK.search(inbox).group(1))

    form = page.context["adminform"].form
    conversation = rated.conversation
    assert conversation.language == "pt"  # read from the customer's messages
    question = Message.objects.get(content="quero a segunda via da fatura")
    assert form.initial["profile"] == conversation.profile_id
    assert form.initial["name"].startswith("Minha fatura veio alta (")
    assert form.initial["source_message_id"] == question.pk
    assert form.initial.get("language", "") == conversation.language
    first, second = form.turns.initial_forms
    for turn, text in ((first, "Minha fatura veio alta"), (second, "quero a segunda via da fatura")):
        assert turn.initial["user"] == text
        assert (turn.initial["agent"], turn.initial["intent"]) == (decided(text).agent, decided(text).intent)
        assert turn.initial.get("answer_language", "") == conversation.language
    assert second.initial["answer_given"] == rated.content
    assert first.initial["answer_given"] == ""
    assert escape(rated.content) in page.content.decode()  # shown beside the turn to mark what was wrong


def test_a_second_test_of_the_same_words_and_day_is_named_apart_from_the_first(client, reader, rated):
    client.force_login(reader)
    link = LINK.search(client.get(INBOX).content.decode()).group(1)
    name = opened(client, link).context["adminform"].form.initial["name"]
    ConversationTest.objects.create(profile_id=rated.conversation.profile_id, name=name, turns=[{"user": "oi"}])

    again = opened(client, LINK.search(client.get(INBOX).content.decode()).group(1))

    assert again.context["adminform"].form.initial["name"] == f"{name} 2"


def test_a_thumbs_down_becomes_a_test_with_a_click_and_a_save(client, reader, rated):
    client.force_login(reader)
    page = opened(client, LINK.search(client.get(INBOX).content.decode()).group(1))
    data = form_data(page)
    data[f"{TURN_PREFIX}-1-answer_not_contains"] = "Subject:"
    data[f"{TURN_PREFIX}-1-judge_rubric"] = "Sends the duplicate invoice (boleto) or says how to get it."
    data[f"{TURN_PREFIX}-1-judge_min_score"] = "0.7"

    answer = client.post(page.redirect_chain[-1][0], data)

    assert answer.status_code == 302, error_messages(answer)
    test = ConversationTest.objects.get()
    assert test.source_message_id == Message.objects.get(content="quero a segunda via da fatura").pk
    assert [turn["user"] for turn in test.turns] == ["Minha fatura veio alta", "quero a segunda via da fatura"]
    last = test.turns[1]["expect"]
    assert last["answer_not_contains"] == ["Subject:"]
    assert last["judge"] == {"rubric": "Sends the duplicate invoice (boleto) or says how to get it.", "min_score": 0.7}
    assert last["agent"] == decided("quero a segunda via da fatura").agent
    assert "answer_given" not in test.turns[1]


def test_the_form_as_it_opens_saves_as_it_is(client, reader, rated):
    client.force_login(reader)
    page = opened(client, LINK.search(client.get(INBOX).content.decode()).group(1))

    answer = client.post(page.redirect_chain[-1][0], form_data(page))

    assert answer.status_code == 302, error_messages(answer)
    assert ConversationTest.objects.get().turns[0]["expect"]["intent"] == decided("Minha fatura veio alta").intent


def test_each_answer_of_a_conversations_page_offers_it_up_to_that_answer(client, reader, rated):
    client.force_login(reader)
    page = client.get(f"/admin/conversations/conversation/{rated.conversation_id}/change/").content.decode()

    links = [url for url in LINK.findall(page) if "conversation-test" in url]
    first = opened(client, links[0]).context["adminform"].form

    assert len(links) == 2  # one per answer
    assert [form.initial["user"] for form in first.turns.initial_forms] == ["Minha fatura veio alta"]
    assert first.turns.initial_forms[0].initial[MORE_FIELD] == {}


def test_who_may_not_add_conversation_tests_neither_sees_the_link_nor_opens_it(
    client, django_user_model, tenant, rated
):
    analyst = django_user_model.objects.create_user("analyst-only", is_staff=True)
    analyst.user_permissions.add(*Permission.objects.filter(codename__in=["view_conversation", "view_messagefeedback"]))
    TenantGrant.objects.create(tenant=tenant, user=analyst, read_conversations=True)
    client.force_login(analyst)
    url = f"/admin/conversations/conversation/{rated.conversation_id}/conversation-test/{rated.pk}/"

    assert "Add as conversation test" not in client.get(INBOX).content.decode()
    assert client.get(url).status_code == 403


def test_another_tenants_conversation_cannot_be_drafted(client, reader, rated, django_user_model):
    TenantGrant.objects.filter(user=reader).delete()
    client.force_login(reader)

    response = client.get(f"/admin/conversations/conversation/{rated.conversation_id}/conversation-test/{rated.pk}/")

    assert response.status_code in (302, 404)  # the admin's answer to an object the user may not see
    assert "conversation_test_drafts" not in client.session
