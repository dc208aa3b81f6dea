"""Addresses with credentials in the admin (MCP servers, remote backends, a profile's model endpoint): shown masked in
lists, forms and read-only pages; write-only — a form posted back with the masked address keeps the stored
credentials, a new address replaces them, and stored credentials never follow an address to another host."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from agents.models import AgentProfile, McpServer, RemoteBackend
from common.endpoints import ERROR_MASK_ELSEWHERE
from tests.adminkit import change_url, changelist_url, error_messages, form_data

pytestmark = pytest.mark.django_db

SECRETS = ("s3cret-user", "s3cret-pa55", "s3cret-t0ken")
STORED = "https://s3cret-user:s3cret-pa55@tools.example:8443/mcp?token=s3cret-t0ken&region=eu"
SHOWN = "https://***@tools.example:8443/mcp?token=***&region=***"


@pytest.fixture(params=["mcp server", "remote backend", "profile"])
def holder(request, telecom):
    """An object whose address holds credentials, and the name of that field."""
    if request.param == "mcp server":
        return McpServer.objects.create(name="crm", endpoint=STORED), "endpoint"
    if request.param == "remote backend":
        backend = RemoteBackend.objects.create(
            profile=telecom, name="crm_backend", base_url=STORED, api_key="sk-x", remote_agent_id="crm"
        )
        return backend, "base_url"
    AgentProfile.objects.filter(pk=telecom.pk).update(llm_base_url=STORED)
    telecom.refresh_from_db()
    return telecom, "llm_base_url"


def shows_no_secret(html: str) -> bool:
    return not any(secret in html for secret in SECRETS)


def test_the_list_and_the_change_page_show_the_address_masked(staff_client, holder):
    obj, field = holder
    listing = staff_client.get(changelist_url(type(obj))).content.decode()
    page = staff_client.get(change_url(obj))

    assert shows_no_secret(listing) and shows_no_secret(page.content.decode())
    assert page.context["adminform"].form[field].value() == SHOWN
    if type(obj) is not AgentProfile:  # the profiles' list has no address column
        assert SHOWN.replace("&", "&amp;") in listing


def test_a_change_that_sends_the_masked_address_back_keeps_the_stored_credentials(staff_client, holder):
    obj, field = holder
    data = form_data(staff_client.get(change_url(obj)))
    assert data[field] == SHOWN
    data["description"] = "changed, the address left as shown"

    response = staff_client.post(change_url(obj), data)

    assert response.status_code == 302, error_messages(response)
    obj.refresh_from_db()
    assert (getattr(obj, field), obj.description) == (STORED, "changed, the address left as shown")


def test_a_new_path_keeps_the_masked_credentials_and_a_new_address_replaces_them(staff_client, holder):
    obj, field = holder
    data = form_data(staff_client.get(change_url(obj)))

    data[field] = "https://***@tools.example:8443/v2/mcp?token=***&region=us"
    assert staff_client.post(change_url(obj), data).status_code == 302
    obj.refresh_from_db()
    assert (
        getattr(obj, field) == "https://s3cret-user:s3cret-pa55@tools.example:8443/v2/mcp?token=s3cret-t0ken&region=us"
    )

    data[field] = "https://other:new-pa55@tools.example/mcp"
    assert staff_client.post(change_url(obj), data).status_code == 302
    obj.refresh_from_db()
    assert getattr(obj, field) == "https://other:new-pa55@tools.example/mcp"


def test_masked_credentials_sent_with_another_host_are_refused_and_nothing_is_saved(staff_client, holder):
    obj, field = holder
    data = form_data(staff_client.get(change_url(obj)))
    data[field] = "https://***@attacker.example/mcp?token=***"

    response = staff_client.post(change_url(obj), data)

    assert response.status_code == 200
    assert ERROR_MASK_ELSEWHERE in error_messages(response)
    assert shows_no_secret(response.content.decode())
    obj.refresh_from_db()
    assert getattr(obj, field) == STORED


def test_a_search_by_a_secret_finds_nothing(staff_client, holder):
    obj, _ = holder
    found = staff_client.get(changelist_url(type(obj)), {"q": "s3cret-pa55"})

    assert found.context["cl"].result_count == 0


def test_someone_who_may_only_view_sees_the_address_masked(client, django_user_model, holder):
    obj, _ = holder
    viewer = django_user_model.objects.create_user("viewer", password="viewer-password", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename=f"view_{obj._meta.model_name}"))
    client.force_login(viewer)

    page = client.get(change_url(obj))

    assert page.status_code == 200
    html = page.content.decode()
    assert shows_no_secret(html) and SHOWN.replace("&", "&amp;") in html


def test_an_mcp_servers_imported_template_shows_and_an_address_typed_here_replaces_it(
    staff_client, telecom, monkeypatch
):
    monkeypatch.delenv("MCP_TELECOM_HOST", raising=False)
    server = McpServer.objects.get(name="telecom")
    server.endpoint_template = "http://${MCP_TELECOM_HOST:-127.0.0.1}:8100/mcp"
    server.save(update_fields=["endpoint_template"])
    secret = McpServer.objects.create(
        name="crm", endpoint=STORED, endpoint_template="https://s3cret-user:s3cret-pa55@${CRM_HOST}/mcp"
    )

    assert "http://${MCP_TELECOM_HOST:-127.0.0.1}:8100/mcp" in staff_client.get(change_url(server)).content.decode()
    assert shows_no_secret(staff_client.get(change_url(secret)).content.decode())  # a template writing a secret
    data = form_data(staff_client.get(change_url(server)))
    data["description"] = "the address left as it was"
    assert staff_client.post(change_url(server), data).status_code == 302
    server.refresh_from_db()
    assert server.endpoint_template == "http://${MCP_TELECOM_HOST:-127.0.0.1}:8100/mcp"

    data["endpoint"] = "http://127.0.0.1:8101/mcp"
    assert staff_client.post(change_url(server), data).status_code == 302
    server.refresh_from_db()
    assert (server.endpoint, server.endpoint_template) == ("http://127.0.0.1:8101/mcp", "")
