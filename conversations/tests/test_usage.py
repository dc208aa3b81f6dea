"""Token usage per turn: every model call of a turn as the model reported it, by kind and model, stored with the
answer."""

from __future__ import annotations

import datetime as dt
import importlib

import pytest
from django.test import AsyncClient

from agents.llm import reset_clients
from agents.usage import text_tokens
from conversations.models import Message, MessageRole
from conversations.runtime import SpecialistOutcome
from conversations.selectors import usage_report
from conversations.steps import outcome_as_dict, outcome_from_dict
from releases.models import RoutingTestCase
from releases.versions import version_publish
from routing.admin_views import route_preview
from tests.streaming import run, sse_events

pytestmark = pytest.mark.django_db

INVOICE_CONTEXT = {"msisdn": "5511999999999", "invoice_id": "INV001"}


def send(api, text, *, context=None, session_id="s-usage", path="/api/gateway/message"):
    response = api.post(
        path,
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session_id, "context": context or {}}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response


def answer_row() -> Message:
    return Message.objects.get(role=MessageRole.ASSISTANT)


def calls(body) -> dict[tuple[str, str], tuple[int, int, int]]:
    return {
        (call["kind"], call["model"]): (call["calls"], call["prompt_tokens"], call["completion_tokens"])
        for call in body["metadata"]["usage"]["calls"]
    }


def test_a_tool_loop_of_two_model_calls_counts_both_and_stores_them_with_the_answer(api, live_mcp, scripted_llm):
    scripted_llm.reply_tool_call("consultar_fatura", INVOICE_CONTEXT, usage=(120, 15))
    scripted_llm.reply("Sua fatura está em R$ 289,90.", usage=(180, 25))

    body = send(api, "Minha fatura veio alta", context=INVOICE_CONTEXT).json()

    usage = body["metadata"]["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (300, 40, 340)
    assert usage["model"] == "scripted-model"
    assert calls(body) == {("answer", "scripted-model"): (2, 300, 40)}
    row = answer_row()
    assert (row.prompt_tokens, row.completion_tokens, row.llm_model) == (300, 40, "scripted-model")
    assert row.metadata["usage"] == usage


@pytest.mark.parametrize("router_model", ["", "router-model"])
def test_the_classifiers_call_is_counted_under_routing_and_under_its_own_model_when_routing_has_one(
    api, telecom, scripted_llm, settings, router_model
):
    if router_model:
        settings.ROUTER_LLM_BASE_URL, settings.ROUTER_LLM_MODEL = scripted_llm.base_url, router_model
        reset_clients()
    telecom.llm_router_enabled = True
    telecom.llm_router_threshold = 0.6
    telecom.save()
    scripted_llm.reply_tool_call("IntentChoice", {"intent": "retail_order_tracking", "confidence": 0.9}, usage=(400, 9))
    scripted_llm.reply("Seu pacote está a caminho.", usage=(90, 8))

    body = send(api, "Cadê minha encomenda?").json()

    routing = router_model or "scripted-model"
    assert body["metadata"]["route_decision"]["method"] == "llm"
    assert [request["model"] for request in scripted_llm.requests] == [routing, "scripted-model"]
    assert calls(body) == {("answer", "scripted-model"): (1, 90, 8), ("routing", routing): (1, 400, 9)}
    row = answer_row()
    assert (row.llm_model, row.prompt_tokens, row.completion_tokens) == ("scripted-model", 490, 17)
    assert row.other_models is bool(router_model)  # the answer's turn called two models


def test_a_turn_that_called_one_model_only_is_not_marked(api, telecom, scripted_llm):
    scripted_llm.reply("Olá!", usage=(10, 2))

    send(api, "Bom dia")

    assert answer_row().other_models is False


def test_the_llm_judges_call_is_counted_under_judge(api, telecom, scripted_llm):
    telecom.judges = {"llm_judge": True}
    telecom.save()
    scripted_llm.reply("Sua fatura está em análise.", usage=(120, 10))
    scripted_llm.reply('{"score": 0.9, "reason": "Answers it."}', usage=(300, 12))

    body = send(api, "Minha fatura veio alta").json()

    assert body["metadata"]["judges"]["llm"]["score"] == 0.9
    assert calls(body) == {("answer", "scripted-model"): (1, 120, 10), ("judge", "scripted-model"): (1, 300, 12)}
    assert (answer_row().prompt_tokens, answer_row().completion_tokens) == (420, 22)


@pytest.mark.django_db(transaction=True)
def test_a_streamed_answer_counts_the_usage_of_the_streams_last_chunk(tenant_key, telecom, scripted_llm):
    scripted_llm.reply_streamed(["Bom ", "dia!"], usage=(77, 6))

    async def stream() -> bytes:
        response = await AsyncClient().post(
            "/api/gateway/message/stream",
            {"agent_id": "telecom_contas", "payload": {"text": "Bom dia", "session_id": "s-stream"}},
            content_type="application/json",
            headers={"Authorization": f"Bearer {tenant_key.raw}"},
        )
        return b"".join([chunk async for chunk in response.streaming_content])

    (done,) = [data for event, data in sse_events(run(stream())) if event == "done"]

    assert done["metadata"]["usage"]["prompt_tokens"] == 77
    assert scripted_llm.requests[0]["stream_options"] == {"include_usage": True}
    row = answer_row()
    assert (row.prompt_tokens, row.completion_tokens) == (77, 6)


def test_a_supervisor_turn_counts_every_part_the_review_and_the_synthesis(api, telecom, scripted_llm):
    telecom.routing_mode = "supervisor"
    telecom.synthesis_prompt = "Merge the parts."
    telecom.save()
    scripted_llm.reply("Parte um.", usage=(30, 3))
    scripted_llm.reply("Parte dois.", usage=(30, 3))
    scripted_llm.reply_tool_call("Coverage", {"uncovered_intents": []}, usage=(50, 4))
    scripted_llm.reply("Tudo junto.", usage=(70, 7))

    body = send(api, "Meu pedido atrasou e minha fatura veio duplicada").json()

    assert calls(body) == {
        ("answer", "scripted-model"): (2, 60, 6),
        ("review", "scripted-model"): (1, 50, 4),
        ("synthesis", "scripted-model"): (1, 70, 7),
    }
    assert (answer_row().prompt_tokens, answer_row().completion_tokens) == (180, 17)


def test_the_offline_model_reports_a_character_count_of_what_it_read_and_wrote(api, telecom):
    body = send(api, "Bom dia").json()

    usage = body["metadata"]["usage"]
    assert usage["model"] == "offline"
    assert usage["completion_tokens"] == text_tokens(body["answer"])
    assert usage["prompt_tokens"] > text_tokens("Bom dia")  # the system prompt too
    row = answer_row()
    assert (row.prompt_tokens, row.completion_tokens, row.llm_model) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
        "offline",
    )


def test_a_plan_steps_usage_crosses_the_broker_with_its_outcome():
    outcome = SpecialistOutcome(answer="ok", llm="openai", model="m", steps=2, prompt_tokens=11, completion_tokens=4)

    back = outcome_from_dict(outcome_as_dict(outcome))

    assert (back.prompt_tokens, back.completion_tokens) == (11, 4)


def test_the_migration_marks_the_stored_answers_whose_turn_called_another_model(api, telecom, scripted_llm):
    from django.apps import apps

    fill = importlib.import_module("conversations.migrations.0011_usage_other_models").other_models_fill
    scripted_llm.reply("Olá!", usage=(10, 2))
    send(api, "Bom dia", session_id="one-model")
    mixed = answer_row()
    routing = {"kind": "routing", "model": "router-model", "calls": 1, "prompt_tokens": 5, "completion_tokens": 1}
    mixed.metadata["usage"]["calls"].append(routing)
    mixed.save()
    scripted_llm.reply("Olá de novo!", usage=(10, 2))
    send(api, "Bom dia", session_id="one-model-too")

    fill(apps, None)

    marked = Message.objects.filter(role=MessageRole.ASSISTANT, other_models=True)
    assert list(marked.values_list("pk", flat=True)) == [mixed.pk]


# -- model calls outside a turn -------------------------------------------------------------------------------------


def classifying(profile, scripted_llm, *replies: tuple[int, int]) -> None:
    """The profile asks its classifier when no keyword decides; the model answers ``replies`` (their usage)."""
    profile.llm_router_enabled = True
    profile.llm_router_threshold = 0.6
    profile.save(update_fields=["llm_router_enabled", "llm_router_threshold"])
    for usage in replies:
        scripted_llm.reply_tool_call(
            "IntentChoice", {"intent": "retail_order_tracking", "confidence": 0.9}, usage=usage
        )


def usage_rows(**scope) -> list[dict]:
    now = dt.datetime.now(dt.UTC)
    report = usage_report(start=now - dt.timedelta(days=1), end=now + dt.timedelta(days=1), **scope)
    return [
        {key: row[key] for key in ("tenant", "profile", "model", "purpose", "answers", "prompt_tokens")}
        | {"completion": row["completion_tokens"]}
        for row in report["rows"]
    ]


def test_the_publish_gates_model_calls_land_in_the_usage(telecom, scripted_llm, tenant, staff_client):
    classifying(telecom, scripted_llm, (400, 9))
    RoutingTestCase.objects.create(
        profile=telecom, name="encomenda", message="Cadê minha encomenda?", expect={"intent": "retail_order_tracking"}
    )

    version_publish(profile=telecom, note="the gate asks the classifier once")

    assert len(scripted_llm.requests) == 1
    gate = {
        "tenant": "",
        "profile": "telecom_contas",
        "model": "scripted-model",
        "purpose": "publish_gate",
        "answers": 0,
        "prompt_tokens": 400,
        "completion": 9,
    }
    assert usage_rows(tenant_id=None) == [gate]  # every tenant read: the operators' work is in
    assert usage_rows(tenant_id=tenant.pk) == []  # a tenant's usage is its own
    body = staff_client.get("/api/analytics/usage", {"days": 1}).json()
    assert (body["totals"]["prompt_tokens"], body["totals"]["completion_tokens"]) == (400, 9)
    assert [row["purpose"] for row in body["rows"]] == ["publish_gate"]


def test_a_route_preview_and_a_debug_route_count_their_model_calls(telecom, scripted_llm, debug_api, tenant):
    classifying(telecom, scripted_llm, (300, 7), (200, 5))

    assert route_preview(profile=telecom, text="Cadê minha encomenda?").decision.method == "llm"
    response = debug_api.post(
        "/api/debug/route",
        {"agent_id": "telecom_contas", "payload": {"text": "Cadê minha encomenda?", "session_id": "s-debug"}},
        format="json",
    )
    assert response.status_code == 200 and response.json()["method"] == "llm"

    preview = ("", "route_preview", 300, 7)
    debug = ("tenant_a", "debug", 200, 5)
    seen = {(r["tenant"], r["purpose"], r["prompt_tokens"], r["completion"]) for r in usage_rows(tenant_id=None)}
    assert seen == {preview, debug}
    assert [(r["purpose"], r["prompt_tokens"]) for r in debug_api.get("/api/debug/usage").json()["rows"]] == [
        ("debug", 200)
    ]
