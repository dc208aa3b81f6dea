"""The goal-mode examples through the goal engine against the real finance server: the Nordea ambiguity and the
user's choice, a name nobody lists, a quote that is then notified, and several symbols at once."""

from __future__ import annotations

import asyncio

import pytest

from agents.mcp import Endpoint, tool_call
from conversations.goals.engine import SKIPPED, STARTED, outputs_combine
from conversations.tests.test_goal_engine import execute, snapshot_of, statuses
from mcp_servers.finance import server as finance
from routing.goals.manifest import manifest_read
from routing.goals.planner import (
    CLARIFICATION,
    DAG,
    FAILURE,
    LAST,
    REPORT,
    SUCCESS,
    GoalCatalogue,
    IntentOutput,
    candidate_choose,
    goal_resolve,
    plan_build,
)
from tests.mcp_processes import running_mcp_servers

pytestmark = pytest.mark.slow

MANIFEST = manifest_read(finance.MANIFEST)
CATALOGUE = GoalCatalogue(
    goals={(goal.domain, goal.name): goal for goal in MANIFEST.goals.values()},
    capabilities=MANIFEST.capabilities,
)


@pytest.fixture(scope="module")
def finance_url():
    with running_mcp_servers("finance") as urls:
        yield urls["finance"]


@pytest.fixture
def snapshot(finance_url):
    return snapshot_of(finance=finance_url)


def quote_plan(**entities):
    intent = IntentOutput("finance", "GET_QUOTE", entities, 0.97, "…")
    return plan_build(goal_resolve(intent, MANIFEST.goals["GET_QUOTE"]), MANIFEST.capabilities)


def test_nordea_has_two_listings_so_the_plan_stops_and_asks_which_one_listing_both(snapshot):
    plan = quote_plan(symbol_text="Nordea")

    run, events = execute(plan, CATALOGUE, snapshot)

    assert run.status == CLARIFICATION
    clarification = run.clarification
    assert {key: clarification[key] for key in ("reason", "step", "param", "from_param", "query")} == {
        "reason": "ambiguous",
        "step": 1,
        "param": "symbol",
        "from_param": "symbol_text",
        "query": "Nordea",
    }
    assert [(c["value"], c["label"], c["exchange"]) for c in clarification["candidates"]] == [
        ("NDA-SE.ST", "Nordea Bank, OMX Stockholm, SEK", "OMX Stockholm"),
        ("NDA-FI.HE", "Nordea Bank, OMX Helsinki, EUR", "OMX Helsinki"),
    ]
    assert clarification["question"] == (
        "Encontrei mais de uma listagem para 'Nordea': 1) Nordea Bank, OMX Stockholm, SEK (NDA-SE.ST) "
        "2) Nordea Bank, OMX Helsinki, EUR (NDA-FI.HE) Qual delas?"
    )
    assert statuses(run) == {1: CLARIFICATION, 2: SKIPPED}  # the quote never ran
    assert [(e["id"], e["status"]) for e in events] == [(1, STARTED), (1, CLARIFICATION), (2, SKIPPED)]


@pytest.mark.parametrize("reply", ["a segunda", "NDA-FI.HE", "a de Helsinki", "2"])
def test_the_users_choice_completes_the_plan_with_that_listings_quote(snapshot, reply):
    asked, _ = execute(quote_plan(symbol_text="Nordea"), CATALOGUE, snapshot)
    clarification = asked.clarification
    index = candidate_choose(
        reply, clarification["candidates"], clarification["label_fields"], clarification["value_field"]
    )
    assert index == 1

    plan = quote_plan(symbol_text="Nordea", symbol=clarification["candidates"][index]["value"])
    run, _ = execute(plan, CATALOGUE, snapshot)

    assert [step.capability for step in plan.steps] == ["get_stock_price"]  # the choice needs no search
    assert run.status == SUCCESS
    combined = outputs_combine(plan, run.outputs)
    assert combined["mode"] == LAST
    assert combined["explanation"] == "Nordea Bank (NDA-FI.HE) está em 10.05 EUR (+0.38% no dia)."
    assert combined["result"]["currency"] == "EUR"


def test_a_name_no_listing_matches_is_a_failure_that_names_it(snapshot):
    run, _ = execute(quote_plan(symbol_text="Xyzzy"), CATALOGUE, snapshot)

    assert run.status == FAILURE and run.clarification is None
    assert statuses(run) == {1: FAILURE, 2: SKIPPED}
    assert run.outputs[1].explanation == "Não encontrei nenhuma listagem para 'Xyzzy'."
    assert run.outputs[1].metadata["status"] == "not_found"


def test_a_name_nobody_lists_is_answered_with_the_manifests_sentence_naming_it_in_the_customers_language(snapshot):
    plan = quote_plan(symbol_text="Xyzzy")

    answers = {}
    for language in ("pt", "en", "es"):
        run, _ = execute(plan, CATALOGUE, snapshot, language=language)
        answers[language] = outputs_combine(plan, run.outputs, language)["explanation"]

    assert answers == {
        "pt": "Não encontrei nenhuma listagem para 'Xyzzy'.",
        "en": "I found no listing for 'Xyzzy'.",
        "es": "No encontré ningún listado para 'Xyzzy'.",
    }


def test_a_name_nobody_lists_among_several_leaves_the_others_priced(snapshot):
    plan = quote_plan(symbols=["Vale", "Xyzzy", "Equinor"])

    run, _ = execute(plan, CATALOGUE, snapshot, language="en")

    quotes = [s.id for s in plan.steps if s.capability == "get_stock_price"]
    assert [run.outputs[step].status for step in quotes] == [SUCCESS, SKIPPED, SUCCESS]
    assert run.status == FAILURE  # a required step did not succeed, and the answer says which
    assert outputs_combine(plan, run.outputs, "en")["explanation"].splitlines() == [
        "Vale ON (VALE3.SA) is at 61.47 BRL (-2.10% today).",
        "I found no listing for 'Xyzzy'.",
        "Equinor (EQNR.OL) is at 276.40 NOK (+2.02% today).",
    ]


def test_the_customers_language_reaches_the_tools_that_take_it_and_no_other(snapshot):
    plan = quote_plan(symbol_text="Petrobras", notify=True)

    run, _ = execute(plan, CATALOGUE, snapshot, language="es")

    arguments = {call.tool: call.arguments for call in run.tool_results}
    assert "language" not in arguments["search_symbol"]  # its capability names no language_param
    assert arguments["get_stock_price"]["language"] == arguments["send_message"]["language"] == "es"
    assert run.outputs[2].explanation == "Petrobras PN (PETR4.SA) está en 38.20 BRL (+1.85% en el día)."
    assert run.outputs[3].explanation == "Notificación enviada."


def test_one_listing_resolves_without_asking_and_the_quote_reads_it(snapshot):
    plan = quote_plan(symbol_text="Petrobras")

    run, _ = execute(plan, CATALOGUE, snapshot)

    assert run.status == SUCCESS and plan.execution_mode == DAG
    assert run.outputs[1].result["resolved"] == "PETR4.SA"
    assert run.outputs[2].result["symbol"] == "PETR4.SA"


def test_a_quote_that_is_then_notified_sends_the_quotes_explanation(snapshot, finance_url):
    plan = quote_plan(symbol_text="PETR4", notify=True)
    assert [(s.capability, s.params) for s in plan.steps][1:] == [
        ("get_stock_price", {"notify": True, "symbol": "${1.result.resolved}"}),
        ("send_message", {"message": "${2.explanation}"}),
    ]

    run, _ = execute(plan, CATALOGUE, snapshot)

    assert run.status == SUCCESS and plan.combine_mode == REPORT
    explanation = run.outputs[2].explanation
    assert explanation == "Petrobras PN (PETR4.SA) está em 38.20 BRL (+1.85% no dia)."
    sent = asyncio.run(
        tool_call(endpoint=Endpoint("finance", finance_url, 5), tool="sent_messages", arguments={}, schema={})
    )
    assert sent.result["messages"][-1]["message"] == explanation
    assert outputs_combine(plan, run.outputs)["explanation"].splitlines() == [explanation, "Notificação enviada."]


def test_several_symbols_are_searched_side_by_side_and_then_priced(snapshot):
    plan = quote_plan(symbols=["PETR4", "Vale", "Equinor"])

    run, events = execute(plan, CATALOGUE, snapshot)

    searches = [s.id for s in plan.steps if s.capability == "search_symbol"]
    quotes = [s.id for s in plan.steps if s.capability == "get_stock_price"]
    started = [e["id"] for e in events if e["status"] == STARTED]
    assert started[:3] == searches == [1, 3, 5]  # all three searches before any price
    assert sorted(started[3:]) == quotes == [2, 4, 6]
    assert run.status == SUCCESS
    assert outputs_combine(plan, run.outputs)["explanation"].splitlines() == [
        "Petrobras PN (PETR4.SA) está em 38.20 BRL (+1.85% no dia).",
        "Vale ON (VALE3.SA) está em 61.47 BRL (-2.10% no dia).",
        "Equinor (EQNR.OL) está em 276.40 NOK (+2.02% no dia).",
    ]
