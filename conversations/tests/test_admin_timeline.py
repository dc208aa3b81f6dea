"""A conversation's page leads with its timeline: turn by turn, the customer's message, the route decision (method,
intent, agent, confidence and why), the agents that answered, tool calls, moves between agents, remote backends,
the answer and its rating. "Add as routing test" on each customer message opens the saved test's add form filled
in, for users who may add routing tests only."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission

from conversations.models import Message, MessageRole
from conversations.tests.stored_turns import conversation_of, store_reader, stored_turn
from conversations.timeline import conversation_timeline
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

ADD_TEST = 'class="addlink timeline-add-test"'


@pytest.fixture
def alpha(db):
    return TenantFactory(slug="tenant_a")


@pytest.fixture
def conversation(alpha):
    """Three turns: a keyword route with a tool call and a rated-down answer; a move to orders_agent with a
    remote backend that timed out and a rated-up answer; an unrated one."""
    conversation = conversation_of(alpha)
    stored_turn(
        conversation,
        "Minha fatura veio alta",
        answer="Sua fatura subiu por roaming.",
        tool="consultar_fatura",
        rating="down",
        comment="não era isso",
    )
    stored_turn(
        conversation,
        "e meu pedido?",
        answer="Seu pedido chega amanhã.",
        intent="order_tracking",
        agent="billing_agent",
        method="examples",
        reason="examples: 'pedido' is like order_tracking (0.93).",
        handoff_to="orders_agent",
        backend="partner_backend",
        rating="up",
    )
    stored_turn(conversation, "obrigado", answer="De nada!", intent="small_talk:thanks", method="small_talk")
    return conversation


def page_of(client, conversation) -> str:
    response = client.get(f"/admin/conversations/conversation/{conversation.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def turns_of(page: str) -> list[str]:
    return re.findall(
        r'<li class="timeline-turn" id="turn-\d+".*?</li>\s*(?=<li class="timeline-turn"|</ol>)', page, re.S
    )


def test_the_timeline_leads_the_page_with_each_turn_in_order(staff_client, conversation):
    page = page_of(staff_client, conversation)

    assert page.index('id="timeline"') < page.index(">Details<") < page.index('id="backend_calls-heading"')
    turns = turns_of(page)
    assert len(turns) == 3
    first, second, third = turns
    order = ["Minha fatura veio alta", "keyword", "consultar_fatura", "Sua fatura subiu por roaming.", "não era isso"]
    assert [first.index(text) for text in order] == sorted(first.index(text) for text in order)
    assert "e meu pedido?" in second and "obrigado" in third


def test_a_turn_shows_its_route_decision_with_method_intent_agent_confidence_and_reason(staff_client, conversation):
    second = turns_of(page_of(staff_client, conversation))[1]

    assert 'data-method="examples"' in second and 'data-intent="order_tracking"' in second
    assert "billing_agent" in second and "0.91" in second
    assert "examples: &#x27;pedido&#x27; is like order_tracking (0.93)." in second


def test_a_turn_shows_its_moves_between_agents_and_remote_backends(staff_client, conversation):
    second = turns_of(page_of(staff_client, conversation))[1]

    assert "billing_agent → orders_agent" in second and "Agent handoff" in second
    assert "partner_backend" in second and "Timed out" in second and "no answer within 5s" in second


def test_each_answer_shows_its_rating_and_comment_beside_it(staff_client, conversation):
    first, second, third = turns_of(page_of(staff_client, conversation))

    assert 'data-rating="down"' in first and "Rated down" in first and "não era isso" in first
    assert 'data-rating="up"' in second and "Rated up" in second
    assert "Not rated." in third


def test_the_parts_of_a_supervisor_turn_show_the_agents_that_answered(staff_client, alpha):
    conversation = conversation_of(alpha, session="sup-1")
    turn = stored_turn(conversation, "fatura e pedido", agent="supervisor_agent", method="llm_plan")
    Message.objects.filter(pk=turn.answer.pk).delete()
    for agent, text in (("billing_agent", "Parte da fatura"), ("orders_agent", "Parte do pedido")):
        Message.objects.create(
            conversation=conversation, role=MessageRole.AGENT, agent=agent, content=text, metadata={"intent": "x"}
        )
    Message.objects.create(conversation=conversation, role="assistant", agent="supervisor_agent", content="Tudo junto")

    [only] = turns_of(page_of(staff_client, conversation))

    assert "Agents that answered" in only
    assert only.index("Parte da fatura") < only.index("Parte do pedido") < only.index("Tudo junto")


def test_a_long_conversation_shows_its_last_turns_and_says_how_many_are_left_out(staff_client, alpha):
    conversation = conversation_of(alpha, session="long")
    for number in range(1, 6):
        stored_turn(conversation, f"mensagem {number}")

    timeline = conversation_timeline(conversation=conversation, turns=2)

    assert [turn.question.content for turn in timeline.turns] == ["mensagem 4", "mensagem 5"]
    assert [turn.number for turn in timeline.turns] == [4, 5]
    assert timeline.turns_left_out == 3


def test_the_timeline_reads_a_fixed_number_of_queries_however_long(alpha, django_assert_max_num_queries):
    conversation = conversation_of(alpha, session="many")
    for number in range(12):
        stored_turn(conversation, f"mensagem {number}", tool="consultar_fatura", handoff_to="orders_agent", rating="up")

    with django_assert_max_num_queries(9):
        timeline = conversation_timeline(conversation=conversation)

    assert len(timeline.turns) == 12
    assert all(len(turn.tool_calls) == 1 and len(turn.handoffs) == 1 for turn in timeline.turns)


# -- "Add as routing test" ---------------------------------------------------------------------------------------


def test_an_editor_who_may_add_tests_gets_a_link_on_each_customer_message(
    client, django_user_model, alpha, conversation
):
    editor = store_reader(django_user_model, "editor_a", alpha)
    editor.user_permissions.add(Permission.objects.get(codename="add_routingtestcase"))
    client.force_login(editor)

    page = page_of(client, conversation)

    questions = conversation.messages.filter(role="user").order_by("id")
    links = re.findall(rf'href="([^"]+)" {ADD_TEST} data-message-id="(\d+)"', page)
    assert [int(message_id) for _, message_id in links] == [message.pk for message in questions]


def test_the_link_opens_the_test_form_filled_with_the_message_and_what_was_decided(
    client, django_user_model, alpha, conversation
):
    editor = store_reader(django_user_model, "editor_a", alpha)
    editor.user_permissions.add(
        *Permission.objects.filter(codename__in=["add_routingtestcase", "view_routingtestcase"])
    )
    client.force_login(editor)
    second = conversation.messages.filter(role="user").order_by("id")[1]

    response = client.get(f"/admin/conversations/conversation/{conversation.pk}/routing-test/{second.pk}/", follow=True)

    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.initial["message"] == "e meu pedido?"
    assert form.initial["expect_intent"] == "order_tracking"
    # Played from the conversation's start: the first message is the test's earlier turn.
    first = conversation.messages.filter(role="user").order_by("id")[0]
    assert form.initial["turns"].startswith(first.content)


def test_a_reader_who_may_not_add_tests_sees_no_link_and_the_address_is_refused(
    client, django_user_model, alpha, conversation
):
    client.force_login(store_reader(django_user_model, "analyst_a", alpha))
    question = conversation.messages.filter(role="user").first()

    assert ADD_TEST not in page_of(client, conversation)
    url = f"/admin/conversations/conversation/{conversation.pk}/routing-test/{question.pk}/"
    assert client.get(url).status_code == 403


def test_the_link_of_another_tenants_or_another_conversations_message_is_a_404(
    client, django_user_model, alpha, conversation
):
    beta_conversation = conversation_of(TenantFactory(slug="tenant_b"), session="b-1")
    theirs = stored_turn(beta_conversation, "cliente B").question
    editor = store_reader(django_user_model, "editor_a", alpha)
    editor.user_permissions.add(Permission.objects.get(codename="add_routingtestcase"))
    client.force_login(editor)
    answer = conversation.messages.filter(role="assistant").first()

    base = "/admin/conversations/conversation"
    assert client.get(f"{base}/{beta_conversation.pk}/routing-test/{theirs.pk}/").status_code == 404
    assert client.get(f"{base}/{conversation.pk}/routing-test/{theirs.pk}/").status_code == 404
    assert client.get(f"{base}/{conversation.pk}/routing-test/{answer.pk}/").status_code == 404  # not the customer's
