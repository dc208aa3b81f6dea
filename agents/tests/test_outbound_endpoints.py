"""The operators' addresses under the outbound policy (common/outbound.py): an MCP server's endpoint, a remote
backend's and a profile's model endpoint, an external desk's URL are refused on an internal address when saved, in
the admin and by YAML import, naming the field; and nothing is sent to one stored before (the transports' check).

Real servers on loopback: the example MCP server, the scripted OpenAI-compatible server, a plain receiver. The suite
allows loopback (tests/suite_environment.py): each test here says what the operator allows."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import async_to_sync

from agents import mcp
from agents.models import AgentProfile, ExternalDesk, McpServer, RemoteBackend
from common.outbound import ERROR_INTERNAL
from releases.configio.importer import ConfigImportError, config_import
from releases.configio.source import Source
from tests.adminkit import add_url, change_url, error_messages, form_data
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.django_db

INTERNAL = [
    "http://169.254.169.254/latest/meta-data/",
    "http://127.0.0.1:18511/mcp",
    "http://localhost:18510/api",
    "http://[::1]:8100/mcp",
    "http://2130706433:8100/mcp",
    "http://10.0.0.7:8100/mcp",
]


@pytest.fixture(params=["mcp server", "remote backend", "profile", "external desk"])
def holder(request, telecom):
    """An operator's object holding an address the platform sends requests to, and that field's name."""
    if request.param == "mcp server":
        return McpServer.objects.create(name="crm", endpoint="https://tools.example/mcp"), "endpoint"
    if request.param == "remote backend":
        backend = RemoteBackend.objects.create(
            profile=telecom, name="crm_backend", base_url="https://tools.example", api_key="sk-x", remote_agent_id="crm"
        )
        return backend, "base_url"
    if request.param == "external desk":
        desk = ExternalDesk.objects.create(name="acme_desk", url="https://desk.example/hooks", secret="s" * 20)
        return desk, "url"
    AgentProfile.objects.filter(pk=telecom.pk).update(llm_base_url="https://llm.example/v1")
    telecom.refresh_from_db()
    return telecom, "llm_base_url"


@pytest.mark.parametrize("url", INTERNAL)
def test_an_operator_cannot_save_an_internal_address_in_the_admin(staff_client, holder, nothing_allowed, url):
    obj, field = holder
    stored = getattr(obj, field)
    data = form_data(staff_client.get(change_url(obj)))
    data[field] = url

    answer = staff_client.post(change_url(obj), data)

    assert answer.status_code == 200, "saved"
    assert answer.context["adminform"].form.errors[field] == [ERROR_INTERNAL]
    obj.refresh_from_db()
    assert getattr(obj, field) == stored


@pytest.mark.sqlite_too  # the operators' admin pages, on the embedded default's database too
def test_an_internal_address_is_refused_until_the_operator_allows_it(staff_client, holder, nothing_allowed):
    obj, field = holder
    data = form_data(staff_client.get(change_url(obj)))
    data[field] = "http://10.0.0.7:8100/mcp"

    refused = staff_client.post(change_url(obj), data)
    nothing_allowed.OUTBOUND_ALLOWED = ["10.0.0.0/8"]
    saved = staff_client.post(change_url(obj), data)

    assert refused.status_code == 200 and ERROR_INTERNAL in error_messages(refused)
    assert saved.status_code == 302, error_messages(saved)
    obj.refresh_from_db()
    assert getattr(obj, field) == "http://10.0.0.7:8100/mcp"


def test_a_new_desk_on_the_metadata_service_is_refused(staff_client, nothing_allowed):
    data = form_data(staff_client.get(add_url(ExternalDesk)))
    data.update({"name": "meta_desk", "url": "http://169.254.169.254/latest/", "secret": "s" * 20, "timeout": "3"})

    answer = staff_client.post(add_url(ExternalDesk), data)

    assert answer.status_code == 200 and ERROR_INTERNAL in error_messages(answer)
    assert not ExternalDesk.objects.filter(name="meta_desk").exists()


def imported(text: str, name: str) -> str:
    """What the import said of ``text`` (a file called ``name``): its problems, or "" when it went in."""
    try:
        config_import(sources=[Source(name, text)])
    except ConfigImportError as exc:
        return "\n".join(exc.messages)
    return ""


def test_the_yaml_import_refuses_an_internal_mcp_endpoint_and_model_endpoint_naming_the_key(telecom, nothing_allowed):
    servers = "servers:\n  crm:\n    transport: streamable_http\n    endpoint: http://169.254.169.254/mcp\n"
    said = imported(servers, "mcp_servers.yaml")
    assert ERROR_INTERNAL.rstrip(".") in said and "endpoint" in said
    assert not McpServer.objects.filter(name="crm").exists()

    agents = "agents:\n  - agent_id: telecom_contas\n    llm:\n      base_url: http://localhost:11434/v1\n"
    said = imported(agents, "agents.yaml")
    assert ERROR_INTERNAL.rstrip(".") in said and "base_url" in said
    telecom.refresh_from_db()
    assert telecom.llm_base_url == ""


def test_an_mcp_server_stored_on_an_internal_address_gets_no_request(telecom, nothing_allowed):
    receiver = Receiver()
    try:
        endpoint = mcp.Endpoint(name="crm", url=f"http://127.0.0.1:{receiver.port}/mcp", timeout=3.0)
        with pytest.raises(mcp.McpUnavailable, match="outbound policy"):
            mcp.tools_list_sync(endpoint)
        result = async_to_sync(mcp.tool_call)(endpoint=endpoint, tool="anything", arguments={}, schema={})
    finally:
        receiver.stop()
    assert result.status == mcp.STATUS_UNAVAILABLE and "outbound policy" in result.error
    assert receiver.requests == []


def test_the_example_mcp_server_answers_when_the_operator_allows_its_port(telecom, mcp_servers, nothing_allowed):
    url = mcp_servers["telecom"]
    port = url.rsplit(":", 1)[1].split("/")[0]
    nothing_allowed.OUTBOUND_ALLOWED = [f"127.0.0.1:{port}"]
    assert mcp.tools_list_sync(mcp.Endpoint(name="telecom", url=url, timeout=10.0))


def ask(profile: AgentProfile) -> str:
    """One answer from ``profile``'s model (the provider the platform picks for it): its text, or the error."""
    from agents.llm import provider_for

    async def answer() -> str:
        try:
            return str((await provider_for(profile).client().ainvoke("Olá")).content)
        except Exception as exc:  # noqa: BLE001 — what the call failed with is what the test reads
            causes: list[BaseException] = []
            error: BaseException | None = exc
            while error is not None and len(causes) < 10:  # the clients wrap it: langchain's, openai's, httpx2's
                causes.append(error)
                error = error.__cause__ or error.__context__
            return " <- ".join(f"{type(error).__name__}: {error}" for error in causes)

    return asyncio.run(answer())


def test_a_profiles_model_endpoint_stored_on_an_internal_address_gets_no_request(
    telecom, scripted_llm, nothing_allowed
):
    AgentProfile.objects.filter(pk=telecom.pk).update(llm_base_url=scripted_llm.base_url, llm_model="scripted-model")
    telecom.refresh_from_db()
    scripted_llm.reply("should never be asked")

    said = ask(telecom)

    assert "outbound policy" in said and scripted_llm.requests == []


def test_the_platforms_own_model_endpoint_set_in_the_environment_is_allowed_for_its_client(
    telecom, scripted_llm, nothing_allowed
):
    scripted_llm.reply("Olá! Em que posso ajudar?")  # OPENAI_BASE_URL is the scripted server, on loopback

    assert ask(telecom) == "Olá! Em que posso ajudar?"
    assert len(scripted_llm.requests) == 1
