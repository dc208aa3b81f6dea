"""Import and export in the admin: YAML uploaded or pasted is tried (a dry run says per profile what would
change, and writes nothing) or imported into the drafts (never published: the live version stays), with a link to
"Publish draft"; invalid files are refused whole with ``file:line`` problems; a profile's draft downloads as YAML
files that import back to no change, a published version as its document in JSON; others get 403.
"""

from __future__ import annotations

import io
import json
import re
import zipfile

import pytest
from auditlog.models import LogEntry
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from agents.models import AgentProfile
from releases.versions import version_publish
from routing.documents import profile_documents
from routing.models import Intent, Keyword
from routing.selectors import live_version
from tests.adminkit import changelist_url

pytestmark = pytest.mark.django_db

IMPORT_URL = "/admin/routing/intent/config/import/"

ROUTING = """\
agent_id: telecom_contas
intents:
  - name: retail_order_tracking
    domain: retail
    agent: orders_agent
    priority: 20
    keywords: [pedido, entrega, rastreio, atraso, modem]
"""

INVALID = """\
agent_id: telecom_contas
intents:
  - name: retail_order_tracking
    domain: retail
    agent: nobody_agent
    priority: 20
    keywords: [modem]
"""


def upload(name: str, text: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode("utf-8"), content_type="application/x-yaml")


def draft_url(profile: AgentProfile) -> str:
    return reverse("admin:routing_config_draft", args=[profile.pk])


@pytest.fixture
def published(telecom, admin_user):
    version_publish(profile=telecom, user=admin_user, note="first")
    return telecom


def test_a_dry_run_shows_what_would_change_and_writes_nothing(admin_client, published):
    before = profile_documents()

    response = admin_client.post(
        IMPORT_URL, {"yaml_files": [upload("routing.telecom_contas.yaml", ROUTING)], "_dry_run": "1"}
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "Dry run of routing.telecom_contas.yaml: nothing was written" in page
    assert "Would change the draft of telecom_contas" in page
    assert "keyword &#x27;modem&#x27; added to intent retail_order_tracking" in page
    assert "Publish draft of" not in page
    assert not Keyword.objects.filter(text="modem").exists()
    assert profile_documents() == before


def test_importing_writes_the_draft_only_shows_the_changes_and_links_to_publish(editor_client, published):
    response = editor_client.post(
        IMPORT_URL, {"yaml_files": [upload("routing.telecom_contas.yaml", ROUTING)], "_import": "1"}
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "Imported routing.telecom_contas.yaml into the drafts" in page
    assert "keyword &#x27;modem&#x27; added to intent retail_order_tracking" in page
    assert f'href="{reverse("admin:agents_agentprofile_publish", args=[published.pk])}"' in page
    assert Keyword.objects.filter(text="modem").exists()
    live = live_version(published)
    assert live is not None and live.number == 1  # customers still get version 1: nothing was published
    assert "modem" not in json.dumps(live.document)


def test_pasted_yaml_is_imported_like_an_uploaded_file(admin_client, published):
    page = admin_client.post(
        IMPORT_URL, {"text": ROUTING, "text_name": "routing.telecom_contas.yaml", "_import": "1"}
    ).content.decode()

    assert "Draft of telecom_contas" in page
    assert Keyword.objects.filter(text="modem").exists()


def test_an_invalid_file_shows_its_problems_with_file_and_line_and_writes_nothing(admin_client, published):
    before = profile_documents()

    response = admin_client.post(
        IMPORT_URL,
        {"yaml_files": [upload("routing.telecom_contas.yaml", INVALID)], "_import": "1"},
    )

    page = response.content.decode()
    assert "nothing was imported" in page
    problems = response.context["problems"]
    assert problems and all(re.match(r"routing\.telecom_contas\.yaml:\d+: ", problem) for problem in problems)
    assert any("nobody_agent" in problem for problem in problems)
    assert escape(problems[0]) in page
    assert not Keyword.objects.filter(text="modem").exists()
    assert profile_documents() == before


def test_a_downloaded_draft_imports_back_without_changing_anything(editor_client, published):
    Keyword.objects.create(intent=published.intents.get(name="retail_order_tracking"), text="modem")
    before = profile_documents()

    response = editor_client.get(draft_url(published))

    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        files = {name: archive.read(name).decode("utf-8") for name in archive.namelist()}
    assert {"agents.yaml", "routing.telecom_contas.yaml", "tools.yaml", "mcp_servers.yaml"} <= set(files)
    assert "modem" in files["routing.telecom_contas.yaml"]  # the draft, not the live version
    response = editor_client.post(
        IMPORT_URL, {"yaml_files": [upload(name, text) for name, text in files.items()], "_import": "1"}
    )
    assert response.context.get("problems") is None, response.context.get("problems")
    assert response.context["done"] and response.context["changed"] == []
    assert "No profile's draft changed." in response.content.decode()
    assert profile_documents() == before


def test_a_downloaded_draft_with_windows_line_ends_imports_back_without_changing_anything(editor_client, published):
    """Multi-line texts (the policy, a description, a prompt) saved with CRLF by a Windows editor, uploaded or pasted
    into the page's text box (which a browser sends with CRLF anyway): nothing changes, no history entry."""
    AgentProfile.objects.filter(pk=published.pk).update(policy="Be brief.\nNever ask for a password.")
    Intent.objects.filter(profile=published).update(description="Invoices.\nCharges and due dates.")
    billing = published.specialists.get(name="billing_agent")
    billing.prompts.filter(is_active=True).update(text="You explain invoices.\nAsk for the month first.")
    before = profile_documents()
    entries = LogEntry.objects.count()
    with zipfile.ZipFile(io.BytesIO(editor_client.get(draft_url(published)).content)) as archive:
        files = {name: archive.read(name).decode("utf-8").replace("\n", "\r\n") for name in archive.namelist()}

    uploaded = editor_client.post(
        IMPORT_URL, {"yaml_files": [upload(name, text) for name, text in files.items()], "_import": "1"}
    )
    pasted = editor_client.post(IMPORT_URL, {"text": files["agents.yaml"], "text_name": "agents.yaml", "_import": "1"})

    for response in (uploaded, pasted):
        assert response.context.get("problems") is None, response.context.get("problems")
        assert response.context["done"] and response.context["changed"] == []
    assert profile_documents() == before
    assert LogEntry.objects.count() == entries


def test_a_downloaded_draft_holds_only_its_profile(admin_client, published):
    from tests.factories import AgentProfileFactory

    AgentProfileFactory(agent_id="other_profile", domain="other")

    with zipfile.ZipFile(io.BytesIO(admin_client.get(draft_url(published)).content)) as archive:
        names = set(archive.namelist())
        agents = archive.read("agents.yaml").decode("utf-8")
    assert "routing.other_profile.yaml" not in names
    assert "telecom_contas" in agents and "other_profile" not in agents


def test_a_version_downloads_as_its_stored_document(admin_client, published):
    version = live_version(published)
    assert version is not None

    response = admin_client.get(reverse("admin:routing_config_version", args=[version.pk]))

    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert json.loads(response.content) == version.document
    assert "telecom_contas-version-1.json" in response["Content-Disposition"]
    page = admin_client.get(reverse("admin:routing_routingversion_change", args=[version.pk])).content.decode()
    assert "Download version 1" in page


def test_the_intent_list_links_to_the_import_page_which_lists_the_draft_downloads(editor_client, published):
    assert IMPORT_URL in editor_client.get(changelist_url(Intent)).content.decode()
    assert draft_url(published) in editor_client.get(IMPORT_URL).content.decode()


def test_staff_without_routing_rights_get_403(client, django_user_model, published):
    user = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_intent"))
    client.force_login(user)
    version = live_version(published)
    assert version is not None

    assert client.get(IMPORT_URL).status_code == 403
    assert client.post(IMPORT_URL, {"text": ROUTING, "_import": "1"}).status_code == 403
    assert client.get(draft_url(published)).status_code == 403
    assert client.get(reverse("admin:routing_config_version", args=[version.pk])).status_code == 403
    assert not Keyword.objects.filter(text="modem").exists()


def test_the_profiles_page_links_its_draft_download_and_impact_preview(client, admin_user, telecom):
    client.force_login(admin_user)

    page = client.get(f"/admin/agents/agentprofile/{telecom.pk}/change/").content.decode()

    assert f"/admin/routing/intent/config/draft/{telecom.pk}/" in page
    assert "/admin/conversations/conversation/impact/?profile=telecom_contas" in page
