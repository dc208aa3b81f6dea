"""Goal mode end to end: the demo's finance_assistente over the real finance MCP server, offline model.

The demo configuration is loaded as shipped, the finance server runs as a real process, and its manifest is
synced into the admin's goals and capabilities before the demo is published — the way ``scripts/start`` does it
(``first_run --demo --sync``). A test that edits a goal publishes its edit, as a routing editor would.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import pytest

from agents.mcp import Endpoint, tool_call
from agents.models import AgentProfile, McpServer
from conversations.models import Conversation, Message
from handoffs.models import Handoff, HandoffKind
from releases.models import ConversationTest, RoutingTestCase
from releases.versions import version_publish
from routing.models import Goal
from tests.demo_snapshot import demo_seed
from tests.shared_rows import rows_shared

AGENT_ID = "finance_assistente"


def finance_seeded(monkeypatch: pytest.MonkeyPatch, finance_mcp: str) -> None:
    """The demo seeded with the finance server's manifest (``seed_demo --sync``), its server the running one."""
    server = urlsplit(finance_mcp)
    monkeypatch.setenv("MCP_FINANCE_HOST", server.hostname)
    monkeypatch.setenv("MCP_FINANCE_PORT", str(server.port))
    demo_seed("--sync")


@pytest.fixture(scope="module")
def finance_demo(request, django_db_setup, django_db_blocker, finance_mcp):
    """The finance demo seeded once for the module's tests (tests/shared_rows.py): each test sees it as seeded and
    nothing another test wrote (its publishes and conversations are rolled back after it): one restore of the
    worker's recorded seed (tests/demo_snapshot.py) instead of one a test. Module-scoped, so it is set up before
    any test's own fixtures: a tenant made first (``api``'s, with its own timestamps) would give the seed another
    starting point, so a real seed of ten seconds instead of the worker's recorded one."""
    with (
        pytest.MonkeyPatch.context() as monkeypatch,
        rows_shared(request, django_db_blocker, lambda: finance_seeded(monkeypatch, finance_mcp)),
    ):
        yield


@pytest.fixture(autouse=True)
def finance(finance_demo, db, finance_mcp):
    """The finance server's URL, the shared demo's finance server pointed at it."""
    assert McpServer.objects.get(name="finance").endpoint == finance_mcp
    return finance_mcp


def publish(note: str) -> None:
    """Publish the demo's draft as the test changed it. These tests change its behaviour on purpose, which the
    demo's saved routing and conversation tests (loaded with the finance suites by seed_demo --sync) would refuse:
    switched off."""
    profile = AgentProfile.objects.get(agent_id=AGENT_ID)
    RoutingTestCase.objects.filter(profile=profile).update(enabled=False)
    ConversationTest.objects.filter(profile=profile).update(enabled=False)
    version_publish(profile=profile, note=note)


def say(api, text, *, session="fin-1", agent_id=AGENT_ID):
    response = api.post(
        "/api/gateway/message",
        {"channel": "api", "agent_id": agent_id, "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def steps(body) -> list[tuple[str, dict]]:
    return [(step["capability"], step["params"]) for step in body["metadata"]["goal"]["plan"]["steps"]]


def sent(url: str) -> list[str]:
    result = asyncio.run(
        tool_call(endpoint=Endpoint("finance", url, 10.0), tool="sent_messages", arguments={}, schema={})
    )
    return [item["message"] for item in result.result["messages"]]


def test_an_ambiguous_name_is_asked_about_and_the_users_choice_completes_the_plan(api, finance):
    asked = say(api, "qual o preço da Nordea?")

    goal = asked["metadata"]["goal"]
    assert asked["metadata"]["mode"] == "goal"
    assert goal["status"] == "clarification"
    assert goal["intent_output"]["goal"] == "GET_QUOTE"
    assert goal["intent_output"]["entities"]["symbol_text"] == "Nordea"
    assert goal["clarification"]["reason"] == "ambiguous"
    assert [c["value"] for c in goal["clarification"]["candidates"]] == ["NDA-SE.ST", "NDA-FI.HE"]
    assert "NDA-SE.ST" in asked["answer"] and "NDA-FI.HE" in asked["answer"]
    conversation = Conversation.objects.get(conversation_key=asked["conversation_key"])
    assert conversation.goal_state["pending"]["reason"] == "ambiguous"

    answered = say(api, "a segunda")

    goal = answered["metadata"]["goal"]
    assert goal["status"] == "success"
    assert "10.05" in answered["answer"] and "NDA-FI.HE" in answered["answer"]
    assert answered["agent"] == "goal_planner"
    conversation.refresh_from_db()
    assert conversation.goal_state["pending"] is None
    assert conversation.goal_state["last"]["goal"] == "GET_QUOTE"


def test_top_gainers_of_brazil_map_direction_gainers_to_get_top_gainers(api, finance):
    body = say(api, "maiores altas do Brasil")

    goal = body["metadata"]["goal"]
    assert goal["status"] == "success"
    assert goal["intent_output"]["entities"]["direction"] == "GAINERS"
    assert [intent["capability"] for intent in goal["execution_intents"]] == ["get_top_gainers"]
    assert [capability for capability, _ in steps(body)] == ["get_top_gainers"]
    assert [step["params"].get("market_text") for step in body["metadata"]["goal"]["plan"]["steps"]] == ["Brasil"]
    # Brazil's gainers only: the market reached the tool (Equinor, up 2.02 % in Oslo, is not listed).
    assert "Magazine Luiza" in body["answer"] and "Petrobras" in body["answer"]
    assert "Equinor" not in body["answer"] and "Vale" not in body["answer"]
    assert {r["tool"]: r["status"] for r in body["metadata"]["mcp_results"]} == {"get_top_gainers": "ok"}


def test_a_quote_that_is_then_notified_sends_the_quotes_explanation(api, finance):
    before = len(sent(finance))

    body = say(api, "cotação da PETR4 e me avise")

    plan = body["metadata"]["goal"]["plan"]["steps"]
    notify = next(step for step in plan if step["capability"] == "send_message")
    quote = next(step for step in plan if step["capability"] == "get_stock_price")
    assert notify["params"]["message"] == f"${{{quote['id']}.explanation}}"
    assert quote["id"] in notify["depends_on"] and notify["required"] is False
    assert body["metadata"]["goal"]["status"] == "success"
    delivered = sent(finance)[before:]
    assert len(delivered) == 1 and "PETR4.SA" in delivered[0] and "38.20" in delivered[0]


def test_a_message_naming_several_symbols_is_decomposed_into_parallel_steps(api, finance):
    body = say(api, "quanto está a Vale e a Petrobras?")

    plan = body["metadata"]["goal"]["plan"]
    prices = [step for step in plan["steps"] if step["capability"] == "get_stock_price"]
    assert len(prices) == 2
    # Neither price waits for the other: each depends only on its own symbol search.
    assert all(not set(p["depends_on"]) & {q["id"] for q in prices} for p in prices)
    assert body["metadata"]["goal"]["status"] == "success"
    assert "VALE3.SA" in body["answer"] and "PETR4.SA" in body["answer"]


def test_a_paraphrase_no_hint_matches_is_read_by_the_goals_examples_and_the_evidence_is_kept(api, finance):
    body = say(api, "quais ações mais se valorizaram hoje?")  # TOP_MOVERS says "quais ações mais caíram hoje?"

    goal = body["metadata"]["goal"]
    assert goal["status"] == "success" and goal["intent_output"]["goal"] == "TOP_MOVERS"
    assert [intent["capability"] for intent in goal["execution_intents"]] == ["get_top_gainers"]
    reading = goal["reading"]
    assert reading["method"] == "examples"
    assert reading["examples"]["score"] == round(goal["intent_output"]["confidence"], 3)
    assert reading["examples"]["runner_up"]["intent"] == "finance.GET_QUOTE"
    assert reading["examples"]["nearest"][0]["example"] == "quais ações mais caíram hoje?"
    assert body["metadata"]["route_decision"]["metadata"]["reading"] == reading
    stored = Message.objects.get(conversation__conversation_key=body["conversation_key"], role="assistant")
    assert stored.metadata["goal"]["reading"]["method"] == "examples"


def test_a_follow_up_keeps_the_goal_and_the_entities_it_leaves_out(api, finance):
    say(api, "cotação da PETR4")

    body = say(api, "e da Vale?")

    goal = body["metadata"]["goal"]
    assert goal["intent_output"]["goal"] == "GET_QUOTE"
    assert goal["intent_output"]["entities"]["symbol_text"] == "Vale"
    assert goal["status"] == "success" and "VALE3.SA" in body["answer"]


def test_a_goal_missing_an_entity_asks_for_it_and_the_reply_completes_it(api, finance):
    asked = say(api, "qual o preço?")

    assert asked["metadata"]["goal"]["status"] == "clarification"
    assert asked["metadata"]["goal"]["clarification"]["reason"] == "missing_entity"
    assert asked["metadata"]["goal"]["plan"] is None

    answered = say(api, "Vale")

    assert answered["metadata"]["goal"]["status"] == "success"
    assert answered["metadata"]["goal"]["intent_output"]["goal"] == "GET_QUOTE"
    assert "VALE3.SA" in answered["answer"]


def test_a_goal_lacking_an_entity_leaves_a_message_its_help_centre_answers_to_the_specialists(api, finance):
    body = say(api, "a cotação tem atraso de quantos minutos?", session="fin-documents")  # a quote, but of what?

    goal = body["metadata"]["goal"]
    assert (goal["status"], goal["intent_output"]["goal"], goal["clarification"]) == ("general", "GET_QUOTE", None)
    (citation, *_) = body["metadata"]["knowledge"]["citations"]
    assert citation["title"] == "Horário do pregão e cotações"
    assert "atraso de 15 minutos" in body["answer"]
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert not (conversation.goal_state or {}).get("pending")


def test_a_request_for_advice_on_buying_an_asset_is_answered_by_what_the_help_centre_says_it_does_not_recommend(
    api, finance
):
    body = say(api, "vale a pena comprar petrobras agora? me indica", session="fin-advice")

    assert body["metadata"]["goal"]["clarification"] is None  # not "Qual o ativo?"
    (citation, *_) = body["metadata"]["knowledge"]["citations"]
    assert citation["title"] == "Horário do pregão e cotações"
    assert "não recomenda a compra" in body["answer"]


def test_a_one_word_follow_up_of_a_question_its_help_centre_answered_is_answered_from_it_with_its_thread(api, finance):
    first = say(api, "as cotações de vocês têm atraso?", session="fin-documents-thread")
    assert first["metadata"]["goal"]["status"] == "general"

    body = say(api, "e o preço?", session="fin-documents-thread")  # a quote without its stock, read alone

    goal = body["metadata"]["goal"]
    assert (goal["status"], goal["intent_output"]["goal"], goal["clarification"]) == ("general", "GET_QUOTE", None)
    knowledge = body["metadata"]["knowledge"]
    assert knowledge["follows_up"] is True
    assert knowledge["citations"][0]["title"] == "Horário do pregão e cotações"
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert not (conversation.goal_state or {}).get("pending")


def test_a_one_word_request_after_a_goal_was_served_stays_with_the_goal_not_the_documents(api, finance):
    say(api, "maiores altas do Brasil", session="fin-goal-thread")

    body = say(api, "e o preço?", session="fin-goal-thread")  # what the documents hold of it is not a plan's thread

    goal = body["metadata"]["goal"]
    assert (goal["status"], goal["intent_output"]["goal"]) == ("clarification", "GET_QUOTE")
    assert goal["clarification"]["reason"] == "missing_entity"


def test_a_goal_unsure_of_its_reading_leaves_a_message_its_help_centre_answers_to_the_specialists(api, finance):
    Goal.objects.filter(name="TOP_MOVERS").update(confidence_threshold=0.99)
    publish("TOP_MOVERS asks below 0.99")

    body = say(api, "como são calculadas as maiores altas do dia?", session="fin-unsure-documents")

    goal = body["metadata"]["goal"]
    assert (goal["status"], goal["intent_output"]["goal"], goal["clarification"]) == ("general", "TOP_MOVERS", None)
    (citation, *_) = body["metadata"]["knowledge"]["citations"]
    assert citation["title"] == "Horário do pregão e cotações"
    assert body["metadata"]["mcp_results"] == []
    conversation = Conversation.objects.get(conversation_key=body["conversation_key"])
    assert not (conversation.goal_state or {}).get("pending")


@pytest.mark.parametrize(
    ("side", "moved"),
    [
        ("antes disso, bom dia, vocês atendem aos sábados?", []),  # out of scope: answered, no frame moves
        ("antes disso, quais as maiores altas do Brasil hoje?", ["pushed", "resumed"]),
    ],
    ids=["out of scope", "another goal"],
)
def test_a_side_question_while_a_goal_waits_for_its_answer_keeps_it_waiting_and_asks_again(api, finance, side, moved):
    asked = say(api, "qual o preço?", session="fin-side")
    question = asked["metadata"]["goal"]["clarification"]["question"]

    aside = say(api, side, session="fin-side")
    assert [event["event"] for event in aside["metadata"]["conversation"]["events"]] == moved
    assert aside["answer"].endswith(question)

    answered = say(api, "Vale", session="fin-side")
    assert answered["metadata"]["goal"]["status"] == "success"
    assert answered["metadata"]["goal"]["intent_output"]["goal"] == "GET_QUOTE"
    assert "VALE3.SA" in answered["answer"]


def test_a_correction_reads_the_goal_again_from_what_it_corrects_to(api, finance):
    first = say(api, "qual o preço da Vale?", session="fin-correct")
    assert first["metadata"]["goal"]["intent_output"]["goal"] == "GET_QUOTE"

    corrected = say(api, "errei, eu queria dizer Itaú", session="fin-correct")

    assert corrected["metadata"]["goal"]["status"] == "success"
    assert corrected["metadata"]["goal"]["intent_output"]["goal"] == "GET_QUOTE"
    assert "ITUB4.SA" in corrected["answer"]


CORRECTIONS = {
    "pt": ("me diz a cotação da PETR4", "foi mal, quis dizer VALE3"),
    "en": ("give me a quote for PETR4", "my mistake, I meant VALE3"),
    "es": ("cotización de PETR4", "perdón, quise decir VALE3"),
}


@pytest.mark.parametrize("language", sorted(CORRECTIONS))
def test_a_correction_in_goal_mode_is_read_as_the_correct_repair(api, finance, language):
    first, correction = CORRECTIONS[language]
    say(api, first, session=f"fin-correct-{language}")

    corrected = say(api, correction, session=f"fin-correct-{language}")

    assert corrected["metadata"]["conversation"]["repair"] == "correct"
    assert corrected["metadata"]["route_decision"]["intent"] == "finance.GET_QUOTE"
    assert "VALE3.SA" in corrected["answer"] and "PETR4.SA" not in corrected["answer"]


SKIPPED = {
    "pt": ("qual o preço da Nordea?", "pula essa", "Preciso dessa resposta para seguir", "a segunda"),
    "en": ("what's the price of Nordea?", "skip that", "I need this answer to go on", "the second one"),
    "es": ("¿cuál es la cotización de Nordea?", "sáltate esa", "Necesito esta respuesta para seguir", "la segunda"),
}


@pytest.mark.parametrize("language", sorted(SKIPPED))
def test_a_skipped_required_question_is_asked_again_with_why_and_still_answered_later(api, finance, language):
    asked_text, skip, why, choice = SKIPPED[language]
    asked = say(api, asked_text, session=f"fin-skip-{language}")
    assert asked["metadata"]["goal"]["clarification"]["reason"] == "ambiguous"

    skipped = say(api, skip, session=f"fin-skip-{language}")

    assert skipped["metadata"]["conversation"]["repair"] == "skip"
    assert skipped["answer"].startswith(why) and "NDA-FI.HE" in skipped["answer"]
    assert skipped["metadata"]["mcp_results"] == []
    assert skipped["metadata"]["conversation"]["stack"][-1]["kind"] == "clarification"
    answered = say(api, choice, session=f"fin-skip-{language}")
    assert "NDA-FI.HE" in answered["answer"]


CHOSEN_IN_THE_REPLY = {
    "pt": ("quero uma cotação", "da Nordea, a segunda opção"),
    "en": ("I want a stock quote", "of Nordea, the second one"),
    "es": ("quiero una cotización", "de Nordea, la segunda"),
}


@pytest.mark.parametrize("language", sorted(CHOSEN_IN_THE_REPLY))
def test_a_reply_that_names_the_stock_and_picks_among_its_listings_is_not_asked_which(api, finance, language):
    missing, reply = CHOSEN_IN_THE_REPLY[language]
    asked = say(api, missing, session=f"fin-chosen-{language}")
    assert asked["metadata"]["goal"]["clarification"]["reason"] == "missing_entity"

    answered = say(api, reply, session=f"fin-chosen-{language}")

    assert "get_stock_price" in {r["tool"] for r in answered["metadata"]["mcp_results"]}
    assert "NDA-FI.HE" in answered["answer"] and "NDA-SE.ST" not in answered["answer"]
    assert answered["metadata"]["conversation"]["stack"] == []
    assert Conversation.objects.get(conversation_key=answered["conversation_key"]).goal_state["pending"] is None


def test_below_the_threshold_the_user_is_asked_and_a_yes_runs_the_goal(api, finance):
    Goal.objects.filter(name="TOP_MOVERS").update(confidence_threshold=0.99)
    publish("TOP_MOVERS asks below 0.99")

    asked = say(api, "maiores baixas do Brasil")

    assert asked["metadata"]["goal"]["status"] == "clarification"
    assert asked["metadata"]["goal"]["clarification"]["reason"] == "low_confidence"
    assert asked["metadata"]["mcp_results"] == []

    answered = say(api, "sim")

    assert answered["metadata"]["goal"]["status"] == "success"
    assert "Vale" in answered["answer"]


@pytest.mark.parametrize("reply", ["sim, pode", "yes, go ahead", "sí, adelante"])
def test_below_the_threshold_a_yes_with_more_words_runs_the_goal(api, finance, reply):
    Goal.objects.filter(name="TOP_MOVERS").update(confidence_threshold=0.99)
    publish("TOP_MOVERS asks below 0.99")
    say(api, "maiores baixas do Brasil", session=f"fin-yes-{reply}")

    answered = say(api, reply, session=f"fin-yes-{reply}")

    assert answered["metadata"]["goal"]["status"] == "success"


# "não pode" and "claro que não" hold a yes word ("pode", "claro"): read as a word anywhere, they used to run the goal.
@pytest.mark.parametrize("reply", ["não pode", "claro que não", "não, obrigado", "no thanks", "mejor no"])
def test_below_the_threshold_a_no_runs_nothing_and_asks_what_the_user_wants(api, finance, reply):
    Goal.objects.filter(name="TOP_MOVERS").update(confidence_threshold=0.99)
    publish("TOP_MOVERS asks below 0.99")
    asked = say(api, "maiores baixas do Brasil", session=f"fin-no-{reply}")
    assert asked["metadata"]["goal"]["clarification"]["reason"] == "low_confidence"

    declined = say(api, reply, session=f"fin-no-{reply}")

    goal = declined["metadata"]["goal"]
    assert (goal["status"], goal["clarification"]["reason"]) == ("clarification", "declined")
    assert goal["plan"] is None and declined["metadata"]["mcp_results"] == []
    conversation = Conversation.objects.get(conversation_key=declined["conversation_key"])
    assert conversation.goal_state["pending"] is None


def test_small_talk_is_the_general_domain_answered_by_the_specialist_and_the_move_to_the_planner_is_recorded(
    api, finance
):
    greeted = say(api, "bom dia")

    assert greeted["agent"] == "general_agent"
    assert greeted["metadata"]["goal"]["status"] == "general"
    assert greeted["metadata"]["route_decision"]["method"] == "small_talk"
    # Small talk moved nothing: no active specialist yet.
    assert Conversation.objects.get(conversation_key=greeted["conversation_key"]).active_specialist == ""

    asked = say(api, "qual o horário de funcionamento de vocês?")
    assert (asked["agent"], asked["metadata"]["goal"]["status"]) == ("general_agent", "general")
    quoted = say(api, "cotação da PETR4")

    assert quoted["agent"] == "goal_planner"
    moves = Handoff.objects.filter(conversation__conversation_key=quoted["conversation_key"])
    assert [(m.from_agent, m.to_agent, m.kind) for m in moves] == [
        ("general_agent", "goal_planner", HandoffKind.ROUTING)
    ]


def test_the_answer_is_stored_with_its_goal_metadata_and_shown_by_the_sessions_api(api, finance):
    body = say(api, "maiores altas do Brasil")

    stored = Message.objects.get(conversation__conversation_key=body["conversation_key"], role="assistant")
    assert stored.metadata["goal"]["status"] == "success"
    assert stored.metadata["goal"]["outputs"]["1"]["status"] == "success"
    shown = api.get(f"/api/sessions/{body['conversation_key']}/messages").json()
    assert any((m.get("metadata") or {}).get("goal") for m in shown["messages"] if m["role"] == "assistant")


def test_debug_plan_shows_the_reading_and_the_plan_without_running_it(debug_api, finance):
    before = len(sent(finance))

    response = debug_api.post(
        "/api/debug/plan",
        {"agent_id": AGENT_ID, "payload": {"text": "cotação da PETR4 e me avise", "session_id": "dbg-1"}},
        format="json",
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["intent_output"]["goal"] == "GET_QUOTE"
    assert body["execution_intent"]["capability"] == "get_stock_price"
    assert {step["capability"] for step in body["plan"]["steps"]} >= {"get_stock_price", "send_message"}
    assert len(sent(finance)) == before
    assert not Conversation.objects.filter(conversation_key__endswith=":dbg-1").exists()


def test_debug_plan_names_the_field_of_bad_input(debug_api, finance):
    response = debug_api.post("/api/debug/plan", {"agent_id": AGENT_ID, "payload": {}}, format="json")

    assert response.status_code == 400
    assert "payload.text" in response.content.decode()


def test_routing_mode_goal_from_the_environment_serves_any_profile_with_goals(api, finance, settings):
    settings.ROUTING_MODE = "goal"

    body = say(api, "maiores altas do Brasil", agent_id="telecom_contas")

    assert body["metadata"]["mode"] == "goal"
    assert body["metadata"]["goal"]["status"] == "success"


def test_a_disabled_goal_is_not_served(api, finance):
    Goal.objects.filter(name="TOP_MOVERS").update(enabled=False)
    publish("TOP_MOVERS disabled")

    body = say(api, "maiores altas do Brasil")

    assert body["metadata"]["goal"]["status"] == "general"
    assert body["agent"] == "general_agent"


def test_a_profile_in_goal_mode_is_set_in_the_admin_model(finance):
    profile = AgentProfile.objects.get(agent_id=AGENT_ID)

    assert profile.routing_mode == "goal"


def test_with_a_model_the_goal_is_read_by_structured_output_and_the_answer_written_from_the_plans_output(
    api, finance, scripted_llm
):
    from routing.goals.intent import GoalIntent

    scripted_llm.reply_tool_call(
        GoalIntent.__name__,
        {"domain": "finance", "goal": "TOP_MOVERS", "entities": {"direction": "LOSERS"}, "confidence": 0.98},
    )
    scripted_llm.reply("Today's biggest losers: Vale ON and Ericsson B.")  # in the question's language

    body = say(api, "what fell the most today?")

    goal = body["metadata"]["goal"]
    assert goal["intent_output"]["goal"] == "TOP_MOVERS" and goal["intent_output"]["confidence"] == 0.98
    assert [intent["capability"] for intent in goal["execution_intents"]] == ["get_top_losers"]
    assert goal["answer"]["method"] == "llm"
    assert body["answer"] == "Today's biggest losers: Vale ON and Ericsson B."
    # The model wrote the answer from the plan's output, which it was shown.
    writing = scripted_llm.requests[-1]["messages"]
    assert any("Vale ON" in str(message.get("content")) for message in writing)


def test_the_models_reading_of_the_goal_and_its_written_answer_are_counted_under_goal_and_answer(
    api, finance, scripted_llm
):
    from routing.goals.intent import GoalIntent

    scripted_llm.reply_tool_call(
        GoalIntent.__name__,
        {"domain": "finance", "goal": "TOP_MOVERS", "entities": {"direction": "LOSERS"}, "confidence": 0.98},
        usage=(700, 30),
    )
    scripted_llm.reply("Today's biggest losers: Vale ON and Ericsson B.", usage=(250, 20))

    body = say(api, "what fell the most today?")

    calls = {(call["kind"], call["model"]): call["calls"] for call in body["metadata"]["usage"]["calls"]}
    assert calls == {("goal", "scripted-model"): 1, ("answer", "scripted-model"): 1}
    usage = body["metadata"]["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"], usage["model"]) == (950, 50, "scripted-model")


def test_a_model_below_the_threshold_makes_the_turn_ask(api, finance, scripted_llm):
    from routing.goals.intent import GoalIntent

    scripted_llm.reply_tool_call(
        GoalIntent.__name__,
        {"domain": "finance", "goal": "TOP_MOVERS", "entities": {"direction": "GAINERS"}, "confidence": 0.7},
    )

    body = say(api, "e o mercado, como foi?")  # no hint of the manifest names a goal: the model's doubt stands

    assert body["metadata"]["goal"]["status"] == "clarification"
    assert body["metadata"]["goal"]["clarification"]["reason"] == "low_confidence"
    assert body["metadata"]["mcp_results"] == []


def test_a_failed_judge_never_replaces_the_answer_of_a_plan_that_sent_a_notification_the_review_adds_a_note(
    api, finance, scripted_llm
):
    from routing.goals.intent import GoalIntent

    profile = AgentProfile.objects.get(agent_id=AGENT_ID)
    profile.judges = {**profile.judges, "llm_judge": True}
    profile.save(update_fields=["judges"])
    publish("the LLM judge on")
    before = len(sent(finance))
    scripted_llm.reply_tool_call(
        GoalIntent.__name__,
        {
            "domain": "finance",
            "goal": "GET_QUOTE",
            "entities": {"symbol_text": "PETR4", "notify": True},
            "confidence": 1,
        },
    )
    scripted_llm.reply("PETR4 is at 38.20 BRL today, and I sent it to you.")
    scripted_llm.reply('{"score": 0.1, "reason": "Too terse."}')

    body = say(api, "what is the price of PETR4? let me know by message")

    assert len(sent(finance)) == before + 1  # the notification really went out
    assert body["metadata"]["judges"]["llm"]["passed"] is False
    review = body["metadata"]["review"]
    assert review["action"] == "note" and review["side_effects"] == ["send_message"]
    assert body["answer"].startswith("PETR4 is at 38.20 BRL today, and I sent it to you.")
    assert body["answer"].endswith("what was already carried out for you stays done.")


def judged(body) -> tuple[str, str]:
    judge = body["metadata"]["judges"]["rule_based"]
    return judge["checks"]["language_matches"], body["metadata"]["review"]["action"]


def test_a_question_in_english_or_spanish_is_answered_in_its_language_offline_and_the_judge_passes_it(api, finance):
    english = say(api, "what is the price of Equinor?", session="en-1")
    spanish = say(api, "¿cuál es el precio de Equinor?", session="es-1")
    portuguese = say(api, "qual o preço da Equinor?", session="pt-1")

    assert "Here is what I found: “Equinor (EQNR.OL) is at 276.40 NOK (+2.02% today).”" in english["answer"]
    assert "Esto es lo que encontré: “Equinor (EQNR.OL) está en 276.40 NOK (+2.02% en el día).”" in spanish["answer"]
    assert "Veja o que encontrei: “Equinor (EQNR.OL) está em 276.40 NOK (+2.02% no dia).”" in portuguese["answer"]
    assert [judged(body) for body in (english, spanish, portuguese)] == [("passed", "accept")] * 3
    assert english["metadata"]["goal"]["language"] == "en" and spanish["metadata"]["goal"]["language"] == "es"


def test_markets_and_a_clear_question_are_read_in_any_of_the_three_languages(api, finance):
    english = say(api, "top losers in Sweden", session="m-en")
    portuguese = say(api, "maiores quedas na Suécia", session="m-pt")
    spanish = say(api, "mayores caídas en Suecia", session="m-es")
    clear = say(api, "which Brazilian stocks went up the most today?", session="m-clear")

    for body, market in ((english, "Sweden"), (portuguese, "Suécia"), (spanish, "Suecia")):
        assert [step["params"]["market_text"] for step in body["metadata"]["goal"]["plan"]["steps"]] == [market]
        assert "Ericsson B -1.27%" in body["answer"] and "Vale" not in body["answer"]  # Sweden's, not every market's
    assert "Top losers (SE)" in english["answer"] and "Mayores caídas (SE)" in spanish["answer"]
    goal = clear["metadata"]["goal"]
    assert goal["status"] == "success" and goal["intent_output"]["entities"]["direction"] == "GAINERS"
    assert "Top gainers (BR): Magazine Luiza ON +4.33%; Petrobras PN +1.85%" in clear["answer"]
    assert [judged(body) for body in (english, portuguese, spanish, clear)] == [("passed", "accept")] * 4


def test_every_name_of_a_message_is_served_and_a_name_nobody_lists_is_said_so_in_the_manifests_words(api, finance):
    before = len(sent(finance))

    both = say(api, "how much are Vale and Petrobras? let me know by message", session="n-1")
    unknown = say(api, "what is the price of Xyzzy?", session="n-2")
    desconocido = say(api, "¿cuál es el precio de Xyzzy?", session="n-3")

    assert both["metadata"]["goal"]["intent_output"]["entities"]["symbols"] == ["Vale", "Petrobras"]
    assert "Vale ON (VALE3.SA) is at 61.47 BRL" in both["answer"]
    assert "Petrobras PN (PETR4.SA) is at 38.20 BRL" in both["answer"]
    assert len(sent(finance)) == before + 2  # one notification per quote
    assert judged(both) == ("passed", "accept") and both["metadata"]["judges"]["rule_based"]["passed"]
    assert unknown["answer"].endswith(": I found no listing for 'Xyzzy'.")
    assert desconocido["answer"].endswith(": No encontré ningún listado para 'Xyzzy'.")


def test_a_name_of_several_words_nobody_lists_is_said_so_whole_and_not_matched_to_another_listing(api, finance):
    body = say(api, "what's the quote for Banco do Brasil and Petrobras?", session="n-4")

    assert body["metadata"]["goal"]["intent_output"]["entities"]["symbols"] == ["Banco do Brasil", "Petrobras"]
    assert "I found no listing for 'Banco do Brasil'." in body["answer"]
    assert "Petrobras PN (PETR4.SA) is at 38.20 BRL" in body["answer"]
    assert "Itaú" not in body["answer"]


def test_a_reply_whose_language_cannot_be_told_keeps_the_conversations(api, finance):
    asked = say(api, "what is the price of Nordea?", session="lang-1")
    answered = say(api, "2", session="lang-1")

    assert asked["answer"].startswith("I found more than one listing for 'Nordea'") and "Which one?" in asked["answer"]
    assert "Nordea Bank (NDA-FI.HE) is at 10.05 EUR (+0.38% today)." in answered["answer"]
    assert answered["metadata"]["goal"]["language"] == "en"
