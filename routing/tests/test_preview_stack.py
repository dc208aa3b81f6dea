"""The route preview takes the conversation as it stands — its state, and the earlier messages typed, played first —
and shows the decision the chat would make with the conversation's open flows: the flows open before and after
the message, what it did to them (pushed, resumed, bound, cancelled, queued …), its repair pattern and the requests
it held. On the demo as shipped; on SQLite too."""

from __future__ import annotations

import re

import pytest

from agents.models import AgentProfile
from handoffs.tests.test_demo_flows import say
from routing.admin_views import EARLIER_MAX_MESSAGES
from routing.stack_explained import stack_explained

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

PREVIEW_URL = "/admin/routing/intent/preview/"
MSISDN = "5511999999999"
PAYMENT = "Quero pagar minha fatura com pix"
SIDE_QUESTION = "antes disso, qual o vencimento da fatura?"
BACK = "voltando ao pagamento: já paguei"
WAITING = "WAITING_PAYMENT_CONFIRMATION"


@pytest.fixture
def contas(module_demo, db) -> AgentProfile:
    return AgentProfile.objects.get(agent_id="telecom_contas")


def preview(client, profile, text, **fields):
    response = client.get(PREVIEW_URL, {"profile": profile.pk, "text": text, **fields})
    assert response.status_code == 200
    return response


def cell(page: str, cell_id: str) -> str:
    """The text of the table cell ``cell_id``, tags dropped and spaces joined."""
    found = re.search(rf'<td id="{cell_id}">(.*?)</td>', page, re.S)
    assert found, f"no cell {cell_id} on the page"
    return " ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split())


def test_a_side_question_in_a_state_shows_the_flow_pushed_and_resumed(staff_client, contas):
    response = preview(staff_client, contas, SIDE_QUESTION, state=WAITING)

    decision = response.context["preview"].decision
    assert decision.method != "state"  # not read as the payment's confirmation
    page = response.content.decode()
    assert cell(page, "route-frames-before") == f"On top: the flow {WAITING}, with billing_agent"
    events = cell(page, "route-stack-events")
    assert f"Pushed the flow {WAITING} under a side question ({decision.intent})." in events
    assert f"Resumed the flow {WAITING}." in events
    assert cell(page, "route-frames-after") == f"On top: the flow {WAITING}, with billing_agent"


def test_the_earlier_messages_are_played_first_and_build_the_flows_the_message_meets(staff_client, contas):
    response = preview(staff_client, contas, SIDE_QUESTION, earlier=f"{PAYMENT}\n")

    shown = response.context["preview"].conversation
    [earlier] = shown.earlier
    assert earlier.text == PAYMENT and earlier.decision.next_state == WAITING
    assert earlier.stack.startswith(f"opened the flow {WAITING}")
    page = response.content.decode()
    assert PAYMENT in cell(page, "route-earlier")
    assert cell(page, "route-frames-before").startswith(f"On top: the flow {WAITING}")
    assert f"Pushed the flow {WAITING} under a side question" in cell(page, "route-stack-events")


def test_without_the_earlier_messages_the_same_question_meets_no_flow(staff_client, contas):
    page = preview(staff_client, contas, SIDE_QUESTION).content.decode()

    assert cell(page, "route-frames-before") == "No flow open: a new request."
    assert "Pushed" not in cell(page, "route-stack-events")


def test_a_return_to_the_flow_after_the_side_question_is_bound_to_it_and_closes_it(staff_client, contas):
    response = preview(staff_client, contas, BACK, earlier=f"{PAYMENT}\n{SIDE_QUESTION}")

    decision = response.context["preview"].decision
    assert (decision.method, decision.intent) == ("state", "billing_payment_confirmation")
    page = response.content.decode()
    assert [message.stack for message in response.context["preview"].conversation.earlier][1].startswith("pushed")
    events = cell(page, "route-stack-events")
    assert f"Read as the reply to the flow {WAITING}." in events
    assert f"Closed the flow {WAITING} (its reply ended it)." in events
    assert cell(page, "route-frames-after") == "No flow open."


def test_a_cancel_shows_its_repair_pattern_and_the_flow_cancelled(staff_client, contas):
    page = preview(staff_client, contas, "deixa pra lá", state=WAITING).content.decode()

    assert cell(page, "route-repair").startswith("Cancel — the customer dropped what was open")
    assert cell(page, "route-stack-events") == f"Cancelled the flow {WAITING}."
    assert cell(page, "route-frames-after") == "No flow open."


def test_two_requests_in_one_message_show_each_topic_and_what_happened_to_it(staff_client, contas):
    page = preview(staff_client, contas, "minha internet caiu e ainda veio a conta mais cara").content.decode()

    topics = cell(page, "route-topics")
    assert topics.startswith("2 requests in one message:")
    assert topics.count(" answered") == 2


def test_the_decision_shown_is_the_one_the_chat_made_in_the_same_conversation(api, served_module_demo, staff_client):
    """The same three messages through the API on the demo, and the last one previewed with the two before it."""
    answers = [
        say(api, text, agent_id="telecom_contas", session="preview-same", msisdn=MSISDN)
        for text in (PAYMENT, SIDE_QUESTION, BACK)
    ]
    contas = AgentProfile.objects.get(agent_id="telecom_contas")

    for played, answer in enumerate(answers):
        texts = [PAYMENT, SIDE_QUESTION, BACK][: played + 1]
        shown = preview(staff_client, contas, texts[-1], earlier="\n".join(texts[:-1])).context["preview"]
        routed = answer["metadata"]["route_decision"]
        decision = shown.decision
        assert (decision.intent, decision.agent, decision.method) == (
            routed["intent"],
            routed["agent"],
            routed["method"],
        ), texts[-1]
        told = stack_explained(answer["metadata"]["conversation"])
        assert told is not None and shown.conversation.after.events == told.events, texts[-1]


def test_more_earlier_messages_than_the_limit_are_refused_naming_the_field(staff_client, contas):
    earlier = "\n".join(f"mensagem {number}" for number in range(EARLIER_MAX_MESSAGES + 1))
    response = preview(staff_client, contas, "oi", earlier=earlier)

    assert response.context["preview"] is None
    assert f"At most {EARLIER_MAX_MESSAGES} earlier messages" in response.context["form"].errors["earlier"][0]


def test_what_the_customer_typed_is_shown_as_text_never_as_markup(staff_client, contas):
    page = preview(staff_client, contas, "<b>oi</b>", earlier="<script>alert(1)</script>").content.decode()

    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_preview_with_earlier_messages_offers_a_conversation_test_case(editor_client, contas):
    alone = preview(editor_client, contas, SIDE_QUESTION).context["preview"]
    played = preview(editor_client, contas, SIDE_QUESTION, earlier=PAYMENT).context["preview"]

    assert "turns=" not in alone.test_case_url
    form = editor_client.get(played.test_case_url).context["adminform"].form
    assert form.initial["turns"].startswith(f"{PAYMENT} | intent: billing_payment_request")
