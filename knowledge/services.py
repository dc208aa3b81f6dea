"""Writes: a file (or pasted text) into a source as a document and its passages, replacing the one of the same name;
a document deleted; and the source's words counted with both, and a new document's passages embedded where its
profile's search uses vectors (:mod:`knowledge.vectors`) (:class:`knowledge.models.KnowledgeWord`). A document a
version served holds (``held_by``) is never rewritten: replacing or deleting it marks it replaced and leaves it to
that version (:mod:`knowledge.versions`). The words count the passages of every row kept, replaced ones included."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.postgres.search import SearchVector
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Q, QuerySet, Value
from django.utils import timezone

from common.language import LANGUAGES
from knowledge.models import KnowledgeDocument, KnowledgePassage, KnowledgeSource, KnowledgeWord, validate_tags
from knowledge.reading import KnowledgeReadError, Piece, passages_of, read_file, read_readable
from knowledge.search import search_config
from knowledge.vectors import document_embed, embed_queue, vectors_wanted
from knowledge.versions import document_keys, rows_chosen
from knowledge.words import passage_stems, word_forms, words_counted

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
    vectors: str = ""  # what the vector search reads of it (knowledge.vectors.document_vectors_state); "": not asked


def _diff(old: list[Piece], new: list[Piece]) -> tuple[int, int, int]:
    """(added, removed, kept): the new passages not among the old, the old not among the new, and those in both."""
    before, after = Counter(old), Counter(new)
    kept = sum((before & after).values())
    return len(new) - kept, len(old) - kept, kept


def _check_bounds(source: KnowledgeSource, *, replacing: KnowledgeDocument | None, passages: int) -> None:
    """Refuse what would take the source's tenant (or the shared sources, for a source with none) past its bounds."""
    tenant = Q(tenant__isnull=True) if source.tenant_id is None else Q(tenant_id=source.tenant_id)
    sources = KnowledgeSource.objects.filter(tenant)
    # The draft's documents: a replaced one kept for a version served is bounded by that version's holding.
    documents = KnowledgeDocument.objects.filter(source__in=sources, replaced_at__isnull=True)
    held = KnowledgePassage.objects.filter(document__source__in=sources, document__replaced_at__isnull=True)
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


def rows_delete(documents: QuerySet[KnowledgeDocument]) -> None:
    """Delete ``documents`` and their passages, each source's words counted out, holding its row lock."""
    by_source: dict[int, list[int]] = {}
    for pk, source_id in documents.values_list("pk", "source_id"):
        by_source.setdefault(source_id, []).append(pk)
    for source_id, pks in sorted(by_source.items()):
        with transaction.atomic():
            KnowledgeSource.objects.select_for_update().filter(pk=source_id).first()
            passages = KnowledgePassage.objects.filter(document_id__in=pks).values_list("heading", "text")
            _words_count(source_id, added=[], removed=[Piece(heading, text) for heading, text in passages])
            KnowledgeDocument.objects.filter(pk__in=pks).delete()


def _retire(document: KnowledgeDocument) -> None:
    """Mark ``document`` replaced (out of the draft, kept for the versions holding it)."""
    if document.replaced_at is None:
        document.replaced_at = timezone.now()
        document.save(update_fields=["replaced_at"])  # a save: the configuration version moves with it


def document_delete(*, document: KnowledgeDocument) -> None:
    """Take ``document`` out of the draft: deleted with its passages, its words counted out of its source's — or,
    while a version served holds it, marked replaced and kept for that version."""
    if document.held_by:
        _retire(document)
        return
    rows_delete(KnowledgeDocument.objects.filter(pk=document.pk))


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
    readable: bool = False,
) -> IngestReport:
    """Read ``data`` as the file ``file_name`` says (Markdown, HTML, text or PDF), cut it into passages and store them
    as the source's document of that name, replacing the one already there. Nothing is written when the bytes are the
    same as the stored document's (``unchanged``) or with ``dry_run``.

    Raises :class:`~knowledge.reading.KnowledgeReadError` (nothing written) for a file it cannot read or one past the
    bounds of ``knowledge.reading`` or of the source's tenant. Holds the source's row lock while it writes: two
    uploads into one source take turns. With ``readable``, ``data`` is the document's readable text (Markdown, as an
    export writes it: :func:`knowledge.reading.readable_text`), whatever its file's kind, and a document it cuts into
    the same passages under the same title is ``unchanged``."""
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
    kind, reading = read_readable(file_name, data) if readable else read_file(file_name, data)
    pieces = passages_of(reading)
    content_hash = hashlib.sha256(data).hexdigest()
    title = (title or reading.title or file_name.rsplit(".", 1)[0])[:300]
    with transaction.atomic():
        KnowledgeSource.objects.select_for_update().filter(pk=source.pk).first()
        # A source not saved yet (a dry run that would make it) holds nothing.
        draft = {"source": source, "file_name": file_name, "replaced_at__isnull": True}
        document = KnowledgeDocument.objects.filter(**draft).first() if source.pk else None
        old = [Piece(p.heading, p.text) for p in document.passages.order_by("position")] if document else []
        added, removed, kept = _diff(old, pieces)
        same = document is not None and (document.content_hash == content_hash or (readable and old == pieces))
        if document is not None and same and document.title == title:
            return IngestReport(file_name, title, UNCHANGED, len(pieces), 0, 0, len(pieces), document.pk)
        _check_bounds(source, replacing=document, passages=len(pieces))
        outcome = REPLACED if document is not None else CREATED
        if dry_run:
            known = document.pk if document else None
            return IngestReport(file_name, title, outcome, len(pieces), added, removed, kept, known)
        counted_out = old
        if document is not None and document.held_by:  # a version served holds it: kept for it, a new row written
            _retire(document)
            document, counted_out = None, []
        if document is None:
            document = KnowledgeDocument(source=source, file_name=file_name)
        document.title, document.kind, document.content_hash = title, kind, content_hash
        document.language = language or source.language
        document.tags, document.size_bytes = tags, len(data)
        document.embedding_model, document.embedding_error = "", ""  # its new passages are not embedded yet
        document.uploaded_by, document.uploaded_at = user, timezone.now()
        document.full_clean(validate_unique=False, validate_constraints=False)
        document.save()
        document.passages.all().delete()
        stemmed = connection.vendor == "sqlite"  # PostgreSQL stems in its configurations (_index)
        KnowledgePassage.objects.bulk_create(
            KnowledgePassage(
                document=document,
                position=position,
                heading=piece.heading,
                text=piece.text,
                stems=passage_stems(piece.heading, piece.text) if stemmed else "",
            )
            for position, piece in enumerate(pieces)
        )
        _index(document)
        _words_count(source.pk, added=pieces, removed=counted_out)
    # Embedded once committed, outside the source's lock: the endpoint's time is not the other uploads' (a failure
    # leaves the document to the words' search, and says so).
    vectors = document_embed(document) if vectors_wanted(source) else ""
    return IngestReport(file_name, title, outcome, len(pieces), added, removed, kept, document.pk, vectors)


def documents_hold(*, profile_pk: int, versions: Mapping[int, Any], vectors: bool = False) -> int:
    """Record in the rows of profile ``profile_pk`` which of ``versions`` (the versions served, by number: each its
    document's knowledge, ``None`` for one holding none) hold each, and delete the replaced rows none holds: how many.
    Called by a publish, in its transaction. ``vectors``: a version served searches with vectors, so its documents not
    embedded by the configured model are embedded once the publish commits (:func:`knowledge.vectors.embed_queue`):
    an upload is embedded when the draft's search uses vectors, and one made while it did not would be read by its
    words alone by a version published since with them."""
    if vectors:
        transaction.on_commit(lambda: embed_queue([profile_pk]))
    with transaction.atomic():
        # The sources' locks, as an upload takes them: none replaces a document in place while it is being held.
        list(KnowledgeSource.objects.select_for_update().filter(profile_id=profile_pk).values_list("pk"))
        documents = KnowledgeDocument.objects.filter(source__profile_id=profile_pk)
        rows = list(documents.values_list("pk", "source__name", "file_name", "content_hash", "replaced_at", "held_by"))
        read = [
            (pk, source, name, content_hash, replaced is None) for pk, source, name, content_hash, replaced, _ in rows
        ]
        held: dict[int, list[int]] = {}
        for number, knowledge in sorted(versions.items()):
            keys = document_keys(knowledge)
            if keys is None:  # published before documents were versioned: it reads the current ones, whatever they are
                continue
            for pk in rows_chosen(read, keys):
                held.setdefault(pk, []).append(number)
        dropped = [pk for pk, *_, replaced, _held in rows if replaced is not None and pk not in held]
        changed: dict[tuple[int, ...], list[int]] = {}  # the rows whose versions changed, by their versions now
        for pk, *_, held_before in rows:
            if pk not in dropped and held.get(pk, []) != held_before:
                changed.setdefault(tuple(held.get(pk, [])), []).append(pk)
        for numbers, pks in changed.items():
            KnowledgeDocument.objects.filter(pk__in=pks).update(held_by=list(numbers))
        rows_delete(KnowledgeDocument.objects.filter(pk__in=dropped))
    return len(dropped)
