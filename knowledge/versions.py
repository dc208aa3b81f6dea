"""A profile's documents in its versions: what a version holds, which rows that is, and the rows kept for it.

A profile's document (``routing.documents``) holds its knowledge as ``{source name: {file name: SHA-256}}``: the
draft's is every current document of its sources (:func:`knowledge_documents`), and a published version keeps the
one it was published with. A search for a version reads the rows its keys name (:func:`rows_chosen`): for each key,
the row of that source, file name and content — the current one when it is that content, else the latest kept — or,
when no row of that content is kept any more (a revert to a version whose replaced documents were deleted since, an
import of other bytes), the current row of that file name. A document holding no knowledge key (``None``: a version
published before documents were versioned) reads the current documents.

Rows kept: every current document (the draft's), and a replaced one while a version served holds it — the live
version or a rollout's candidate not ended, as :func:`knowledge.services.documents_hold` was told at the last publish
(``held_by``). A publish deletes the replaced rows no version served holds any more, their passages and their words
counted out; a document replaced or deleted while no version served holds it is replaced in place or deleted at once
(:mod:`knowledge.services`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from knowledge.models import KnowledgeDocument

Key = tuple[str, str, str]  # source name, file name, SHA-256 of its bytes
Row = tuple[int, str, str, str, bool]  # pk, source name, file name, SHA-256, current


def knowledge_documents(profile_pks: Iterable[int] | None = None) -> dict[int, dict[str, dict[str, str]]]:
    """The current documents of each profile's sources (every profile's, or those of ``profile_pks``) as a document
    holds them, by profile pk: one query."""
    rows = KnowledgeDocument.objects.filter(replaced_at__isnull=True)
    if profile_pks is not None:
        rows = rows.filter(source__profile_id__in=list(profile_pks))
    out: dict[int, dict[str, dict[str, str]]] = {}
    for profile_id, source, file_name, content_hash in rows.values_list(
        "source__profile_id", "source__name", "file_name", "content_hash"
    ).order_by("source__name", "file_name"):
        out.setdefault(profile_id, {}).setdefault(source, {})[file_name] = content_hash
    return out


def knowledge_held(
    profile_pks: Iterable[int] | None = None,
) -> tuple[dict[int, dict[str, dict[str, str]]], dict[int, dict[str, list[list[str]]]]]:
    """What each profile's document holds of its knowledge (every profile's, or those of ``profile_pks``), by profile
    pk: its current documents (as :func:`knowledge_documents`) and the synonyms of the sources holding them
    (``knowledge_synonyms``: groups by source name, sources with none left out; a source with no document is searched
    by none), in one query."""
    rows = KnowledgeDocument.objects.filter(replaced_at__isnull=True)
    if profile_pks is not None:
        rows = rows.filter(source__profile_id__in=list(profile_pks))
    documents: dict[int, dict[str, dict[str, str]]] = {}
    synonyms: dict[int, dict[str, list[list[str]]]] = {}
    for profile_id, source, file_name, content_hash, groups in rows.values_list(
        "source__profile_id", "source__name", "file_name", "content_hash", "source__synonyms"
    ).order_by("source__name", "file_name"):
        documents.setdefault(profile_id, {}).setdefault(source, {})[file_name] = content_hash
        if groups:
            synonyms.setdefault(profile_id, {})[source] = [list(group) for group in groups]
    return documents, synonyms


def document_keys(knowledge: Any) -> frozenset[Key] | None:
    """The keys of a document's knowledge (``None`` when it holds none: read the current documents)."""
    if not isinstance(knowledge, Mapping):
        return None
    return frozenset(
        (str(source), str(file_name), str(content_hash))
        for source, files in knowledge.items()
        if isinstance(files, Mapping)
        for file_name, content_hash in files.items()
    )


def rows_chosen(rows: Iterable[Row], keys: frozenset[Key] | None) -> set[int]:
    """The rows (pks) of ``rows`` that ``keys`` name (the module's docstring); without keys, the current ones."""
    if keys is None:
        return {pk for pk, *_, current in rows if current}
    exact: dict[Key, int] = {}
    current_of: dict[tuple[str, str], int] = {}
    for pk, source, file_name, content_hash, current in sorted(rows, key=lambda row: (row[4], row[0])):
        if (source, file_name, content_hash) in keys:
            exact[(source, file_name, content_hash)] = pk  # the current one last, else the latest
        if current:
            current_of[(source, file_name)] = pk
    chosen = {exact.get(key, current_of.get(key[:2])) for key in keys}
    chosen.discard(None)
    return chosen  # type: ignore[return-value]  # None discarded
