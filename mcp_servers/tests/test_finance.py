"""The finance example server (goal mode's domain), as a real process over the official MCP client: its tools, and
its manifest served as ``manifest://finance``, which the goal core reads and plans the goal-mode examples from."""

from __future__ import annotations

import json

import pytest

from mcp_servers.finance import server as finance
from mcp_servers.tests.test_servers import session_to
from routing.goals.intent import pattern_values
from routing.goals.manifest import ManifestError, manifest_read
from routing.goals.planner import DAG, IntentOutput, goal_resolve, plan_build
from tests.mcp_processes import running_mcp_servers

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.fixture(scope="module")
def finance_url():
    with running_mcp_servers("finance") as urls:
        yield urls["finance"]


async def served_manifest(url: str) -> dict:
    async with session_to(url) as session:
        listed = await session.list_resources()
        assert finance.MANIFEST_URI in {str(resource.uri) for resource in listed.resources}
        read = await session.read_resource(finance.MANIFEST_URI)
    (content,) = read.contents
    assert content.mime_type == "application/json"
    return json.loads(content.text)


async def test_the_manifest_is_served_as_an_mcp_resource_and_reads_into_goals_and_capabilities(finance_url):
    manifest = manifest_read(await served_manifest(finance_url))

    assert manifest.domain == "finance"
    assert set(manifest.goals) == {"GET_QUOTE", "TOP_MOVERS"}
    assert set(manifest.capabilities) == {
        "get_stock_price",
        "search_symbol",
        "get_top_gainers",
        "get_top_losers",
        "send_message",
    }
    async with session_to(finance_url) as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
    assert set(manifest.tools.values()) <= tools  # every capability is served by a tool of the server


async def test_seed_002s_examples_plan_from_the_served_manifest_alone(finance_url):
    manifest = manifest_read(await served_manifest(finance_url))

    def plan(goal: str, **entities):
        intent = IntentOutput("finance", goal, entities, 0.95, "…")
        return plan_build(goal_resolve(intent, manifest.goals[goal]), manifest.capabilities)

    assert [s.capability for s in plan("TOP_MOVERS", direction="GAINERS", market_text="Brasil").steps] == [
        "get_top_gainers"
    ]
    assert [s.capability for s in plan("TOP_MOVERS", market_text="Brasil").steps] == ["get_top_gainers"]
    notified = plan("GET_QUOTE", symbol_text="PETR4", notify=True)
    assert notified.execution_mode == DAG
    assert [(s.capability, s.params) for s in notified.steps] == [
        ("search_symbol", {"query": "PETR4"}),  # flow.pre: the name as the user said it becomes a symbol
        ("get_stock_price", {"notify": True, "symbol": "${1.result.resolved}"}),
        ("send_message", {"message": "${2.explanation}"}),
    ]
    several = plan("GET_QUOTE", symbols=["PETR4", "Vale", "Equinor"])
    assert several.execution_mode == DAG and len(several.steps) == 6  # three searches ∥, then three prices ∥


async def test_nordea_has_two_listings_so_a_search_finds_both(finance_url):
    async with session_to(finance_url) as session:
        result = await session.call_tool("search_symbol", {"query": "Nordea"})
    assert not result.is_error
    assert [m["symbol"] for m in result.structured_content["matches"]] == ["NDA-SE.ST", "NDA-FI.HE"]


async def test_a_quote_carries_its_market_context_and_an_explanation(finance_url):
    async with session_to(finance_url) as session:
        result = await session.call_tool("get_stock_price", {"symbol": "NDA-SE.ST"})
        unknown = await session.call_tool("get_stock_price", {"symbol": "NOPE"})
    quote = result.structured_content
    assert (quote["price"], quote["currency"], quote["_market_context"]["exchange"]) == (112.5, "SEK", "OMX Stockholm")
    assert quote["explanation"].startswith("Nordea Bank (NDA-SE.ST) está em 112.50 SEK")
    assert unknown.is_error and "search_symbol" in unknown.content[0].text


async def test_top_gainers_and_losers_of_a_market(finance_url):
    async with session_to(finance_url) as session:
        gainers = (await session.call_tool("get_top_gainers", {"market_text": "Brasil"})).structured_content
        losers = (await session.call_tool("get_top_losers", {})).structured_content
    assert [item["symbol"] for item in gainers["items"]] == ["MGLU3.SA", "PETR4.SA", "ITUB4.SA"]
    assert [item["symbol"] for item in losers["items"]] == ["VALE3.SA", "ERIC-B.ST"]


async def test_the_notifier_records_what_it_sent(finance_url):
    async with session_to(finance_url) as session:
        sent = await session.call_tool("send_message", {"message": "PETR4 está em 38.20 BRL"})
        log = (await session.call_tool("sent_messages", {})).structured_content
    assert sent.structured_content["sent"] is True
    assert log["messages"][-1]["message"] == "PETR4 está em 38.20 BRL"


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda m: m.pop("domain"), "domain"),
        (lambda m: m["goals"][1]["entities_schema"]["direction"].update(values=[]), "entities_schema.direction"),
        (lambda m: m["goals"][1]["entities_schema"]["direction"]["capability_map"].update(UP="nowhere"), "goals[1]"),
        (lambda m: m["goals"][0].update(capabilities=["nowhere"]), "goals[0].capabilities"),
        (lambda m: m["capabilities"].append({"capability": "search_symbol"}), "capabilities[5]"),
        (lambda m: m["goals"][0]["entities_schema"]["symbol_text"].update(type="number"), "symbol_text"),
    ],
)
def test_a_manifest_the_platform_cannot_serve_is_refused_naming_the_place(change, where):
    manifest = json.loads(finance.manifest())
    change(manifest)
    with pytest.raises(ManifestError, match=where.replace("[", r"\[").replace("]", r"\]")):
        manifest_read(manifest)


async def test_a_search_matches_the_start_of_a_names_word_never_the_middle_of_one(finance_url):
    async with session_to(finance_url) as session:
        banco = await session.call_tool("search_symbol", {"query": "Banco"})
        unibanco = await session.call_tool("search_symbol", {"query": "Unibanco"})
        luiza = await session.call_tool("search_symbol", {"query": "luiza"})
    assert banco.structured_content["matches"] == []  # "Itaú Unibanco" is no bank called "Banco"
    assert [m["symbol"] for m in unibanco.structured_content["matches"]] == ["ITUB4.SA"]
    assert [m["symbol"] for m in luiza.structured_content["matches"]] == ["MGLU3.SA"]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("what's the quote for Banco do Brasil and Petrobras?", ["Banco do Brasil", "Petrobras"]),
        ("preço do Banco do Brasil", ["Banco do Brasil"]),
        ("cotización de Banco de la Nación y Vale", ["Banco de la Nación", "Vale"]),
        ("preço da Vale e do Itaú", ["Vale", "Itaú"]),
        ("price of Equinor", ["Equinor"]),
    ],
)
def test_a_name_of_several_words_joined_by_of_is_read_whole(text, names):
    assert pattern_values({"pattern": finance.SYMBOL_PATTERN}, text) == names  # as the platform reads it: RE2
