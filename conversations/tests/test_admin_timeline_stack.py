"""A conversation's page shows, for each customer message, what it did to the conversation's open flows — a flow
opened, pushed under a side question and resumed, cancelled, two requests answered or the second queued — and the
flows open after it, read from the stored answer's ``metadata["conversation"]``, as text. Conversations run through
the API on the demo as shipped; on SQLite too."""

from __future__ import annotations

import re

import pytest

from agents.models import AgentProfile
from conversations.models import Conversation
from conversations.tests.stored_turns import conversation_of, stored_turn
from handoffs.tests.test_demo_flows import say
from releases.models import ConversationTest, RoutingTestCase
from releases.versions import version_publish
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

MSISDN = "5511999999999"
WAITING = "WAITING_PAYMENT_CONFIRMATION"
TWO_REQUESTS = "minha internet caiu e ainda veio a conta mais cara"


def page_of(client, conversation) -> str:
    response = client.get(f"/admin/conversations/conversation/{conversation.pk}/change/")
    assert response.status_code == 200
    return response.content.decode()


def flows_of(page: str) -> list[str]:
    """Each turn's "Open flows" step as text (tags dropped, spaces joined); ``""`` for a turn without one."""
    turns = re.findall(r'<li class="timeline-turn" id="turn-\d+".*?(?=<li class="timeline-turn"|</ol>)', page, re.S)
    shown = []
    for turn in turns:
        found = re.search(
            r'<div class="timeline-step timeline-stack">.*?<div class="timeline-body">(.*?)</div>', turn, re.S
        )
        shown.append(" ".join(re.sub(r"<[^>]+>", " ", found.group(1)).split()) if found else "")
    return shown


def walk(api, session: str, *texts: str) -> Conversation:
    bodies = [say(api, text, agent_id="telecom_contas", session=session, msisdn=MSISDN) for text in texts]
    return Conversation.objects.get(conversation_key=bodies[-1]["conversation_key"])


def test_each_message_shows_what_it_did_to_the_flows_of_a_conversation_run_on_the_demo(
    api, served_module_demo, staff_client
):
    conversation = walk(
        api,
        "timeline-stack",
        "Quero pagar minha fatura com pix",
        "antes disso, qual o vencimento da fatura?",
        "deixa pra lá",
        TWO_REQUESTS,
    )

    opened, digressed, cancelled, two = flows_of(page_of(staff_client, conversation))

    assert opened.startswith(f"Opened the flow {WAITING} (billing_payment_request).")
    assert f"Open after it, the next reply's first: the flow {WAITING}, with billing_agent" in opened
    assert digressed.startswith(
        f"Pushed the flow {WAITING} under a side question (billing_invoice_explanation); resumed the flow {WAITING}."
    )
    assert f"the flow {WAITING}" in digressed.split("Open after it")[1]
    assert cancelled.startswith(f"Cancelled the flow {WAITING}; repair: cancel — the customer dropped what was open.")
    assert cancelled.endswith("No flow open after it.")
    assert re.match(r"2 requests in one message: \w+ \(\w+\) answered, \w+ \(\w+\) answered\.", two), two


def test_the_second_request_queued_in_turn_is_shown_queued_and_open(api, served_module_demo, staff_client, staff_user):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    profile.multi_topic = "in_turn"
    profile.save(update_fields=["multi_topic"])
    # The demo's saved tests expect the two requests answered together: this test changes that on purpose.
    RoutingTestCase.objects.filter(profile=profile).update(enabled=False)
    ConversationTest.objects.filter(profile=profile).update(enabled=False)
    version_publish(profile=profile, user=staff_user, note="one request at a time")

    conversation = walk(api, "timeline-queued", TWO_REQUESTS)
    [two] = flows_of(page_of(staff_client, conversation))

    found = re.match(
        r"Queued the request (\w+) for later; 2 requests in one message: \w+ \(\w+\) answered, (\w+)"
        r" \(\w+\) queued\.",
        two,
    )
    assert found and found.group(1) == found.group(2), two
    assert f"the queued request {found.group(2)}" in two.split("Open after it")[1]


def test_the_details_show_the_flows_the_conversation_has_open(api, served_module_demo, staff_client):
    conversation = walk(api, "details-open", "Quero pagar minha fatura com pix")

    page = page_of(staff_client, conversation)

    found = re.search(r'<div class="readonly">([^<]*)</div>', page.split("field-open_flows")[1])
    assert found and found.group(1).startswith(f"the flow {WAITING}, with billing_agent")


def test_what_the_stored_metadata_holds_is_shown_as_text_never_as_markup(staff_client):
    conversation = conversation_of(TenantFactory(slug="tenant_a"))
    turn = stored_turn(conversation, "oi")
    turn.answer.metadata = {
        "conversation": {
            "stack": [{"kind": "state", "name": "<script>alert(1)</script>", "agent": "billing_agent"}],
            "events": [{"event": "opened", "frame": {"kind": "state", "name": "<b>X</b>"}, "by": "<i>y</i>"}, "junk"],
            "repair": None,
            "topics": "not a list",
        }
    }
    turn.answer.save(update_fields=["metadata"])

    page = page_of(staff_client, conversation)

    assert "<script>alert(1)</script>" not in page and "<b>X</b>" not in page and "<i>y</i>" not in page
    assert "Opened the flow &lt;b&gt;X&lt;/b&gt; (&lt;i&gt;y&lt;/i&gt;)." in page
    assert "the flow &lt;script&gt;alert(1)&lt;/script&gt;, with billing_agent" in page


def test_a_turn_not_routed_with_the_stack_shows_no_flows(staff_client):
    conversation = conversation_of(TenantFactory(slug="tenant_a"))
    stored_turn(conversation, "Minha fatura veio alta")  # stored without metadata["conversation"], as before

    assert flows_of(page_of(staff_client, conversation)) == [""]
