"""Goals and capabilities in YAML (``goals.<domain>.yaml``) and a profile's goal-mode settings in its router block.

The synced domain is the real one: the demo loaded by ``seed_demo`` and the finance example server (a process)
synced by ``sync_mcp_tools``, as ``scripts/start`` does it.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from agents.models import AgentProfile, McpServer, RoutingMode
from common.config_version import config_version_bump
from releases.configio import config_export, config_export_data, goals_file_name
from releases.configio import messages as m
from releases.tests.test_config_io import (
    assert_refused_without_writing,
    database_dump,
    empty_the_configuration,
    routing_version,
    run_import,
    write,
)
from routing.models import Capability, Goal

pytestmark = pytest.mark.django_db

FINANCE_FILE = goals_file_name("finance")


@pytest.fixture
def finance(demo, finance_mcp) -> McpServer:
    """The demo, with the finance server's manifest synced into goals and capabilities (for this test only)."""
    McpServer.objects.filter(name="finance").update(endpoint=finance_mcp)
    config_version_bump()  # QuerySet.update bypasses the invalidation signals
    call_command("sync_mcp_tools", "finance", stdout=StringIO())
    assert Goal.objects.filter(domain="finance").count() == 2
    return McpServer.objects.get(name="finance")


@pytest.fixture
def demo(module_demo, db) -> None:
    """The demo without a sync: the finance server and its tools exist, no goal yet. Seeded once for the module's
    tests (``module_demo``): each test sees it as seeded and nothing another test imported or synced."""


def export_to(directory: Path) -> Path:
    call_command("export_config", str(directory), stdout=StringIO())
    return directory


# A domain made by hand: two capabilities over the demo's telecom tools, one goal choosing by an enum.
BILLING = """
    domain: billing
    mcp_server: telecom
    capabilities:
      invoice_lookup:
        tool: consultar_fatura
        description: Looks an invoice up.
        keywords: [fatura, invoice]
        metadata:
          decomposition: {array_params: []}
      payment_lookup:
        tool: consultar_pagamentos
    goals:
      BILLING_QUESTION:
        description: A question about an invoice or a payment.
        examples: [minha fatura veio alta]
        confidence_threshold: 0.8
        entities_schema:
          subject:
            type: enum
            values: [INVOICE, PAYMENT]
            default: INVOICE
            capability_map:
              INVOICE: invoice_lookup
              PAYMENT: payment_lookup
"""


# -- the profile's goal-mode settings ----------------------------------------------------------------


def test_mode_goal_threshold_and_goal_domains_are_imported_from_the_router_block_and_exported_back(demo):
    profile = AgentProfile.objects.get(agent_id="finance_assistente")

    assert profile.routing_mode == RoutingMode.GOAL
    assert profile.goal_threshold == 0.94
    assert list(profile.goal_domains.values_list("name", flat=True)) == ["finance"]
    router = config_export_data()["routing.finance_assistente.yaml"]["router"]
    assert (router["mode"], router["goal_threshold"], router["goal_domains"]) == ("goal", 0.94, ["finance"])


def test_goal_domains_and_threshold_a_file_changes_replace_the_stored_ones(demo, tmp_path):
    routing = write(
        tmp_path,
        "routing.yaml",
        """
        agent_id: finance_assistente
        router:
          goal_threshold: 0.8
          goal_domains: [telecom, retail]
        """,
    )
    out = run_import(routing)

    profile = AgentProfile.objects.get(agent_id="finance_assistente")
    assert profile.goal_threshold == 0.8
    assert set(profile.goal_domains.values_list("name", flat=True)) == {"telecom", "retail"}
    assert "profiles: 1 updated" in out

    write(tmp_path, "routing.yaml", "agent_id: finance_assistente\nrouter:\n  goal_domains: []\n")
    run_import(routing)
    assert not profile.goal_domains.exists()


def test_goal_domains_naming_an_unknown_server_is_refused_with_its_line(demo, tmp_path):
    routing = write(
        tmp_path,
        "routing.yaml",
        """
        agent_id: finance_assistente
        router:
          goal_domains:
            - finance
            - finanse
          goal_threshold: 1.5
        """,
    )
    error = assert_refused_without_writing(routing)

    assert f"{routing}:5: router.goal_domains[1]: {m.ERROR_UNKNOWN_SERVER.format(name='finanse')}" in error
    assert f"{routing}:6: router.goal_threshold: Ensure this value is less than or equal to 1.0" in error


# -- goals and capabilities ---------------------------------------------------------------------------


def test_a_domain_file_creates_goals_and_capabilities_made_by_hand(demo, tmp_path):
    out = run_import(write(tmp_path, "goals.billing.yaml", BILLING))

    assert "capabilities: 2 created" in out and "goals: 1 created" in out
    invoice = Capability.objects.get(name="invoice_lookup")
    assert (invoice.domain, invoice.server.name, invoice.tool.name) == ("billing", "telecom", "consultar_fatura")
    assert (invoice.keywords, invoice.metadata) == (["fatura", "invoice"], {"decomposition": {"array_params": []}})
    goal = Goal.objects.get(domain="billing", name="BILLING_QUESTION")
    assert goal.entities_schema["subject"]["capability_map"] == {
        "INVOICE": "invoice_lookup",
        "PAYMENT": "payment_lookup",
    }
    assert (goal.confidence_threshold, goal.examples, goal.enabled) == (0.8, ["minha fatura veio alta"], True)
    assert goal.synced == {} and goal.synced_at is None  # made here, as in the admin


def test_an_export_of_synced_and_edited_goals_imports_as_a_no_op(finance, tmp_path):
    goal = Goal.objects.get(name="TOP_MOVERS")
    goal.description, goal.confidence_threshold = "  Editado no admin.\n", 0.7
    goal.save()
    Capability.objects.filter(name="send_message").update(enabled=False)
    exported = export_to(tmp_path / "export")
    assert (exported / FINANCE_FILE).exists()
    before, version = database_dump(), routing_version()

    out = run_import(exported)

    assert "changed nothing" in out
    assert "capabilities: 5 unchanged" in out and "goals: 2 unchanged" in out
    assert database_dump() == before  # synced, synced_at and updated_at included
    assert routing_version() == version
    assert config_export() == {name: (exported / name).read_text(encoding="utf-8") for name in config_export()}


def test_an_import_keeps_synced_so_a_later_sync_keeps_the_files_edit(finance, tmp_path):
    goal = Goal.objects.get(name="TOP_MOVERS")
    synced, synced_at, manifest_text = dict(goal.synced), goal.synced_at, goal.description
    domain = write(
        tmp_path,
        FINANCE_FILE,
        """
        domain: finance
        mcp_server: finance
        goals:
          TOP_MOVERS:
            description: As maiores altas ou baixas (texto do negócio).
            examples: ["quem subiu hoje?"]
        capabilities:
          get_top_gainers:
            keywords: [disparou]
        """,
    )
    run_import(domain)

    goal.refresh_from_db()
    assert (goal.synced, goal.synced_at) == (synced, synced_at)
    assert goal.edited_fields() == ["description", "examples"]
    gainers = Capability.objects.get(name="get_top_gainers")
    assert gainers.keywords == ["disparou"] and gainers.edited_fields() == ["keywords"]
    assert gainers.metadata == gainers.synced["metadata"]  # what the file leaves out stays as synced

    out = StringIO()
    call_command("sync_mcp_tools", "finance", stdout=out)
    goal.refresh_from_db()
    assert goal.description == "As maiores altas ou baixas (texto do negócio)."
    assert goal.synced["description"] == manifest_text
    assert "kept as edited" in out.getvalue()
    assert Capability.objects.get(name="get_top_gainers").keywords == ["disparou"]


def test_a_goal_set_back_to_its_synced_text_follows_the_manifest_again(finance, tmp_path):
    goal = Goal.objects.get(name="TOP_MOVERS")
    goal.description = "Editado."
    goal.save()
    text = yaml.safe_dump({"TOP_MOVERS": {"description": goal.synced["description"]}}, allow_unicode=True)
    indented = "\n".join(f"  {line}" for line in text.splitlines())
    domain = write(tmp_path, FINANCE_FILE, f"domain: finance\nmcp_server: finance\ngoals:\n{indented}\n")

    run_import(domain)

    goal.refresh_from_db()
    assert goal.edited_fields() == []


def test_a_dry_run_of_a_domain_file_reports_and_writes_nothing(demo, tmp_path):
    before, version = database_dump(), routing_version()

    out = run_import(write(tmp_path, "goals.billing.yaml", BILLING), dry_run=True)

    assert "would change" in out and "(dry run, rolled back)" in out
    assert "capabilities: 2 created" in out and "goals: 1 created" in out
    assert database_dump() == before
    assert routing_version() == version


# -- refusals ---------------------------------------------------------------------------------------------


def test_a_bad_entities_schema_is_refused_naming_file_line_and_field(finance, tmp_path):
    domain = write(
        tmp_path,
        FINANCE_FILE,
        """
        domain: finance
        mcp_server: finance
        goals:
          TOP_MOVERS:
            entities_schema:
              direction:
                type: enum
                values: [GAINERS, LOSERS]
                default: BOTH
                capability_map: {GAINERS: get_top_gainers}
          GET_QUOTE:
            entities_schema:
              symbol_text: {type: text}
        """,
    )
    error = assert_refused_without_writing(domain)

    assert f"{domain}:6: goals.TOP_MOVERS.entities_schema.direction: default must be one of the values" in error
    assert (
        f"{domain}:13: goals.GET_QUOTE.entities_schema.symbol_text: "
        "type must be one of boolean, enum, list, string, not 'text'"
    ) in error


def test_an_entity_pattern_re2_cannot_compile_is_refused_naming_file_line_and_field(finance, tmp_path):
    domain = write(
        tmp_path,
        FINANCE_FILE,
        r"""
        domain: finance
        mcp_server: finance
        goals:
          GET_QUOTE:
            entities_schema:
              symbol_text: {type: string, pattern: '(?<=da )(?P<value>[A-Z]\w+)'}
        """,
    )
    error = assert_refused_without_writing(domain)

    assert f"{domain}:6: goals.GET_QUOTE.entities_schema.symbol_text.pattern: RE2 cannot compile it: " in error
    assert "(?<" in error and "lookarounds" in error


def test_an_unknown_capability_in_a_capability_map_is_refused(finance, tmp_path):
    domain = write(
        tmp_path,
        FINANCE_FILE,
        """
        domain: finance
        mcp_server: finance
        goals:
          TOP_MOVERS:
            entities_schema:
              direction:
                type: enum
                values: [GAINERS, LOSERS]
                capability_map:
                  GAINERS: get_top_gainers
                  LOSERS: get_top_loosers
          GET_QUOTE:
            capabilities: [get_stock_price, get_stock_prize]
        """,
    )
    error = assert_refused_without_writing(domain)

    assert (
        f"{domain}:6: goals.TOP_MOVERS.entities_schema.direction: "
        "capability_map names unknown capability 'get_top_loosers'"
    ) in error
    assert f"{domain}:13: goals.GET_QUOTE.capabilities: unknown capability 'get_stock_prize'" in error


def test_a_capability_the_same_import_defines_may_be_named_by_a_goal(finance, tmp_path):
    domain = write(
        tmp_path,
        FINANCE_FILE,
        """
        domain: finance
        mcp_server: finance
        goals:
          GET_QUOTE:
            capabilities: [get_quote_twice]
        capabilities:
          get_quote_twice:
            tool: get_stock_price
        """,
    )
    run_import(domain)
    assert Goal.objects.get(name="GET_QUOTE").capabilities == ["get_quote_twice"]
    assert Capability.objects.get(name="get_quote_twice").tool.name == "get_stock_price"


def test_a_goal_that_names_no_capability_is_refused(finance, tmp_path):
    domain = write(
        tmp_path,
        FINANCE_FILE,
        """
        domain: finance
        mcp_server: finance
        goals:
          NEW_GOAL:
            description: Nothing serves it.
        """,
    )
    error = assert_refused_without_writing(domain)
    assert f"{domain}:4: goals.NEW_GOAL: names no capability (capability_map or capabilities)" in error


def test_wrong_types_and_values_in_goals_and_capabilities_are_refused_with_their_lines(finance, tmp_path):
    domain = write(
        tmp_path,
        FINANCE_FILE,
        """
        domain: finance
        mcp_server: finance
        goals:
          TOP_MOVERS:
            examples: [altas, 3]
            confidence_threshold: 1.2
            enabled: "yes"
            entities_schema: [direction]
            owner: me
        capabilities:
          get_top_gainers:
            keywords: altas
            metadata: [decomposition]
          Get Losers:
            tool: get_top_losers
        """,
    )
    error = assert_refused_without_writing(domain)

    assert f"{domain}:5: goals.TOP_MOVERS.examples[1]: must be a string, not an integer" in error
    assert f"{domain}:6: goals.TOP_MOVERS.confidence_threshold: Ensure this value is less than or equal" in error
    assert f"{domain}:7: goals.TOP_MOVERS.enabled: must be true or false, not a string" in error
    assert f"{domain}:8: goals.TOP_MOVERS.entities_schema: must be a mapping, not a list" in error
    assert f"{domain}:9: goals.TOP_MOVERS.owner: unknown key 'owner'" in error
    assert f"{domain}:12: capabilities.get_top_gainers.keywords: must be a list, not a string" in error
    assert f"{domain}:13: capabilities.get_top_gainers.metadata: must be a mapping, not a list" in error
    assert f"{domain}:14: capabilities.Get Losers: " in error  # not a slug


def test_a_capabilitys_tool_must_exist_on_its_domains_server(finance, tmp_path):
    domain = write(
        tmp_path,
        FINANCE_FILE,
        """
        domain: finance
        mcp_server: finance
        capabilities:
          get_top_gainers:
            tool: consultar_fatura
          get_top_losers:
            tool: get_top_loser
        """,
    )
    error = assert_refused_without_writing(domain)

    assert (
        f"{domain}:5: capabilities.get_top_gainers.tool: "
        + m.ERROR_TOOL_SERVER.format(name="consultar_fatura", server="telecom", expected="finance")
        in error
    )
    assert f"{domain}:7: capabilities.get_top_losers.tool: {m.ERROR_UNKNOWN_TOOL.format(name='get_top_loser')}" in error


def test_a_domain_keeps_its_server_and_a_capability_its_domain(finance, tmp_path):
    moved = write(
        tmp_path,
        "goals.moved.yaml",
        """
        domain: finance
        mcp_server: telecom
        goals:
          TOP_MOVERS:
            enabled: false
        """,
    )
    stolen = write(
        tmp_path,
        "goals.other.yaml",
        """
        domain: markets
        mcp_server: finance
        capabilities:
          get_stock_price:
            description: Mine now.
        """,
    )
    error = assert_refused_without_writing(moved, stolen)

    assert f"{moved}:2: mcp_server: {m.ERROR_DOMAIN_SERVER.format(domain='finance', other='finance')}" in error
    assert (
        f"{stolen}:4: capabilities.get_stock_price: "
        + m.ERROR_CAPABILITY_DOMAIN.format(name="get_stock_price", domain="finance", server="finance")
        in error
    )


def test_two_files_giving_one_domain_two_servers_are_refused(demo, tmp_path):
    first = write(tmp_path, "a.yaml", BILLING)
    second = write(
        tmp_path,
        "b.yaml",
        "domain: billing\nmcp_server: retail\ncapabilities:\n  order_lookup:\n    tool: consultar_pedido\n",
    )
    error = assert_refused_without_writing(first, second)
    assert f"{second}:2: mcp_server: 'retail' conflicts with mcp_server = 'telecom' at {first}:2" in error


def test_goals_need_their_domain_and_server_and_those_need_goals(demo, tmp_path):
    headless = write(tmp_path, "a.yaml", "goals:\n  X:\n    capabilities: [y]\n")
    alone = write(tmp_path, "b.yaml", "domain: billing\nmcp_server: telecom\n")
    unknown = write(tmp_path, "c.yaml", BILLING.replace("mcp_server: telecom", "mcp_server: telecon"))

    error = assert_refused_without_writing(headless, alone, unknown)

    assert f"{headless}:1: goals: {m.ERROR_DOMAIN_REQUIRED.format(key='domain')}" in error
    assert f"{headless}:1: goals: {m.ERROR_DOMAIN_REQUIRED.format(key='mcp_server')}" in error
    assert f"{alone}:1: domain: {m.ERROR_DOMAIN_ALONE.format(key='domain')}" in error
    assert f"{unknown}:2: mcp_server: {m.ERROR_UNKNOWN_SERVER.format(name='telecon')}" in error


# -- the demo's export ---------------------------------------------------------------------------------------


def test_the_demo_exported_after_a_sync_of_the_finance_server_holds_its_goals(finance, tmp_path):
    exported = export_to(tmp_path / "export")

    data = yaml.safe_load((exported / FINANCE_FILE).read_text(encoding="utf-8"))
    assert (data["domain"], data["mcp_server"]) == ("finance", "finance")
    assert set(data["goals"]) == {"GET_QUOTE", "TOP_MOVERS"}
    assert data["goals"]["TOP_MOVERS"]["entities_schema"]["direction"]["capability_map"]["GAINERS"] == (
        "get_top_gainers"
    )
    assert data["goals"]["GET_QUOTE"]["capabilities"] == ["get_stock_price"]
    assert set(data["capabilities"]) == {
        "get_stock_price",
        "search_symbol",
        "get_top_gainers",
        "get_top_losers",
        "send_message",
    }
    assert data["capabilities"]["get_stock_price"]["tool"] == "get_stock_price"
    assert data["capabilities"]["get_stock_price"]["metadata"]["flow"]["pre"][0]["search_capability"] == (
        "search_symbol"
    )
    router = yaml.safe_load((exported / "routing.finance_assistente.yaml").read_text(encoding="utf-8"))["router"]
    assert (router["mode"], router["goal_domains"]) == ("goal", ["finance"])


def test_the_export_imported_into_an_empty_database_exports_the_same_files(finance, tmp_path):
    first = export_to(tmp_path / "first")
    empty_the_configuration()  # goals and capabilities go with their servers

    run_import(first)

    second = export_to(tmp_path / "second")
    assert {p.name: p.read_text(encoding="utf-8") for p in first.iterdir()} == {
        p.name: p.read_text(encoding="utf-8") for p in second.iterdir()
    }
    assert not Goal.objects.exclude(synced={}).exists()  # made by the import: every value counts as an edit
