"""Writes: a file (or pasted text) into a source as a document and its passages, replacing the one of the same name;
a document deleted; and the source's words counted with both (:class:`knowledge.models.KnowledgeWord`)."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchVector
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Q, Value
from django.utils import timezone

from common.language import LANGUAGES
from knowledge.models import KnowledgeDocument, KnowledgePassage, KnowledgeSource, KnowledgeWord, validate_tags
from knowledge.reading import KnowledgeReadError, Piece, passages_of, read_file
from knowledge.search import search_config
from knowledge.words import word_forms, words_counted

ERROR_TOO_MANY_DOCUMENTS = "This tenant's knowledge holds {limit} documents already, the most it may."
ERROR_TOO_MANY_PASSAGES_TENANT = "This document would take this tenant's knowledge past {limit} passages."
ERROR_LANGUAGE = "Unknown language: use one of {languages}."
ERROR_FILE_NAME = "A file name is required (at most 255 characters, no folder)."

CREATED, REPLACED, UNCHANGED = "created", "replaced", "unchanged"


@dataclass(frozen=True)
class IngestReport:
    """What an upload did (or, dry, would do): ``outcome`` is ``created``, ``replaced`` or ``unchanged``; the
    passages counts compare the new passages with the old ones by heading and text."""

    file_name: str
    title: str
    outcome: str
    passages: int
    added: int
    removed: int
    kept: int
    document_id: int | None


def _diff(old: list[Piece], new: list[Piece]) -> tuple[int, int, int]:
    """(added, removed, kept): the new passages not among the old, the old not among the new, and those in both."""
    before, after = Counter(old), Counter(new)
    kept = sum((before & after).values())
    return len(new) - kept, len(old) - kept, kept


def _check_bounds(source: KnowledgeSource, *, replacing: KnowledgeDocument | None, passages: int) -> None:
    """Refuse what would take the source's tenant (or the shared sources, for a source with none) past its bounds."""
    tenant = Q(tenant__isnull=True) if source.tenant_id is None else Q(tenant_id=source.tenant_id)
    sources = KnowledgeSource.objects.filter(tenant)
    documents = KnowledgeDocument.objects.filter(source__in=sources)
    held = KnowledgePassage.objects.filter(document__source__in=sources)
    if replacing is not None:
        documents, held = documents.exclude(pk=replacing.pk), held.exclude(document_id=replacing.pk)
    if documents.count() >= settings.KNOWLEDGE_MAX_DOCUMENTS:
        message = ERROR_TOO_MANY_DOCUMENTS.format(limit=settings.KNOWLEDGE_MAX_DOCUMENTS)
        raise KnowledgeReadError(message, fields={"file": [message]})
    if held.count() + passages > settings.KNOWLEDGE_MAX_PASSAGES:
        message = ERROR_TOO_MANY_PASSAGES_TENANT.format(limit=settings.KNOWLEDGE_MAX_PASSAGES)
        raise KnowledgeReadError(message, fields={"file": [message]})


def _index(document: KnowledgeDocument) -> None:
    """PostgreSQL: the passages' weighted tsvector in the document's language (the heading weighs more than the
    text). SQLite's FTS5 table follows the passages' rows by itself (its triggers, migration 0002)."""
    if connection.vendor != "postgresql":
        return
    config = Value(search_config(document.language))
    KnowledgePassage.objects.filter(document=document).update(
        search_vector=SearchVector("heading", weight="A", config=config)
        + SearchVector("text", weight="B", config=config)
    )


_WORDS_TABLE = KnowledgeWord._meta.db_table
_WORDS_UPSERT = (
    f"INSERT INTO {_WORDS_TABLE} (source_id, word, folded, stem, passages) VALUES (%s, %s, %s, %s, %s) "  # noqa: S608
    f"ON CONFLICT (source_id, word) DO UPDATE SET passages = {_WORDS_TABLE}.passages + excluded.passages"
)


def _words_count(source_id: int, *, added: list[Piece], removed: list[Piece]) -> None:
    """Count the words of the ``added`` passages into the source's words, and those of the ``removed`` ones out; a
    word no passage holds any more is deleted. Expects the source's row lock."""
    delta = words_counted((piece.heading, piece.text) for piece in added)
    delta.subtract(words_counted((piece.heading, piece.text) for piece in removed))
    rows = [(source_id, *word_forms(word), count) for word, count in delta.items() if count]
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(_WORDS_UPSERT, rows)
    if any(count < 0 for *_, count in rows):
        KnowledgeWord.objects.filter(source_id=source_id, passages__lte=0).delete()


def document_delete(*, document: KnowledgeDocument) -> None:
    """Delete ``document`` and its passages, its words counted out of its source's. Holds the source's row lock."""
    with transaction.atomic():
        KnowledgeSource.objects.select_for_update().filter(pk=document.source_id).first()
        old = [Piece(p.heading, p.text) for p in document.passages.all()]
        _words_count(document.source_id, added=[], removed=old)
        document.delete()


def document_ingest(
    *,
    source: KnowledgeSource,
    file_name: str,
    data: bytes,
    title: str = "",
    language: str = "",
    tags: list[str] | None = None,
    user: Any = None,
    dry_run: bool = False,
) -> IngestReport:
    """Read ``data`` as the file ``file_name`` says (Markdown, HTML, text or PDF), cut it into passages and store them
    as the source's document of that name, replacing the one already there. Nothing is written when the bytes are the
    same as the stored document's (``unchanged``) or with ``dry_run``.

    Raises :class:`~knowledge.reading.KnowledgeReadError` (nothing written) for a file it cannot read or one past the
    bounds of ``knowledge.reading`` or of the source's tenant. Holds the source's row lock while it writes: two
    uploads into one source take turns."""
    file_name = file_name.strip()
    if not file_name or len(file_name) > 255 or "/" in file_name or "\\" in file_name:
        raise KnowledgeReadError(ERROR_FILE_NAME, fields={"file_name": [ERROR_FILE_NAME]})
    tags = list(tags or [])
    try:
        validate_tags(tags)
    except ValidationError as error:
        raise KnowledgeReadError(error.messages[0], fields={"tags": error.messages}) from None
    if language and language not in LANGUAGES:
        message = ERROR_LANGUAGE.format(languages=", ".join(LANGUAGES))
        raise KnowledgeReadError(message, fields={"language": [message]})
    kind, reading = read_file(file_name, data)
    pieces = passages_of(reading)
    content_hash = hashlib.sha256(data).hexdigest()
    title = (title or reading.title or file_name.rsplit(".", 1)[0])[:300]
    with transaction.atomic():
        KnowledgeSource.objects.select_for_update().filter(pk=source.pk).first()
        # A source not saved yet (a dry run that would make it) holds nothing.
        document = KnowledgeDocument.objects.filter(source=source, file_name=file_name).first() if source.pk else None
        old = [Piece(p.heading, p.text) for p in document.passages.order_by("position")] if document else []
        added, removed, kept = _diff(old, pieces)
        if document is not None and document.content_hash == content_hash and document.title == title:
            return IngestReport(file_name, title, UNCHANGED, len(pieces), 0, 0, len(pieces), document.pk)
        _check_bounds(source, replacing=document, passages=len(pieces))
        outcome = REPLACED if document is not None else CREATED
        if dry_run:
            known = document.pk if document else None
            return IngestReport(file_name, title, outcome, len(pieces), added, removed, kept, known)
        if document is None:
            document = KnowledgeDocument(source=source, file_name=file_name)
        document.title, document.kind, document.content_hash = title, kind, content_hash
        document.language = language or source.language
        document.tags, document.size_bytes = tags, len(data)
        document.uploaded_by, document.uploaded_at = user, timezone.now()
        document.full_clean(validate_unique=False, validate_constraints=False)
        document.save()
        document.passages.all().delete()
        KnowledgePassage.objects.bulk_create(
            KnowledgePassage(document=document, position=position, heading=piece.heading, text=piece.text)
            for position, piece in enumerate(pieces)
        )
        _index(document)
        _words_count(source.pk, added=pieces, removed=old)
    return IngestReport(file_name, title, outcome, len(pieces), added, removed, kept, document.pk)
