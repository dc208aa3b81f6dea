"""Configuration files in the reference framework's own shapes, imported as written and exported as read.

``tests/config_files/shared_routing/`` holds its four files: an ``agents.yaml`` of two profiles whose
``routing_config_path`` both name one ``routing.yaml`` (which has no ``agent_id``), a ``tools.yaml`` with the
``{arg: type}`` shorthand and ``mcp_servers.yaml`` endpoints written with ``${NAME:-default}``. They go on top of the
demo (whose profiles have the specialists those intents name): the shared routing file applies to each profile that
names it, from the command and from the admin, and the export writes the endpoints' templates back, never the
values the environment gave them.
"""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from agents.models import AgentProfile, McpServer
from agents.schemas import expand_args_schema
from releases.configio import Source, config_export, config_export_data, config_import
from releases.configio import messages as m
from releases.tests.test_config_io import DEMO_DIR, empty_the_configuration, refused, run_import
from routing.models import Intent, StatePolicy

pytestmark = pytest.mark.django_db

FILES = Path(__file__).resolve().parents[2] / "tests" / "config_files" / "shared_routing"
PROFILES = ("retail_orders", "telecom_contas")
TELECOM_TEMPLATE = "http://${MCP_TELECOM_HOST:-127.0.0.1}:${MCP_TELECOM_PORT:-8100}/mcp"
RETAIL_TEMPLATE = "${MCP_RETAIL_URL:-http://localhost:8200/mcp}"


@pytest.fixture
def demo(monkeypatch):
    """The demo's configuration, in an environment that gives the endpoints' variables values of its own."""
    monkeypatch.setenv("MCP_TELECOM_PORT", "18113")
    for name in ("MCP_TELECOM_HOST", "MCP_RETAIL_URL"):
        monkeypatch.delenv(name, raising=False)
    run_import(DEMO_DIR)


def read(name: str) -> dict:
    return yaml.safe_load((FILES / name).read_text(encoding="utf-8"))


def holds(exported: dict, written: dict) -> bool:
    """Every key ``written`` gives is in ``exported`` with its value (mappings compared the same way, lists of names
    as sets: the export sorts them)."""

    def same(value, other) -> bool:
        if isinstance(other, dict):
            return isinstance(value, dict) and holds(value, other)
        if isinstance(other, list):
            return isinstance(value, list) and sorted(value) == sorted(other)
        return value == other

    return all(key in exported and same(exported[key], value) for key, value in written.items())


def assert_the_shared_routing_is_every_profiles():
    routing = read("routing.yaml")
    for agent_id in PROFILES:
        profile = AgentProfile.objects.get(agent_id=agent_id)
        assert (profile.fallback_specialist.name, profile.llm_router_threshold) == ("support_agent", 0.6), agent_id
        policy = StatePolicy.objects.get(profile=profile, state="WAITING_PAYMENT_CONFIRMATION")
        assert policy.specialist.name == "billing_agent"
        for written in routing["intents"]:
            intent = Intent.objects.get(profile=profile, name=written["name"])
            assert intent.specialist.name == written["agent"]
            assert intent.priority == written["priority"]
            assert sorted(k.text for k in intent.keywords.all()) == sorted(written["keywords"])
            assert sorted(intent.mcp_tools.values_list("name", flat=True)) == sorted(written["mcp_tools"])


def test_the_command_applies_a_shared_routing_file_to_every_profile_that_names_it(demo):
    out = StringIO()
    call_command("import_config", str(FILES), stdout=out, stderr=(err := StringIO()))

    assert_the_shared_routing_is_every_profiles()
    assert "Draft of retail_orders:" in out.getvalue() and "Draft of telecom_contas:" in out.getvalue()
    assert "routing_config_path" not in err.getvalue()  # it was read, not ignored
    assert "prompt_policy_path: " + m.WARNING_IGNORED_KEY in err.getvalue()


def test_the_admin_applies_a_shared_routing_file_to_every_profile_that_names_it(demo, staff_client):
    uploads = [
        SimpleUploadedFile(path.name, path.read_bytes(), content_type="application/x-yaml")
        for path in sorted(FILES.glob("*.yaml"))
    ]

    response = staff_client.post("/admin/routing/intent/config/import/", {"yaml_files": uploads, "_import": "1"})

    page = response.content.decode()
    assert response.status_code == 200
    assert "Imported agents.yaml, mcp_servers.yaml, routing.yaml, tools.yaml into the drafts" in page
    assert "Draft of retail_orders" in page and "Draft of telecom_contas" in page
    assert_the_shared_routing_is_every_profiles()


def test_a_profile_option_other_than_the_profiles_naming_the_file_is_refused(demo):
    error = refused(FILES, profile="telecom_contas")

    assert (
        m.ERROR_PROFILE_NAMED.format(
            profiles="telecom_contas, retail_orders", where=str(FILES / "agents.yaml"), option="telecom_contas"
        )
        in error
    )


def test_a_routing_path_naming_no_file_of_the_import_leaves_that_routing_alone(demo):
    before = list(Intent.objects.filter(profile__agent_id="retail_orders").values_list("name", "priority"))

    report = config_import(sources=[Source("agents.yaml", (FILES / "agents.yaml").read_text())])

    assert (
        f"agents.yaml:6: agents[0].routing_config_path: {m.WARNING_ROUTING_PATH_ABSENT.format(name='routing.yaml')}"
        in (report.warnings)
    )
    assert list(Intent.objects.filter(profile__agent_id="retail_orders").values_list("name", "priority")) == before


def test_two_files_a_routing_path_may_name_alike_are_refused(demo, tmp_path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(FILES / "routing.yaml", tmp_path / folder / "routing.yaml")

    error = refused(FILES / "agents.yaml", tmp_path / "a" / "routing.yaml", tmp_path / "b" / "routing.yaml")

    assert "agents[0].routing_config_path: './config/routing.yaml' may name any of" in error
    assert "agents[1].routing_config_path" in error


def test_the_export_writes_the_endpoints_templates_not_what_they_expanded_to(demo):
    run_import(FILES / "mcp_servers.yaml")
    assert McpServer.objects.get(name="telecom").endpoint == "http://127.0.0.1:18113/mcp"

    servers = yaml.safe_load(config_export()["mcp_servers.yaml"])["servers"]

    assert (servers["telecom"]["endpoint"], servers["retail"]["endpoint"]) == (TELECOM_TEMPLATE, RETAIL_TEMPLATE)
    assert "18113" not in config_export()["mcp_servers.yaml"]


def test_a_round_trip_keeps_every_written_value_and_a_second_export_is_byte_identical(demo, tmp_path):
    run_import(FILES)
    call_command("export_config", str(tmp_path / "first"), stdout=StringIO())
    exported = config_export_data()

    # What the files wrote is in the export as written, after the normalisation docs/configuration.md states.
    for name, server in read("mcp_servers.yaml")["servers"].items():
        assert holds(exported["mcp_servers.yaml"]["servers"][name], {**server, "transport": "streamable_http"})
    for name, tool in read("tools.yaml")["tools"].items():
        expanded = {**tool, "args_schema": expand_args_schema(tool["args_schema"])}
        assert holds(exported["tools.yaml"]["tools"][name], expanded)
    agents = {entry["agent_id"]: entry for entry in exported["agents.yaml"]["agents"]}
    for entry in read("agents.yaml")["agents"]:
        assert holds(agents[entry["agent_id"]], {key: entry[key] for key in ("agent_id", "name", "metadata")})
    routing = read("routing.yaml")
    for agent_id in PROFILES:
        written = exported[f"routing.{agent_id}.yaml"]
        assert holds(written["router"], routing["router"])
        assert written["state_policies"]["WAITING_PAYMENT_CONFIRMATION"]["agent"] == "billing_agent"
        intents = {intent["name"]: intent for intent in written["intents"]}
        for intent in routing["intents"]:
            assert holds(intents[intent["name"]], intent), (agent_id, intent["name"])

    empty_the_configuration()
    run_import(*sorted((tmp_path / "first").glob("*.yaml")))
    call_command("export_config", str(tmp_path / "second"), stdout=StringIO())

    first = {path.name: path.read_bytes() for path in (tmp_path / "first").iterdir()}
    second = {path.name: path.read_bytes() for path in (tmp_path / "second").iterdir()}
    assert first == second
    assert yaml.safe_load(first["mcp_servers.yaml"])["servers"]["telecom"]["endpoint"] == TELECOM_TEMPLATE


def test_a_template_that_writes_a_secret_is_exported_masked_and_imports_back_unchanged(tmp_path, monkeypatch):
    monkeypatch.delenv("CRM_HOST", raising=False)
    monkeypatch.setenv("CRM_TOKEN", "t0k3n")
    (tmp_path / "mcp_servers.yaml").write_text(
        "servers:\n"
        "  crm:\n    endpoint: https://bot:pa55@${CRM_HOST:-crm.example}/mcp\n"
        "  billing:\n    endpoint: https://billing.example/mcp?token=${CRM_TOKEN}\n"
    )
    run_import(tmp_path / "mcp_servers.yaml")

    text = config_export()["mcp_servers.yaml"]
    servers = yaml.safe_load(text)["servers"]

    assert servers["crm"]["endpoint"] == "https://***@crm.example/mcp"
    assert servers["billing"]["endpoint"] == "https://billing.example/mcp?token=${CRM_TOKEN}"  # a name, not a value
    assert "pa55" not in text and "t0k3n" not in text
    stored = list(McpServer.objects.order_by("name").values())
    (tmp_path / "again.yaml").write_text(text)
    assert "changed nothing" in run_import(tmp_path / "again.yaml")
    assert list(McpServer.objects.order_by("name").values()) == stored
