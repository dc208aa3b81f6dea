"""The chat API as a client uses it: gateway, debug route, sessions, health, agents."""

from __future__ import annotations

import contextvars

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import AgentProfile
from agents.offline_words import offline_words
from chat import health
from common import language
from common.config_version import config_version_bump
from common.errors import ERROR_CONVERSATION_NOT_FOUND, ERROR_DEBUG_FORBIDDEN, ERROR_INVALID_KEY
from conversations.models import Conversation, Message, RouteDecisionRecord
from handoffs.models import Handoff
from routing.examples import ExampleIndex
from routing.models import Intent
from routing.router import CompiledRouter
from tests.factories import StatePolicyFactory

pytestmark = pytest.mark.django_db

GRAPH_NODES = [
    "input_guardrails",
    "routing_decision",
    "output_guardrails",
    "judge",
    "supervisor_review",
    "escalation",
    "persist",
]


def message(text, *, agent_id="telecom_contas", session_id="web-001", **payload):
    return {
        "channel": "web",
        "agent_id": agent_id,
        "payload": {"text": text, "session_id": session_id, "user_id": "u1", **payload},
    }


def send(api, text, **kwargs):
    return api.post("/api/gateway/message", message(text, **kwargs), format="json")


def stored_rows() -> tuple[int, int, int, int]:
    return (
        Conversation.objects.count(),
        Message.objects.count(),
        RouteDecisionRecord.objects.count(),
        Handoff.objects.count(),
    )


# -- the seed's examples ---------------------------------------------------------------


def test_the_invoice_complaint_goes_to_billing_with_its_tools(api, telecom):
    response = send(api, "Minha fatura veio alta", context={"msisdn": "5511999999999", "invoice_id": "INV001"})

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["agent"] == "billing_agent"
    assert body["conversation_key"] == "tenant_a:telecom_contas:web-001"
    metadata = body["metadata"]
    assert metadata["route"] == "billing_agent"
    assert metadata["intent"] == "billing_invoice_explanation"
    assert metadata["route_decision"]["method"] == "keyword"
    assert metadata["mcp_tools"] == ["consultar_fatura", "consultar_pagamentos"]
    assert metadata["llm"] == "offline"
    assert offline_words("pt")["notice"] in body["answer"]  # the offline model's marker, in the customer's language
    assert {"guardrails", "judges", "handoffs", "flags", "mcp_results"} <= metadata.keys()


def test_where_is_my_order_goes_to_the_orders_agent(api, telecom):
    body = send(api, "Onde está meu pedido?").json()
    assert body["agent"] == "orders_agent"
    assert body["metadata"]["intent"] == "retail_order_tracking"
    assert body["metadata"]["mcp_tools"] == ["consultar_entrega", "consultar_pedido"]


def test_every_graph_node_is_timed_in_order_in_the_trace(api, telecom):
    trace = send(api, "Minha fatura veio alta").json()["metadata"]["trace"]
    names = [step["node"] for step in trace]
    assert names == [*GRAPH_NODES[:2], "billing_agent", *GRAPH_NODES[2:]]
    assert all(step["ms"] >= 0 for step in trace)


def test_a_message_and_its_answer_and_decision_are_stored(api, telecom):
    send(api, "Minha fatura veio alta")

    conversation = Conversation.objects.get()
    assert conversation.conversation_key == "tenant_a:telecom_contas:web-001"
    assert conversation.active_specialist == "billing_agent"
    assert conversation.message_count == 2
    assert list(conversation.messages.values_list("role", "agent")) == [("user", ""), ("assistant", "billing_agent")]
    decision = conversation.route_decisions.get()
    assert (decision.method, decision.intent, decision.mode) == ("keyword", "billing_invoice_explanation", "router")


def test_each_decision_points_at_its_own_user_message_and_each_answer_id_is_the_stored_answer(api, telecom):
    first = send(api, "Minha fatura veio alta").json()
    second = send(api, "E o meu pedido?").json()  # a handoff too: its row joins the turn's write

    conversation = Conversation.objects.get()
    users = conversation.messages.filter(role="user").order_by("id").values_list("pk", flat=True)
    decisions = conversation.route_decisions.order_by("id").values_list("message_id", flat=True)
    assert list(decisions) == list(users)
    answers = conversation.messages.filter(role="assistant").order_by("id").values_list("pk", flat=True)
    assert [first["message_id"], second["message_id"]] == list(answers)
    assert Handoff.objects.get().conversation_id == conversation.pk
    assert (conversation.message_count, conversation.turn_tickets_done) == (4, 2)


def test_the_intents_next_state_makes_the_state_policy_decide_the_next_message(api, telecom):
    billing = telecom.specialists.get(name="billing_agent")
    intent = telecom.intents.get(name="billing_invoice_explanation")
    intent.next_state = "WAITING_PAYMENT_CONFIRMATION"
    intent.save()
    StatePolicyFactory(profile=telecom, state="WAITING_PAYMENT_CONFIRMATION", specialist=billing, intent=intent)

    send(api, "Quero a segunda via do boleto")
    assert Conversation.objects.get().state == "WAITING_PAYMENT_CONFIRMATION"

    decision = send(api, "sim").json()["metadata"]["route_decision"]
    assert (decision["method"], decision["agent"]) == ("state", "billing_agent")


def test_routing_away_from_the_active_specialist_records_a_routing_handoff(api, telecom):
    send(api, "Minha fatura veio alta")
    body = send(api, "E o meu pedido?").json()

    assert body["metadata"]["route_decision"]["handoff"] is True
    handoff = Handoff.objects.get()
    assert (handoff.from_agent, handoff.to_agent, handoff.kind) == ("billing_agent", "orders_agent", "routing_handoff")


def test_a_session_without_an_id_gets_a_fresh_conversation_key(api, telecom):
    body = api.post(
        "/api/gateway/message", {"agent_id": "telecom_contas", "payload": {"text": "fatura"}}, format="json"
    ).json()
    assert body["conversation_key"].startswith("tenant_a:telecom_contas:")
    assert len(body["conversation_key"].split(":")[2]) == 32


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"agent_id": "telecom_contas", "payload": {}}, "payload.text"),
        ({"agent_id": "telecom_contas", "payload": {"text": ""}}, "payload.text"),
        ({"agent_id": "telecom_contas", "payload": {"text": "   "}}, "payload.text"),
        ({"agent_id": "telecom_contas", "payload": {"text": 42}}, "payload.text"),
        ({"agent_id": "telecom_contas", "payload": {"text": ["fatura"]}}, "payload.text"),
        ({"agent_id": "telecom_contas"}, "payload"),
        ({"agent_id": "telecom_contas", "payload": "fatura"}, "payload"),
        ({"agent_id": "telecom_contas", "payload": {"text": "fatura", "context": ["x"]}}, "payload.context"),
        ({"agent_id": "telecom_contas", "payload": {"text": "fatura", "session_id": 7}}, "payload.session_id"),
        ({"payload": {"text": "fatura"}}, "agent_id"),
        ({"agent_id": "nope", "payload": {"text": "fatura"}}, "agent_id"),
        ({"agent_id": 12, "payload": {"text": "fatura"}}, "agent_id"),
    ],
)
def test_bad_input_is_refused_with_the_field_named_and_nothing_stored(api, telecom, body, field):
    response = api.post("/api/gateway/message", body, format="json")

    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"], response.json()
    assert stored_rows() == (0, 0, 0, 0)


def test_text_over_the_limit_is_refused(api, telecom, settings):
    settings.MAX_INPUT_CHARS = 4000
    response = send(api, "a" * 4001)

    assert response.status_code == 400
    assert "4000" in response.json()["error"]["fields"]["payload.text"][0]
    assert stored_rows() == (0, 0, 0, 0)
    assert send(api, "fatura " + "a" * 3990).status_code == 200


def test_a_profile_may_set_its_own_input_limit(api, telecom):
    telecom.guardrails = {"max_input_chars": 10}
    telecom.save()
    assert send(api, "minha fatura veio alta").status_code == 400


def test_malformed_json_is_refused(api, telecom):
    response = api.post("/api/gateway/message", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "malformed_json"
    assert stored_rows() == (0, 0, 0, 0)


def test_a_request_without_a_key_is_refused(client, telecom):
    response = client.post("/api/gateway/message", message("fatura"), content_type="application/json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert stored_rows() == (0, 0, 0, 0)


@pytest.mark.parametrize("header", ["Bearer wrong", "Bearer ", "Token abc", "Basic dXNlcjpwYXNz"])
def test_a_request_with_a_wrong_key_is_refused(client, telecom, header):
    response = client.post(
        "/api/gateway/message", message("fatura"), content_type="application/json", HTTP_AUTHORIZATION=header
    )
    assert response.status_code == 401
    assert response.json()["error"]["message"] == ERROR_INVALID_KEY
    assert stored_rows() == (0, 0, 0, 0)


def test_a_revoked_key_is_refused(api, tenant_key, telecom):
    assert send(api, "fatura").status_code == 200  # the key is now cached in this process
    tenant_key.is_active = False
    tenant_key.save()
    assert send(api, "fatura").status_code == 401


def test_a_key_deactivated_by_the_admin_action_is_refused_at_once(api, tenant_key, telecom, client, staff_user):
    assert send(api, "fatura").status_code == 200
    client.force_login(staff_user)
    client.post("/admin/tenants/apikey/", {"action": "deactivate_keys", "_selected_action": [tenant_key.pk]})
    assert send(api, "fatura").status_code == 401


def test_a_deactivated_tenant_is_refused(api, tenant, telecom):
    assert send(api, "fatura").status_code == 200
    tenant.is_active = False
    tenant.save()
    assert send(api, "fatura").status_code == 401


# -- tenants ----------------------------------------------------------------------------------


def test_the_tenant_comes_from_the_key_not_the_body(api, telecom):
    body = message("fatura")
    body["tenant_id"] = "outsider"
    assert api.post("/api/gateway/message", body, format="json").json()["conversation_key"].startswith("tenant_a:")


def test_a_tenant_never_sees_another_tenants_conversation(api, outsider_api, telecom):
    send(api, "Minha fatura veio alta")
    send(outsider_api, "Minha fatura veio alta")

    assert Conversation.objects.count() == 2
    response = outsider_api.get("/api/sessions/tenant_a:telecom_contas:web-001/messages")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == ERROR_CONVERSATION_NOT_FOUND
    own = outsider_api.get("/api/sessions/outsider:telecom_contas:web-001/messages")
    assert own.status_code == 200
    assert len(own.json()["messages"]) == 2


# -- sessions -----------------------------------------------------------------------------------


def test_the_session_lists_messages_decisions_and_handoffs(api, telecom, django_assert_max_num_queries):
    send(api, "Minha fatura veio alta")
    send(api, "Onde está meu pedido?")

    with django_assert_max_num_queries(6):
        response = api.get("/api/sessions/tenant_a:telecom_contas:web-001/messages")

    body = response.json()
    assert body["conversation_key"] == "tenant_a:telecom_contas:web-001"
    assert [(m["role"], m["agent"]) for m in body["messages"]] == [
        ("user", ""),
        ("assistant", "billing_agent"),
        ("user", ""),
        ("assistant", "orders_agent"),
    ]
    assert {"role", "agent", "content", "created_at"} <= body["messages"][0].keys()
    assert [d["agent"] for d in body["route_decisions"]] == ["billing_agent", "orders_agent"]
    assert [(h["from_agent"], h["to_agent"], h["kind"]) for h in body["handoffs"]] == [
        ("billing_agent", "orders_agent", "routing_handoff")
    ]
    assert {"from_agent", "to_agent", "kind", "reason", "created_at"} <= body["handoffs"][0].keys()


def test_an_unknown_session_is_not_found(api, telecom):
    assert api.get("/api/sessions/tenant_a:telecom_contas:nope/messages").status_code == 404


# -- debug route ---------------------------------------------------------------------------------


def test_the_debug_route_answers_the_decision_and_stores_nothing(debug_api, telecom):
    response = debug_api.post("/api/debug/route", message("Minha fatura veio alta"), format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["mode"] == "router"
    assert (body["route"], body["agent"], body["intent"], body["method"]) == (
        "billing_agent",
        "billing_agent",
        "billing_invoice_explanation",
        "keyword",
    )
    assert body["mcp_tools"] == ["consultar_fatura", "consultar_pagamentos"]
    assert stored_rows() == (0, 0, 0, 0)


def test_the_debug_route_needs_a_debug_key(api, telecom):
    response = api.post("/api/debug/route", message("fatura"), format="json")
    assert response.status_code == 403
    assert response.json()["error"]["message"] == ERROR_DEBUG_FORBIDDEN


def test_a_staff_session_may_use_the_debug_route(client, staff_user, tenant, telecom):
    client.force_login(staff_user)
    body = message("fatura")
    body["tenant_id"] = "tenant_a"
    response = client.post("/api/debug/route", body, content_type="application/json")
    assert response.status_code == 200
    assert response.json()["agent"] == "billing_agent"


def test_the_routing_mode_environment_variable_overrides_the_profile(debug_api, telecom, settings):
    settings.ROUTING_MODE = "hybrid"
    assert debug_api.post("/api/debug/route", message("fatura"), format="json").json()["mode"] == "hybrid"


# -- health, agents, schema -----------------------------------------------------------------------


def test_health_reports_database_modes_profiles_and_servers(client, telecom, live_mcp, monkeypatch):
    # What is reported, not how fast: a live MCP server on a busy machine may take longer than the probe's bound of a
    # second (test_readiness_outages.py holds the bound itself), and is then reported degraded.
    monkeypatch.setattr(health, "CHECK_SECONDS", 30.0)
    body = client.get("/api/health").json()
    assert body["status"] == "ok"
    assert body["agents"] == ["telecom_contas"]
    assert body["routing_modes"] == {"telecom_contas": "router"}
    assert body["database"]["status"] == "ok"
    assert {server["name"] for server in body["mcp_servers"]} == {"telecom", "retail"}


def test_agents_lists_profiles_specialists_and_intents(api, telecom):
    (profile,) = api.get("/api/agents").json()["agents"]
    assert profile["agent_id"] == "telecom_contas"
    assert {s["name"] for s in profile["specialists"]} == {
        "billing_agent",
        "orders_agent",
        "product_agent",
        "support_agent",
    }
    assert profile["intents"][0]["name"] == "billing_invoice_explanation"
    assert "segunda via" in profile["intents"][0]["keywords"]


def test_the_openapi_schema_and_its_browsable_ui_are_served(client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/gateway/message" in schema.content
    assert client.get("/api/docs/").status_code == 200


# -- no routing configuration on the message path ----------------------------------------------------

ROUTING_CONFIG_TABLES = (
    "agents_agentprofile",
    "agents_specialist",
    "agents_specialistprompt",
    "agents_mcpserver",
    "agents_mcptool",
    "routing_intent",
    "routing_keyword",
    "routing_statepolicy",
    "routing_routingconfigversion",
)


def test_a_message_reads_no_routing_configuration_from_the_database(api, telecom, django_assert_num_queries):
    send(api, "aquecimento", session_id="warm-up")  # compiles the snapshot and caches the version

    with CaptureQueriesContext(connection) as queries:
        assert send(api, "Minha fatura veio alta").status_code == 200

    touched = [q["sql"] for q in queries if any(table in q["sql"] for table in ROUTING_CONFIG_TABLES)]
    assert touched == []


def test_the_message_path_has_a_fixed_query_budget(api, telecom, django_assert_max_num_queries):
    send(api, "Minha fatura veio alta")
    # Two statements a message (the key is cached in the process, the routing compiled in it): the ticket, one
    # UPDATE … RETURNING that also reads the conversation's state, its history and the customer's facts; then one
    # statement with both messages, the decision and the conversation's update (which hands the ticket on), no
    # transaction around it (conversations/records.py). A test transaction wraps them here, with no savepoint.
    with django_assert_max_num_queries(2) as captured:
        send(api, "Minha fatura veio alta de novo")

    ticket, write = (query["sql"] for query in captured.captured_queries)
    assert ticket.startswith('UPDATE "routing_conversation"') and "json_agg" in ticket
    assert write.startswith('WITH m AS (INSERT INTO "routing_message"')


def test_a_message_that_starts_a_session_creates_its_conversation_and_takes_its_ticket_in_one_statement(
    api, telecom, django_assert_max_num_queries
):
    send(api, "Minha fatura veio alta")  # the key cached in the process, the routing compiled in it
    with django_assert_max_num_queries(2) as captured:
        posted = message("Minha fatura veio alta")
        del posted["payload"]["session_id"]
        body = api.post("/api/gateway/message", posted, format="json").json()

    create, write = (query["sql"] for query in captured.captured_queries)
    assert create.startswith('INSERT INTO "routing_conversation"') and "ON CONFLICT DO NOTHING RETURNING" in create
    assert write.startswith('WITH m AS (INSERT INTO "routing_message"')
    stored = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert (stored.turn_tickets_issued, stored.turn_tickets_done, stored.messages.count()) == (1, 1, 2)


def test_the_message_path_reads_a_messages_keywords_once_and_each_texts_language_once(api, telecom, monkeypatch):
    """A turn routes on the message's keywords and the offline model moves on the same hits; the language is read
    of the message (the turn's language, the offline model's, the judge's) and of the answer's own words (the
    judge): each text is worked out once a request."""
    calls: list[str] = []
    scored: list[str] = []

    def counted(owner, name):
        original = getattr(owner, name)

        def call(*args, **kwargs):
            calls.append(name)
            if name == "language_scores":
                scored.append(args[0])
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, call)

    counted(CompiledRouter, "keyword_match")
    counted(language, "language_scores")
    # Each request in a context of its own, as the ASGI server gives it: the test client's requests share the test's.
    contextvars.Context().run(send, api, "Minha fatura veio alta")
    first_scored = list(scored)
    calls.clear()
    scored.clear()

    body = contextvars.Context().run(send, api, "Preciso da segunda via do boleto").json()

    assert body["metadata"]["route_decision"]["method"] == "keyword"
    assert calls.count("keyword_match") == 1
    # The message once (the turn's language, the offline model's, the judge's), and the answer's own words once.
    assert len(scored) == len(set(scored)) == 2 and scored[0] == "Preciso da segunda via do boleto"
    assert len(first_scored) == len(set(first_scored)) == 2
    assert body["metadata"]["judges"]["rule_based"]["details"]["language_matches"] == {"user": "pt", "answer": "pt"}


def test_the_examples_tier_scores_a_message_once_a_turn(api, telecom, monkeypatch):
    """A message no keyword matches is scored against the examples to route it, and the offline model moves on the
    intent the tier reads it as (conversations.runtime): one score serves both."""
    Intent.objects.filter(profile=telecom, name="billing_invoice_explanation").update(
        examples=["minha conta de telefone veio cara", "phone bill is way too expensive"]
    )
    Intent.objects.filter(profile=telecom, name="retail_order_tracking").update(
        examples=["o chip ainda não chegou em casa", "my router was never delivered"]
    )
    AgentProfile.objects.filter(pk=telecom.pk).update(examples_threshold=0.2, examples_margin=0.05)
    config_version_bump()
    scored: list[str] = []
    match = ExampleIndex.match

    def counted(index, vector, **kwargs):
        scored.append("match")
        return match(index, vector, **kwargs)

    monkeypatch.setattr(ExampleIndex, "match", counted)
    send(api, "Minha fatura veio alta")
    scored.clear()

    body = send(api, "o telefone veio caro demais").json()

    assert body["metadata"]["route_decision"]["method"] == "examples"
    assert scored == ["match"]


def test_an_admin_edit_is_seen_by_the_next_message(api, telecom):
    assert send(api, "quero um upgrade").json()["agent"] == "support_agent"

    product = telecom.intents.get(name="product_information")
    product.keywords.create(text="upgrade")

    assert send(api, "quero um upgrade").json()["agent"] == "product_agent"


def test_an_answer_keeps_its_latency_and_judge_score_in_columns_for_the_analytics(api, telecom):
    body = send(api, "Minha fatura veio alta").json()

    answer = Message.objects.get(conversation__conversation_key=body["conversation_key"], role="assistant")
    assert answer.judge_score == body["metadata"]["judges"]["rule_based"]["score"]
    graph_ms = sum(node["ms"] for node in body["metadata"]["trace"] if node["node"] != "persist")
    assert answer.latency_ms == pytest.approx(graph_ms, abs=0.01)
    assert Message.objects.get(conversation=answer.conversation, role="user").latency_ms is None
