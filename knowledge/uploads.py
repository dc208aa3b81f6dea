"""Uploads: files handed to a source, each recorded (:class:`~knowledge.models.KnowledgeUpload`) and read into a
document (:func:`knowledge.services.document_ingest`) — a file of ``KNOWLEDGE_QUEUE_FROM_BYTES`` or more by a Celery
worker where a broker is configured (``REDIS_URL``), once the request that queued it has committed; a smaller one, and
every one without a broker, in that request. A large file does not hold the upload page while it is cut, indexed and
its words counted, and a small one's outcome is told at once; the source's admin page lists its uploads with their
status, and what each changed or why it was refused.

A worker claims an upload by moving it from ``queued`` to ``indexing`` (a second delivery of the task finds it taken
and leaves it); reading it ends ``done`` with its report or ``failed`` with the refusal (a file past a bound, a PDF it
cannot read: the same messages as in the request). Its bytes are dropped then.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from common.errors import DomainError
from knowledge.models import KnowledgeSource, KnowledgeUpload, UploadStatus
from knowledge.services import document_ingest
from platform.celery import app

logger = logging.getLogger(__name__)

UPLOAD_TASK = "knowledge.upload_read"
ERROR_INTERNAL = "It could not be read: an error of the platform's, logged for its operators. Upload it again."
UPLOADS_KEPT = 50  # a source's latest uploads kept (the older ones, read, are deleted as new ones come)


def uploads_queue(
    *, source: KnowledgeSource, files: list[tuple[str, bytes, str]], language: str, tags: list[str], user: Any
) -> list[KnowledgeUpload]:
    """Record each ``(file name, bytes, title)`` of ``files`` as an upload of ``source`` and have it read: a large one
    by a worker after this transaction commits where a broker is configured (it comes back ``queued``), the others
    here (they come back ``done`` or ``failed``). The source keeps its latest :data:`UPLOADS_KEPT` uploads read."""
    uploads = [
        KnowledgeUpload.objects.create(
            source=source,
            file_name=name[:255],
            title=title[:300],
            language=language,
            tags=list(tags),
            data=data,
            size_bytes=len(data),
            uploaded_by=user if getattr(user, "pk", None) else None,
        )
        for name, data, title in files
    ]
    read = KnowledgeUpload.objects.filter(source=source).exclude(
        status__in=(UploadStatus.QUEUED, UploadStatus.INDEXING)
    )
    old = list(read.order_by("-created_at", "-pk").values_list("pk", flat=True)[UPLOADS_KEPT:])
    if old:
        KnowledgeUpload.objects.filter(pk__in=old).delete()
    for upload in uploads:
        if settings.REDIS_URL and upload.size_bytes >= settings.KNOWLEDGE_QUEUE_FROM_BYTES:
            transaction.on_commit(lambda pk=upload.pk: app.send_task(UPLOAD_TASK, args=(pk,)))
        else:
            upload_read(upload.pk)
            upload.refresh_from_db()
    return uploads


def upload_read(upload_pk: int) -> None:
    """Read the upload into its source, if it is still queued (claimed here: another worker's is left alone)."""
    if not KnowledgeUpload.objects.filter(pk=upload_pk, status=UploadStatus.QUEUED).update(
        status=UploadStatus.INDEXING
    ):
        logger.info("knowledge upload %s is not queued: left alone", upload_pk)
        return
    upload = KnowledgeUpload.objects.select_related("source", "uploaded_by").get(pk=upload_pk)
    done: dict[str, Any] = {"data": b""}
    try:
        report = document_ingest(
            source=upload.source,
            file_name=upload.file_name,
            data=bytes(upload.data),
            title=upload.title,
            language=upload.language,
            tags=upload.tags,
            user=upload.uploaded_by,
        )
    except DomainError as error:
        done |= {"status": UploadStatus.FAILED, "error": error.message}
    except Exception:  # anything else: the upload must not stay "indexing" for ever
        logger.exception("knowledge upload %s could not be read", upload_pk)
        done |= {"status": UploadStatus.FAILED, "error": ERROR_INTERNAL}
    else:
        done |= {"status": UploadStatus.DONE, "report": asdict(report)}
    done["finished_at"] = timezone.now()
    KnowledgeUpload.objects.filter(pk=upload_pk).update(**done)
