"""``GET /api/debug/usage``: the tenant's tokens per profile, day and model, priced from the admin's model prices."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from agents.llm import reset_clients
from agents.models import ModelPrice
from chat.usage_apis import ERROR_DAYS
from conversations.models import Message, MessageRole
from tests.factories import AgentProfileFactory

pytestmark = pytest.mark.django_db

URL = "/api/debug/usage"


def send(client, text="Minha fatura veio alta", session_id="s-usage"):
    response = client.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session_id}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def priced(db):
    return ModelPrice.objects.create(model="scripted-model", prompt_per_million="2", completion_per_million="10")


def test_the_totals_and_cost_come_from_the_models_reported_tokens_and_its_price(
    api, debug_api, telecom, scripted_llm, priced
):
    scripted_llm.reply("Primeira.", usage=(1000, 200))
    scripted_llm.reply("Segunda.", usage=(3000, 100))
    send(api, session_id="s-1")
    send(api, session_id="s-2")

    body = debug_api.get(URL, {"days": "7"}).json()

    today = timezone.now().astimezone(dt.UTC).date().isoformat()
    (row,) = body["rows"]
    assert row == {
        "tenant": "tenant_a",
        "profile": "telecom_contas",
        "day": today,
        "model": "scripted-model",
        "purpose": "conversation",
        "answers": 2,
        "prompt_tokens": 4000,
        "completion_tokens": 300,
        "total_tokens": 4300,
        "cost": 0.011,  # (4000 × 2 + 300 × 10) / 1,000,000
        "currency": "USD",
    }
    totals = body["totals"]
    assert (totals["answers"], totals["total_tokens"], totals["cost"], totals["currency"]) == (2, 4300, 0.011, "USD")
    assert totals["cost_by_currency"] == {"USD": 0.011}
    assert body["unpriced_models"] == []
    assert (body["tenant"], body["days"], body["profile"]) == ("tenant_a", 7, None)


def test_a_routing_models_tokens_are_priced_at_its_own_price_not_the_answering_models(
    api, debug_api, telecom, scripted_llm, priced, settings
):
    settings.ROUTER_LLM_BASE_URL, settings.ROUTER_LLM_MODEL = scripted_llm.base_url, "router-model"
    reset_clients()
    telecom.llm_router_enabled = True
    telecom.llm_router_threshold = 0.6
    telecom.save()
    ModelPrice.objects.create(model="router-model", prompt_per_million="0.1", completion_per_million="0.4")
    scripted_llm.reply("Uma.", usage=(1000, 100))  # a keyword route: the answering model only
    send(api, "Minha fatura veio alta", session_id="s-1")
    scripted_llm.reply_tool_call("IntentChoice", {"intent": "retail_order_tracking", "confidence": 0.9}, usage=(400, 9))
    scripted_llm.reply("Seu pacote está a caminho.", usage=(90, 8))
    send(api, "Cadê minha encomenda?", session_id="s-2")

    body = debug_api.get(URL).json()

    rows = {row["model"]: row for row in body["rows"]}
    assert {model: (row["answers"], row["prompt_tokens"], row["completion_tokens"]) for model, row in rows.items()} == {
        "scripted-model": (2, 1090, 108),
        "router-model": (0, 400, 9),
    }
    assert rows["scripted-model"]["cost"] == round((1090 * 2 + 108 * 10) / 1e6, 6)
    assert rows["router-model"]["cost"] == round((400 * 0.1 + 9 * 0.4) / 1e6, 6)
    totals = body["totals"]
    assert (totals["answers"], totals["prompt_tokens"], totals["completion_tokens"]) == (2, 1490, 117)
    assert totals["cost"] == round((1090 * 2 + 108 * 10 + 400 * 0.1 + 9 * 0.4) / 1e6, 6)


def test_a_price_edited_re_prices_the_past(api, debug_api, telecom, scripted_llm, priced):
    scripted_llm.reply("Uma.", usage=(1000, 1000))
    send(api)
    priced.completion_per_million = 20
    priced.save()

    assert debug_api.get(URL).json()["totals"]["cost"] == 0.022


def test_a_model_without_a_price_has_no_cost_and_is_listed_as_unpriced(api, debug_api, telecom):
    send(api)  # the offline model answers

    body = debug_api.get(URL).json()

    (row,) = body["rows"]
    assert row["model"] == "offline" and row["prompt_tokens"] > 0
    assert (row["cost"], row["currency"]) == (None, "")
    assert body["unpriced_models"] == ["offline"]
    assert (body["totals"]["cost"], body["totals"]["cost_by_currency"]) == (None, {})


def test_another_tenants_usage_is_invisible(api, debug_api, outsider_api, telecom):
    send(outsider_api, session_id="theirs")
    send(outsider_api, session_id="theirs-too")
    send(api, session_id="ours")

    body = debug_api.get(URL).json()

    assert body["totals"]["answers"] == 1
    assert {row["tenant"] for row in body["rows"]} == {"tenant_a"}


def test_days_and_profile_narrow_the_window(api, debug_api, telecom):
    send(api, session_id="old")
    Message.objects.filter(role=MessageRole.ASSISTANT).update(created_at=timezone.now() - dt.timedelta(days=3))
    send(api, session_id="new")
    send(api, session_id="other")
    other = AgentProfileFactory(agent_id="retail_orders")
    Message.objects.filter(role=MessageRole.ASSISTANT, conversation__session_id="other").update(profile=other)

    assert debug_api.get(URL, {"days": "1"}).json()["totals"]["answers"] == 2
    assert debug_api.get(URL, {"days": "4"}).json()["totals"]["answers"] == 3
    only = debug_api.get(URL, {"days": "4", "profile": "telecom_contas"}).json()
    assert only["totals"]["answers"] == 2 and {row["profile"] for row in only["rows"]} == {"telecom_contas"}
    assert len(only["rows"]) == 2  # one per day
    assert debug_api.get(URL, {"profile": "retail_orders"}).json()["rows"][0]["profile"] == "retail_orders"


@pytest.mark.parametrize("days", ["0", "367", "-1", "1.5", "abc", "²", ""])
def test_a_bad_days_is_a_400_naming_it(debug_api, days):
    response = debug_api.get(URL, {"days": days})

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"days": [ERROR_DAYS]}


def test_an_unknown_profile_is_a_404_naming_it(debug_api):
    # The schema fuzzer: any string is a valid profile parameter, so one naming no profile is not found, not bad.
    response = debug_api.get(URL, {"profile": "nope"})

    assert response.status_code == 404
    assert list(response.json()["error"]["fields"]) == ["profile"]


def test_a_key_without_the_debug_right_is_refused(api):
    assert api.get(URL).status_code == 403
