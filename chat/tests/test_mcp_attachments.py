"""The attachments tool results link to (``/api/mcp/attachments/<key>``, chat/mcp_apis.py): absolute links in the
answers the faces return, and each attachment served to its own tenant only — its API keys, and the staff who may
chat as it or read its conversations (the chat page's browser, by its session)."""

from __future__ import annotations

import secrets

import pytest
from asgiref.sync import async_to_sync
from rest_framework.test import APIClient

from agents.mcp import Attachment, attachment_url, attachments_store
from tenants.models import TenantGrant
from tests.mcp_fixtures import ALL_CONTENT_CONTEXT

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lines")]

ASKED = "Minha fatura veio alta; mande também a imagem da cobertura"


def image_link(api: APIClient, **headers: str) -> tuple[dict, str]:
    response = api.post(
        "/api/gateway/message",
        {
            "agent_id": "telecom_contas",
            "payload": {"text": ASKED, "session_id": "s-att", "context": ALL_CONTENT_CONTEXT},
        },
        format="json",
        **headers,
    )
    assert response.status_code == 200, response.content
    body = response.json()
    (result,) = [result for result in body["metadata"]["mcp_results"] if result["tool"] == "tiny_image"]
    [image] = result["result"]["attachments"]
    return body, image["url"]


def test_an_answers_attachment_link_is_absolute_on_the_host_the_client_asked(api, settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "agents.example.com"]

    body, url = image_link(api, HTTP_HOST="agents.example.com")

    assert url.startswith("http://agents.example.com/api/mcp/attachments/")
    assert url in body["answer"]


def test_an_answers_attachment_link_is_on_the_public_url_when_one_is_configured(api, settings):
    settings.PUBLIC_URL = "https://chat.example.com/platform/"

    body, url = image_link(api)

    assert url.startswith("https://chat.example.com/platform/api/mcp/attachments/")
    assert url in body["answer"]


def test_an_attachment_is_served_to_its_tenants_key_and_to_no_other_tenants_nor_to_no_key(api, outsider_api, client):
    _, url = image_link(api)

    assert api.get(url).status_code == 200
    refused = outsider_api.get(url)
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"  # as an unknown key
    assert client.get(url).status_code == 401  # no key, no session: nothing says whose it is


def test_a_browser_session_gets_an_attachment_of_a_tenant_it_may_chat_as_and_not_of_another(
    api, client, tenant, outsider, django_user_model
):
    _, url = image_link(api)
    ours = django_user_model.objects.create_user("ours", password="x", is_staff=True)
    TenantGrant.objects.create(tenant=tenant, user=ours, act_for_tenant=True)
    theirs = django_user_model.objects.create_user("theirs", password="x", is_staff=True)
    TenantGrant.objects.create(tenant=outsider, user=theirs, act_for_tenant=True, read_conversations=True)

    client.force_login(theirs)
    assert client.get(url).status_code == 404
    client.force_login(ours)
    served = client.get(url)
    assert served.status_code == 200 and served["Content-Type"] == "image/png"


@pytest.mark.parametrize(
    ("mime_type", "name"), [("image/svg+xml", "coverage.svg"), ("text/html", '<b onload="x()">offer</b>.html')]
)
def test_an_attachment_a_browser_could_run_is_a_sandboxed_download(api, tenant, mime_type, name):
    """What a server sends is not the platform's to vouch for: a type that can hold script is never shown inline, and
    nothing served runs in the platform's origin (no sniffing, a sandbox with nothing allowed)."""
    data = b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(document.cookie)</script></svg>"
    kept = Attachment(secrets.token_urlsafe(24), "file", mime_type, name, data)
    async_to_sync(attachments_store)([kept], tenant.pk)

    served = api.get(attachment_url(kept.key))

    assert served.status_code == 200 and served.content == data
    assert served["Content-Type"] == "application/octet-stream"
    disposition = served["Content-Disposition"]
    assert disposition.startswith('attachment; filename="') and "<" not in disposition and '"x' not in disposition
    assert served["X-Content-Type-Options"] == "nosniff"
    assert served["Content-Security-Policy"] == "sandbox; default-src 'none'"
