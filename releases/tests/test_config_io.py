"""import_config, export_config and seed_demo: the YAML configuration round trip."""

from __future__ import annotations

import json
import shutil
import textwrap
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from agents.escalation import EscalationSettings
from agents.models import AgentProfile, McpServer, McpTool, Specialist, SpecialistPrompt
from agents.profile_settings import Block, ProfileSetting, yaml_settings
from common.models import ConfigVersion
from releases.configio import Source, config_export, config_export_data, config_import
from releases.configio import messages as m
from routing.models import Capability, Goal, Intent, Keyword, ProfileRelease, RoutingVersion, StatePolicy
from routing.services import ERROR_KEYWORD_TAKEN
from tests.demo_snapshot import demo_seed
from tests.factories import IntentFactory

pytestmark = pytest.mark.django_db

DEMO_DIR = Path(settings.BASE_DIR) / "config" / "demo"
DEMO_FILES = [
    "mcp_servers.yaml",
    "tools.yaml",
    "agents.yaml",
    "routing.telecom_contas.yaml",
    "routing.retail_orders.yaml",
    "routing.telecom_assistente.yaml",
    "routing.finance_assistente.yaml",
]
CONFIG_MODELS = (
    McpServer,
    McpTool,
    AgentProfile,
    Specialist,
    SpecialistPrompt,
    Intent,
    Keyword,
    StatePolicy,
    Capability,
    Goal,
)
THROUGH_MODELS = (
    Intent.mcp_tools.through,
    Specialist.allowed_tools.through,
    Specialist.handoff_targets.through,
    AgentProfile.goal_domains.through,
)


# -- helpers -------------------------------------------------------------------------


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def run_import(*paths, **options) -> str:
    out = StringIO()
    call_command("import_config", *[str(p) for p in paths], stdout=out, stderr=StringIO(), **options)
    return out.getvalue()


def refused(*paths, **options) -> str:
    """The error text of an import that must fail."""
    with pytest.raises(CommandError) as exc:
        call_command("import_config", *[str(p) for p in paths], stdout=StringIO(), stderr=StringIO(), **options)
    return str(exc.value)


def database_dump() -> dict[str, list[dict]]:
    """Every configuration row with every column (including ``updated_at``) and every m2m link."""
    return {
        model._meta.label: list(model.objects.order_by("pk").values()) for model in (*CONFIG_MODELS, *THROUGH_MODELS)
    }


def row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in (*CONFIG_MODELS, *THROUGH_MODELS)}


def routing_version() -> int:
    return ConfigVersion.objects.values_list("version", flat=True).first() or 0


def demo_copy(tmp_path: Path) -> Path:
    target = tmp_path / "demo"
    shutil.copytree(DEMO_DIR, target)
    return target


def empty_the_configuration() -> None:
    # Versions protect their profiles, intents and state policies their specialists, so they go first.
    ProfileRelease.objects.all().delete()
    RoutingVersion.objects.all().delete()
    StatePolicy.objects.all().delete()
    Intent.objects.all().delete()
    AgentProfile.objects.all().delete()
    McpTool.objects.all().delete()
    McpServer.objects.all().delete()
    assert sum(row_counts().values()) == 0


SERVERS = """
    servers:
      telecom:
        transport: http
        endpoint: http://127.0.0.1:8100/mcp
"""

TOOLS = """
    tools:
      consultar_fatura:
        description: Consulta dados resumidos de fatura por msisdn/invoice_id.
        mcp_server: telecom
        args_schema:
          msisdn: string
          invoice_id: string
"""

AGENTS = """
    agents:
      - agent_id: telecom_contas
        name: Agente Telecom Contas
        metadata:
          domain: telecom
        specialists:
          - name: billing_agent
            prompt: You explain invoices.
            tools: [consultar_fatura]
          - name: support_agent
            prompt: You help with everything else.
"""


@pytest.fixture
def small(tmp_path) -> Path:
    """A minimal valid configuration: one server, one tool, one profile with two specialists."""
    write(tmp_path, "mcp_servers.yaml", SERVERS)
    write(tmp_path, "tools.yaml", TOOLS)
    write(tmp_path, "agents.yaml", AGENTS)
    return tmp_path


# -- seed_demo ---------------------------------------------------------------------------


def test_seed_demo_loads_both_profiles_with_their_intents():
    out = demo_seed().stdout

    telecom = AgentProfile.objects.get(agent_id="telecom_contas")
    retail = AgentProfile.objects.get(agent_id="retail_orders")
    assert (telecom.domain, retail.domain) == ("telecom", "retail")
    for profile in (telecom, retail):
        assert set(profile.specialists.values_list("name", flat=True)) == {
            "billing_agent",
            "product_agent",
            "orders_agent",
            "support_agent",
        }
        assert profile.fallback_specialist.name == "support_agent"
        assert all(s.prompts.get(is_active=True).text for s in profile.specialists.all())
        names = set(profile.intents.values_list("name", flat=True))
        assert {
            "billing_invoice_explanation",
            "retail_order_tracking",
            "product_information",
            "support_request",
        } <= names
        assert profile.state_policies.count() == 1

    billing = telecom.intents.get(name="billing_invoice_explanation")
    assert billing.specialist.name == "billing_agent"
    assert billing.priority == 10
    assert set(billing.keywords.values_list("text", flat=True)) == {
        "fatura",
        "conta",
        "cobrança",
        "boleto",
        "vencimento",
        "segunda via",
        "contestar",
        "valor alto",
        "factura",
        "invoice",
    }
    assert set(billing.mcp_tools.values_list("name", flat=True)) == {"consultar_fatura", "consultar_pagamentos"}
    tracking = retail.intents.get(name="retail_order_tracking")
    assert (tracking.specialist.name, tracking.priority) == ("orders_agent", 20)
    assert set(tracking.mcp_tools.values_list("name", flat=True)) == {"consultar_pedido", "consultar_entrega"}

    policy = telecom.state_policies.get(state="WAITING_PAYMENT_CONFIRMATION")
    assert (policy.specialist.name, policy.intent.name) == ("billing_agent", "billing_payment_confirmation")
    assert not policy.intent.keywords.exists()
    payment = telecom.intents.get(name="billing_payment_request")
    assert payment.next_state == "WAITING_PAYMENT_CONFIRMATION"
    assert billing.next_state == ""

    telecom_server = McpServer.objects.get(name="telecom")
    assert (telecom_server.transport, telecom_server.endpoint, telecom_server.timeout) == (
        "streamable_http",
        "http://127.0.0.1:8100/mcp",
        10.0,
    )
    assert McpServer.objects.get(name="retail").endpoint == "http://127.0.0.1:8200/mcp"
    assert McpTool.objects.get(name="consultar_fatura").args_schema["required"] == ["msisdn"]
    assert "profiles: 4 created" in out


def test_seed_demo_loads_the_delegation_profile_with_its_coordinator():
    demo_seed()

    profile = AgentProfile.objects.get(agent_id="telecom_assistente")
    assert (profile.name, profile.routing_mode) == ("Assistente virtual Conecta Telecom", "router")
    assert profile.coordinator.name == profile.fallback_specialist.name == "assistente_virtual"
    tools = {s.name: set(s.allowed_tools.values_list("name", flat=True)) for s in profile.specialists.all()}
    assert tools == {
        "assistente_virtual": set(),
        "billing_agent": {"consultar_fatura", "consultar_pagamentos"},
        "orders_agent": {"consultar_pedido", "consultar_entrega"},
        "support_agent": {"consultar_pedido"},
    }
    assert (profile.max_handoffs_per_turn, profile.max_steps_per_agent, profile.block_ping_pong) == (3, 10, True)
    assert (profile.loop_window, profile.loop_max_repeats) == (5, 3)
    assert "era só isso" in profile.closing_words
    assert profile.confirmation_words == AgentProfile._meta.get_field("confirmation_words").get_default()

    prompts = {s.name: s.prompts.get(is_active=True).text for s in profile.specialists.all()}
    coordinator = prompts.pop("assistente_virtual")
    for needed in (
        "request_specialist_sub_conversation",
        "specialist_role",
        "initial_context",
        "[SYSTEM_NOTE:",
        "final_result",
        "last_user_message",
        "message_to_coordinator",
        "out_of_scope",
        "billing_agent",
        "orders_agent",
        "support_agent",
    ):
        assert needed in coordinator, needed
    for name, prompt in prompts.items():
        for needed in ("end_specialist_sub_conversation", "final_result", "last_user_message", "out_of_scope"):
            assert needed in prompt, (name, needed)
        assert "request_handoff" not in prompt

    intents = {i.name: i for i in profile.intents.all()}
    assert {name: i.specialist.name for name, i in intents.items()} == {
        "billing_invoice_explanation": "billing_agent",
        "retail_order_tracking": "orders_agent",
        "support_request": "support_agent",
    }
    assert {"fatura", "segunda via", "pix"} <= set(
        intents["billing_invoice_explanation"].keywords.values_list("text", flat=True)
    )
    assert set(intents["support_request"].mcp_tools.values_list("name", flat=True)) == {"consultar_pedido"}


def test_seed_demo_twice_changes_nothing():
    demo_seed()
    before, version = database_dump(), routing_version()

    out = StringIO()
    call_command("seed_demo", stdout=out)

    assert database_dump() == before
    assert routing_version() == version
    assert "changed nothing" in out.getvalue()


def test_the_demo_routes_the_seed_examples_and_the_confirmation_flow():
    from routing import snapshot

    demo_seed()
    telecom = snapshot.current().profiles["telecom_contas"].router
    retail = snapshot.current().profiles["retail_orders"].router

    assert telecom.route_sync("Minha fatura veio com valor alto").intent == "billing_invoice_explanation"
    assert telecom.route_sync("Preciso da segunda via").intent == "billing_invoice_explanation"
    asked = telecom.route_sync("Quero pagar minha fatura com pix")
    assert (asked.intent, asked.next_state) == ("billing_payment_request", "WAITING_PAYMENT_CONFIRMATION")
    confirmed = telecom.route_sync("sim", state=asked.next_state)
    assert (confirmed.method, confirmed.agent, confirmed.intent) == (
        "state",
        "billing_agent",
        "billing_payment_confirmation",
    )
    assert confirmed.mcp_tools == ["consultar_pagamentos"]
    assert telecom.route_sync("oi, tudo bem?").agent == "support_agent"

    assistente = snapshot.current().profiles["telecom_assistente"]
    assert assistente.coordinator == "assistente_virtual"
    assert assistente.router.route_sync("Preciso da segunda via").agent == "billing_agent"
    assert assistente.router.route_sync("Meu celular está sem sinal").agent == "support_agent"
    assert assistente.router.route_sync("oi, tudo bem?").agent == "assistente_virtual"

    asked = retail.route_sync("Quero cancelar o pedido P300")
    assert (asked.intent, asked.next_state) == ("retail_order_cancellation", "WAITING_CANCELLATION_CONFIRMATION")
    assert retail.route_sync("sim", state=asked.next_state).intent == "retail_cancellation_confirmation"
    assert retail.route_sync("Onde está meu pedido?").intent == "retail_order_tracking"


def test_the_demo_sends_line_problems_to_support_with_the_gated_diagnosis():
    from routing import snapshot

    demo_seed()
    telecom = snapshot.current().profiles["telecom_contas"].router
    profile = AgentProfile.objects.get(agent_id="telecom_contas")

    for message in (
        "Meu celular está sem sinal",
        "Minha internet lenta não melhora",  # "internet" is product_information's keyword too
        "Estou SEM INTERNET desde ontem",
        "O celular não conecta",
        "O chip não funciona",
    ):
        decision = telecom.route_sync(message)
        assert (decision.intent, decision.agent, decision.mcp_tools) == (
            "technical_support",
            "support_agent",
            ["diagnosticar_linha"],
        ), message
    assert telecom.route_sync("Qual plano de internet fibra vocês têm?").intent == "product_information"
    assert telecom.route_sync("Meu modem está com defeito").intent == "support_request"

    diagnosis = McpTool.objects.get(name="diagnosticar_linha")
    assert (diagnosis.server.name, diagnosis.needs_permission) == ("telecom", True)
    assert diagnosis.args_schema["required"] == ["msisdn"]
    support = profile.specialists.get(name="support_agent")
    assert set(support.allowed_tools.values_list("name", flat=True)) == {"consultar_pedido", "diagnosticar_linha"}
    others = profile.specialists.exclude(name="support_agent")
    assert not others.filter(allowed_tools__name="diagnosticar_linha").exists()


# -- idempotency, round trip, order ----------------------------------------------------------


def test_importing_the_same_files_twice_changes_nothing():
    run_import(*(DEMO_DIR / name for name in DEMO_FILES))
    before, version = database_dump(), routing_version()

    out = run_import(*(DEMO_DIR / name for name in DEMO_FILES))

    assert database_dump() == before  # no new prompt version, no row touched, no updated_at moved
    assert routing_version() == version
    assert "changed nothing" in out
    assert "specialists: 13 unchanged" in out


def test_an_import_invalidates_compiled_routing_once():
    from common.config_version import config_version_bump

    config_version_bump()  # the row exists: an import then adds exactly one
    version = routing_version()
    run_import(DEMO_DIR)
    assert routing_version() == version + 1


def test_an_export_imported_into_an_empty_database_exports_the_same_files(tmp_path):
    run_import(DEMO_DIR)
    call_command("export_config", str(tmp_path / "first"), stdout=StringIO())
    data, counts = config_export_data(), row_counts()

    empty_the_configuration()
    run_import(*sorted((tmp_path / "first").glob("*.yaml")))
    call_command("export_config", str(tmp_path / "second"), stdout=StringIO())

    first = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "first").iterdir()}
    second = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "second").iterdir()}
    assert set(first) == {"agents.yaml", "tools.yaml", "mcp_servers.yaml"} | {
        "routing.telecom_contas.yaml",
        "routing.retail_orders.yaml",
        "routing.telecom_assistente.yaml",
        "routing.finance_assistente.yaml",
    }
    assert first == second
    assert config_export_data() == data
    assert row_counts() == counts


def test_exporting_twice_gives_identical_files():
    run_import(DEMO_DIR)
    assert config_export() == config_export()


def test_the_order_of_the_files_does_not_matter(tmp_path):
    demo = demo_copy(tmp_path)
    reverse_order = [demo / name for name in reversed(DEMO_FILES)]

    run_import(*reverse_order)

    reference = config_export_data()
    empty_the_configuration()
    run_import(*(demo / name for name in DEMO_FILES))
    assert config_export_data() == reference


def test_a_directory_stands_for_its_yaml_files():
    out = run_import(DEMO_DIR)
    assert "Imported 7 file(s)" in out
    assert AgentProfile.objects.count() == 4


# -- upsert semantics ---------------------------------------------------------------------------


def test_a_changed_prompt_creates_a_new_active_version_and_keeps_the_old_one(small):
    run_import(small)
    billing = Specialist.objects.get(name="billing_agent")
    assert list(billing.prompts.values_list("version", "is_active")) == [(1, True)]

    write(small, "agents.yaml", AGENTS.replace("You explain invoices.", "You explain invoices, briefly."))
    out = run_import(small)

    versions = list(billing.prompts.order_by("version").values_list("version", "text", "is_active"))
    assert versions == [(1, "You explain invoices.", False), (2, "You explain invoices, briefly.", True)]
    assert "prompt versions: 1 created, 1 unchanged" in out
    assert Specialist.objects.get(name="support_agent").prompts.count() == 1

    run_import(small)
    assert billing.prompts.count() == 2


def test_keywords_of_an_imported_intent_are_replaced_by_the_files_list(small):
    write(
        small,
        "routing.yaml",
        """
        agent_id: telecom_contas
        intents:
          - name: billing_invoice_explanation
            agent: billing_agent
            keywords: [fatura, conta, boleto]
        """,
    )
    run_import(small)
    write(
        small,
        "routing.yaml",
        """
        agent_id: telecom_contas
        intents:
          - name: billing_invoice_explanation
            agent: billing_agent
            keywords: [Fatura, cobrança]
        """,
    )
    run_import(small)

    intent = Intent.objects.get(name="billing_invoice_explanation")
    assert sorted(intent.keywords.values_list("text", flat=True)) == ["Fatura", "cobrança"]


def test_entities_and_fields_the_files_leave_out_are_left_alone(small):
    run_import(small)
    other = IntentFactory(profile=AgentProfile.objects.get(), name="made_in_the_admin", keywords=["pix"])
    profile = AgentProfile.objects.get()
    profile.policy = "Written in the admin."
    profile.save(update_fields=["policy"])

    write(small, "agents.yaml", AGENTS.replace("Agente Telecom Contas", "Telecom"))
    run_import(small)

    profile.refresh_from_db()
    assert (profile.name, profile.policy) == ("Telecom", "Written in the admin.")
    assert Intent.objects.filter(pk=other.pk).exists()
    assert list(other.keywords.values_list("text", flat=True)) == ["pix"]


def test_the_seeds_own_file_shapes_are_accepted(tmp_path):
    """The first format, verbatim: shorthand args_schema, transport http and the *_path keys of agents.yaml."""
    write(tmp_path, "mcp_servers.yaml", SERVERS)
    write(tmp_path, "tools.yaml", TOOLS)
    write(
        tmp_path,
        "agents.yaml",
        """
        default_agent_id: telecom_contas
        agents:
          - agent_id: telecom_contas
            name: Agente Telecom Contas
            prompt_policy_path: ./config/agents/telecom_contas/prompt_policy.yaml
            routing_config_path: ./config/routing.yaml
            metadata:
              domain: telecom
        """,
    )
    report = config_import(sources=[Source(p.name, p.read_text()) for p in tmp_path.iterdir()])

    tool = McpTool.objects.get(name="consultar_fatura")
    assert tool.args_schema == {
        "type": "object",
        "properties": {"msisdn": {"type": "string"}, "invoice_id": {"type": "string"}},
    }
    assert McpServer.objects.get().transport == "streamable_http"
    assert f"agents.yaml:5: agents[0].prompt_policy_path: {m.WARNING_IGNORED_KEY}" in report.warnings


def test_routing_settings_may_be_given_in_agents_yaml_or_in_the_router_block(small):
    write(small, "agents.yaml", AGENTS.replace("Contas\n", "Contas\n        routing_mode: hybrid\n"))
    write(
        small, "routing.yaml", "agent_id: telecom_contas\nrouter:\n  fallback_agent: support_agent\n  threshold: 0.7\n"
    )
    run_import(small)

    profile = AgentProfile.objects.get()
    assert (profile.routing_mode, profile.llm_router_threshold) == ("hybrid", 0.7)
    assert profile.fallback_specialist.name == "support_agent"


DELEGATION = """
    agent_id: telecom_contas
    router:
      coordinator: support_agent
      loop_safety:
        max_handoffs_per_turn: 2
        max_steps_per_agent: 6
        block_ping_pong: false
        window: 4
        max_repeats: 2
"""

# Put before the profile's specialists in AGENTS.
WORDS = (
    "        confirmation_words: [sim, pode consultar]\n"
    "        denial_words: []\n"
    "        closing_words: [valeu, era só isso]\n"
    "        specialists:\n"
)


def test_the_coordinator_loop_safety_and_word_lists_are_imported_and_exported(small):
    write(small, "agents.yaml", AGENTS.replace("        specialists:\n", WORDS, 1))
    write(small, "routing.yaml", DELEGATION)
    run_import(small)

    profile = AgentProfile.objects.get()
    assert profile.coordinator.name == "support_agent"
    assert (profile.max_handoffs_per_turn, profile.max_steps_per_agent, profile.block_ping_pong) == (2, 6, False)
    assert (profile.loop_window, profile.loop_max_repeats) == (4, 2)
    assert (profile.confirmation_words, profile.denial_words) == (["sim", "pode consultar"], [])
    assert profile.closing_words == ["valeu", "era só isso"]

    data = config_export_data()
    exported = data["agents.yaml"]["agents"][0]
    assert (exported["confirmation_words"], exported["denial_words"]) == (["sim", "pode consultar"], [])
    assert exported["closing_words"] == ["valeu", "era só isso"]
    router = data["routing.telecom_contas.yaml"]["router"]
    assert router["coordinator"] == "support_agent"
    assert router["loop_safety"] == {
        "max_handoffs_per_turn": 2,
        "max_steps_per_agent": 6,
        "block_ping_pong": False,
        "window": 4,
        "max_repeats": 2,
    }

    before = database_dump()
    assert "changed nothing" in run_import(small)
    assert database_dump() == before

    write(small, "routing.yaml", "agent_id: telecom_contas\nrouter:\n  coordinator: null\n")
    run_import(small)
    profile.refresh_from_db()
    assert profile.coordinator is None
    assert config_export_data()["routing.telecom_contas.yaml"]["router"]["coordinator"] is None


def test_a_profile_that_keeps_no_running_summary_is_imported_and_exported_so(small, tmp_path):
    write(
        small,
        "agents.yaml",
        AGENTS.replace("        specialists:\n", "        summarise_conversations: false\n        specialists:\n", 1),
    )
    run_import(small)
    assert AgentProfile.objects.get().summarise_conversations is False
    call_command("export_config", str(tmp_path / "exported"), stdout=StringIO())
    assert config_export_data()["agents.yaml"]["agents"][0]["summarise_conversations"] is False

    empty_the_configuration()
    run_import(*sorted((tmp_path / "exported").glob("*.yaml")))

    assert AgentProfile.objects.get().summarise_conversations is False
    write(
        small,
        "agents.yaml",
        AGENTS.replace("        specialists:\n", "        summarise_conversations: 0\n        specialists:\n", 1),
    )
    assert "summarise_conversations" in refused(small)


def test_word_lists_a_file_leaves_out_keep_their_stored_words(small):
    run_import(small)
    profile = AgentProfile.objects.get()
    assert profile.closing_words == AgentProfile._meta.get_field("closing_words").get_default()
    profile.closing_words = ["valeu"]
    profile.save(update_fields=["closing_words"])

    run_import(small)

    profile.refresh_from_db()
    assert profile.closing_words == ["valeu"]


def test_a_coordinator_in_supervisor_mode_is_stored_with_a_warning(small):
    write(
        small, "routing.yaml", "agent_id: telecom_contas\nrouter:\n  mode: supervisor\n  coordinator: support_agent\n"
    )
    report = config_import(sources=[Source(str(p), p.read_text()) for p in sorted(small.iterdir())])

    assert AgentProfile.objects.get().coordinator.name == "support_agent"
    warning = m.WARNING_COORDINATOR_UNUSED.format(mode="supervisor")
    assert f"{small / 'routing.yaml'}:4: router.coordinator: {warning}" in report.warnings


def test_profile_option_names_the_profile_of_a_routing_file_without_agent_id(small, tmp_path):
    run_import(small)
    routing = write(
        tmp_path,
        "routing.yaml",
        """
        intents:
          - name: billing_invoice_explanation
            agent: billing_agent
            keywords: [fatura]
        """,
    )
    run_import(routing, profile="telecom_contas")
    assert Intent.objects.get().profile.agent_id == "telecom_contas"


def test_a_dry_run_reports_but_writes_nothing(small):
    counts, version = row_counts(), routing_version()
    out = run_import(small, dry_run=True)
    assert "would change" in out
    assert "profiles: 1 created" in out
    assert row_counts() == counts
    assert routing_version() == version


# -- refusals ------------------------------------------------------------------------------------


@pytest.fixture
def imported(small) -> Path:
    """``small`` imported; tests then write a bad file next to it."""
    run_import(small)
    return small


def assert_refused_without_writing(*paths, **options) -> str:
    before = database_dump()
    error = refused(*paths, **options)
    assert database_dump() == before
    assert "nothing was imported" in error
    return error


def test_an_unknown_specialist_is_refused_with_its_line(imported):
    routing = write(
        imported,
        "routing.yaml",
        """
        agent_id: telecom_contas
        intents:
          - name: billing_invoice_explanation
            agent: billing_agent
            keywords: [fatura]
          - name: support_request
            agent: support_agent
            keywords: [defeito]
          - name: bilingual
            agent: bilign_agent
            keywords: [english]
        """,
    )
    error = assert_refused_without_writing(routing)
    assert f"{routing}:10: intents[2].agent: unknown specialist 'bilign_agent' of profile telecom_contas" in error


def test_a_yaml_syntax_error_is_refused_with_its_line(imported):
    routing = write(imported, "routing.yaml", "agent_id: telecom_contas\nintents:\n  - name: x\n    agent: [oops\n")
    error = assert_refused_without_writing(imported / "tools.yaml", routing)
    assert f"{routing}:5: " in error
    assert "YAML syntax error" in error


def test_unknown_keys_are_refused(imported):
    routing = write(
        imported,
        "routing.yaml",
        """
        agent_id: telecom_contas
        intentz: []
        router:
          fallback: support_agent
        """,
    )
    error = assert_refused_without_writing(routing)
    assert f"{routing}:2: intentz: " + m.ERROR_UNKNOWN_TOP_KEY.split(";")[0].format(key="intentz") in error
    assert f"{routing}:4: router.fallback: unknown key 'fallback'" in error


def test_wrong_types_are_refused_with_every_problem_listed(imported):
    routing = write(
        imported,
        "routing.yaml",
        """
        agent_id: telecom_contas
        intents:
          - name: billing_invoice_explanation
            agent: billing_agent
            priority: high
            enabled: "yes"
            keywords: fatura
        """,
    )
    error = assert_refused_without_writing(routing)
    assert f"{routing}:5: intents[0].priority: must be an integer, not a string" in error
    assert f"{routing}:6: intents[0].enabled: must be true or false, not a string" in error
    assert f"{routing}:7: intents[0].keywords: must be a list, not a string" in error


def test_unknown_tools_servers_and_intents_are_refused(imported):
    tools = write(
        imported,
        "tools.yaml",
        TOOLS + "      consultar_pedido:\n        mcp_server: retail\n",
    )
    agents = write(imported, "agents.yaml", AGENTS.replace("tools: [consultar_fatura]", "tools: [consultar_faturas]"))
    routing = write(
        imported,
        "routing.yaml",
        """
        agent_id: telecom_contas
        state_policies:
          WAITING_PAYMENT_CONFIRMATION:
            agent: billing_agent
            intent: billing_payment_confirmation
        intents:
          - name: billing_invoice_explanation
            agent: billing_agent
            mcp_tools: [consultar_fatura, consultar_pagamentos]
        """,
    )
    error = assert_refused_without_writing(tools, agents, routing)
    assert f"{tools}:9: tools.consultar_pedido.mcp_server: unknown MCP server 'retail'" in error
    assert f"{agents}:9: agents[0].specialists[0].tools[0]: unknown MCP tool 'consultar_faturas'" in error
    assert (
        f"{routing}:5: state_policies.WAITING_PAYMENT_CONFIRMATION.intent: "
        "unknown intent 'billing_payment_confirmation' of profile telecom_contas"
    ) in error
    assert f"{routing}:9: intents[0].mcp_tools[1]: unknown MCP tool 'consultar_pagamentos'" in error


def test_an_invalid_json_schema_is_refused(imported):
    tools = write(
        imported,
        "tools.yaml",
        """
        tools:
          consultar_fatura:
            mcp_server: telecom
            args_schema:
              type: object
              properties:
                msisdn:
                  type: strin
          consultar_pagamentos:
            mcp_server: telecom
            args_schema:
              msisdn: text
          consultar_pedido:
            mcp_server: telecom
            args_schema:
              type: object
              properties: {}
              required: [order_id]
        """,
    )
    error = assert_refused_without_writing(tools)
    assert f"{tools}:8: tools.consultar_fatura.args_schema.properties.msisdn.type: Invalid JSON Schema at" in error
    assert f"{tools}:12: tools.consultar_pagamentos.args_schema.msisdn: unknown argument type 'text'" in error
    assert (
        f"{tools}:15: tools.consultar_pedido.args_schema: required names arguments that are not in properties" in error
    )


def test_duplicate_names_are_refused(imported):
    agents = write(
        imported,
        "agents.yaml",
        AGENTS + "          - name: billing_agent\n",
    )
    routing = write(
        imported,
        "routing.yaml",
        """
        agent_id: telecom_contas
        intents:
          - name: billing_invoice_explanation
            agent: billing_agent
          - name: billing_invoice_explanation
            agent: support_agent
        """,
    )
    more_tools = write(imported, "more_tools.yaml", TOOLS)
    error = assert_refused_without_writing(agents, routing, imported / "tools.yaml", more_tools)
    assert (
        f"{agents}:12: agents[0].specialists[2].name: duplicate specialist 'billing_agent' (first at {agents}:7)"
        in error
    )
    assert (
        f"{routing}:5: intents[1].name: duplicate intent 'billing_invoice_explanation' (first at {routing}:3)" in error
    )
    assert f"{more_tools}:2: tools.consultar_fatura: duplicate MCP tool 'consultar_fatura'" in error


def test_a_keyword_of_two_enabled_intents_in_the_file_is_refused_naming_the_other(imported):
    routing = write(
        imported,
        "routing.yaml",
        """
        agent_id: telecom_contas
        intents:
          - name: billing_invoice_explanation
            agent: billing_agent
            keywords: [fatura, conta]
          - name: support_request
            agent: support_agent
            keywords: [defeito, Conta]
          - name: old_billing
            agent: billing_agent
            enabled: false
            keywords: [fatura]
        """,
    )
    error = assert_refused_without_writing(routing)
    taken = ERROR_KEYWORD_TAKEN.format(keyword="Conta", intent="billing_invoice_explanation").rstrip(".")
    assert f"{routing}:8: intents[1].keywords[1]: {taken}" in error
    assert "old_billing" not in error  # a disabled intent may share keywords


def test_a_keyword_of_a_stored_intent_the_file_does_not_name_is_refused(imported):
    IntentFactory(profile=AgentProfile.objects.get(), name="made_in_the_admin", keywords=["cobrança"])
    routing = write(
        imported,
        "routing.yaml",
        """
        agent_id: telecom_contas
        intents:
          - name: billing_invoice_explanation
            agent: billing_agent
            keywords: [fatura, cobranca]
        """,
    )
    error = assert_refused_without_writing(routing)
    taken = ERROR_KEYWORD_TAKEN.format(keyword="cobranca", intent="made_in_the_admin").rstrip(".")
    assert f"{routing}:5: intents[0].keywords[1]: {taken}" in error


def test_a_keyword_moved_between_intents_in_one_file_is_accepted(imported):
    IntentFactory(profile=AgentProfile.objects.get(), name="old_owner", keywords=["boleto"])
    routing = write(
        imported,
        "routing.yaml",
        """
        agent_id: telecom_contas
        intents:
          - name: old_owner
            agent: support_agent
            keywords: [garantia]
          - name: billing_invoice_explanation
            agent: billing_agent
            keywords: [boleto]
        """,
    )
    run_import(routing)
    assert Keyword.objects.get(text="boleto").intent.name == "billing_invoice_explanation"


def test_a_routing_file_without_a_profile_is_refused(imported):
    routing = write(imported, "routing.yaml", "intents:\n  - name: x\n    agent: billing_agent\n")
    error = assert_refused_without_writing(routing)
    assert f"{routing}:1: intents: {m.ERROR_NO_PROFILE}" in error


def test_an_unknown_coordinator_is_refused_with_its_line(imported):
    routing = write(
        imported, "routing.yaml", DELEGATION.replace("coordinator: support_agent", "coordinator: suport_agent")
    )
    error = assert_refused_without_writing(routing)
    assert f"{routing}:3: router.coordinator: unknown specialist 'suport_agent' of profile telecom_contas" in error


def test_bad_loop_safety_limits_are_refused_with_their_lines(imported):
    routing = write(
        imported,
        "routing.yaml",
        """
        agent_id: telecom_contas
        router:
          coordinator: [support_agent]
          loop_safety:
            max_handoffs_per_turn: "3"
            max_steps_per_agent: 0
            block_ping_pong: "yes"
            window: 1
            max_repeat: 3
        """,
    )
    error = assert_refused_without_writing(routing)
    assert f"{routing}:3: router.coordinator: must be a string, not a list" in error
    assert f"{routing}:5: router.loop_safety.max_handoffs_per_turn: must be an integer, not a string" in error
    assert (
        f"{routing}:6: router.loop_safety.max_steps_per_agent: Ensure this value is greater than or equal to 1" in error
    )
    assert f"{routing}:7: router.loop_safety.block_ping_pong: must be true or false, not a string" in error
    assert f"{routing}:8: router.loop_safety.window: Ensure this value is greater than or equal to 2" in error
    assert f"{routing}:9: router.loop_safety.max_repeat: unknown key 'max_repeat'" in error


def test_more_repeats_than_the_window_holds_is_refused_with_its_line(imported):
    routing = write(
        imported,
        "routing.yaml",
        """
        agent_id: telecom_contas
        router:
          loop_safety:
            window: 2
            max_repeats: 3
        """,
    )
    error = assert_refused_without_writing(routing)
    assert f"{routing}:5: router.loop_safety.max_repeats: must not exceed window (2)" in error


def test_bad_word_lists_are_refused_with_their_lines(imported):
    words = (
        '        confirmation_words: [sim, "", yes]\n'
        "        denial_words: não\n"
        "        closing_words:\n"
        "          - valeu\n"
        "          - 3\n"
        "        specialists:\n"
    )
    agents = write(imported, "agents.yaml", AGENTS.replace("        specialists:\n", words, 1))
    error = assert_refused_without_writing(agents)
    assert f"{agents}:6: agents[0].confirmation_words[1]: must not be empty" in error
    assert f"{agents}:6: agents[0].confirmation_words[2]: {m.ERROR_WORD_BOOLEAN}" in error
    assert f"{agents}:7: agents[0].denial_words: must be a list, not a string" in error
    assert f"{agents}:10: agents[0].closing_words[1]: must be a string, not an integer" in error


def test_routing_for_an_unknown_profile_is_refused(imported):
    routing = write(imported, "routing.yaml", "intents:\n  - name: x\n    agent: billing_agent\n")
    error = assert_refused_without_writing(routing, profile="retail_orders")
    assert f"{routing}:1: intents: unknown profile 'retail_orders'" in error


def test_contradicting_routing_settings_are_refused(imported):
    agents = write(imported, "agents.yaml", AGENTS.replace("Contas\n", "Contas\n        routing_mode: hybrid\n"))
    routing = write(imported, "routing.yaml", "agent_id: telecom_contas\nrouter:\n  mode: supervisor\n")
    error = assert_refused_without_writing(agents, routing)
    assert (
        f"{routing}:3: router.mode: 'supervisor' conflicts with agents[0].routing_mode = 'hybrid' at {agents}:4"
        in error
    )


def test_model_validators_apply_to_imported_values(imported):
    servers = write(
        imported,
        "mcp_servers.yaml",
        """
        servers:
          telecom:
            transport: grpc
            endpoint: not a url
            timeout: 0
        """,
    )
    error = assert_refused_without_writing(servers)
    assert f"{servers}:3: servers.telecom.transport: 'grpc' is not one of" in error
    assert f"{servers}:4: servers.telecom.endpoint: Enter an http:// or https:// URL" in error
    assert f"{servers}:5: servers.telecom.timeout: Ensure this value is greater than or equal to 0.1" in error


def test_one_bad_file_keeps_the_good_ones_out_too(tmp_path):
    demo = demo_copy(tmp_path)
    routing = demo / "routing.retail_orders.yaml"
    routing.write_text(routing.read_text(encoding="utf-8").replace("agent: orders_agent", "agent: order_agent", 1))

    error = assert_refused_without_writing(demo)

    assert "unknown specialist 'order_agent' of profile retail_orders" in error
    assert sum(row_counts().values()) == 0


def test_server_endpoints_expand_environment_variables_with_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("MCP_TEST_HOST", "mcp-telecom")
    monkeypatch.delenv("MCP_TEST_PORT", raising=False)
    path = tmp_path / "servers.yaml"
    path.write_text(
        "servers:\n  telecom:\n    endpoint: http://${MCP_TEST_HOST:-127.0.0.1}:${MCP_TEST_PORT:-8100}/mcp\n"
    )

    run_import(path)

    assert McpServer.objects.get(name="telecom").endpoint == "http://mcp-telecom:8100/mcp"


def test_an_unset_variable_without_a_default_refuses_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("MCP_NOT_SET", raising=False)
    path = tmp_path / "servers.yaml"
    path.write_text("servers:\n  telecom:\n    endpoint: http://${MCP_NOT_SET}/mcp\n")

    error = refused(path)

    assert "servers.yaml:3" in error and "MCP_NOT_SET" in error
    assert not McpServer.objects.exists()


@pytest.mark.parametrize("variable", ["DJANGO_SECRET_KEY", "DATABASE_URL", "OTEL_EXPORTER_OTLP_HEADERS"])
def test_a_platform_secret_is_never_expanded_into_an_endpoint(tmp_path, monkeypatch, variable):
    monkeypatch.setenv(variable, "planted-secret-value")
    path = tmp_path / "servers.yaml"
    path.write_text(f"servers:\n  telecom:\n    endpoint: http://127.0.0.1:8100/mcp?k=${{{variable}}}\n")

    error = refused(path)

    assert "servers.yaml:3" in error and variable in error and "platform's own secrets" in error
    assert "planted-secret-value" not in error
    assert not McpServer.objects.exists()


# -- every declared profile setting (agents/profile_settings.py) -------------------------------------------------

# A valid value other than the default, by kind, and where the kind's would not do.
SETTING_VALUES = {"boolean": None, "integer": None, "number": 0.5, "text": "Written by the file.", "name": "Renamed"}
SETTING_VALUE_OF = {
    "language": "en",  # text a validator holds to the platform's languages
    "translations": {"es": {"name": "Agente de cuentas"}},
    "llm_temperature": 0.5,
    "llm_model": "small-model",
    "llm_base_url": "https://llm.example.com/v1",
    "llm_api_key_env": "TELECOM_API_KEY",
    "guardrails": {"max_input_chars": 900},
    "judges": {"min_score": 0.4},
    "confirmation_words": ["pode sim"],
    "denial_words": ["nunca"],
    "closing_words": ["até mais"],
    "cancel_words": ["esquece tudo"],
    "correction_words": ["foi mal, é"],
    "repeat_words": ["fala de novo"],
    "skip_words": ["passo essa"],
    "already_told_words": ["te falei antes"],
    "out_of_scope_examples": ["me conta uma piada"],
    "escalation": {"enabled": True, "teams": ["atendimento"]},
    "knowledge": {"tags": ["billing"], "min_score": 0.4},
    "examples_reliability": [{"low": 0.5, "high": 0.9, "routed": 4, "right": 3, "mean_score": 0.7}],
}


def setting_value(setting: ProfileSetting):
    if setting.name in SETTING_VALUE_OF:
        return SETTING_VALUE_OF[setting.name]
    if setting.kind == "boolean":
        return not setting.default
    if setting.kind == "integer":
        return setting.default + 1
    if setting.kind == "choice":
        return next(choice for choice in setting.choices if choice != setting.default)
    return SETTING_VALUES[setting.kind]


def settings_file(block: Block, value_of) -> tuple[str, dict[str, tuple[int, str]]]:
    """A file setting every setting of ``block`` its key holds to ``value_of(setting)``, and each setting's line and
    key path as a problem names them."""
    if block == "agents":
        lines, indent, prefix = ["agents:", "  - agent_id: telecom_contas"], "    ", "agents[0]."
    else:
        lines, indent, prefix = ["agent_id: telecom_contas", "router:"], "  ", "router."
    where, group = {}, None
    for path, setting in yaml_settings(block):
        if len(path) > 1 and path[0] != group:
            lines.append(f"{indent}{path[0]}:")
        group = path[0] if len(path) > 1 else None
        lines.append(f"{indent}{'  ' * (len(path) - 1)}{path[-1]}: {json.dumps(value_of(setting), ensure_ascii=False)}")
        where[setting.name] = (len(lines), prefix + ".".join(path))
    return "\n".join(lines) + "\n", where


def exported_at(files: dict, block: Block, path: tuple[str, ...]):
    data = files["agents.yaml"]["agents"][0] if block == "agents" else files["routing.telecom_contas.yaml"]["router"]
    for key in path:
        data = data[key]
    return data


def test_each_declared_setting_is_imported_from_its_key_and_exported_to_it(small):
    run_import(small)
    (small / "agents.yaml").write_text(settings_file("agents", setting_value)[0], encoding="utf-8")
    (small / "routing.yaml").write_text(settings_file("routing", setting_value)[0], encoding="utf-8")
    run_import(small)

    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    files = config_export_data()
    for block in ("agents", "routing"):
        for path, setting in yaml_settings(block):
            value = setting_value(setting)
            stored = getattr(profile, setting.name)
            if setting.kind == "escalation":
                assert EscalationSettings.from_json(stored) == EscalationSettings.from_json(value)
            elif setting.kind == "reliability":
                assert [{key: row[key] for key in value[0]} for row in stored] == value
            else:
                assert stored == value, setting.name
            if block == "agents" and setting.routing_yaml:
                continue  # exported in the routing file
            written = exported_at(files, block, path)
            if setting.kind == "escalation":
                assert EscalationSettings.from_json(written) == EscalationSettings.from_json(value)
            else:
                assert written == value, setting.name


def test_a_wrong_value_at_each_declared_key_is_refused_naming_its_file_line_and_key(imported):
    def wrong(setting: ProfileSetting):
        return 7 if setting.kind in ("words", "settings", "escalation", "reliability") else [7]

    for block in ("agents", "routing"):
        text, where = settings_file(block, wrong)
        path = write(imported, f"{block}.wrong.yaml", text)
        error = assert_refused_without_writing(path)
        for name, (line, key) in where.items():
            assert f"{path}:{line}: {key}: must be " in error, name


def test_a_specialists_remember_tool_is_imported_and_exported_only_when_given(small):
    write(
        small,
        "agents.yaml",
        AGENTS.replace("tools: [consultar_fatura]", "tools: [consultar_fatura]\n            remember_tool: true"),
    )
    run_import(small)

    specialists = {s.name: s.remember_tool for s in Specialist.objects.all()}
    assert specialists == {"billing_agent": True, "support_agent": False}
    written = {s["name"]: s for s in config_export_data()["agents.yaml"]["agents"][0]["specialists"]}
    assert written["billing_agent"]["remember_tool"] is True
    assert "remember_tool" not in written["support_agent"]

    write(
        small,
        "agents.yaml",
        AGENTS.replace("tools: [consultar_fatura]", "tools: [consultar_fatura]\n            remember_tool: sim"),
    )
    assert "remember_tool" in refused(small)
