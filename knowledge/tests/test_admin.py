"""The knowledge admin: list, add, change and upload pages, on PostgreSQL and SQLite; a staff user without the
"edit knowledge" permission is refused on every path that writes."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import KnowledgeDocument, KnowledgeSource
from knowledge.services import document_ingest
from knowledge.tests.conftest import HELP_EN, HELP_PT

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]


@pytest.fixture
def plain_staff(django_user_model):
    """Staff with no group: may open the admin, holds no permission on knowledge."""
    return django_user_model.objects.create_user("plain", "plain@example.com", "plain-password", is_staff=True)


def upload_url(source) -> str:
    return f"/admin/knowledge/knowledgesource/{source.pk}/upload/"


def test_the_list_shows_each_sources_documents_and_passages_counts(client, editor, source):
    document_ingest(source=source, file_name="help.md", data=HELP_EN)
    client.force_login(editor)

    page = client.get("/admin/knowledge/knowledgesource/")

    assert page.status_code == 200
    assert 'class="field-documents_count">1<' in page.content.decode()
    assert 'class="field-passages_count">2<' in page.content.decode()


def test_an_editor_adds_a_source_and_its_page_lists_its_documents(client, editor, profile):
    client.force_login(editor)

    added = client.post(
        "/admin/knowledge/knowledgesource/add/",
        {
            "profile": profile.pk,
            "name": "FAQ",
            "language": "pt",
            "tags": '["faq"]',
            "enabled": "on",
            "documents-TOTAL_FORMS": "0",
            "documents-INITIAL_FORMS": "0",
        },
    )
    source = KnowledgeSource.objects.get(name="FAQ")
    document_ingest(source=source, file_name="ajuda.md", data=HELP_PT)
    page = client.get(f"/admin/knowledge/knowledgesource/{source.pk}/change/").content.decode()

    assert added.status_code == 302 and source.tags == ["faq"]
    assert "Central de ajuda" in page and "ajuda.md" in page and upload_url(source) in page


def test_an_editor_uploads_files_and_pasted_text_and_is_told_what_changed(client, editor, source):
    client.force_login(editor)
    assert client.get(upload_url(source)).status_code == 200

    first = client.post(
        upload_url(source),
        {
            "uploads": [SimpleUploadedFile("help.md", HELP_EN), SimpleUploadedFile("ajuda.md", HELP_PT)],
            "pasted": "Opening hours: nine to five.",
            "pasted_name": "hours",
            "title": "Opening hours",
            "tags": "hours, store",
        },
        follow=True,
    )
    again = client.post(
        upload_url(source), {"uploads": [SimpleUploadedFile("help.md", HELP_EN + b"\nOne more line.\n")]}, follow=True
    )

    said = [str(message) for message in first.context["messages"]]
    assert said == [
        "help.md: created, 2 passages (2 added, 0 removed, 0 kept).",
        "ajuda.md: created, 2 passages (2 added, 0 removed, 0 kept).",
        "hours.txt: created, 1 passages (1 added, 0 removed, 0 kept).",
    ]
    assert [str(message) for message in again.context["messages"]] == [
        "help.md: replaced, 2 passages (1 added, 1 removed, 1 kept)."
    ]
    hours = KnowledgeDocument.objects.get(file_name="hours.txt")
    assert (hours.title, hours.tags, hours.uploaded_by) == ("Opening hours", ["hours", "store"], editor)


def test_a_refused_file_is_named_with_why_and_the_others_still_go_in(client, editor, source):
    client.force_login(editor)

    page = client.post(
        upload_url(source),
        {"uploads": [SimpleUploadedFile("deep.html", b"<div>" * 500), SimpleUploadedFile("help.md", HELP_EN)]},
    )

    assert page.status_code == 200
    said = [str(message) for message in page.context["messages"]]
    assert said[0].startswith("deep.html: The HTML is nested more than")
    assert list(KnowledgeDocument.objects.values_list("file_name", flat=True)) == ["help.md"]


def test_staff_without_the_edit_knowledge_permission_is_refused_on_every_path(client, plain_staff, source):
    client.force_login(plain_staff)
    base = "/admin/knowledge/knowledgesource/"

    assert client.get(base).status_code == 403
    assert client.get(f"{base}add/").status_code == 403
    assert client.get(f"{base}{source.pk}/change/").status_code == 403
    assert client.post(f"{base}{source.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.get(upload_url(source)).status_code == 403
    assert client.post(upload_url(source), {"uploads": [SimpleUploadedFile("help.md", HELP_EN)]}).status_code == 403
    assert not KnowledgeDocument.objects.exists() and KnowledgeSource.objects.filter(pk=source.pk).exists()


def test_a_reader_with_only_the_view_permission_sees_the_documents_but_cannot_upload(client, plain_staff, source):
    plain_staff.user_permissions.add(Permission.objects.get(codename="view_knowledgesource"))
    client.force_login(plain_staff)

    page = client.get(f"/admin/knowledge/knowledgesource/{source.pk}/change/")

    assert page.status_code == 200 and upload_url(source) not in page.content.decode()
    assert client.get(upload_url(source)).status_code == 403


def test_a_citations_link_opens_the_documents_page_with_its_passages_read_only(client, editor, plain_staff, source):
    from knowledge.retrieval import document_link

    report = document_ingest(source=source, file_name="help.md", data=HELP_EN)
    link = document_link(report.document_id)
    client.force_login(editor)

    page = client.get(link)
    listed = client.get("/admin/knowledge/knowledgedocument/?q=help")
    client.force_login(plain_staff)
    refused = client.get(link)

    assert page.status_code == 200 and listed.status_code == 200
    text = page.content.decode()
    assert "Help centre › Refunds" in text and "Refunds reach your card within five working days" in text
    assert 'name="title"' not in text, "the page is read only: documents change by upload"
    assert refused.status_code == 403
