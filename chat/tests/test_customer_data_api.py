"""``GET`` and ``DELETE /api/customers/{user_id}/data``: one end user's data exported and erased, seeded through the
real message API (a turn with a tool call, a rating with a comment, an escalation with a desk note), with marker
strings the database is searched for afterwards."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from rest_framework.test import APIClient

from conversations.customer_data import ERROR_USER_ID
from conversations.desk.escalations import Person, desk_note
from conversations.models import Conversation, CustomerErasure, Message, ToolCall
from tenants.models import TenantGrant

pytestmark = pytest.mark.django_db

USER = "cust-zq17-user"
SESSION = "sess-zq17-session"
INVOICE = "INVZQ17ARG"  # a tool argument
SAID = "ZQ17-SAID minha fatura veio alta"
COMMENT = "ZQ17-COMMENT a resposta não ajudou"
ASKED = "ZQ17-ASKED minha internet caiu de novo"
NOTE = "ZQ17-NOTE cliente irritado"
MARKERS = (USER, SESSION, INVOICE, "ZQ17-SAID", "ZQ17-COMMENT", "ZQ17-ASKED", "ZQ17-NOTE")
OTHER = "ZQ17-OTHER minha fatura veio alta"
ANALYTICS = ("handoffs", "agents", "routing-methods", "tools", "cohorts", "languages", "usage", "feedback", "outcomes")


def say(api, text: str, *, user: str = USER, session: str = SESSION, **context) -> dict:
    response = api.post(
        "/api/gateway/message",
        {
            "agent_id": "telecom_contas",
            "payload": {"text": text, "session_id": session, "user_id": user, "context": context},
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def seeded(api, scripted_llm) -> dict:
    """The customer's turn with a tool call and its rating, then a second conversation handed to a person."""
    scripted_llm.reply_tool_call("consultar_fatura", {"msisdn": "[PHONE_1]", "invoice_id": INVOICE})
    scripted_llm.reply(f"Sua fatura {INVOICE} é de R$ 289,90.")
    answer = say(api, SAID, msisdn="5511999999999", invoice_id=INVOICE)
    rated = api.post(
        f"/api/sessions/{answer['conversation_key']}/feedback",
        {"message_id": answer["message_id"], "rating": "down", "comment": COMMENT},
        format="json",
    )
    assert rated.status_code == 201, rated.content
    say(api, ASKED, session=f"{SESSION}-2")
    escalated = say(api, "quero falar com um atendente", session=f"{SESSION}-2")
    desk_note(escalation_id=escalated["metadata"]["escalation"]["id"], person=Person("Ana", None, "ana"), text=NOTE)
    return answer


def database_dump() -> str:
    """Every row of every table of the database, as PostgreSQL writes it as JSON (every column, every type)."""
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
        dumped = []
        for table in tables:
            # The table names are the database's own (introspected), quoted.
            cursor.execute(f"SELECT row_to_json(t)::text FROM {connection.ops.quote_name(table)} t")  # noqa: S608
            dumped.extend(f"{table}: {row}" for (row,) in cursor.fetchall())
    return "\n".join(dumped).lower()


def found(dump: str) -> list[str]:
    return [marker for marker in MARKERS if marker.lower() in dump]


def analytics(api) -> dict:
    return {name: api.get(f"/api/analytics/{name}").json() for name in ANALYTICS}


def export(api, user: str = USER, **params) -> dict:
    response = api.get(f"/api/customers/{user}/data", params)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    return json.loads(b"".join(response.streaming_content))


@pytest.fixture
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("the dump reads PostgreSQL's row_to_json")


def test_the_export_holds_the_customers_conversations_with_every_row_kind_and_masked_values_stay_masked(
    api, live_mcp, scripted_llm
):
    seeded(api, scripted_llm)
    say(api, OTHER, user="someone-else", session="other-session")

    document = export(api)

    assert (document["tenant"], document["user_id"]) == ("tenant_a", USER)
    conversations = {conversation["session_id"]: conversation for conversation in document["conversations"]}
    assert set(conversations) == {SESSION, f"{SESSION}-2"}  # not someone-else's
    first, second = conversations[SESSION], conversations[f"{SESSION}-2"]
    assert SAID in [message["content"] for message in first["messages"]]
    (call,) = first["tool_calls"]
    assert call["arguments"] == {"msisdn": "[PHONE]", "invoice_id": INVOICE}  # masked as stored
    assert "5511999999999" not in json.dumps(document)
    assert [rating["comment"] for rating in first["ratings"]] == [COMMENT]
    assert first["route_decisions"] and first["agent_id"] == "telecom_contas"
    assert [escalation["reason"] for escalation in second["escalations"]] == ["customer_request"]
    assert NOTE in [message["content"] for message in second["messages"] if message["role"] == "note"]
    assert second["handoffs"] and second["outcome"]


def test_after_erasure_the_database_holds_none_of_the_customers_ids_words_or_tool_arguments(
    api, live_mcp, scripted_llm, postgres_only
):
    seeded(api, scripted_llm)
    say(api, OTHER, user="someone-else", session="other-session")
    assert found(database_dump()) == list(MARKERS)  # the seed reached the tables the dump reads
    before = analytics(api)

    response = api.delete(f"/api/customers/{USER}/data")

    assert response.status_code == 200, response.content
    erased = response.json()["erased"]
    assert erased["conversations.Conversation"] == 2 and erased["conversations.ToolCall"] == 1
    assert erased["conversations.MessageFeedback"] == 1 and erased["conversations.Escalation"] == 1
    assert found(database_dump()) == []
    assert analytics(api) == before  # the counted rows stayed, anonymised
    assert "zq17-other" in database_dump()  # another user of the tenant is untouched
    record = CustomerErasure.objects.get()
    assert record.counts == erased and record.actor.startswith("api key: ")
    assert USER not in record.customer and record.customer.startswith("user:")


def test_a_second_erasure_finds_nothing_and_changes_nothing(api, live_mcp, scripted_llm):
    seeded(api, scripted_llm)
    assert api.delete(f"/api/customers/{USER}/data").json()["erased"]
    stored = [list(model.objects.order_by("pk").values()) for model in (Conversation, Message, ToolCall)]

    again = api.delete(f"/api/customers/{USER}/data")

    assert again.status_code == 200 and again.json()["erased"] == {}
    assert [list(model.objects.order_by("pk").values()) for model in (Conversation, Message, ToolCall)] == stored
    assert CustomerErasure.objects.count() == 1
    assert export(api)["conversations"] == []


def test_the_next_message_after_erasure_starts_a_new_conversation(api, live_mcp, scripted_llm):
    answer = seeded(api, scripted_llm)
    api.delete(f"/api/customers/{USER}/data")

    again = say(api, "Qual o melhor plano de internet?")

    assert again["conversation_key"] == answer["conversation_key"]
    assert [len(conversation["messages"]) for conversation in export(api)["conversations"]] == [2]


def test_another_tenants_customer_with_the_same_user_id_is_neither_exported_nor_erased(api, outsider_api, telecom):
    say(outsider_api, "ZQ17-OUTSIDER minha fatura veio alta")
    say(api, "Qual o melhor plano de internet?")

    theirs = export(outsider_api)
    assert theirs["tenant"] == "outsider" and len(theirs["conversations"]) == 1
    assert outsider_api.delete(f"/api/customers/{USER}/data").json()["erased"]["conversations.Conversation"] == 1

    mine = export(api)["conversations"]
    assert len(mine) == 1 and mine[0]["user_id"] == USER
    assert not Message.objects.filter(content__contains="ZQ17-OUTSIDER").exists()
    assert Message.objects.filter(conversation__tenant__slug="tenant_a", role="user").exclude(content="").exists()


def test_an_email_user_id_is_found_by_its_stored_pseudonym_and_erased(api, telecom):
    email = "maria.zq17@example.com"
    say(api, "Qual o melhor plano de internet?", user=email, session="email-session")
    assert Conversation.objects.get().user_id.startswith("email:")  # the store never keeps the e-mail

    assert len(export(api, email)["conversations"]) == 1
    assert api.delete(f"/api/customers/{email}/data").json()["erased"]["conversations.Conversation"] == 1
    assert Conversation.objects.get().user_id == ""


def test_a_blank_user_id_is_a_400_and_a_key_naming_another_tenant_a_403_naming_the_field(api, telecom):
    blank = api.get("/api/customers/%20/data")
    assert blank.status_code == 400
    assert blank.json()["error"]["fields"]["user_id"] == [ERROR_USER_ID]

    named = api.delete(f"/api/customers/{USER}/data", QUERY_STRING="tenant=outsider")
    assert named.status_code == 403 and "tenant" in named.json()["error"]["fields"]
    own = api.get(f"/api/customers/{USER}/data", QUERY_STRING="tenant=tenant_a")  # its own: as if left out
    assert own.status_code == 200


def test_a_staff_session_needs_the_right_over_the_tenant_it_names(client, tenant, telecom, django_user_model, api):
    say(api, "Qual o melhor plano de internet?")
    reader = django_user_model.objects.create_user("reader", password="pw", is_staff=True)
    grant = TenantGrant.objects.create(tenant=tenant, user=reader, read_conversations=True)
    staff = APIClient()
    staff.force_login(reader)

    assert staff.get(f"/api/customers/{USER}/data").status_code == 400  # no tenant named
    assert len(export(staff, tenant="tenant_a")["conversations"]) == 1
    refused = staff.delete(f"/api/customers/{USER}/data?tenant=tenant_a")
    assert refused.status_code == 403
    assert Conversation.objects.get().user_id == USER

    grant.manage_conversations = True
    grant.save(update_fields=["manage_conversations"])
    erased = staff.delete(f"/api/customers/{USER}/data?tenant=tenant_a")
    assert erased.status_code == 200 and erased.json()["erased"]["conversations.Conversation"] == 1
    record = CustomerErasure.objects.get()
    assert (record.actor, record.requested_by) == ("staff: reader", reader)


def test_no_key_and_no_session_is_a_401(client):
    assert APIClient().get(f"/api/customers/{USER}/data").status_code == 401
