"""Guardrails, judges and review as a client sees them through the gateway."""

from __future__ import annotations

import json

import pytest

from common.i18n import say as say_in
from conversations.graph import BLOCKED_ANSWER
from conversations.judges import REVIEW_FALLBACK_ANSWER
from conversations.models import Message, RouteDecisionRecord, ToolCall

pytestmark = pytest.mark.django_db

CPF = "529.982.247-25"
CARD = "4111 1111 1111 1111"


def send(api, text, context=None, session_id="s-guard"):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session_id, "context": context or {}}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def everything_stored() -> str:
    rows = [
        *Message.objects.values("content", "metadata"),
        *RouteDecisionRecord.objects.values("reason", "metadata"),
        *ToolCall.objects.values("arguments", "result", "error"),
    ]
    return json.dumps(rows, ensure_ascii=False, default=str)


def test_a_cpf_and_a_card_never_reach_the_model_server(api, telecom, scripted_llm):
    send(api, f"Minha fatura veio alta. CPF {CPF}, cartão {CARD}")

    sent = json.dumps(scripted_llm.requests, ensure_ascii=False)
    assert "529.982.247-25" not in sent and "52998224725" not in sent
    assert "4111 1111 1111 1111" not in sent and "4111111111111111" not in sent
    assert "[CPF_1]" in sent and "[CARD_1]" in sent


def test_a_cpf_and_a_card_never_reach_the_stored_trace(api, telecom):
    body = send(api, f"Minha fatura veio alta. CPF {CPF}, cartão {CARD}")

    stored = everything_stored()
    assert "529.982.247-25" not in stored and "4111 1111 1111 1111" not in stored
    assert "[CPF]" in Message.objects.filter(role="user").get().content
    counts = {c["name"]: c for c in body["metadata"]["guardrails"]["input"]["checks"]}
    assert counts["personal_data"]["details"]["masked"] == {"cpf": 1, "card": 1}


def test_the_original_input_is_stored_only_where_the_profile_allows_it(api, telecom):
    telecom.guardrails = {"store_original_input": True}
    telecom.save()

    send(api, f"Minha fatura veio alta. CPF {CPF}")

    assert CPF in Message.objects.filter(role="user").get().content


def test_a_phone_in_the_context_reaches_the_tool_but_not_the_model(api, live_mcp, scripted_llm):
    scripted_llm.reply_tool_call("consultar_fatura", {"msisdn": "[PHONE_1]", "invoice_id": "INV001"})
    scripted_llm.reply("Sua fatura INV001 é de R$ 289,90.")

    body = send(api, "Minha fatura veio alta", context={"msisdn": "5511999999999", "invoice_id": "INV001"})

    assert "5511999999999" not in json.dumps(scripted_llm.requests)
    result = body["metadata"]["mcp_results"][0]
    assert result["status"] == "ok"  # the server got the real number
    assert result["arguments"]["msisdn"] == "[PHONE]"  # the record did not
    assert "5511999999999" not in everything_stored()


def test_a_blocked_term_blocks_the_message_before_any_model(api, telecom, scripted_llm):
    telecom.guardrails = {"blocked_terms": ["senha do cartão"]}
    telecom.save()

    body = send(api, "Me passa a SENHA do cartao agora")

    assert body["answer"] == say_in(body["metadata"]["language"], BLOCKED_ANSWER)
    assert body["metadata"]["guardrails"]["input"]["blocked"] is True
    assert scripted_llm.requests == []


def test_raw_tool_json_and_stack_traces_are_removed_from_the_answer(api, telecom, scripted_llm):
    scripted_llm.reply(
        'Aqui está: {"invoice_id": "INV001", "amount": 289.9}\nTraceback (most recent call last):\n'
        '  File "x.py", line 1, in <module>\nValueError: boom\nSua fatura é de R$ 289,90.'
    )

    body = send(api, "Minha fatura veio alta")

    assert "{" not in body["answer"] and "Traceback" not in body["answer"]
    assert "R$ 289,90" in body["answer"]
    checks = {c["name"]: c for c in body["metadata"]["guardrails"]["output"]["checks"]}
    assert checks["no_raw_tool_json"]["action"] == "sanitize"
    assert checks["no_stack_trace"]["action"] == "sanitize"


def test_the_rule_judge_scores_a_grounded_answer(api, live_mcp):
    body = send(api, "Minha fatura veio alta", context={"msisdn": "5511999999999", "invoice_id": "INV001"})

    judge = body["metadata"]["judges"]["rule_based"]
    assert judge["passed"] is True
    assert judge["checks"]["grounded"] == "passed"
    assert body["metadata"]["review"]["action"] == "accept"


def test_an_ungrounded_answer_fails_the_judge_and_the_review_replaces_it(api, live_mcp, scripted_llm, telecom):
    telecom.judges = {"min_score": 0.9}
    telecom.save()
    scripted_llm.reply_tool_call("consultar_fatura", {"msisdn": "[PHONE_1]"})
    scripted_llm.reply("Your bill looks fine to me.")

    body = send(api, "Minha fatura veio alta", context={"msisdn": "5511999999999"})

    assert body["metadata"]["judges"]["rule_based"]["passed"] is False
    assert body["metadata"]["review"]["action"] == "replace"
    assert body["answer"] == say_in(body["metadata"]["language"], REVIEW_FALLBACK_ANSWER)


def test_the_llm_judge_runs_when_the_profile_asks_for_it(api, telecom, scripted_llm):
    telecom.judges = {"llm_judge": True}
    telecom.save()
    scripted_llm.reply("Sua fatura está em análise.")
    scripted_llm.reply('{"score": 0.2, "reason": "Does not answer the question."}')

    body = send(api, "Minha fatura veio alta")

    llm_judge = body["metadata"]["judges"]["llm"]
    assert llm_judge["score"] == 0.2
    assert body["metadata"]["review"]["action"] == "replace"
