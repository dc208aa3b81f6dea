"""Every kind of content a tool result may hold, from a real MCP server (``mcp_servers.all_content``) run as a
process: carried into the result a specialist reads, its bytes behind links, never dropped."""

from __future__ import annotations

import asyncio
import json

import pytest

from agents.mcp import STATUS_OK, Endpoint, tool_call
from agents.tool_summary import result_summary
from mcp_servers.all_content.server import EMBEDDED_TEXT, png_pixel

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def all_content(all_content_mcp):
    return Endpoint("all_content", all_content_mcp, timeout=10)


def call(endpoint, tool, arguments=None):
    result = asyncio.run(tool_call(endpoint=endpoint, tool=tool, arguments=arguments or {}, schema={}))
    assert result.status == STATUS_OK, result.error
    return result


@pytest.mark.django_db  # an operator's call: a staff session with the debug right reads it
def test_an_image_is_carried_as_a_link_to_its_bytes_not_as_base64(all_content, staff_client):
    result = call(all_content, "tiny_image")

    assert result.result["text"] == "The coverage map:"
    [image] = result.result["attachments"]
    assert (image["type"], image["mime_type"], image["bytes"]) == ("image", "image/png", len(png_pixel()))
    assert "data" not in image and "iVBOR" not in json.dumps(result.as_dict())  # no base64 PNG anywhere
    served = staff_client.get(image["url"])
    assert served.status_code == 200
    assert served["Content-Type"] == "image/png" and served["X-Content-Type-Options"] == "nosniff"
    assert served["Content-Security-Policy"] == "sandbox; default-src 'none'"  # shown inline, runs nothing
    assert served.content == png_pixel()


@pytest.mark.django_db  # an operator's call: a staff session with the debug right reads it
def test_audio_is_carried_as_a_link_to_its_bytes(all_content, staff_client):
    [audio] = call(all_content, "voice_note", {"msisdn": "5511999999999"}).result["attachments"]

    served = staff_client.get(audio["url"])
    assert (audio["type"], served["Content-Type"]) == ("audio", "audio/wav")
    assert served.content.startswith(b"RIFF") and len(served.content) == audio["bytes"]


def test_an_image_over_the_attachment_limit_is_named_not_kept(all_content, settings):
    settings.MCP_ATTACHMENT_MAX_BYTES = 1024

    [image] = call(all_content, "big_image").result["attachments"]

    assert "url" not in image
    assert image["bytes"] > 1024 and image["omitted"] == "over MCP_ATTACHMENT_MAX_BYTES (1024 bytes)"


def test_resource_links_are_carried_as_links_and_reach_the_offline_answer(all_content):
    result = call(all_content, "resource_links", {"msisdn": "5511999999999"})

    assert result.result["links"] == [
        {
            "uri": "https://docs.example.com/contract.pdf",
            "name": "contract.pdf",
            "title": "Contract",
            "description": "The signed contract",
            "mime_type": "application/pdf",
        },
        {"uri": "file:///invoices/2026-10.txt", "name": "invoice-2026-10", "mime_type": "text/plain"},
    ]
    summary = result_summary(result.result, "en")
    assert "Here are 2 resource links" in summary
    assert "- Contract: https://docs.example.com/contract.pdf" in summary
    assert "- invoice-2026-10: file:///invoices/2026-10.txt" in summary


def test_an_embedded_text_resource_is_carried_as_text(all_content):
    result = call(all_content, "embedded_text", {"msisdn": "5511999999999"})

    assert result.result == EMBEDDED_TEXT


@pytest.mark.django_db  # an operator's call: a staff session with the debug right reads it
def test_an_embedded_binary_resource_is_a_named_download(all_content, staff_client):
    [blob] = call(all_content, "embedded_blob", {"msisdn": "5511999999999"}).result["attachments"]

    assert (blob["type"], blob["name"], blob["mime_type"]) == ("file", "contract.txt.gz", "application/gzip")
    served = staff_client.get(blob["url"])
    assert served["Content-Type"] == "application/octet-stream"
    assert served["Content-Disposition"] == 'attachment; filename="contract.txt.gz"'
    assert served.content == b"\x1f\x8b" * 8


@pytest.mark.django_db  # an operator's call: a staff session with the debug right reads it
def test_an_unknown_attachment_is_a_404(staff_client):
    assert staff_client.get("/api/mcp/attachments/no-such-key").status_code == 404
