"""Reads: the passages of a profile's knowledge that best answer a question, on PostgreSQL or on SQLite.

Both engines return :class:`Hit` with a score in [0, 1), higher better. Both search in three steps, so that a search
over 100,000 passages ranks a bounded number of them, not every passage that holds a common word:

1. **The words filtered on.** The question's content words (:func:`agents.passages.content_words`: common words of
   the three languages and words under four letters left out) are looked up in the searched sources' words
   (:class:`knowledge.models.KnowledgeWord`), which say how many passages hold each (by its first letters, as the
   relevance bar compares words). Rarest first, words are taken while the passages they bring add up to at most
   :data:`CANDIDATE_BUDGET` (on PostgreSQL, the passages of the lexemes they stem to: :meth:`Term.brings`); when
   even the rarest brings more, the passages must hold the two rarest. The words left
   out still rank on PostgreSQL. On PostgreSQL, a word no passage holds is read as the documents' nearest words
   (trigram similarity of the folded words, at least :data:`TYPO_SIMILARITY`: ``pasword`` → ``password``), and a
   word typed without its accents as the documents write it (``cartao`` → ``cartão``).
2. **The ranking**, in the database, of the passages holding a filtered word:

   * PostgreSQL: full text with the document language's configuration (stemmed, stop words dropped) through the GIN
     index on ``search_vector``, at most :data:`CANDIDATE_LIMIT` of the passages it finds, ranked by ``ts_rank``
     over every word of the question (normalised to rank / (rank + 1)); no similarity to a passage's text (a
     misspelt word is read as the documents' nearest words before the search, and step 3 orders the best).
   * SQLite: FTS5 (``unicode61``, diacritics removed), each word matched by its first letters in the heading or the
     text (``senha`` finds ``senhas``) or by a Snowball stem in the passage's stems (``billing`` finds ``bill``),
     ranked by BM25 (the heading counting twice the text, the stems nothing), normalised the same way.

3. **The words held**: the engine's best :data:`WORDS_RERANKED` ordered again by how much of the question's words
   each holds, as the relevance bar counts and weighs them (a general word weighing less), its document's title
   breaking a tie (:func:`by_words_held`), and scored by that share first: a bar on the score reads about the same on
   both engines.

The question is read with the synonyms of the sources searched first (:mod:`knowledge.synonym_reading`): a group's
other terms are searched too, as are its words' bases and the other words of a fault's families
(:func:`agents.passages.family_searched`: "llego" finds "recibirlo").

With few passages (a help centre of a few hundred), every content word is filtered on: step 1 only ever leaves out
the words a large knowledge holds in thousands of passages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Exists, Q, Sum
from django.db.models.functions import Length

from agents.public import (
    STEM_CHARS,
    HeldShare,
    asked_words,
    content_words,
    family_searched,
    word_bases,
    word_stems,
    zipf_frequency,
)
from common.config_version import config_version, local_generation
from common.text import fold
from knowledge.answer_kinds import asked_with_kinds, kind_words, kinds_asked
from knowledge.models import KnowledgeDocument, KnowledgePassage, KnowledgeSource, KnowledgeWord
from knowledge.reading import HEADING_SEPARATOR
from knowledge.spelling import edits_allowed, respelt, spelling_of
from knowledge.synonym_reading import Reading, expanded, passage_words, question_read, words_held_with
from knowledge.synonyms import Group, Held, groups_of
from knowledge.vectors import LEXICAL, VECTORS, Stamp, fused, nearest
from knowledge.versions import Key, rows_chosen

CONFIGS = {"pt": "portuguese", "en": "english", "es": "spanish"}
MAX_QUERY_WORDS = 32
MAX_LIMIT = 50
CANDIDATE_BUDGET = 2000  # passages the filtered words may bring, by the sources' counts
# PostgreSQL: a search of every language past this many passages finds its candidates by the full-text index alone
# (the filtered words bring at most CANDIDATE_BUDGET of the searched ones), never by the documents' index: the
# planner, reading that index as a cheap scan of the whole table in order, chose it for 100,000 passages and tested
# every one (0.5-1 s). In one language the documents' index may be the better one: the full-text index also brings
# the other languages' passages holding the word.
LARGE_SCOPE = 4 * CANDIDATE_BUDGET
# PostgreSQL: the passages a ranking reads at most, whatever the words' counts said (a single known word is
# filtered on however many passages hold it, and a lexeme's count can miss words it stems from: "every" is "everi").
# Past it, the first the full-text index returns, in the table's order (migration 0005 keeps the scan serial, so the
# same ones every time): ranking each costs reading its toasted tsvector, and a common word brought 14,000 (100 ms).
CANDIDATE_LIMIT = CANDIDATE_BUDGET
FUSION_DEPTH = 20  # with vectors: how deep each ranking goes before they are fused
# The engine's best passages a search re-ranks by how many of the question's words each holds (a customer's question
# shares most of its words with its answer; an engine's rank lifts a passage repeating one of them).
WORDS_RERANKED = 10
STEMS_WEIGHT = 0.0  # SQLite: BM25's weight of a stem matched, beside the heading's 2 and the text's 1
TYPO_MIN_CHARS = 4  # shorter unknown words are left as they are: too many words are near them
TYPO_SIMILARITY = 0.45
TYPO_WORDS = 2  # the nearest words an unknown word is read as
_WORD = re.compile(r"\w+")
FTS_TABLE = "knowledge_passage_fts"
PASSAGE_TABLE = KnowledgePassage._meta.db_table
WORD_TABLE = KnowledgeWord._meta.db_table
SCOPES_KEPT = 256  # per process: the documents of this many (profile, tenant, language, tags)
WORDS_KEPT = 20_000  # per process: this many (sources, word) counts and spellings
QUERIES_READ_KEPT = 1024  # per process: the words of this many queries (a search reads its query's up to five times)


def search_config(language: str) -> str:
    """PostgreSQL's text search configuration for a language of the platform's (``simple`` for any other)."""
    return CONFIGS.get(language, "simple")


def search_configs(language: str | None) -> list[str]:
    """The configurations a search reads with: the language's, or without one every language's and ``simple``."""
    return [search_config(language)] if language else sorted({*CONFIGS.values(), "simple"})


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
    # The rankings that found it (knowledge.vectors: LEXICAL, VECTORS), and its cosine when the vectors ranked it.
    found_by: tuple[str, ...] = (LEXICAL,)
    cosine: float | None = None


@dataclass
class Term:
    """A content word of the question: folded, the passages of the searched sources holding a word that starts as it
    does, and the documents' own spellings of it (PostgreSQL: accents, or the nearest words for a misspelt one)."""

    folded: str
    passages: int = 0
    forms: set[str] = field(default_factory=set)
    # PostgreSQL: the lexemes its spellings stem to, by configuration, each with the passages of the sources holding
    # a word that starts with it (what a full-text filter on it brings: "pague" is "pag" in Spanish, as "pago" is).
    lexemes: tuple[tuple[str, str, int], ...] = ()

    @property
    def prefix(self) -> str:
        return self.folded[:STEM_CHARS]

    @property
    def stems(self) -> frozenset[str]:
        """Its Snowball stems (:func:`agents.stems.word_stems`): SQLite matches them in the passages' stems."""
        return word_stems(self.folded)

    def brings(self, configs: Iterable[str] | None) -> int:
        """The passages a filter on this word brings: on PostgreSQL (``configs`` given), those of its lexemes in
        ``configs`` (each counted once); on SQLite, those of its first letters."""
        if configs is None:
            return self.passages
        wanted = set(configs)
        counts = {fold(lexeme): count for config, lexeme, count in self.lexemes if config in wanted}
        # A lexeme that starts with another ("fedigo", "fedig") brings none of the passages that one does not.
        return sum(
            count for lexeme, count in counts.items() if not any(lexeme.startswith(o) for o in counts if o != lexeme)
        )


@dataclass(frozen=True)
class Plan:
    """The words a search filters on (any of them; with ``both``, the two together) and those it ranks by."""

    filtered: list[Term]
    both: bool
    ranked: list[str]


@dataclass(frozen=True)
class Scope:
    """The documents a search may read (with what a hit tells of each: title, file name, source's name, language),
    and their sources."""

    documents: list[int]
    sources: list[int]
    about: dict[int, tuple[str, str, str, str]]
    passages: int
    tenants_kept: bool = True  # a tenant of the profile has a source of its own: each tenant's scope is its own
    stamps: tuple[Stamp, ...] = ()  # each document's pk, SHA-256 and embeddings model, for the vectors' matrix
    synonyms: Mapping[str, Any] = field(default_factory=dict)  # the current synonyms of its sources, by name

    @cached_property
    def documents_sql(self) -> str:
        """:attr:`documents` as an SQL literal (PostgreSQL's bigint array), written once a scope kept."""
        return _ids(self.documents)

    def groups(self, synonyms: Held | None) -> tuple[Group, ...]:
        """The synonym groups of its sources: ``synonyms``' (a version's, by source name), else the current ones."""
        names = {source_name for _, _, source_name, _ in self.about.values()}
        return groups_of(self.synonyms if synonyms is None else dict(synonyms), names)


class PerVersion:
    """Values read from the database that hold while the configuration version does, in this process: every write
    of a source or a document (an upload, a replacement, a delete, a source switched off) bumps the version
    (:class:`knowledge.apps.KnowledgeConfig`), and the words' counts are written in the same transaction as their
    document. The caller reads the version before the database, so that a value is never older than the version it
    is kept under. At most ``size`` values: past that, they are read again."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._held: tuple[object, dict[Any, Any]] = (None, {})

    def get(self, version: object, key: Any) -> Any:
        held_version, values = self._held
        return values.get(key) if held_version == version else None

    def put(self, version: object, key: Any, value: Any) -> None:
        held_version, values = self._held
        if held_version != version or len(values) >= self.size:
            values = {}
            self._held = (version, values)
        values[key] = value


SCOPES = PerVersion(SCOPES_KEPT)
WORDS = PerVersion(WORDS_KEPT)
SPELLINGS = PerVersion(WORDS_KEPT)  # (sources, word) → the knowledge's word it is read as ("": none, or it is known)


def _version() -> tuple[int, int]:
    """What :class:`PerVersion` values are kept under: the configuration version, and this process's own writes
    (seen at once, before their commit publishes the version)."""
    return config_version(), local_generation()


@lru_cache(maxsize=QUERIES_READ_KEPT)
def _words(query: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(_WORD.findall(query.casefold())))[:MAX_QUERY_WORDS]


def _scope(
    *,
    profile: Any,
    tenant: Any,
    language: str | None,
    tags: Iterable[str],
    version: object,
    documents: frozenset[Key] | None = None,
) -> Scope:
    """The documents a search may read, and their sources: of the profile's enabled sources shared by every tenant or
    kept to ``tenant``, the rows ``documents`` names (a version's knowledge, :func:`knowledge.versions.rows_chosen`;
    ``None``: the current ones), in ``language`` when given, holding one of ``tags`` (the document's or its source's)
    when given. One query, once per configuration version — for every tenant of a profile none of whose tenants has a
    source of its own (the scope kept says so), for each tenant otherwise."""
    wanted = frozenset(tags)
    shared = (getattr(profile, "pk", profile), None, language or None, wanted, documents)
    tenant_pk = getattr(tenant, "pk", tenant)
    key = shared if tenant_pk is None else (shared[0], tenant_pk, *shared[2:])
    for held in (key, shared) if key != shared else (key,):
        kept = SCOPES.get(version, held)
        if kept is not None and (held == key or not kept.tenants_kept):
            return kept
    scope = Q(source__tenant__isnull=True)
    if tenant is not None:
        scope |= Q(source__tenant=tenant)
    rows = KnowledgeDocument.objects.filter(scope, source__profile=profile, source__enabled=True)
    if documents is None:
        rows = rows.filter(replaced_at__isnull=True)
    tenants_kept = KnowledgeSource.objects.filter(profile=profile, enabled=True, tenant__isnull=False)
    fields = (
        "pk", "source_id", "title", "file_name", "source__name", "language", "tags", "source__tags", "held",
        "tenants_kept", "content_hash", "replaced_at", "embedding_model", "source__synonyms",
    )  # fmt: skip
    read = list(
        rows.annotate(held=Count("passages"), tenants_kept=Exists(tenants_kept)).values_list(*fields).order_by()
    )
    chosen = rows_chosen(((row[0], row[4], row[3], row[10], row[11] is None) for row in read), documents)
    kept_rows = [
        row
        for row in read
        if row[0] in chosen and (not language or row[5] == language) and (not wanted or wanted & {*row[6], *row[7]})
    ]
    found = Scope(
        [row[0] for row in kept_rows],
        sorted({row[1] for row in kept_rows}),
        {row[0]: (row[2], row[3], row[4], row[5]) for row in kept_rows},
        sum(row[8] for row in kept_rows),
        tenants_kept=any(row[9] for row in read),
        stamps=tuple((row[0], row[10], row[12]) for row in kept_rows),
        synonyms={row[4]: row[13] for row in kept_rows if row[13]},
    )
    SCOPES.put(version, key, found)
    if read and not found.tenants_kept:  # what every tenant of the profile reads
        SCOPES.put(version, shared, found)
    return found


Counted = tuple[int, frozenset[str], tuple[tuple[str, str, int], ...]]  # a word's passages, spellings, lexemes


def _terms(query: str, sources: list[int], version: object) -> list[Term]:
    """The question's content words (its words when it has none), each with the passages holding it and its
    spellings in the sources' words (on PostgreSQL, a word no passage holds read as its nearest words, and the
    lexemes of its spellings counted): kept per configuration version, the words not kept read in one query."""
    asked = content_words(query)[:MAX_QUERY_WORDS] or [fold(word) for word in _words(query)]
    typed = {fold(word): word for word in _words(query)}
    held = tuple(sources)
    keys = {word: (held, word, typed.get(word, word)) for word in dict.fromkeys(asked)}
    known: dict[str, Counted | None] = {word: WORDS.get(version, key) for word, key in keys.items()}
    missing = [word for word, found in known.items() if found is None]
    if missing:
        if connection.vendor == "postgresql":
            read = _words_postgres([keys[word][2] for word in missing], missing, sources)
        else:
            read = _words_sqlite(missing, sources)
        for word, found in read.items():
            WORDS.put(version, keys[word], found)
            known[word] = found
    return [
        Term(word, passages, set(forms), lexemes)
        for word, (passages, forms, lexemes) in ((word, found) for word, found in known.items() if found is not None)
    ]


def _words_sqlite(words: list[str], sources: list[int]) -> dict[str, Counted]:
    """SQLite: the passages holding a word that starts as each of ``words`` does or shares a Snowball stem with it
    (FTS5 matches by those letters and those stems, and the ranking reads no spelling), on the (source, stem) index:
    the sources' words starting with the word's first letters or a stem's, the stems compared here."""
    starts = Q()
    prefixes = {start[:STEM_CHARS] for word in words for start in (word, *word_stems(word))}
    for prefix in prefixes:  # a range, not LIKE: the index serves it
        starts |= Q(stem__gte=prefix, stem__lt=prefix + "\uffff")
    rows = KnowledgeWord.objects.filter(starts, source_id__in=sources).values_list("stem", "folded")
    held = list(rows.annotate(Sum("passages")).order_by())
    return {
        word: (
            sum(
                total
                for stem, folded, total in held
                if stem.startswith(word[:STEM_CHARS]) or not word_stems(word).isdisjoint(word_stems(folded))
            ),
            frozenset(),
            (),
        )
        for word in words
    }


def query_spelled(
    *,
    profile: Any,
    query: str,
    tenant: Any = None,
    language: str | None = None,
    tags: Iterable[str] = (),
    documents: frozenset[Key] | None = None,
) -> str:
    """``query`` with each content word of letters that general language uses little (below Zipf
    :data:`agents.word_frequency.COUNTED_FROM`) and ``profile``'s knowledge does not hold (in the sources ``tenant``
    may read, their documents in ``language`` and of ``tags`` when given, as a search reads them: not by its first
    letters, nor by a Snowball stem) read as the knowledge's one word one edit from it
    (:mod:`knowledge.spelling`: "roming" is "roaming"), for the search and the relevance bar alike, on either engine.
    The words' counts are the search's own in the same scope (:func:`_terms`, kept per configuration version: a
    search's words cost no query more); a word they say no passage holds costs one query of the sources' words near
    it, once per configuration version."""
    version = _version()
    scope = _scope(profile=profile, tenant=tenant, language=language, tags=tags, version=version, documents=documents)
    if not scope.sources:
        return query
    # A word of letters only, which general language uses little (a frequent word — "pena", "like", "shop" — is a
    # word, not a typo) and no passage holds.
    suspects = [
        term.folded
        for term in _terms(query, scope.sources, version)
        if edits_allowed(term.folded) and term.folded.isalpha() and not zipf_frequency(term.folded) and _unheld(term)
    ]
    return respelt(query, _spellings(suspects, scope.sources, version)) if suspects else query


def _unheld(term: Term) -> bool:
    """No passage holds ``term`` by its first letters: it brings none (SQLite, and PostgreSQL when no word is near
    it either), or only PostgreSQL's near words, none of which starts as it does."""
    if not term.passages:
        return True
    return bool(term.forms) and not any(fold(form)[:STEM_CHARS] == term.prefix for form in term.forms)


def _spellings(words: list[str], sources: list[int], version: object) -> dict[str, str]:
    """Of ``words`` (folded), those the sources do not hold by their first letters or a Snowball stem, each with the
    sources' word it is read as (:func:`knowledge.spelling.spelling_of`): kept per configuration version, the words not
    kept read in one query — the sources' words starting as each word or one of its stems does, and those of its
    first letter within its edits' length of it."""
    held = tuple(sources)
    known = {word: SPELLINGS.get(version, (held, word)) for word in words}
    missing = [word for word, found in known.items() if found is None]
    if missing:
        starts = {word: {word[:STEM_CHARS], *(stem[:STEM_CHARS] for stem in word_stems(word))} for word in missing}
        near = Q()
        for word in missing:
            for prefix in starts[word]:
                near |= Q(stem__gte=prefix, stem__lt=prefix + "\uffff")
            most = edits_allowed(word)  # the words of its first letter within its edits of its length
            lengths = (len(word) - most, len(word) + most)
            near |= Q(stem__gte=word[0], stem__lt=word[0] + "\uffff", length__range=lengths)
        rows = KnowledgeWord.objects.filter(source_id__in=sources, passages__gt=0).annotate(length=Length("folded"))
        spelt = set(rows.filter(near).values_list("folded", flat=True))
        for word in missing:
            stems = word_stems(word)
            holding = any(
                folded.startswith(word[:STEM_CHARS]) or not stems.isdisjoint(word_stems(folded))
                for folded in spelt
                if folded.startswith(tuple(starts[word]))
            )
            candidates = (folded for folded in sorted(spelt) if content_words(folded) == [folded])
            found = "" if holding else spelling_of(word, candidates) or ""
            SPELLINGS.put(version, (held, word), found)
            known[word] = found
    return {word: found for word, found in known.items() if found}


# The accented letters of the platform's languages, and their folded forms: the stemmers keep some accents (Portuguese
# "lín" of "línea") and drop others (Spanish "line"), and the words' stems are folded.
_ACCENTED = "áàâãäåéèêëíìîïóòôõöúùûüçñýÿ"
_PLAIN = "".join(fold(letter) for letter in _ACCENTED)

# For each word asked (folded, and as typed): the passages holding a word starting as it does; its spellings (the
# documents' words folding to it); when no passage holds it (and it has TYPO_MIN_CHARS letters or more) the
# sources' TYPO_WORDS nearest words, with their passages; and the lexemes its spellings (else the word as typed)
# stem to in each configuration, each with the passages holding a word that starts with it (folded). One query on the
# (source, stem) and (source, word) indexes, the trigram index only for unknown words.
_WORDS_SQL = (
    "SELECT asked, held.passages, spelt.forms, near.words, near.passages, counted.lexemes "  # noqa: S608
    "FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[]) AS asked_words (asked, typed, prefix, bound) "
    "CROSS JOIN LATERAL ("
    f"SELECT COALESCE(SUM(passages), 0) AS passages FROM {WORD_TABLE} "
    "WHERE source_id = ANY(%s) AND stem >= prefix AND stem < bound AND starts_with(stem, prefix)) AS held "
    "CROSS JOIN LATERAL ("
    f"SELECT COALESCE(array_agg(word), '{{}}') AS forms FROM {WORD_TABLE} "
    "WHERE source_id = ANY(%s) AND stem = prefix AND folded = asked) AS spelt "
    "CROSS JOIN LATERAL ("
    "SELECT COALESCE(array_agg(word), '{}') AS words, COALESCE(SUM(passages), 0) AS passages FROM ("
    f"SELECT word, passages FROM {WORD_TABLE} "
    "WHERE held.passages = 0 AND length(asked) >= %s AND source_id = ANY(%s) "
    "AND folded %% asked AND similarity(folded, asked) >= %s "
    "ORDER BY similarity(folded, asked) DESC, word LIMIT %s) AS nearest) AS near "
    "CROSS JOIN LATERAL ("
    "SELECT COALESCE(json_agg(json_build_array(config, lexeme, brought.passages)), '[]') AS lexemes FROM ("
    "SELECT config, lexeme, translate(lexeme, %s, %s) AS plain FROM ("
    "SELECT DISTINCT config, lexeme FROM unnest(%s::text[]) AS configs (config) "
    "CROSS JOIN unnest(CASE WHEN spelt.forms || near.words = '{}' THEN ARRAY[typed] "
    "ELSE spelt.forms || near.words END) AS spellings (spelling) "
    "CROSS JOIN unnest(tsvector_to_array(to_tsvector(config::regconfig, spelling))) AS lexeme) AS distinct_lexemes"
    ") AS lexemes CROSS JOIN LATERAL ("
    f"SELECT COALESCE(SUM(passages), 0) AS passages FROM {WORD_TABLE} "
    "WHERE source_id = ANY(%s) AND stem >= left(plain, %s) AND stem < left(plain, %s) || %s "
    "AND starts_with(folded, plain)) AS brought) AS counted"
)


def _words_postgres(typed: list[str], words: list[str], sources: list[int]) -> dict[str, Counted]:
    """PostgreSQL: :data:`_WORDS_SQL` for ``words`` (folded), typed as ``typed``."""
    prefixes = [word[:STEM_CHARS] for word in words]
    configs = sorted({*CONFIGS.values(), "simple"})
    params = [
        words, typed, prefixes, [prefix + "\uffff" for prefix in prefixes], sources, sources,
        TYPO_MIN_CHARS, sources, TYPO_SIMILARITY, TYPO_WORDS, _ACCENTED, _PLAIN, configs,
        sources, STEM_CHARS, STEM_CHARS, "\uffff",
    ]  # fmt: skip
    read: dict[str, Counted] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        # Its lateral counts are estimated far above what they cost (under a millisecond each): past jit_above_cost,
        # compiling it took 30-250 ms of the 5 ms it runs in.
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(_WORDS_SQL, params)
        for asked, held, spelt, near, near_passages, lexemes in cursor.fetchall():
            counted = json.loads(lexemes) if isinstance(lexemes, str) else lexemes
            read[asked] = (
                int(held) + int(near_passages),
                frozenset([*spelt, *near]),
                tuple(sorted((config, lexeme, int(count)) for config, lexeme, count in counted)),
            )
    return read


def _plan(terms: list[Term], typed: Sequence[str], configs: list[str] | None) -> Plan:
    """Rarest first, the words whose passages (:meth:`Term.brings`) add up to at most :data:`CANDIDATE_BUDGET`;
    when the rarest alone brings more, the two rarest together."""
    brings = {term.folded: term.brings(configs) for term in terms}
    # A word is known by its first letters, or (PostgreSQL) by a lexeme it stems to: "billing" brings "bill"'s.
    held = (term for term in terms if term.passages or brings[term.folded])
    known = sorted(held, key=lambda term: (brings[term.folded], term.folded))
    ranked = list(dict.fromkeys([*typed, *(form for term in terms for form in term.forms)]))
    if len(known) > 1 and brings[known[0].folded] > CANDIDATE_BUDGET:
        return Plan(known[:2], True, ranked)
    filtered: list[Term] = []
    total = 0
    for term in known:
        if filtered and total + brings[term.folded] > CANDIDATE_BUDGET:
            break
        filtered.append(term)
        total += brings[term.folded]
    return Plan(filtered, False, ranked)


def _ranked_by_own_words(plan: Plan, query: str, terms: list[Term]) -> Plan:
    """``plan`` ranking by the question's own words and their spellings only: a synonym's terms widen what the
    search finds, and do not outrank a passage holding what the customer wrote — a group's term common in the
    documents ("preço da ação" for "cotação") would lift every passage that names a price. PostgreSQL's ranking
    reads ``ranked``; SQLite's ranks by the words it filters on."""
    own = {fold(word) for word in _words(query)}
    kept = {*_words(query), *(form for term in terms if term.folded in own for form in term.forms)}
    return replace(plan, ranked=[word for word in plan.ranked if word in kept])


def _tsquery(words: Iterable[str], configs: list[str], joiner: str = " | ") -> tuple[str, list[str]]:
    """SQL for the OR, over ``configs``, of ``to_tsquery(config, words joined by joiner)``, and its parameters (the
    words: the configurations are this module's own names, written into the SQL). The words are ``\\w+`` runs (or
    ``&``/``|`` groups of them): nothing to escape in tsquery syntax inside quotes."""
    raw = joiner.join(words)
    sql = " || ".join(f"to_tsquery('{_config(config)}'::regconfig, %s)" for config in configs)
    return f"({sql})", [raw for _ in configs]


def _config(name: str) -> str:
    """``name``, one of :func:`search_configs`' (written into SQL as it is)."""
    if name not in _CONFIG_NAMES:
        raise ValueError(f"not a text search configuration of the knowledge search: {name!r}")
    return name


_CONFIG_NAMES = frozenset({*CONFIGS.values(), "simple"})


def _ids(values: Iterable[int]) -> str:
    """An SQL literal of the bigint array of ``values`` (integers: nothing to escape)."""
    return "'{" + ",".join(str(int(value)) for value in values) + "}'::int8[]"


# The passages a ranking query returns: id, score, document, heading, position, text.
Row = tuple[int, float, int, str, int, str]


def _postgres(plan: Plan, scope: Scope, language: str | None, limit: int) -> list[Row]:
    configs = search_configs(language)
    typed = {fold(word): word for word in plan.ranked}
    spellings = [sorted(term.forms or {typed.get(term.folded, term.folded)}) for term in plan.filtered]
    groups = ["(" + " | ".join(f"'{word}'" for word in words) + ")" for words in spellings]
    filter_sql, filter_params = _tsquery(groups, configs, " & " if plan.both else " | ")
    rank_sql, rank_params = _tsquery([f"'{word}'" for word in plan.ranked], configs)
    whole = language is None and scope.passages > LARGE_SCOPE
    in_documents = "(document_id + 0)" if whole else "document_id"  # + 0: no index serves it
    # Only the customer's words are parameters: the weights, limits and document ids (integers) are written into the
    # statement, which the client-side binding would have quoted into it one by one, a list's every element too.
    sql = (
        "SELECT id, rank, document_id, heading, position, text FROM ("  # noqa: S608
        f"SELECT id, document_id, heading, position, text, ts_rank(search_vector, {rank_sql}, 32) AS rank FROM ("
        f"SELECT * FROM {PASSAGE_TABLE} WHERE search_vector @@ {filter_sql} "
        f"AND {in_documents} = ANY({scope.documents_sql}) LIMIT {int(CANDIDATE_LIMIT)}"
        f") AS matched) AS ranked ORDER BY rank DESC, id LIMIT {int(limit)}"
    )
    params = [*rank_params, *filter_params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(pk, float(score), *rest) for pk, score, *rest in cursor.fetchall()]


def _sqlite_term(term: Term) -> str:
    """FTS5's query for a filtered word: its first letters in the heading, the text or the passage's stems
    (``senha`` finds ``senhas``; ``wifi`` the stems of ``Wi-Fi`` joined), or one of its Snowball stems in the
    passage's stems (``billing`` finds ``bill``) — those the first letters do not find already (a stem starting with
    them is a word's that does: ``pagament`` of ``pagamento``)."""
    prefix = f'{{heading text stems}} : "{term.prefix}"' + ("*" if len(term.prefix) >= 4 else "")
    stems = sorted(stem for stem in term.stems if len(term.prefix) < 4 or not stem.startswith(term.prefix))
    return "(" + " OR ".join([prefix, *(f'stems : "{stem}"' for stem in stems)]) + ")"


def _sqlite(plan: Plan, documents: list[int], limit: int) -> list[Row]:
    joiner = " AND " if plan.both else " OR "
    match = joiner.join(_sqlite_term(term) for term in plan.filtered)
    marks = ", ".join("%s" for _ in documents)
    sql = (
        f"SELECT p.id, -bm25({FTS_TABLE}, 2.0, 1.0, {STEMS_WEIGHT}) AS relevance, "  # noqa: S608
        "p.document_id, p.heading, p.position, p.text "
        f"FROM {FTS_TABLE} "
        f"JOIN {PASSAGE_TABLE} p ON p.id = {FTS_TABLE}.rowid "
        f"WHERE {FTS_TABLE} MATCH %s AND p.document_id IN ({marks}) ORDER BY relevance DESC, p.id LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [match, *documents, limit])
        return [(pk, relevance / (relevance + 1), *rest) for pk, relevance, *rest in cursor.fetchall()]


def synonym_groups(
    *, profile: Any, tenant: Any = None, documents: frozenset[Key] | None = None, synonyms: Held | None = None
) -> tuple[Group, ...]:
    """The synonym groups a search of ``profile``'s knowledge for ``tenant`` reads (those of the sources it may
    read, in any language: ``synonyms``, a version's, else the current ones), which the relevance bar counts with."""
    scope = _scope(profile=profile, tenant=tenant, language=None, tags=(), version=_version(), documents=documents)
    return scope.groups(synonyms)


def search_plan(*, query: str, sources: list[int], language: str | None = None) -> Plan:
    """The words a search of ``query`` over ``sources`` (in ``language``'s documents when given) filters on and
    ranks by (step 1 of the module's docstring)."""
    configs = search_configs(language) if connection.vendor == "postgresql" else None
    return _plan(_terms(query, sources, _version()), _words(query), configs)


def knowledge_search(
    *,
    profile: Any,
    query: str,
    tenant: Any = None,
    language: str | None = None,
    tags: Iterable[str] = (),
    limit: int = 5,
    documents: frozenset[Key] | None = None,
    vectors: bool = False,
    synonyms: Held | None = None,
) -> list[Hit]:
    """The ``limit`` passages (at most :data:`MAX_LIMIT`) of ``profile``'s enabled knowledge that best match
    ``query``, best first, read for ``tenant`` (its sources and the shared ones; ``None``: the shared ones only),
    filtered by the documents' ``language`` and by ``tags`` (any of them, the document's or its source's), of the
    documents a version holds (``documents``, its knowledge's keys; ``None``: the current ones), the question read
    with the synonyms of the sources searched (``synonyms``, a version's by source name; ``None``: the current ones;
    :mod:`knowledge.synonym_reading`: a group's other terms are looked for too) and for the kinds of answer it asks
    for (:mod:`knowledge.answer_kinds`: their words looked for too, the passages holding one ordered as holding one
    more of its words). A query
    with no word, or none the searched documents hold (nor, on PostgreSQL, one near), finds nothing. Three queries
    at most on either engine, whatever the size of the knowledge: the documents searched and the words' counts,
    each kept per configuration version (:class:`PerVersion`), and the ranking, which returns the passages' rows
    and ranks the passages of the filtered words only (:func:`search_plan`). With ``vectors``, the passages nearest
    the question by their embeddings too, the two rankings fused (:func:`knowledge.vectors.fused`; the vectors'
    failure leaves the words' alone): one more query to read the passages only the vectors found, and one to read
    the scope's vectors once per set of documents (:mod:`knowledge.vectors`)."""
    limit = max(0, min(limit, MAX_LIMIT))
    if not _words(query) or not limit:
        return []
    version = _version()
    scope = _scope(profile=profile, tenant=tenant, language=language, tags=tags, version=version, documents=documents)
    if not scope.documents:
        return []
    depth = max(limit, FUSION_DEPTH) if vectors else limit
    configs = search_configs(language) if connection.vendor == "postgresql" else None
    asked = asked_with_kinds(asked_words(query), query)
    reading = question_read(asked, query, scope.groups(synonyms))
    # The words of the kinds of answer asked for are looked for and rank as the question's own; a synonym's and a
    # word's base only widen what is found.
    kinds_of = kinds_asked(query)
    kinds = (*kind_words(kinds_of.marks), *kinds_of.read)
    own = " ".join([query, *kinds]) if kinds else query
    searched = _with_bases(expanded(query, reading), asked)
    if kinds:
        searched = " ".join([searched, *kinds])
    terms = _terms(searched, scope.sources, version)
    plan = _plan(terms, _words(searched), configs)
    if searched != own:
        plan = _ranked_by_own_words(plan, own, terms)
    ranked: list[Row] = []
    if plan.filtered and connection.vendor == "postgresql":
        ranked = _postgres(plan, scope, language, max(depth, WORDS_RERANKED))
    elif plan.filtered:
        ranked = _sqlite(plan, scope.documents, max(depth, WORDS_RERANKED))
    ranked = by_words_held(ranked, asked, reading, scope.about)[:depth]
    if vectors:
        found = nearest(documents=scope.stamps, passages=scope.passages, query=query[:1000], limit=depth)
        if found is not None:
            return _fused(ranked, found, scope, limit)
    return [_hit(row, scope) for row in ranked[:limit]]


def _with_bases(query: str, asked: Sequence[str]) -> str:
    """``query`` with the bases of its words asked that have one (:func:`agents.stems.word_bases`: "lentisimo" is
    "lento") and the other members of their families (:func:`agents.passages.family_searched`: "llego" is "recib",
    "fallada" "defect") on a line of their own: searched too, as a synonym's terms are, where a passage writes the
    base or another word of the same event."""
    bases = [base for word in asked for base in word_bases(word) if len(base) >= 4]
    kin = [member for word in asked for member in family_searched(word)]
    widened = list(dict.fromkeys([*bases, *kin]))
    return f"{query}\n{' '.join(widened)}" if widened else query


def by_words_held(
    rows: list[Row], asked: list[str], reading: Reading, about: Mapping[int, tuple[str, ...]] | None = None
) -> list[Row]:
    """``rows`` (the engine's ranking, best first) ordered by how much of the question's words ``asked``
    (:func:`agents.passages.asked_words`) each passage holds, heading and text (as the relevance bar counts and weighs
    them, :func:`agents.passages.held_share`, ``reading``'s synonyms too:
    :func:`knowledge.synonym_reading.words_held_with`); among equals, by how much its document's title holds
    (``about``: by document, its title first, as :attr:`Scope.about`); then by how much its section holds of its own
    (:func:`section_held`: the sections of one document share their title's words, which told none of them from the
    others: "how long does it take to port my number" was quoted the section on withdrawing a request, not the one
    on how long it takes); then in the engine's order. Each scored in [0, 1): (held + (held by the title + the
    section's own) / (asked + 1)) / (asked + 1), the section's own (held by its heading alone + (held by its heading
    and text + the engine's score) / (asked + 1)) / (asked + 1), what is held counted as ``asked`` times its share
    (the number of words held when each weighs the same). A question with no such word keeps the engine's order and
    scores."""
    if not asked:
        return rows
    whole = len(asked) + 1
    share = HeldShare(asked)
    titles: dict[int, tuple[str, float, frozenset[str]]] = {}  # by document: the passages found are often several
    scored = []
    for index, row in enumerate(rows):
        held = words_held_with(asked, passage_words(row[3], row[5]), reading)
        title, in_title, by_title = titles.get(row[2]) or titles.setdefault(
            row[2], _title_held(row[2], about, asked, reading, share)
        )
        named, own = section_held(row[3], row[5], title, by_title, held, reading)
        section = (len(asked) * share(named) + (len(asked) * share(own) + row[1]) / whole) / whole
        scored.append(((len(asked) * share(held) + (in_title + section) / whole) / whole, index, row))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [(row[0], round(value, 6), *row[2:]) for value, _, row in scored]


def _title_held(
    document: int, about: Mapping[int, tuple[str, ...]] | None, asked: list[str], reading: Reading, share: HeldShare
) -> tuple[str, float, frozenset[str]]:
    """A document's title, ``asked`` times the share of the question's words it holds, and those words."""
    title = (about or {}).get(document, ("",))[0]
    held = words_held_with(asked, passage_words("", title), reading)
    return title, len(asked) * share(held), frozenset(held)


def section_held(
    heading: str, text: str, title: str, by_title: AbstractSet[str], held: list[str], reading: Reading
) -> tuple[list[str], list[str]]:
    """Of the question's words a passage holds under its whole ``heading`` path (``held``), in order, what its section
    holds that its document's other sections do not hold with it: those its own heading (:func:`own_heading`) holds
    and its ``title`` does not (``by_title``: the title holds them for every section), and those its own heading or
    its ``text`` holds (the path above it left out). "¿cómo saco una copia de mi factura?" holds *copia* and
    *factura* in every section of "Segunda copia de la factura" through its title; the one headed "Factura digital
    por correo" holds *factura* of its own as the title does, and "En la aplicación" both in its text; of "¿en cuánto
    tiempo me devuelven un cobro indebido?", the section headed "Cómo se devuelve" names what the title does not."""
    section = own_heading(heading, title)
    own = words_held_with(held, passage_words(section, text), reading)
    if not section:
        return [], own
    return [word for word in words_held_with(own, passage_words(section, ""), reading) if word not in by_title], own


def own_heading(heading: str, title: str) -> str:
    """A passage's own heading: the last of its ``heading`` path (:data:`knowledge.reading.HEADING_SEPARATOR`), none
    when that is its document's ``title`` (the passages before the first section's heading). What the path holds
    above it — the title, the sections it sits in — every passage of those sections holds too."""
    own = heading.rsplit(HEADING_SEPARATOR, 1)[-1]
    return "" if own == title else own


def _hit(row: Row, scope: Scope, found_by: tuple[str, ...] = (LEXICAL,), cosine: float | None = None) -> Hit:
    pk, score, document, heading, position, text = row
    title, file_name, source_name, document_language = scope.about[document]
    return Hit(
        pk, document, title, file_name, source_name, document_language, heading, position, text, round(score, 6),
        found_by, cosine,
    )  # fmt: skip


def _fused(ranked: list[Row], found: list[tuple[int, float]], scope: Scope, limit: int) -> list[Hit]:
    """The words' ranking and the vectors' fused (reciprocal rank fusion), each hit scored by the fusion, with its
    cosine when the vectors ranked it; the passages only the vectors found read in one query."""
    rows = {row[0]: row for row in ranked}
    cosines = dict(found)
    order = fused([(LEXICAL, [row[0] for row in ranked]), (VECTORS, [pk for pk, _ in found])], limit)
    missing = [pk for pk, _, _ in order if pk not in rows]
    if missing:
        fields = ("pk", "document_id", "heading", "position", "text")
        read = KnowledgePassage.objects.filter(pk__in=missing).values_list(*fields).order_by()
        for pk, document, heading, position, text in read:
            rows[pk] = (pk, 0.0, document, heading, position, text)
    return [
        _hit((pk, score, *rows[pk][2:]), scope, found_by, cosines.get(pk))
        for pk, score, found_by in order
        if pk in rows and rows[pk][2] in scope.about
    ]
