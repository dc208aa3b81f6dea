"""Domain manifests synced into goals and capabilities, against the finance example server.

The first sync runs against the finance server as a real process; the re-syncs after a manifest change run it
in this process (``build_server`` over uvicorn in a thread), so a test can change the manifest it serves.
"""

from __future__ import annotations

import contextlib
import copy
import socket
import threading
import time
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from agents.models import McpServer, McpTool
from agents.services import mcp_server_sync
from mcp_servers.finance import server as finance
from routing.documents import profile_documents
from routing.models import Capability, Goal
from tests.factories import McpServerFactory
from tests.mcp_processes import running_mcp_servers

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def finance_process() -> Iterator[str]:
    with running_mcp_servers("finance") as urls:
        yield urls["finance"]


@contextlib.contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """``app`` (an MCP server's streamable HTTP app) served by uvicorn in a thread: its MCP endpoint's URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a hang guard
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def manifest(monkeypatch) -> dict[str, Any]:
    """The manifest the in-process finance server serves: a deep copy of the real one, for the test to change."""
    served = copy.deepcopy(finance.MANIFEST)
    monkeypatch.setattr(finance, "MANIFEST", served)
    return served


@pytest.fixture
def finance_in_process(manifest) -> Iterator[str]:
    app = finance.build_server(log_level="WARNING").streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, host="127.0.0.1"
    )
    with serve_in_thread(app) as url:
        yield url


@pytest.fixture
def finance_server(finance_process) -> McpServer:
    return McpServerFactory(name="finance", endpoint=finance_process)


@pytest.fixture
def finance_editable(finance_in_process) -> McpServer:
    server = McpServerFactory(name="finance", endpoint=finance_in_process)
    report = mcp_server_sync(server=server)
    assert report.ok, report.errors
    return server


def sync(name: str = "finance") -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("sync_mcp_tools", name, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def goal_of(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    return next(goal for goal in manifest["goals"] if goal["goal"] == name)


def capability_of(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    return next(capability for capability in manifest["capabilities"] if capability["capability"] == name)


def hints_of(manifest: dict[str, Any], name: str) -> dict[str, Any]:
    return capability_of(manifest, name)["metadata"]["intent_hints"]


def test_a_sync_creates_the_manifests_two_goals_and_five_capabilities_linked_to_their_tools(finance_server):
    served = finance.MANIFEST  # what the process serves (the example's own manifest, read from the same file)

    out, _ = sync()

    assert set(Goal.objects.values_list("domain", "name")) == {("finance", "GET_QUOTE"), ("finance", "TOP_MOVERS")}
    capabilities = {capability.name: capability for capability in Capability.objects.select_related("tool")}
    assert set(capabilities) == {
        "get_stock_price",
        "search_symbol",
        "get_top_gainers",
        "get_top_losers",
        "send_message",
    }
    for name, capability in capabilities.items():
        assert capability.tool == McpTool.objects.get(server=finance_server, name=name)
        assert capability.server == finance_server and capability.domain == "finance"
    price = capabilities["get_stock_price"]
    assert price.keywords == hints_of(served, "get_stock_price")["keywords"] and "preço" in price.keywords
    assert price.examples == hints_of(served, "get_stock_price")["examples"]
    assert "intent_hints" not in price.metadata and price.metadata["composition"]["followup_roles"] == ["notifier"]
    assert capabilities["send_message"].metadata["roles"] == ["notifier"]
    movers = Goal.objects.get(name="TOP_MOVERS")
    assert movers.entities_schema["direction"]["capability_map"]["GAINERS"] == "get_top_gainers"
    assert movers.examples == goal_of(served, "TOP_MOVERS")["examples"] and movers.examples
    assert movers.description == goal_of(served, "TOP_MOVERS")["description"]
    assert movers.enabled and movers.confidence_threshold is None and movers.edited_fields() == []
    assert Goal.objects.get(name="GET_QUOTE").capabilities == ["get_stock_price"]
    tools = McpTool.objects.filter(server=finance_server).count()
    assert f"finance: {tools} created, 0 updated, 0 unchanged" in out
    assert "finance manifest://finance: goals 2 created, 0 updated, 0 unchanged; capabilities 5 created" in out


def test_a_sync_records_which_tools_say_they_only_read(finance_server):
    sync()

    only_read = dict(McpTool.objects.filter(server=finance_server).values_list("name", "read_only"))

    assert only_read == {
        "search_symbol": True,
        "get_stock_price": True,
        "get_top_gainers": True,
        "get_top_losers": True,
        "sent_messages": True,
        "send_message": False,  # it sends: a call of it is something done
    }


def test_a_second_sync_of_the_same_manifest_changes_nothing(finance_server):
    sync()
    before = {goal.name: goal.updated_at for goal in Goal.objects.all()}

    out, _ = sync()

    assert "goals 0 created, 0 updated, 2 unchanged; capabilities 0 created, 0 updated, 5 unchanged" in out
    assert {goal.name: goal.updated_at for goal in Goal.objects.all()} == before


def test_a_resync_keeps_what_was_edited_and_takes_the_manifests_changes_of_what_was_not(finance_editable, manifest):
    movers = Goal.objects.get(name="TOP_MOVERS")
    movers.description = "Altas e baixas do pregão (editado)"
    movers.enabled = False
    movers.confidence_threshold = 0.8
    movers.save()
    gainers = Capability.objects.get(name="get_top_gainers")
    gainers.keywords = ["subiram", "dispararam"]
    gainers.save()
    quote = goal_of(manifest, "GET_QUOTE")
    quote["description"] = "Cotação de uma ou mais ações."
    quote["examples"] = ["preço da Vale"]
    goal_of(manifest, "TOP_MOVERS")["description"] = "O manifesto mudou isto também."
    goal_of(manifest, "TOP_MOVERS")["examples"].append("o que mais subiu?")
    hints_of(manifest, "get_top_gainers")["keywords"] = ["maiores altas"]
    hints_of(manifest, "get_top_gainers")["examples"] = ["quem subiu mais?"]

    report = mcp_server_sync(server=finance_editable)

    assert report.ok, report.errors
    quote_row = Goal.objects.get(name="GET_QUOTE")
    assert quote_row.description == "Cotação de uma ou mais ações." and quote_row.examples == ["preço da Vale"]
    movers.refresh_from_db()
    assert movers.description == "Altas e baixas do pregão (editado)"  # edited: kept
    assert movers.examples[-1] == "o que mais subiu?"  # not edited: follows the manifest
    assert movers.enabled is False and movers.confidence_threshold == 0.8  # the business user's alone
    assert movers.synced["description"] == "O manifesto mudou isto também."
    assert movers.edited_fields() == ["description"]
    gainers.refresh_from_db()
    assert gainers.keywords == ["subiram", "dispararam"]
    assert gainers.examples == ["quem subiu mais?"]
    assert gainers.synced["keywords"] == ["maiores altas"]
    assert any("kept as edited" in line and "goal TOP_MOVERS (description)" in line for line in report.lines)
    assert any("capability get_top_gainers (keywords)" in line for line in report.lines)
    assert any("goals 0 created, 2 updated, 0 unchanged" in line for line in report.lines)


def test_a_field_edited_back_to_the_synced_value_follows_the_manifest_again(finance_editable, manifest):
    goal = Goal.objects.get(name="GET_QUOTE")
    goal.description = "editado"
    goal.save()
    mcp_server_sync(server=finance_editable)
    goal.description = goal.synced["description"]
    goal.save()
    goal_of(manifest, "GET_QUOTE")["description"] = "Nova descrição do manifesto."

    mcp_server_sync(server=finance_editable)

    goal.refresh_from_db()
    assert goal.description == "Nova descrição do manifesto." and goal.edited_fields() == []


def test_goals_and_capabilities_the_manifest_no_longer_lists_are_left_alone_and_reported(finance_editable, manifest):
    manifest["goals"] = [goal for goal in manifest["goals"] if goal["goal"] != "GET_QUOTE"]
    manifest["capabilities"] = [c for c in manifest["capabilities"] if c["capability"] != "send_message"]

    report = mcp_server_sync(server=finance_editable)

    assert report.ok, report.errors
    assert Goal.objects.filter(name="GET_QUOTE", enabled=True).exists()
    assert Capability.objects.filter(name="send_message", enabled=True).exists()
    assert any(
        "no longer in the manifest" in line and "goal GET_QUOTE" in line and "capability send_message" in line
        for line in report.lines
    )


def test_a_new_goal_in_the_manifest_is_created_on_the_next_sync(finance_editable, manifest):
    manifest["goals"].append(
        {
            "goal": "NOTIFY",
            "description": "Enviar um aviso.",
            "capabilities": ["send_message"],
            "entities_schema": {"message_text": {"type": "string"}},
        }
    )

    mcp_server_sync(server=finance_editable)

    assert Goal.objects.get(domain="finance", name="NOTIFY").capabilities == ["send_message"]


@pytest.mark.parametrize(
    ("kind", "name", "breakage", "problem"),
    [
        (
            "goals",
            "TOP_MOVERS",
            lambda goal: goal["entities_schema"]["direction"].pop("values"),
            ".entities_schema.direction: an enum needs its values",
        ),
        (
            "goals",
            "TOP_MOVERS",
            lambda goal: goal["entities_schema"]["direction"].update(type="date"),
            ".entities_schema.direction: type must be one of",
        ),
        (
            "goals",
            "GET_QUOTE",
            lambda goal: goal.update(capabilities=["get_dividends"]),
            ".capabilities: unknown capability 'get_dividends'",
        ),
        (
            "goals",
            "GET_QUOTE",
            lambda goal: goal.update(examples="qual o preço?"),
            ".examples: must be a list of strings",
        ),
        (
            "capabilities",
            "get_stock_price",
            lambda capability: capability["metadata"]["intent_hints"].update(keywords="preço"),
            ".metadata.intent_hints.keywords: must be a list of strings",
        ),
        ("", "", lambda manifest: manifest.update(domain="bolsa"), "domain: 'bolsa', but served as manifest://finance"),
    ],
    ids=["enum-without-values", "unknown-type", "unknown-capability", "examples", "keywords", "domain"],
)
def test_a_bad_manifest_changes_nothing_and_the_command_fails_naming_the_place(
    finance_editable, manifest, kind, name, breakage, problem
):
    before = sorted(Goal.objects.values_list("name", "description", "entities_schema", "updated_at"))
    goal_of(manifest, "GET_QUOTE")["description"] = "would change, if the manifest were good"
    place = problem
    if kind:
        key = "goal" if kind == "goals" else "capability"
        index = next(i for i, item in enumerate(manifest[kind]) if item[key] == name)
        breakage(manifest[kind][index])
        place = f"{kind}[{index}]{problem}"
    else:
        breakage(manifest)
    err = StringIO()

    with pytest.raises(CommandError, match="could not be synchronised"):
        call_command("sync_mcp_tools", "finance", stdout=StringIO(), stderr=err)

    assert f"finance manifest://finance: {place}" in err.getvalue() and "nothing changed" in err.getvalue()
    assert sorted(Goal.objects.values_list("name", "description", "entities_schema", "updated_at")) == before


def test_a_manifest_that_is_not_json_is_reported_with_its_line():
    from mcp_servers.common import new_server

    tiny = new_server("broken", title="Broken", instructions="A manifest that is not JSON.")
    tiny.resource("manifest://broken", name="manifest", mime_type="application/json")(
        lambda: '{"domain": "broken",\n "goals": [}'
    )
    app = tiny.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True, host="127.0.0.1"
    )
    with serve_in_thread(app) as url:
        server = McpServerFactory(name="broken", endpoint=url)

        report = mcp_server_sync(server=server)

    assert report.errors == ["broken manifest://broken: not JSON (Expecting value, line 2 column 12); nothing changed"]
    assert not Goal.objects.exists()


def test_a_kept_edit_that_the_new_manifest_would_leave_without_a_capability_refuses_the_domain(
    finance_editable, manifest
):
    quote = Goal.objects.get(name="GET_QUOTE")
    quote.entities_schema = {"symbol_text": {"type": "string", "required": True, "description": "Nome da ação."}}
    quote.save()
    # The manifest now chooses GET_QUOTE's capability by an enum; the edited schema (kept) has none, and the
    # goal's capability list (not edited) follows the manifest to empty: the goal would name no capability.
    goal_of(manifest, "GET_QUOTE")["capabilities"] = []
    goal_of(manifest, "GET_QUOTE")["entities_schema"]["kind"] = {
        "type": "enum",
        "values": ["PRICE"],
        "capability_map": {"PRICE": "get_stock_price"},
    }
    hints_of(manifest, "get_stock_price")["keywords"] = ["preço"]

    report = mcp_server_sync(server=finance_editable)

    assert len(report.errors) == 1
    assert report.errors[0].startswith("finance manifest://finance: goal GET_QUOTE: ")
    assert "names no capability" in report.errors[0] and report.errors[0].endswith("nothing changed")
    quote.refresh_from_db()
    assert quote.capabilities == ["get_stock_price"] and "kind" not in quote.synced["entities_schema"]
    assert Capability.objects.get(name="get_stock_price").keywords != ["preço"]  # the whole domain rolled back


def test_a_domain_another_server_publishes_is_refused(finance_in_process):
    other = McpServerFactory(name="bolsa")
    Goal.objects.create(server=other, domain="finance", name="GET_QUOTE", capabilities=["get_stock_price"])
    server = McpServerFactory(name="finance", endpoint=finance_in_process)

    report = mcp_server_sync(server=server)

    assert report.errors == [
        "finance manifest://finance: domain: 'finance' is already the domain of the server 'bolsa'; nothing changed"
    ]
    assert not Capability.objects.exists()


def test_a_server_without_manifests_syncs_its_tools_alone(live_mcp):
    out, _ = sync("telecom")

    assert out.strip() == "telecom: 1 created, 2 updated, 0 unchanged"
    assert not Goal.objects.exists()


# -- which profiles carry a domain's goals ----------------------------------------------------------------------


def test_a_sync_changes_the_drafts_of_the_profiles_that_serve_the_domain_and_of_no_other(finance_editable, manifest):
    from agents.models import RoutingMode
    from releases.versions import documents_same, version_publish
    from routing.selectors import live_version
    from tests.factories import AgentProfileFactory, SpecialistFactory

    weather = McpServerFactory(name="weather")
    profiles = {
        "router_naming_none": AgentProfileFactory(agent_id="router_naming_none", routing_mode=RoutingMode.ROUTER),
        "goal_naming_none": AgentProfileFactory(agent_id="goal_naming_none", routing_mode=RoutingMode.GOAL),
        "goal_naming_weather": AgentProfileFactory(agent_id="goal_naming_weather", routing_mode=RoutingMode.GOAL),
        "router_naming_finance": AgentProfileFactory(agent_id="router_naming_finance"),
    }
    profiles["goal_naming_weather"].goal_domains.set([weather])
    profiles["router_naming_finance"].goal_domains.set([finance_editable])
    for profile in profiles.values():
        SpecialistFactory(profile=profile, name="general_agent")
        version_publish(profile=profile, note="before the manifest changed")
    hints_of(manifest, "get_top_gainers")["keywords"].append("disparou")

    assert mcp_server_sync(server=finance_editable).ok

    changed = {
        agent_id
        for agent_id, profile in profiles.items()
        if not documents_same(live_version(profile).document, profile_documents([agent_id])[agent_id])
    }
    assert changed == {"goal_naming_none", "router_naming_finance"}


def test_a_profile_neither_in_goal_mode_nor_naming_a_domain_carries_no_goal(finance_editable):
    from agents.models import RoutingMode
    from tests.factories import AgentProfileFactory

    AgentProfileFactory(agent_id="plain_router", routing_mode=RoutingMode.SUPERVISOR)

    document = profile_documents(["plain_router"])["plain_router"]

    assert document["goals"] == {} and document["capabilities"] == {}
    assert not {"get_stock_price", "search_symbol", "send_message"} & set(document["tools"])
