"""Reads: the passages of a profile's knowledge that best answer a question, on PostgreSQL or on SQLite.

Both engines take the question's words (any of them may match) and rank the passages that hold them, a heading's
words counting more than the text's; both return :class:`Hit` with a score in [0, 1), higher better. The scores of
the two engines are not comparable with each other, only within one search.

* PostgreSQL: full-text search with the document's language's configuration (stemmed, stop words dropped), ranked by
  ``ts_rank`` (normalised to rank / (rank + 1)), plus trigram word similarity of the question to the text, which
  finds a passage whose words the question misspells (``pasword``). Both through GIN indexes (migration 0002).
* SQLite: FTS5 with ``unicode61`` (diacritics removed), ranked by BM25 (normalised the same way); a word of four
  letters or more also matches as a prefix (``senha`` finds ``senhas``). No stemming and no typo tolerance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any

from django.contrib.postgres.lookups import TrigramWordSimilar
from django.contrib.postgres.search import SearchQuery, SearchRank, TrigramWordSimilarity
from django.db import connection
from django.db.models import F, FloatField, Q, Value
from django.db.models.functions import Cast

from knowledge.models import KnowledgeDocument, KnowledgePassage

CONFIGS = {"pt": "portuguese", "en": "english", "es": "spanish"}
MAX_QUERY_WORDS = 32
MAX_LIMIT = 50
TRIGRAM_WEIGHT = 0.5  # a misspelt word's match counts, but less than the words themselves
_WORD = re.compile(r"\w+")
FTS_TABLE = "knowledge_passage_fts"


def search_config(language: str) -> str:
    """PostgreSQL's text search configuration for a language of the platform's (``simple`` for any other)."""
    return CONFIGS.get(language, "simple")


@dataclass(frozen=True)
class Hit:
    """One passage found: where it is (document, heading, position), what it says, and how well it matched."""

    passage_id: int
    document_id: int
    document_title: str
    file_name: str
    source_name: str
    language: str
    heading: str
    position: int
    text: str
    score: float


def _words(query: str) -> list[str]:
    return list(dict.fromkeys(_WORD.findall(query.casefold())))[:MAX_QUERY_WORDS]


def _documents(*, profile: Any, tenant: Any, language: str | None, tags: Iterable[str]) -> list[int]:
    """The ids of the documents a search may read: the profile's enabled sources shared by every tenant or kept to
    ``tenant``, in ``language`` when given, holding one of ``tags`` (the document's or its source's) when given."""
    scope = Q(source__tenant__isnull=True)
    if tenant is not None:
        scope |= Q(source__tenant=tenant)
    documents = KnowledgeDocument.objects.filter(scope, source__profile=profile, source__enabled=True)
    if language:
        documents = documents.filter(language=language)
    wanted = set(tags)
    rows = documents.values_list("pk", "tags", "source__tags")
    return [pk for pk, own, inherited in rows if not wanted or wanted & {*own, *inherited}]


def _postgres(
    words: list[str], query: str, documents: list[int], language: str | None, limit: int
) -> list[tuple[int, float]]:
    raw = " | ".join(f"'{word}'" for word in words)  # \w+ words only: nothing to escape in tsquery syntax
    configs = [search_config(language)] if language else sorted({*CONFIGS.values(), "simple"})
    tsquery = reduce(or_, (SearchQuery(raw, config=config, search_type="raw") for config in configs))
    found = (
        KnowledgePassage.objects.filter(document_id__in=documents)
        .filter(Q(search_vector=tsquery) | TrigramWordSimilar(F("text"), Value(query)))
        .annotate(
            score=Cast(SearchRank(F("search_vector"), tsquery, normalization=Value(32)), FloatField())
            + TRIGRAM_WEIGHT * TrigramWordSimilarity(query, "text")
        )
        .order_by("-score", "pk")
        .values_list("pk", "score")[:limit]
    )
    return list(found)


def _sqlite(words: list[str], documents: list[int], limit: int) -> list[tuple[int, float]]:
    match = " OR ".join(f'"{word}"' + ("*" if len(word) >= 4 else "") for word in words)
    marks = ", ".join("%s" for _ in documents)
    sql = (
        f"SELECT p.id, -bm25({FTS_TABLE}, 2.0, 1.0) AS relevance FROM {FTS_TABLE} "  # noqa: S608 — names are ours
        f"JOIN knowledge_knowledgepassage p ON p.id = {FTS_TABLE}.rowid "
        f"WHERE {FTS_TABLE} MATCH %s AND p.document_id IN ({marks}) ORDER BY relevance DESC, p.id LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [match, *documents, limit])
        return [(pk, relevance / (relevance + 1)) for pk, relevance in cursor.fetchall()]


def knowledge_search(
    *,
    profile: Any,
    query: str,
    tenant: Any = None,
    language: str | None = None,
    tags: Iterable[str] = (),
    limit: int = 5,
) -> list[Hit]:
    """The ``limit`` passages (at most :data:`MAX_LIMIT`) of ``profile``'s enabled knowledge that best match
    ``query``, best first, read for ``tenant`` (its sources and the shared ones; ``None``: the shared ones only),
    filtered by the documents' ``language`` and by ``tags`` (any of them, the document's or its source's). A query
    with no word finds nothing. Three queries on either engine, whatever the size of the knowledge."""
    words = _words(query)
    limit = max(0, min(limit, MAX_LIMIT))
    if not words or not limit:
        return []
    documents = _documents(profile=profile, tenant=tenant, language=language, tags=tags)
    if not documents:
        return []
    if connection.vendor == "postgresql":
        ranked = _postgres(words, query[:1000], documents, language, limit)
    else:
        ranked = _sqlite(words, documents, limit)
    scores = dict(ranked)
    passages = KnowledgePassage.objects.filter(pk__in=scores).select_related("document__source")
    by_id = {passage.pk: passage for passage in passages}
    return [
        Hit(
            passage_id=pk,
            document_id=passage.document_id,
            document_title=passage.document.title,
            file_name=passage.document.file_name,
            source_name=passage.document.source.name,
            language=passage.document.language,
            heading=passage.heading,
            position=passage.position,
            text=passage.text,
            score=round(float(scores[pk]), 6),
        )
        for pk, _score in ranked
        if (passage := by_id.get(pk)) is not None
    ]
