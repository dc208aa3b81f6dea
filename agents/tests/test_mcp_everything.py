"""The MCP reference "everything" server (``@modelcontextprotocol/server-everything``, pinned in
``mcp_servers/everything/``, installed by ``scripts/mcp-everything-install``), run over streamable HTTP: material
nobody in the project wrote, each finding of the conformance review against it checked again."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from agents.mcp import STATUS_OK, Endpoint, tool_call
from agents.models import McpServer, McpTool
from agents.services import mcp_tools_sync

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "var/mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
START_HANG_GUARD_SECONDS = 60  # it listens within a second or two; this only stops a hung start


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def everything_url():
    node = shutil.which("node")
    if node is None or not SERVER.exists():
        pytest.fail(
            f"the MCP everything server is not installed (node: {node}; {SERVER}): scripts/mcp-everything-install"
        )
    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed at the end of the fixture
    process = subprocess.Popen(
        [node, str(SERVER), "streamableHttp"],
        env={"PATH": "/usr/bin:/bin", "PORT": str(port)},
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + START_HANG_GUARD_SECONDS
        while True:
            assert process.poll() is None, "the everything server exited while starting"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the everything server did not listen"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


@pytest.fixture
def everything(everything_url):
    return Endpoint("everything", everything_url, timeout=20)


def call(endpoint, tool, arguments=None, **options):
    result = asyncio.run(tool_call(endpoint=endpoint, tool=tool, arguments=arguments or {}, schema={}, **options))
    assert result.status == STATUS_OK, result.error
    return result


@pytest.mark.django_db
def test_its_sync_imports_every_tool_but_the_task_only_research_query(everything_url):
    server = McpServer.objects.create(name="everything", endpoint=everything_url, timeout=20)

    report = mcp_tools_sync(server=server)

    assert report.refused == ["simulate-research-query"]
    assert "get-tiny-image" in report.created and "trigger-long-running-operation" in report.created
    assert not McpTool.objects.filter(name="simulate-research-query").exists()


@pytest.mark.django_db  # an operator's call: a staff session with the debug right reads it
def test_its_image_is_a_link_the_faces_can_open(everything, staff_client):
    result = call(everything, "get-tiny-image")

    [image] = result.result["attachments"]
    assert image["mime_type"] == "image/png" and "data" not in image
    assert staff_client.get(image["url"]).content.startswith(b"\x89PNG")
    assert len(json.dumps(result.as_dict())) < image["bytes"]  # the bytes stay behind the link


def test_its_resource_links_arrive_as_links(everything):
    result = call(everything, "get-resource-links", {"count": 3})

    assert result.result["text"].startswith("Here are 3 resource links")
    links = result.result["links"]
    assert len(links) == 3 and all(link["uri"].startswith("demo://resource/dynamic/") for link in links)


def test_its_embedded_text_resource_arrives_as_text(everything):
    result = call(everything, "get-resource-reference", {"resourceType": "Text", "resourceId": 1})

    assert "Resource 1: This is a plaintext resource" in result.result


def test_its_long_operations_progress_is_passed_on(everything):
    seen = []

    async def progressed(progress, total, message):
        seen.append((progress, total))

    call(everything, "trigger-long-running-operation", {"duration": 1, "steps": 3}, on_progress=progressed)

    assert [progress for progress, _ in seen] == [1, 2, 3] and {total for _, total in seen} == {3}


@pytest.mark.django_db
def test_offline_a_product_intent_given_its_tools_with_no_argument_runs_none_unless_the_message_names_one(
    everything_url, api, telecom
):
    """The review's case: every tool of the server with no required argument on the product intent, and every
    product question waited for its 10-second long-running operation."""
    from common.config_version import config_version_bump

    server = McpServer.objects.create(name="everything", endpoint=everything_url, timeout=20)
    mcp_tools_sync(server=server)
    free = [tool for tool in McpTool.objects.filter(server=server) if not tool.args_schema.get("required")]
    assert {"get-tiny-image", "trigger-long-running-operation"} <= {tool.name for tool in free}
    telecom.specialists.get(name="product_agent").allowed_tools.add(*free)
    telecom.intents.get(name="product_information").mcp_tools.add(*free)
    config_version_bump()

    def ran(text: str) -> set[str]:
        body = api.post(
            "/api/gateway/message",
            {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": f"s-{len(text)}"}},
            format="json",
        ).json()
        assert body["metadata"]["route_decision"]["intent"] == "product_information"
        assert set(body["metadata"]["mcp_tools"]) == {tool.name for tool in free}  # all offered
        return {result["tool"] for result in body["metadata"]["mcp_results"]}

    assert ran("Qual plano de internet fibra vocês têm?") == set()
    # "demonstrar" shares "Demonstrates" with the long-running operation's description, not a word of its name.
    assert ran("Pode demonstrar como funciona o plano de internet?") == set()
    assert ran("Qual plano de internet tem? Mande a imagem da cobertura") == {"get-tiny-image"}
