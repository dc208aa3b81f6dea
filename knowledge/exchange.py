"""A profile's knowledge as plain data, for the YAML export, and back: its sources (their synonyms among their
settings), and each current document with its readable text (:func:`knowledge.reading.readable_text`), which an import
cuts into the same passages.

An import writes a source by name (:func:`source_import`: created, or its settings updated) and each document through
:func:`knowledge.services.document_ingest` (``readable``): created, replaced or unchanged as an upload of it would be,
within the same bounds per tenant. Documents the data does not name are left as they are.
"""

from __future__ import annotations

from typing import Any

from knowledge.models import KnowledgeDocument, KnowledgePassage, KnowledgeSource
from knowledge.reading import Piece, readable_text

CREATED, UPDATED, UNCHANGED = "created", "updated", "unchanged"
SOURCE_FIELDS = ("language", "tags", "owner", "tenant", "enabled", "synonyms")


def knowledge_exported(profile_pk: int) -> list[dict[str, Any]]:
    """The profile's sources by name, each with its current documents by file name (three queries)."""
    sources = list(
        KnowledgeSource.objects.filter(profile_id=profile_pk).select_related("owner", "tenant").order_by("name")
    )
    documents = KnowledgeDocument.objects.filter(source__in=sources, replaced_at__isnull=True).order_by("file_name")
    pieces: dict[int, list[Piece]] = {}
    for document_id, heading, text in (
        KnowledgePassage.objects.filter(document__in=documents)
        .order_by("document_id", "position")
        .values_list("document_id", "heading", "text")
    ):
        pieces.setdefault(document_id, []).append(Piece(heading, text))
    by_source: dict[int, list[dict[str, Any]]] = {}
    for document in documents:
        by_source.setdefault(document.source_id, []).append(
            {
                "file_name": document.file_name,
                "title": document.title,
                "kind": document.kind,
                "language": document.language,
                "tags": list(document.tags),
                "text": readable_text(pieces.get(document.pk, [])),
            }
        )
    out = []
    for source in sorted(sources, key=lambda source: source.name):
        entry: dict[str, Any] = {"name": source.name, "language": source.language, "tags": list(source.tags)}
        if source.owner is not None:
            entry["owner"] = source.owner.get_username()
        if source.tenant is not None:
            entry["tenant"] = source.tenant.slug
        entry["enabled"] = source.enabled
        if source.synonyms:
            entry["synonyms"] = [list(group) for group in source.synonyms]
        entry["documents"] = by_source.get(source.pk, [])
        out.append(entry)
    return out


def source_import(*, profile: Any, name: str, settings: dict[str, Any]) -> tuple[KnowledgeSource, str]:
    """The source ``name`` of ``profile`` written with ``settings`` (of :data:`SOURCE_FIELDS`: ``owner`` a user,
    ``tenant`` a tenant, or ``None``; a field left out keeps its value), and whether it was ``created``, ``updated``
    or ``unchanged``. Its documents are each a :func:`knowledge.services.document_ingest` with ``readable``."""
    source = KnowledgeSource.objects.filter(profile=profile, name=name).first()
    outcome = UNCHANGED
    if source is None:
        source, outcome = KnowledgeSource(profile=profile, name=name), CREATED
    for field, value in settings.items():
        if getattr(source, field) != value:
            setattr(source, field, value)
            outcome = outcome if outcome == CREATED else UPDATED
    if outcome != UNCHANGED:
        source.full_clean(validate_unique=False, validate_constraints=False)
        source.save()
    return source, outcome
