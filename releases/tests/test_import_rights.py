"""An import applies only what its user may change in the admin's forms, on the admin's page (dry run included) and
on the command line: a profile's model endpoint, model and key variable need the operator's permission, MCP servers
and tools their own; the check is on what would change, so a routing editor re-importing the unchanged draft passes,
and anything else is refused whole with a ``file:line: path: message`` naming the permission. The draft zip writes
MCP endpoints masked, and a masked endpoint equal to the stored one's mask imports as unchanged."""

from __future__ import annotations

import io
import re
import zipfile
from io import StringIO

import pytest
import yaml
from auditlog.models import LogEntry
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from agents.models import MODEL_ENDPOINT_PERMISSION, AgentProfile, McpServer, McpTool
from releases.configio import messages
from releases.configio.exporter import HEADER, dump
from releases.versions import version_publish
from routing.documents import profile_documents
from routing.models import Keyword, RoutingVersion
from routing.selectors import live_version

pytestmark = pytest.mark.django_db

IMPORT_URL = "/admin/routing/intent/config/import/"
EVIL_HOST = "http://127.0.0.1:18240/v1"
SECRET_CANARY = "django-secret-canary-5d1e"
RETAIL_ENDPOINT = "http://mcpuser:mcp-pw-77c1@127.0.0.1:8200/mcp?token=mcp-token-3b9a"


def upload(name: str, text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode("utf-8"), content_type="application/x-yaml")


@pytest.fixture
def published(telecom, admin_user):
    McpServer.objects.filter(name="retail").update(endpoint=RETAIL_ENDPOINT)
    version_publish(profile=telecom, user=admin_user, note="first")
    return telecom


def draft_files(client, profile: AgentProfile) -> dict[str, str]:
    """Step 1 of the probe: the profile's draft as the zip the import page offers."""
    response = client.get(reverse("admin:routing_config_draft", args=[profile.pk]))
    assert response.status_code == 200
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        return {name: archive.read(name).decode("utf-8") for name in archive.namelist()}


def with_model(files: dict[str, str], **llm: str) -> dict[str, str]:
    """The draft with the profile's ``llm`` settings in agents.yaml replaced."""
    agents = yaml.safe_load(files["agents.yaml"])
    agents["agents"][0]["llm"].update(llm)
    return {**files, "agents.yaml": HEADER + dump(agents)}


def with_retail_endpoint(files: dict[str, str], endpoint: str) -> dict[str, str]:
    servers = yaml.safe_load(files["mcp_servers.yaml"])
    servers["servers"]["retail"]["endpoint"] = endpoint
    return {**files, "mcp_servers.yaml": HEADER + dump(servers)}


def with_keyword(files: dict[str, str], keyword: str) -> dict[str, str]:
    """The draft with ``keyword`` added to the intent retail_order_tracking (what an editor may change)."""
    routing = yaml.safe_load(files["routing.telecom_contas.yaml"])
    (intent,) = [intent for intent in routing["intents"] if intent["name"] == "retail_order_tracking"]
    intent["keywords"].append(keyword)
    return {**files, "routing.telecom_contas.yaml": HEADER + dump(routing)}


def post_import(client, files: dict[str, str], *, dry_run: bool = False):
    button = "_dry_run" if dry_run else "_import"
    return client.post(IMPORT_URL, {"yaml_files": [upload(n, t) for n, t in files.items()], button: "1"})


def problems_of(response) -> list[str]:
    assert response.status_code == 200
    return list(response.context.get("problems") or [])


def model_settings(profile: AgentProfile) -> tuple[str, str, str]:
    profile.refresh_from_db()
    return profile.llm_base_url, profile.llm_model, profile.llm_api_key_env


# -- the probe's steps, as a routing editor ---------------------------------------------------------------------


def test_an_editor_reimporting_the_unchanged_draft_zip_passes(editor_client, published):
    # What the admin and a server's sync store as they are, and the files write otherwise.
    McpTool.objects.filter(name="consultar_entrega").update(args_schema={}, description="Rastreia a entrega.\n")
    before = profile_documents()
    tools = list(McpTool.objects.order_by("pk").values())

    response = post_import(editor_client, draft_files(editor_client, published))

    assert problems_of(response) == []
    assert response.context["done"] and response.context["changed"] == []
    assert profile_documents() == before
    assert list(McpTool.objects.order_by("pk").values()) == tools


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry run", "import"])
def test_an_editor_may_not_import_a_profiles_model_endpoint_model_and_key_variable(
    editor_client, published, monkeypatch, dry_run
):
    monkeypatch.setenv("EVIL_API_KEY", "sk-evil")
    files = with_model(draft_files(editor_client, published), base_url=EVIL_HOST, model="evil-model")
    files = with_model(files, api_key_env="EVIL_API_KEY")
    before = profile_documents()

    problems = problems_of(post_import(editor_client, files, dry_run=dry_run))

    for key in ("base_url", "model", "api_key_env"):
        (problem,) = [p for p in problems if f"agents[0].llm.{key}:" in p]
        assert re.match(rf"agents\.yaml:\d+: agents\[0\]\.llm\.{key}: ", problem), problem
        assert problem.endswith(
            "editor may not change this: it needs the permissions agents.change_agentprofile and "
            f"{MODEL_ENDPOINT_PERMISSION}"
        )
    assert model_settings(published) == ("", "", "")
    assert profile_documents() == before


def test_an_editor_may_not_name_the_platforms_secret_as_the_model_key_and_nothing_is_sent(
    api, editor_client, published, scripted_llm, monkeypatch
):
    monkeypatch.setenv("DJANGO_SECRET_KEY", SECRET_CANARY)
    files = with_model(
        draft_files(editor_client, published),
        base_url=scripted_llm.base_url,
        api_key_env="DJANGO_SECRET_KEY",
        model="evil-model",
    )

    problems = problems_of(post_import(editor_client, files))  # step 2
    publish = editor_client.post(f"/admin/agents/agentprofile/{published.pk}/publish/", {"based_on": "1"})  # step 3
    answer = api.post(  # step 4
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": "Minha fatura veio alta", "session_id": "n1"}},
        format="json",
    )

    assert any("agents[0].llm.api_key_env" in p and "DJANGO_SECRET_KEY" in p for p in problems), problems
    assert publish.status_code in (200, 302)
    assert RoutingVersion.objects.filter(profile=published).count() == 1
    assert answer.status_code == 200
    assert f"Bearer {SECRET_CANARY}" not in scripted_llm.authorizations
    assert "evil-model" not in [request["model"] for request in scripted_llm.requests]
    assert model_settings(published) == ("", "", "")


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry run", "import"])
def test_an_editor_may_not_repoint_a_live_mcp_server(editor_client, published, dry_run):
    files = with_retail_endpoint(draft_files(editor_client, published), "http://127.0.0.1:18240/mcp")  # step 5

    problems = problems_of(post_import(editor_client, files, dry_run=dry_run))

    (problem,) = problems
    assert re.match(r"mcp_servers\.yaml:\d+: servers\.retail\.endpoint: ", problem), problem
    assert "agents.change_mcpserver" in problem
    assert McpServer.objects.get(name="retail").endpoint == RETAIL_ENDPOINT


def test_a_refused_import_writes_nothing_even_what_the_editor_may_change(editor_client, published):
    files = with_keyword(draft_files(editor_client, published), "modem")
    files = with_retail_endpoint(files, "http://127.0.0.1:18240/mcp")

    problems = problems_of(post_import(editor_client, files))

    assert problems and all("servers.retail.endpoint" in p for p in problems)
    assert not Keyword.objects.filter(text="modem").exists()


def test_an_editor_may_not_create_mcp_servers_tools_or_specialists(editor_client, published):
    files = {
        "mcp_servers.yaml": "servers:\n  evil:\n    endpoint: http://127.0.0.1:18240/mcp\n",
        "tools.yaml": "tools:\n  exfiltrar:\n    mcp_server: evil\n",
        "agents.yaml": "agents:\n  - agent_id: telecom_contas\n    specialists:\n      - name: spy_agent\n",
    }

    problems = problems_of(post_import(editor_client, files))

    assert any(p.startswith("mcp_servers.yaml:2: servers.evil: ") and "agents.add_mcpserver" in p for p in problems)
    assert any(p.startswith("tools.yaml:2: tools.exfiltrar: ") and "agents.add_mcptool" in p for p in problems)
    assert any("agents[0].specialists[0].name: " in p and "agents.add_specialist" in p for p in problems)
    assert not McpServer.objects.filter(name="evil").exists()


def test_a_user_who_may_change_profiles_but_not_their_model_imports_the_rest(client, editor, published):
    editor.user_permissions.add(Permission.objects.get(codename="change_agentprofile"))
    client.force_login(editor)
    files = with_model(draft_files(client, published), base_url=EVIL_HOST)
    agents = yaml.safe_load(files["agents.yaml"])
    agents["agents"][0]["description"] = "Contas e faturas"
    files["agents.yaml"] = dump(agents)

    (problem,) = problems_of(post_import(client, files))
    assert "agents[0].llm.base_url" in problem and MODEL_ENDPOINT_PERMISSION in problem
    assert "change_agentprofile" not in problem

    del agents["agents"][0]["llm"]
    assert problems_of(post_import(client, {"agents.yaml": dump(agents)})) == []
    published.refresh_from_db()
    assert published.description == "Contas e faturas"


# -- as an operator ----------------------------------------------------------------------------------------------


def test_an_operator_imports_a_model_endpoint_and_an_allowed_key_variable_publishes_and_it_answers(
    api, admin_client, published, scripted_llm, monkeypatch
):
    monkeypatch.setenv("BILLING_LLM_API_KEY", "sk-billing")
    monkeypatch.setenv("DJANGO_SECRET_KEY", SECRET_CANARY)
    files = with_model(
        draft_files(admin_client, published),
        base_url=scripted_llm.base_url,
        model="billing",
        api_key_env="BILLING_LLM_API_KEY",
    )

    assert problems_of(post_import(admin_client, files)) == []
    published_v2 = admin_client.post(f"/admin/agents/agentprofile/{published.pk}/publish/", {"based_on": "1"})
    answer = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": "Minha fatura veio alta", "session_id": "op"}},
        format="json",
    )

    assert model_settings(published) == (scripted_llm.base_url, "billing", "BILLING_LLM_API_KEY")
    assert published_v2.status_code == 302 and answer.status_code == 200
    assert {request["model"] for request in scripted_llm.requests} == {"billing"}
    assert set(scripted_llm.authorizations) == {"Bearer sk-billing"}


@pytest.mark.parametrize(
    "variable", ["DJANGO_SECRET_KEY", "DATABASE_URL", "OPENAI_API_KEY", "OTEL_EXPORTER_OTLP_HEADERS"]
)
def test_no_one_may_import_a_platform_secret_as_a_model_key_even_when_the_operator_allows_it(
    admin_client, published, settings, variable
):
    settings.LLM_API_KEY_ENV_ALLOWED = ["*_API_KEY", variable]
    files = with_model(draft_files(admin_client, published), api_key_env=variable)

    (problem,) = problems_of(post_import(admin_client, files))

    assert re.match(rf"agents\.yaml:\d+: agents\[0\]\.llm\.api_key_env: .*{variable}", problem), problem
    assert model_settings(published) == ("", "", "")


def test_an_operator_repoints_an_mcp_server(admin_client, published):
    files = with_retail_endpoint(draft_files(admin_client, published), "http://127.0.0.1:8201/mcp")

    assert problems_of(post_import(admin_client, files)) == []

    assert McpServer.objects.get(name="retail").endpoint == "http://127.0.0.1:8201/mcp"


def test_a_user_granted_the_operators_permissions_imports_what_they_allow(client, editor, published):
    editor.user_permissions.add(
        *Permission.objects.filter(codename__in=["change_agentprofile", MODEL_ENDPOINT_PERMISSION.split(".")[1]])
    )
    client.force_login(editor)

    files = with_model(draft_files(client, published), base_url=EVIL_HOST, model="billing")

    assert problems_of(post_import(client, files)) == []
    assert model_settings(published)[:2] == (EVIL_HOST, "billing")


# -- the draft zip: endpoints masked, masked endpoints unchanged ------------------------------------------------


def test_the_draft_zip_masks_mcp_endpoint_credentials_and_imports_back_unchanged(editor_client, published):
    files = draft_files(editor_client, published)

    assert "mcp-pw-77c1" not in files["mcp_servers.yaml"] and "mcp-token-3b9a" not in files["mcp_servers.yaml"]
    assert "http://***@127.0.0.1:8200/mcp?token=***" in files["mcp_servers.yaml"]
    assert problems_of(post_import(editor_client, files)) == []
    assert McpServer.objects.get(name="retail").endpoint == RETAIL_ENDPOINT


def test_a_profiles_endpoint_credentials_are_masked_in_the_draft_and_the_version_download(admin_client, published):
    AgentProfile.objects.filter(pk=published.pk).update(llm_base_url="https://llmuser:llm-pw-4e2a@llm.example/v1")
    version = version_publish(profile=published, note="own endpoint")

    files = draft_files(admin_client, published)
    download = admin_client.get(reverse("admin:routing_config_version", args=[version.pk])).content.decode()

    assert "llm-pw-4e2a" not in files["agents.yaml"] and "https://***@llm.example/v1" in files["agents.yaml"]
    assert "llm-pw-4e2a" not in download
    assert problems_of(post_import(admin_client, files)) == []
    assert model_settings(published)[0] == "https://llmuser:llm-pw-4e2a@llm.example/v1"


def test_a_masked_endpoint_that_is_not_the_stored_ones_mask_is_refused(admin_client, published):
    files = {"mcp_servers.yaml": "servers:\n  crm:\n    endpoint: http://***@crm.example/mcp?token=***\n"}

    (problem,) = problems_of(post_import(admin_client, files))

    assert problem.startswith("mcp_servers.yaml:3: servers.crm.endpoint: ") and messages.ERROR_MASKED in problem
    assert not McpServer.objects.filter(name="crm").exists()


# -- the command line ---------------------------------------------------------------------------------------------


def write_files(directory, files: dict[str, str]) -> list[str]:
    paths = []
    for name, text in files.items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        paths.append(str(path))
    return paths


def test_import_config_applies_the_permissions_of_its_user(tmp_path, editor, published, admin_client):
    files = with_retail_endpoint(draft_files(admin_client, published), "http://127.0.0.1:18240/mcp")
    files = with_model(files, base_url=EVIL_HOST)
    paths = write_files(tmp_path, files)

    for options in ({"user": "editor"}, {"user": "editor", "dry_run": True}):
        with pytest.raises(CommandError) as refused:
            call_command("import_config", *paths, stdout=StringIO(), stderr=StringIO(), **options)
        text = str(refused.value)
        assert re.search(r"mcp_servers\.yaml:\d+: servers\.retail\.endpoint: .*agents\.change_mcpserver", text), text
        assert re.search(rf"agents\.yaml:\d+: agents\[0\]\.llm\.base_url: .*{MODEL_ENDPOINT_PERMISSION}", text)
    assert McpServer.objects.get(name="retail").endpoint == RETAIL_ENDPOINT
    with pytest.raises(CommandError, match="Unknown user 'nobody'"):
        call_command("import_config", *paths, user="nobody", stdout=StringIO(), stderr=StringIO())

    call_command("import_config", *paths, stdout=StringIO(), stderr=StringIO())  # the operator, at the shell

    assert McpServer.objects.get(name="retail").endpoint == "http://127.0.0.1:18240/mcp"
    assert model_settings(published)[0] == EVIL_HOST


def test_import_config_refuses_a_platform_secret_as_the_model_key_for_the_operator_too(
    tmp_path, published, admin_client
):
    paths = write_files(tmp_path, with_model(draft_files(admin_client, published), api_key_env="METRICS_TOKEN"))

    with pytest.raises(CommandError) as refused:
        call_command("import_config", *paths, stdout=StringIO(), stderr=StringIO())

    assert re.search(r"agents\.yaml:\d+: agents\[0\]\.llm\.api_key_env: .*METRICS_TOKEN", str(refused.value))
    assert model_settings(published) == ("", "", "")


def test_import_config_records_its_user_as_the_author_of_what_it_publishes(tmp_path, editor, published, admin_client):
    paths = write_files(tmp_path, with_keyword(draft_files(admin_client, published), "modem"))

    call_command("import_config", *paths, user="editor", publish=True, stdout=StringIO(), stderr=StringIO())

    live = live_version(published)
    assert live is not None and (live.number, live.created_by) == (2, editor)
    assert LogEntry.objects.get_for_model(Keyword).get(object_repr__contains="modem").actor == editor
