"""The knowledge a turn reads: whether a profile holds any, and the passages retrieved for a specialist's question.

The compiled snapshot holds :func:`knowledge_profiles`, so the engine (``conversations.knowledge_turn``) knows without
a query whether a profile holds any: a profile with no knowledge pays nothing for it. For one that does,
:func:`knowledge_retrieve` searches (:func:`knowledge.search.knowledge_search`) the conversation's language
first and, when no passage of it reaches the relevance bar or none holds the whole question, every language (a
passage of another language beside one of the conversation's at the bar only when it holds the whole question).

A search gives its database connection back when it is done (outside a transaction), as the turn's other steps do
(``conversations.turn_store``): a turn searches before its model's call and writes after it, and a connection kept
through the call left the process's other messages waiting for the pool (a few connections a worker) for as long as
the model took.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ParamSpec, TypeVar

from django.db import connection
from django.urls import get_resolver, get_script_prefix, get_urlconf, reverse
from django.utils.translation import get_language

from agents.public import (
    FAMILY_WEIGHT,
    MIN_WORDS_HELD,
    HeldShare,
    asked_words,
    holds,
    short_words,
    through_family,
    weight_of,
)
from knowledge.answer_kinds import KIND_MARKS, asked_with_kinds
from knowledge.models import KnowledgeDocument
from knowledge.search import Hit, knowledge_search, own_heading, query_spelled, synonym_groups
from knowledge.synonym_reading import NOTHING, Reading, passage_words, question_read, words_held_with
from knowledge.synonyms import Held
from knowledge.versions import Key

RETRIEVE_LIMIT = 5  # passages considered per question
# A follow-up searched with the conversation's previous question (``thread``): that question's words weigh together
# as this much of one full word of the follow-up's own (docs/knowledge.md, "A follow-up"). Less than one, so that a
# follow-up naming a subject of its own the passage does not hold ("e o horário?" after "posso trocar um produto?")
# stays under a bar of one half whatever the thread holds, where one naming nothing the passage could hold ("e o
# tempo pra isso?": "tempo" weighs 0.39) reaches it on the thread.
THREAD_WEIGHT = 0.8
P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Considered:
    """A passage found, with its relevance to the question: the share of the question's content words it holds, each
    weighed by how little general language uses it (:func:`agents.passages.held_share`, heading and text: "going" or
    "quero" a fifth of "roaming"), those its own heading names counting twice when it names two or more
    (:func:`_named`), the measure the relevance bar is held to on every engine (the search's own score orders the
    passages, but its scale is each engine's, and on SQLite a question's common words alone score high); and how many
    of the question's ``asked`` content words it ``held``."""

    hit: Hit
    relevance: float
    held: int
    asked: int

    @property
    def whole(self) -> bool:
        """It holds every one of the question's words (its relevance is 1 then, whatever its heading names)."""
        return 0 < self.asked <= self.held

    def reaches(self, bar: float, vector_bar: float | None = None) -> bool:
        """The passage answers the question as far as words tell: it holds ``bar``'s share of the question's content
        words and at least :data:`agents.passages.MIN_WORDS_HELD` of them (all, for a question of fewer); or, with
        ``vector_bar`` (the profile's search uses vectors), the vectors ranked it at a cosine of ``vector_bar`` or
        more — a passage saying what the question asks in other words."""
        if self.relevance >= bar and self.held >= min(MIN_WORDS_HELD, self.asked):
            return True
        return vector_bar is not None and self.hit.cosine is not None and self.hit.cosine >= vector_bar


@dataclass(frozen=True)
class Retrieved:
    """The passages considered for one question, in the search's order, and the bar a passage must reach to be used."""

    considered: tuple[Considered, ...]
    min_score: float
    vector_bar: float | None = None  # the cosine bar when the search used vectors

    def reaching(self, passage: Considered) -> bool:
        """``passage`` reaches this search's bars (:meth:`Considered.reaches`)."""
        return passage.reaches(self.min_score, self.vector_bar)

    @property
    def used(self) -> tuple[Considered, ...]:
        """The passages at or above the bar, the most relevant first (the search's order among equals): what the
        specialist is given."""
        at_bar = [passage for passage in self.considered if self.reaching(passage)]
        return tuple(sorted(at_bar, key=lambda passage: -passage.relevance))


def _considered(
    hits: Iterable[Hit], asked: list[str], reading: Reading = NOTHING, thread: Sequence[str] = ()
) -> list[Considered]:
    """The passages ``hits`` with their relevance to a question whose words the bar counts are ``asked``
    (:func:`agents.passages.asked_words`, read once a search), the words the passage's own heading names
    (:func:`_named`) weighing twice; with ``thread``, the words of the question it follows (none of ``asked``), which
    weigh together :data:`THREAD_WEIGHT` of one word, their share held times that added to the question's own weight
    held, over the question's whole weight and that; a word held only through its family
    (:func:`agents.passages.through_family`: "llegar" in "recibirlo") weighing :data:`agents.passages.FAMILY_WEIGHT`
    of itself. At most 1, which a passage holding every word reaches."""
    out = []
    share = HeldShare(asked)
    whole = weight_of(asked)
    thread_share = HeldShare(thread)
    words = [*asked, *thread]
    # The kinds of answer asked for count beside a word the question names, never alone: "how much?" names nothing.
    words = words if _words_in(words) else []
    for hit in hits:
        stems = passage_words(hit.heading, hit.text)
        held = words_held_with(words, stems, reading) if words else []
        kin = [word for word in held if word not in thread and through_family(word, stems)]
        named = share(_named(hit, asked, reading)) - (1 - FAMILY_WEIGHT) * share(kin)  # kin: held as less
        if thread:
            own = (share(word for word in held if word not in thread) + named) * whole
            relevance = (own + THREAD_WEIGHT * thread_share(word for word in held if word in thread)) / (
                whole + THREAD_WEIGHT
            )
        else:
            relevance = share(held) + named
        out.append(Considered(hit, round(min(relevance, 1.0), 6), _words_in(held), _words_in(words)))
    return out


def _short_words_held(question: str, hits: Iterable[Hit]) -> list[str]:
    """The words of three letters of ``question`` (:func:`agents.passages.short_words`: not the common ones, nor
    names typed in capitals) that a passage of ``hits`` holds, in any case: "pdf" of "la factura en pdf" where a
    passage writes *PDF*, "via" of "a 2a via" where one writes *segunda via*. One no passage found holds is left out:
    a chat abbreviation ("vcs", "tbm") or a word the documents do not use would lower every passage's share."""
    typed = short_words(question)
    if not typed:
        return []
    held = {word for hit in hits for word in typed if word in passage_words(hit.heading, hit.text)}
    return [word for word in typed if word in held]


def _named(hit: Hit, asked: Sequence[str], reading: Reading) -> list[str]:
    """The question's words ``asked`` that the passage's own heading (:func:`knowledge.search.own_heading`: its
    section's, not its document's title) holds, when it holds :data:`agents.passages.MIN_WORDS_HELD` or more: a
    heading is its writer's summary of what the section is about, and one naming two of the question's words says
    the section is about what is asked, where the text's words may be any of its circumstances ("the jacket is too
    big, can I swap it for a smaller size?" holds *swap* and *size* in *Exchanging for another size, colour or
    model*, and no other of its words in the text). One word named is not enough: a help centre's common words
    ("loja", "celular") head sections about other things. Nor is one term of a synonym group standing for two of the
    question's words, so one of them must be the heading's own (:func:`agents.passages.holds`): "no me llegó la
    factura y vence pronto" holds the Spanish help centre's term "factura vencida", whose group's "pago atrasado"
    heads the section on paying late, not the one headed *No me llegó la factura*."""
    own = own_heading(hit.heading, hit.document_title)
    if not own or len(asked) < MIN_WORDS_HELD:
        return []
    stems = passage_words(own, "")
    named = words_held_with(asked, stems, reading)
    return named if _words_in(named) >= MIN_WORDS_HELD and any(holds(word, stems) for word in named) else []


def _words_in(words: Sequence[str]) -> int:
    """How many of ``words`` are the question's own words, not the kinds of answer it asks for
    (:mod:`knowledge.answer_kinds`): a passage holding a price and one word of "how much is bitcoin?" holds one."""
    return sum(word not in KIND_MARKS for word in words)


def knowledge_profiles() -> frozenset[int]:
    """The profiles (by pk) with an enabled source holding a document (the draft's, or one kept for a version), for
    some tenant or for all: one query. The
    compiled snapshot holds it (``routing.snapshot``), rebuilt when the configuration version moves, which every write
    of a source or a document bumps (:class:`knowledge.apps.KnowledgeConfig`)."""
    documents = KnowledgeDocument.objects.filter(source__enabled=True)
    return frozenset(documents.values_list("source__profile_id", flat=True).distinct())


_calls = threading.local()  # how deep this thread is in calls of _connection_given_back's functions


def _connection_given_back(func: Callable[P, R]) -> Callable[P, R]:
    """``func``, its thread's database connection given back when it returns or raises, unless a transaction holds
    it (the module's docstring) or it was called by another such function, which gives it back once at its end."""

    @functools.wraps(func)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        depth = getattr(_calls, "depth", 0)
        _calls.depth = depth + 1
        try:
            return func(*args, **kwargs)
        finally:
            _calls.depth = depth
            if not depth and not connection.in_atomic_block:
                connection.close()

    return call


@_connection_given_back
def knowledge_retrieve(
    *,
    profile_pk: int,
    tenant_pk: int | None,
    query: str,
    language: str,
    tags: Iterable[str],
    min_score: float,
    limit: int = RETRIEVE_LIMIT,
    every_language: bool = True,
    documents: frozenset[Key] | None = None,
    vector_bar: float | None = None,
    synonyms: Held | None = None,
    thread: str = "",
    kept: dict[tuple[str, str | None], list[Hit]] | None = None,
) -> Retrieved:
    """The ``limit`` best passages of the profile's knowledge for ``query`` as ``tenant_pk`` may read it (the shared
    sources and its own), keeping to ``tags`` when given: those in ``language`` (every language when it is empty),
    and when none of them reaches ``min_score`` and ``every_language`` is on, the ``limit`` best of every language
    after them; when the best of them at the bar holds fewer than all the question's words, those of every language
    holding all of them. ``documents``: the documents the version searched holds
    (:func:`knowledge.versions.document_keys`; ``None``: the current ones); ``synonyms``: the synonyms it holds
    (:func:`knowledge.synonyms.document_synonyms`; ``None``: the current ones), with which the search reads the
    question and the bar counts a word held by another term of its group (:mod:`knowledge.synonym_reading`).
    ``vector_bar``: the profile's search uses vectors too (:mod:`knowledge.vectors`), and this is the cosine bar of
    a passage only they found. ``thread``: the conversation's previous question, which ``query`` follows up: searched
    with it, its words weighing less (:func:`_considered`). ``kept``: the searches a caller's sequence of retrievals
    ran already (:func:`knowledge_retrieve_followed`), by query and language, reused and added to."""
    tags = tuple(tags)
    vectors = vector_bar is not None
    own_lines = query.count("\n") + 1  # the question's own lines, before the thread's (respelling keeps lines)
    if thread:
        query = f"{query}\n{thread}"
    # Read in the conversation's language: its search reads the same words' counts, and queries none more.
    query = query_spelled(
        profile=profile_pk, query=query, tenant=tenant_pk, language=language or None, tags=tags, documents=documents
    )
    kept = {} if kept is None else kept

    def searched(language: str | None) -> list[Hit]:
        found = kept.get((query, language))
        if found is None:
            found = kept[query, language] = knowledge_search(
                profile=profile_pk,
                query=query,
                tenant=tenant_pk,
                language=language,
                tags=tags,
                limit=limit,
                documents=documents,
                vectors=vectors,
                synonyms=synonyms,
            )
        return found

    found = searched(language or None)
    groups = synonym_groups(profile=profile_pk, tenant=tenant_pk, documents=documents, synonyms=synonyms)
    asked = asked_with_kinds(asked_words(query), query)  # read once for the synonyms and every passage found
    reading = question_read(asked, query, groups)
    own_text = "\n".join(query.split("\n")[:own_lines])
    own = set(asked_with_kinds(asked_words(own_text), own_text)) if thread else set()
    followed = [word for word in asked if word not in own] if thread else []
    asked = [word for word in asked if word not in followed]
    asked += [word for word in _short_words_held(own_text, found) if word not in asked]
    considered = _considered(found, asked, reading, followed)
    reached = [passage for passage in considered if passage.reaches(min_score, vector_bar)]
    if every_language and language and not any(passage.whole for passage in reached):
        seen = {hit.passage_id for hit in found}
        others = searched(None)
        more = _considered((hit for hit in others if hit.passage_id not in seen), asked, reading, followed)
        # Beside passages of the conversation's language at the bar, another language's only when it holds the whole
        # question: a customer asks in their language about what the business wrote in one other. Holding more of it
        # is not enough: languages share words (names, codes, cognates: "alerta", "subir"), so another language's
        # version of the same answer often holds one more by its spelling alone.
        considered += more if not reached else [passage for passage in more if passage.whole]
    return Retrieved(tuple(considered), min_score, vector_bar)


@_connection_given_back
def knowledge_retrieve_followed(
    *, query: str, thread: str, every_language: bool = True, **scope: Any
) -> tuple[Retrieved, bool]:
    """A follow-up's passages (``query``, which follows up ``thread``: docs/knowledge.md, "A follow-up"), and whether
    they were found with its thread: with its thread first, in the conversation's language; when nothing reaches the
    bar so, the message alone (every language too, with ``every_language``); when nothing does either and
    ``every_language`` is on, with its thread in every language. ``scope``: :func:`knowledge_retrieve`'s other
    arguments. One connection for the sequence, given back once at its end, and the thread's search in the
    conversation's language run once (the last step starts from it)."""
    kept: dict[tuple[str, str | None], list[Hit]] = {}
    followed = knowledge_retrieve(query=query, thread=thread, every_language=False, kept=kept, **scope)
    if followed.used:
        return followed, True
    retrieved = knowledge_retrieve(query=query, every_language=every_language, kept=kept, **scope)
    if retrieved.used or not every_language:
        return retrieved, False
    followed = knowledge_retrieve(query=query, thread=thread, kept=kept, **scope)
    return (followed, True) if followed.used else (retrieved, False)


DOCUMENT_PAGE = "admin:knowledge_knowledgedocument_change"
_PAGE_ID = "DOCUMENT_ID"  # stands for the id while the page's path is reversed: letters the path keeps as they are


@lru_cache(maxsize=64)  # a few entries in a process: URLconfs, script prefixes and languages (tests make more)
def _document_page(resolver: Any, script_prefix: str, language: str | None) -> tuple[str, str]:
    """The document page's path around its id, for what ``reverse`` reads besides the id: the URLconf's resolver, the
    script prefix and the language."""
    head, found, tail = reverse(DOCUMENT_PAGE, args=[_PAGE_ID]).partition(_PAGE_ID)
    assert found, "the document page's path keeps its id as given"
    return head, tail


def document_link(document_id: int) -> str:
    """The admin's page of a document (its passages), which a citation links to: ``reverse``'s path, the same for
    every id but the id, resolved once per URLconf, script prefix and language (a resolver's walk cost a cited answer
    about 25 µs a citation) and the id written into it, as ``reverse`` writes a number."""
    head, tail = _document_page(get_resolver(get_urlconf()), get_script_prefix(), get_language())
    return f"{head}{int(document_id)}{tail}"
