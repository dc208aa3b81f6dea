"""Uploads: a large file is read by a Celery worker where a broker is configured (the upload page says it is queued,
the source's page shows its status and then what it changed or why it was refused); a small one, and every one
without a broker, in the request; an upload is read once however often its task is delivered; a source keeps its
latest uploads."""

from __future__ import annotations

import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge import uploads
from knowledge.models import KnowledgeDocument, KnowledgeUpload, UploadStatus
from knowledge.tests.conftest import HELP_EN, HELP_PT
from knowledge.uploads import upload_read, uploads_queue

DEEP = b"<div>" * 500  # nested past the HTML bound: refused when read


def upload_url(source) -> str:
    return f"/admin/knowledge/knowledgesource/{source.pk}/upload/"


def page_of(source) -> str:
    return f"/admin/knowledge/knowledgesource/{source.pk}/change/"


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_without_a_broker_every_upload_is_read_in_the_request_and_the_sources_page_lists_it(
    client, editor, source, settings
):
    settings.REDIS_URL, settings.KNOWLEDGE_QUEUE_FROM_BYTES = "", 1
    client.force_login(editor)

    client.post(upload_url(source), {"uploads": [SimpleUploadedFile("help.md", HELP_EN)]})
    client.post(upload_url(source), {"uploads": [SimpleUploadedFile("deep.html", DEEP)]})

    done, failed = KnowledgeUpload.objects.order_by("created_at", "pk")
    assert (done.status, done.report["outcome"], done.report["passages"], done.data) == (
        UploadStatus.DONE,
        "created",
        2,
        b"",
    )
    assert failed.status == UploadStatus.FAILED and failed.error.startswith("The HTML is nested more than")
    assert done.uploaded_by == editor and done.finished_at is not None
    shown = client.get(page_of(source)).content.decode()
    assert "latest uploads" in shown.lower()
    assert "help.md: created, 2 passages (2 added, 0 removed, 0 kept)." in shown
    assert "The HTML is nested more than" in shown


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_an_upload_is_read_once_however_often_its_task_comes(source, settings):
    settings.REDIS_URL = ""
    (upload,) = uploads_queue(source=source, files=[("help.md", HELP_EN, "")], language="", tags=[], user=None)
    read = KnowledgeUpload.objects.get(pk=upload.pk)

    upload_read(upload.pk)  # the task delivered again (or a second worker): the upload is no longer queued

    again = KnowledgeUpload.objects.get(pk=upload.pk)
    assert (again.status, again.report, again.finished_at) == (UploadStatus.DONE, read.report, read.finished_at)
    assert KnowledgeDocument.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_an_upload_whose_reading_breaks_ends_failed_not_indexing_for_ever(source, settings, monkeypatch):
    settings.REDIS_URL = ""

    def broken(**_):
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(uploads, "document_ingest", broken)
    (upload,) = uploads_queue(source=source, files=[("help.md", HELP_EN, "")], language="", tags=[], user=None)

    assert (upload.status, upload.error, upload.data) == (UploadStatus.FAILED, uploads.ERROR_INTERNAL, b"")
    assert upload.finished_at is not None


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_a_source_keeps_its_latest_uploads_read_and_never_drops_one_waiting(source, settings, monkeypatch):
    settings.REDIS_URL = ""
    monkeypatch.setattr(uploads, "UPLOADS_KEPT", 2)
    waiting = KnowledgeUpload.objects.create(source=source, file_name="waiting.md", data=HELP_EN)
    for number in range(4):
        uploads_queue(source=source, files=[(f"f{number}.md", HELP_EN, "")], language="", tags=[], user=None)

    kept = list(KnowledgeUpload.objects.order_by("pk").values_list("file_name", flat=True))
    assert kept == [waiting.file_name, "f1.md", "f2.md", "f3.md"]  # before the last came: two read, and the waiting


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_with_a_broker_a_large_file_is_queued_and_a_worker_reads_it_a_small_one_at_once(
    client, editor, source, settings, celery_worker
):
    settings.KNOWLEDGE_QUEUE_FROM_BYTES = len(HELP_PT)  # HELP_EN is smaller: read in the request
    client.force_login(editor)

    page = client.post(
        upload_url(source),
        {
            "uploads": [
                SimpleUploadedFile("ajuda.md", HELP_PT),
                SimpleUploadedFile("help.md", HELP_EN),
                SimpleUploadedFile("deep.html", DEEP),
            ]
        },
        follow=True,
    )

    said = [str(message) for message in page.context["messages"]]
    assert said == [
        "ajuda.md: queued, read in the background; its status is under latest uploads.",
        "help.md: created, 2 passages (2 added, 0 removed, 0 kept).",
        "deep.html: queued, read in the background; its status is under latest uploads.",
    ]
    for _ in range(1200):  # polls of the rows, not a time bound on the worker
        waiting = KnowledgeUpload.objects.filter(status__in=(UploadStatus.QUEUED, UploadStatus.INDEXING))
        if not waiting.exists():
            break
        time.sleep(0.1)
    statuses = dict(KnowledgeUpload.objects.values_list("file_name", "status"))
    assert statuses == {"ajuda.md": UploadStatus.DONE, "help.md": UploadStatus.DONE, "deep.html": UploadStatus.FAILED}
    assert sorted(KnowledgeDocument.objects.values_list("file_name", flat=True)) == ["ajuda.md", "help.md"]
    assert "ajuda.md: created, 2 passages" in client.get(page_of(source)).content.decode()
