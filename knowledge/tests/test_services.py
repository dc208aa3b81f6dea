"""Uploading documents: created, replaced with what changed, unchanged, dry, and bounded per tenant."""

from __future__ import annotations

import pytest

from knowledge.models import KnowledgeDocument, KnowledgePassage, KnowledgeSource, KnowledgeWord
from knowledge.reading import KnowledgeReadError
from knowledge.services import (
    CREATED,
    ERROR_TOO_MANY_DOCUMENTS,
    ERROR_TOO_MANY_PASSAGES_TENANT,
    REPLACED,
    UNCHANGED,
    document_delete,
    document_ingest,
)
from knowledge.tests.conftest import HELP_EN
from knowledge.words import words_counted
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]


def test_a_document_is_stored_with_its_passages_in_order(source, django_user_model):
    user = django_user_model.objects.create_user("writer")

    report = document_ingest(source=source, file_name="help.md", data=HELP_EN, user=user, tags=["faq"])

    document = KnowledgeDocument.objects.get(pk=report.document_id)
    assert (report.outcome, report.passages, report.added) == (CREATED, 2, 2)
    assert (document.title, document.kind, document.language, document.tags) == (
        "Help centre",
        "markdown",
        "en",
        ["faq"],
    )
    assert document.uploaded_by == user and len(document.content_hash) == 64
    assert list(document.passages.values_list("position", "heading")) == [
        (0, "Help centre › Passwords"),
        (1, "Help centre › Refunds"),
    ]


def test_uploading_the_same_name_again_replaces_the_document_and_reports_what_changed(source):
    first = document_ingest(source=source, file_name="help.md", data=HELP_EN)
    changed = HELP_EN.replace(b"five working days", b"ten working days") + b"\n## Shipping\n\nFree over 50.\n"

    report = document_ingest(source=source, file_name="help.md", data=changed)

    assert (report.outcome, report.document_id) == (REPLACED, first.document_id)
    assert (report.added, report.removed, report.kept, report.passages) == (2, 1, 1, 3)
    assert KnowledgeDocument.objects.filter(source=source).count() == 1
    assert "ten working days" in " ".join(KnowledgePassage.objects.values_list("text", flat=True))


def test_the_same_bytes_again_change_nothing_and_a_dry_run_writes_nothing(source):
    document_ingest(source=source, file_name="help.md", data=HELP_EN)
    passages = set(KnowledgePassage.objects.values_list("pk", flat=True))

    again = document_ingest(source=source, file_name="help.md", data=HELP_EN)
    dry = document_ingest(source=source, file_name="other.md", data=HELP_EN, dry_run=True)

    assert again.outcome == UNCHANGED and set(KnowledgePassage.objects.values_list("pk", flat=True)) == passages
    assert dry.outcome == CREATED and dry.passages == 2 and dry.document_id is None
    assert not KnowledgeDocument.objects.filter(file_name="other.md").exists()


def test_a_tenant_past_its_documents_bound_is_refused_and_another_tenant_is_not(source, settings):
    settings.KNOWLEDGE_MAX_DOCUMENTS = 1
    acme = TenantFactory(slug="acme")
    own = KnowledgeSource.objects.create(profile=source.profile, tenant=acme, name="Acme's", language="en")
    document_ingest(source=source, file_name="one.md", data=HELP_EN)

    with pytest.raises(KnowledgeReadError) as refused:
        document_ingest(source=source, file_name="two.md", data=HELP_EN)
    replaced = document_ingest(source=source, file_name="one.md", data=HELP_EN + b"\nMore.\n")
    elsewhere = document_ingest(source=own, file_name="two.md", data=HELP_EN)

    assert refused.value.message == ERROR_TOO_MANY_DOCUMENTS.format(limit=1)
    assert replaced.outcome == REPLACED and elsewhere.outcome == CREATED
    assert not KnowledgeDocument.objects.filter(source=source, file_name="two.md").exists()


def test_a_document_that_would_take_the_tenant_past_its_passages_bound_is_refused_whole(source, settings):
    settings.KNOWLEDGE_MAX_PASSAGES = 3
    document_ingest(source=source, file_name="one.md", data=HELP_EN)

    with pytest.raises(KnowledgeReadError) as refused:
        document_ingest(source=source, file_name="two.md", data=HELP_EN)

    assert refused.value.message == ERROR_TOO_MANY_PASSAGES_TENANT.format(limit=3)
    assert KnowledgePassage.objects.count() == 2


def test_a_bad_language_or_tag_is_refused_naming_the_field(source):
    with pytest.raises(KnowledgeReadError) as language:
        document_ingest(source=source, file_name="a.md", data=HELP_EN, language="de")
    with pytest.raises(KnowledgeReadError) as tags:
        document_ingest(source=source, file_name="a.md", data=HELP_EN, tags=["Not a tag"])

    assert list(language.value.fields) == ["language"] and list(tags.value.fields) == ["tags"]
    assert not KnowledgeDocument.objects.exists()


def words_held(source) -> dict[str, int]:
    return dict(KnowledgeWord.objects.filter(source=source).values_list("word", "passages"))


def test_a_sources_words_count_the_passages_holding_them_through_a_replacement_and_a_delete(source):
    document_ingest(source=source, file_name="help.md", data=HELP_EN)
    document_ingest(source=source, file_name="more.md", data=b"# More\n\n## Refunds\n\nRefunds by email.\n")
    before = words_held(source)
    document_ingest(source=source, file_name="help.md", data=HELP_EN.replace(b"email", b"pigeon"))
    replaced = words_held(source)
    document_delete(document=KnowledgeDocument.objects.get(source=source, file_name="more.md"))

    held = KnowledgePassage.objects.filter(document__source=source).values_list("heading", "text")

    assert (before["refunds"], before["email"], before["help"]) == (2, 2, 2)  # a heading's words count too
    assert (replaced["email"], replaced["pigeon"]) == (1, 1)
    assert words_held(source) == dict(words_counted(held))  # what the passages left hold, no more
    assert "more" not in words_held(source) and KnowledgeWord.objects.filter(passages__lte=0).count() == 0
