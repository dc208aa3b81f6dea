"""Reads: the passages of a profile's knowledge that best answer a question, on PostgreSQL or on SQLite.

Both engines return :class:`Hit` with a score in [0, 1), higher better, comparable within one search only. Both
search in two steps, so that a search over 100,000 passages ranks a bounded number of them, not every passage that
holds a common word:

1. **The words filtered on.** The question's content words (:func:`agents.passages.content_words`: common words of
   the three languages and words under four letters left out) are looked up in the searched sources' words
   (:class:`knowledge.models.KnowledgeWord`), which say how many passages hold each (by its first letters, as the
   relevance bar compares words). Rarest first, words are taken while the passages they bring add up to at most
   :data:`CANDIDATE_BUDGET`; when even the rarest brings more, the passages must hold the two rarest. The words left
   out still rank on PostgreSQL. On PostgreSQL, a word no passage holds is read as the documents' nearest words
   (trigram similarity of the folded words, at least :data:`TYPO_SIMILARITY`: ``pasword`` → ``password``), and a
   word typed without its accents as the documents write it (``cartao`` → ``cartão``).
2. **The ranking**, in the database, of the passages holding a filtered word:

   * PostgreSQL: full text with the document language's configuration (stemmed, stop words dropped) through the GIN
     index on ``search_vector``, ranked by ``ts_rank`` over every word of the question (normalised to
     rank / (rank + 1)); the best :data:`RERANK` then gain half the trigram word similarity of the question to
     their text.
   * SQLite: FTS5 (``unicode61``, diacritics removed), each word matched by its first letters (``senha`` finds
     ``senhas``), ranked by BM25 (the heading counting twice the text), normalised the same way.

With few passages (a help centre of a few hundred), every content word is filtered on: step 1 only ever leaves out
the words a large knowledge holds in thousands of passages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Q, Sum

from agents.passages import STEM_CHARS, content_words
from common.text import fold
from knowledge.models import KnowledgeDocument, KnowledgePassage, KnowledgeWord

CONFIGS = {"pt": "portuguese", "en": "english", "es": "spanish"}
MAX_QUERY_WORDS = 32
MAX_LIMIT = 50
CANDIDATE_BUDGET = 2000  # passages the filtered words may bring, by the sources' counts
RERANK = 50  # PostgreSQL: the best passages by full text that the trigram similarity re-ranks
TRIGRAM_WEIGHT = 0.5  # a misspelt word's match counts, but less than the words themselves
TYPO_MIN_CHARS = 4  # shorter unknown words are left as they are: too many words are near them
TYPO_SIMILARITY = 0.45
TYPO_WORDS = 2  # the nearest words an unknown word is read as
_WORD = re.compile(r"\w+")
FTS_TABLE = "knowledge_passage_fts"
PASSAGE_TABLE = KnowledgePassage._meta.db_table
WORD_TABLE = KnowledgeWord._meta.db_table


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


@dataclass
class Term:
    """A content word of the question: folded, the passages of the searched sources holding a word that starts as it
    does, and the documents' own spellings of it (PostgreSQL: accents, or the nearest words for a misspelt one)."""

    folded: str
    passages: int = 0
    forms: set[str] = field(default_factory=set)

    @property
    def prefix(self) -> str:
        return self.folded[:STEM_CHARS]


@dataclass(frozen=True)
class Plan:
    """The words a search filters on (any of them; with ``both``, the two together) and those it ranks by."""

    filtered: list[Term]
    both: bool
    ranked: list[str]


def _words(query: str) -> list[str]:
    return list(dict.fromkeys(_WORD.findall(query.casefold())))[:MAX_QUERY_WORDS]


def _scope(*, profile: Any, tenant: Any, language: str | None, tags: Iterable[str]) -> tuple[list[int], list[int]]:
    """The documents a search may read, and their sources: the profile's enabled sources shared by every tenant or
    kept to ``tenant``, in ``language`` when given, holding one of ``tags`` (the document's or its source's) when
    given."""
    scope = Q(source__tenant__isnull=True)
    if tenant is not None:
        scope |= Q(source__tenant=tenant)
    documents = KnowledgeDocument.objects.filter(scope, source__profile=profile, source__enabled=True)
    if language:
        documents = documents.filter(language=language)
    wanted = set(tags)
    if not wanted:
        kept = list(documents.values_list("pk", "source_id"))
    else:
        rows = documents.values_list("pk", "source_id", "tags", "source__tags")
        kept = [(pk, source) for pk, source, own, inherited in rows if wanted & {*own, *inherited}]
    return [pk for pk, _ in kept], sorted({source for _, source in kept})


def _terms(query: str, sources: list[int]) -> list[Term]:
    """The question's content words (its words when it has none), each with the passages holding it and its
    spellings in the sources' words: two queries, each on the (source, stem) index."""
    asked = content_words(query)[:MAX_QUERY_WORDS] or [fold(word) for word in _words(query)]
    terms = {word: Term(word) for word in asked}
    prefixes = {term.prefix for term in terms.values()}
    starts = Q()
    for prefix in prefixes:  # a range, not LIKE: the index serves it on both engines
        starts |= Q(stem__gte=prefix, stem__lt=prefix + "\uffff")
    words = KnowledgeWord.objects.filter(source_id__in=sources)
    held = words.filter(starts).values_list("stem").annotate(total=Sum("passages")).order_by()
    spelt = words.filter(stem__in={word[:STEM_CHARS] for word in asked}, folded__in=asked)
    for term in terms.values():
        term.passages = sum(total for stem, total in held if stem.startswith(term.prefix))
    for word, folded in spelt.values_list("word", "folded"):
        terms[folded].forms.add(word)
    return list(terms.values())


def _plan(terms: list[Term], typed: list[str]) -> Plan:
    """Rarest first, the words whose passages add up to at most :data:`CANDIDATE_BUDGET`; when the rarest alone
    brings more, the two rarest together."""
    known = sorted((term for term in terms if term.passages), key=lambda term: (term.passages, term.folded))
    ranked = list(dict.fromkeys([*typed, *(form for term in terms for form in term.forms)]))
    if len(known) > 1 and known[0].passages > CANDIDATE_BUDGET:
        return Plan(known[:2], True, ranked)
    filtered: list[Term] = []
    total = 0
    for term in known:
        if filtered and total + term.passages > CANDIDATE_BUDGET:
            break
        filtered.append(term)
        total += term.passages
    return Plan(filtered, False, ranked)


def _typos(terms: list[Term], sources: list[int]) -> None:
    """PostgreSQL: each word no passage holds, of :data:`TYPO_MIN_CHARS` letters or more, read as the sources'
    :data:`TYPO_WORDS` nearest words (trigram similarity of the folded words), with the passages those hold."""
    by_word = {term.folded: term for term in terms if not term.passages and len(term.folded) >= TYPO_MIN_CHARS}
    if not by_word or not sources:
        return
    sql = (
        "SELECT asked, near.word, near.passages FROM unnest(%s::text[]) AS asked CROSS JOIN LATERAL ("  # noqa: S608
        f"SELECT word, passages FROM {WORD_TABLE} "
        "WHERE source_id = ANY(%s) AND folded %% asked AND similarity(folded, asked) >= %s "
        "ORDER BY similarity(folded, asked) DESC, word LIMIT %s) AS near"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [list(by_word), sources, TYPO_SIMILARITY, TYPO_WORDS])
        for asked, word, passages in cursor.fetchall():
            by_word[asked].passages += passages
            by_word[asked].forms.add(word)


def _tsquery(words: Iterable[str], configs: list[str], joiner: str = " | ") -> tuple[str, list[str]]:
    """SQL for the OR, over ``configs``, of ``to_tsquery(config, words joined by joiner)``, and its parameters. The
    words are ``\\w+`` runs (or ``&``/``|`` groups of them): nothing to escape in tsquery syntax inside quotes."""
    raw = joiner.join(words)
    sql = " || ".join("to_tsquery(%s::regconfig, %s)" for _ in configs)
    return f"({sql})", [value for config in configs for value in (config, raw)]


def _postgres(
    plan: Plan, query: str, documents: list[int], language: str | None, limit: int
) -> list[tuple[int, float]]:
    configs = [search_config(language)] if language else sorted({*CONFIGS.values(), "simple"})
    typed = {fold(word): word for word in plan.ranked}
    spellings = [sorted(term.forms or {typed.get(term.folded, term.folded)}) for term in plan.filtered]
    groups = ["(" + " | ".join(f"'{word}'" for word in words) + ")" for words in spellings]
    filter_sql, filter_params = _tsquery(groups, configs, " & " if plan.both else " | ")
    rank_sql, rank_params = _tsquery([f"'{word}'" for word in plan.ranked], configs)
    sql = (
        f"SELECT id, rank + %s * word_similarity(%s, text) AS score FROM ("  # noqa: S608 — names are ours
        f"SELECT id, text, ts_rank(search_vector, {rank_sql}, 32) AS rank FROM {PASSAGE_TABLE} "
        f"WHERE search_vector @@ {filter_sql} AND document_id = ANY(%s) ORDER BY rank DESC, id LIMIT %s"
        ") AS candidates ORDER BY score DESC, id LIMIT %s"
    )
    params = [TRIGRAM_WEIGHT, query, *rank_params, *filter_params, documents, max(limit, RERANK), limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(pk, float(score)) for pk, score in cursor.fetchall()]


def _sqlite(plan: Plan, documents: list[int], limit: int) -> list[tuple[int, float]]:
    joiner = " AND " if plan.both else " OR "
    match = joiner.join(f'"{term.prefix}"' + ("*" if len(term.prefix) >= 4 else "") for term in plan.filtered)
    marks = ", ".join("%s" for _ in documents)
    sql = (
        f"SELECT p.id, -bm25({FTS_TABLE}, 2.0, 1.0) AS relevance FROM {FTS_TABLE} "  # noqa: S608 — names are ours
        f"JOIN {PASSAGE_TABLE} p ON p.id = {FTS_TABLE}.rowid "
        f"WHERE {FTS_TABLE} MATCH %s AND p.document_id IN ({marks}) ORDER BY relevance DESC, p.id LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [match, *documents, limit])
        return [(pk, relevance / (relevance + 1)) for pk, relevance in cursor.fetchall()]


def search_plan(*, query: str, sources: list[int]) -> Plan:
    """The words a search of ``query`` over ``sources`` filters on and ranks by (step 1 of the module's docstring)."""
    terms = _terms(query, sources)
    if connection.vendor == "postgresql":
        _typos(terms, sources)
    return _plan(terms, _words(query))


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
    with no word, or none the searched documents hold (nor, on PostgreSQL, one near), finds nothing. Five queries
    on SQLite, six at most on PostgreSQL, whatever the size of the knowledge; the ranking query ranks the passages
    of the filtered words only (:func:`search_plan`)."""
    limit = max(0, min(limit, MAX_LIMIT))
    if not _words(query) or not limit:
        return []
    documents, sources = _scope(profile=profile, tenant=tenant, language=language, tags=tags)
    if not documents:
        return []
    plan = search_plan(query=query, sources=sources)
    if not plan.filtered:
        return []
    if connection.vendor == "postgresql":
        ranked = _postgres(plan, query[:1000], documents, language, limit)
    else:
        ranked = _sqlite(plan, documents, limit)
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
