"""A specialist's turn with the all-content server's tools (``mcp_servers.all_content``, a real process) beside the
telecom fixture's: what the offline model calls, and what reaches the answer."""

from __future__ import annotations

import pytest
from django.test import AsyncClient

from agents.models import McpTool
from common.config_version import config_version_bump
from mcp_servers.all_content.server import DOTTED, PROGRESS_STEPS
from tests.mcp_fixtures import ALL_CONTENT_CONTEXT as CONTEXT
from tests.mcp_fixtures import NO_ARGUMENT_TOOLS
from tests.streaming import run, sse_events

pytestmark = pytest.mark.django_db(transaction=True)  # the stream's turn runs on the ASGI app's threads


def send(api, text, *, context=CONTEXT):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": "s-all", "context": context}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def called(body) -> dict[str, dict]:
    return {result["tool"]: result for result in body["metadata"]["mcp_results"]}


@pytest.mark.usefixtures("lines")
def test_offline_a_tool_with_no_required_argument_is_not_called_when_the_message_does_not_ask_for_it(api):
    body = send(api, "Minha fatura veio alta")

    results = called(body)
    assert set(body["metadata"]["mcp_tools"]) >= NO_ARGUMENT_TOOLS  # offered
    assert not NO_ARGUMENT_TOOLS & set(results)  # not called
    assert {"consultar_fatura", "resource_links", "lines__files_read"} <= set(results)


@pytest.mark.usefixtures("lines")
def test_offline_a_tool_with_no_required_argument_is_called_when_the_message_asks_for_what_it_does(api):
    body = send(api, "Minha fatura veio alta; e qual o status da rede (network)?")

    results = called(body)
    assert results["server_status"]["status"] == "ok"
    assert "long_operation" not in results


@pytest.mark.usefixtures("lines")
def test_a_turns_answer_carries_a_dotted_tools_result_and_the_links_and_images_of_results(api):
    body = send(api, "Minha fatura veio alta; mande também a imagem da cobertura")

    results = called(body)
    assert results["lines__files_read"]["status"] == "ok"
    assert results["lines__files_read"]["result"] == {"result": "contents of contract.txt"}
    assert "https://docs.example.com/contract.pdf" in body["answer"]  # a resource link, in the offline answer
    [image] = results["tiny_image"]["result"]["attachments"]
    assert image["url"] in body["answer"]
    assert api.get(image["url"])["Content-Type"] == "image/png"  # the tenant's own key
    assert DOTTED not in body["metadata"]["mcp_tools"]  # the model sees the platform's name


@pytest.mark.usefixtures("lines")
def test_a_tools_progress_notifications_stream_as_tool_call_events_between_its_start_and_end(tenant_key):
    async def go():
        response = await AsyncClient().post(
            "/api/gateway/message/stream",
            {
                "agent_id": "telecom_contas",
                "payload": {
                    "text": "Minha fatura: qual o progresso da operação?",
                    "session_id": "s-progress",
                    "context": CONTEXT,
                },
            },
            content_type="application/json",
            headers={"Authorization": f"Bearer {tenant_key.raw}"},
        )
        assert response.status_code == 200
        return b"".join([chunk async for chunk in response.streaming_content])

    events = sse_events(run(go()))
    phases = [data for event, data in events if event == "tool_call" and data["tool"] == "long_operation"]

    assert [data["phase"] for data in phases] == ["started", *["progress"] * PROGRESS_STEPS, "finished"]
    assert [(data["progress"], data["total"]) for data in phases[1:-1]] == [(1, 3), (2, 3), (3, 3)]
    assert phases[1]["message"] == "step 1 of 3" and phases[1]["server"] == "lines"
    assert events[-1][0] == "done"


@pytest.fixture
def network_intent(lines, telecom):
    """An intent whose only tool is the all-content server's ``server_status`` (no argument), hit by its keyword."""
    from tests.factories import IntentFactory

    status = McpTool.objects.get(server=lines, name="server_status")
    support = telecom.specialists.get(name="support_agent")
    support.allowed_tools.add(status)
    IntentFactory(profile=telecom, name="network_check", specialist=support, keywords=["sem sinal"], tools=[status])
    config_version_bump()


@pytest.mark.usefixtures("network_intent")
def test_offline_an_intent_that_names_its_one_tool_with_no_argument_calls_it_though_the_message_shares_no_word(api):
    body = send(api, "Estou sem sinal desde ontem")

    assert body["metadata"]["route_decision"]["intent"] == "network_check"
    assert called(body)["server_status"]["status"] == "ok"


@pytest.mark.usefixtures("lines")
def test_offline_a_word_of_a_tools_description_alone_does_not_call_one_of_the_intents_many_tools(api):
    # "progresso" shares "progress" with long_operation's description, not a word of its name: an unrelated ask.
    body = send(api, "Minha fatura veio alta; e o progresso da minha portabilidade?")

    assert set(body["metadata"]["mcp_tools"]) >= NO_ARGUMENT_TOOLS  # offered: the intent names several
    assert not NO_ARGUMENT_TOOLS & set(called(body))
