"""A specialist's use of its profile's knowledge in one run: retrieval before it answers or when its model asks for it,
the passages handed to its model, the citations its answer carries, and "I don't know" below the relevance bar.

The specialist runtime (:mod:`conversations.runtime`) asks :func:`knowledge_prepared` before the first model step
(passages retrieved, or the :data:`agents.passages.SEARCH_KNOWLEDGE` tool to offer) and calls :func:`knowledge_settle`
after the last. The rules, in order (docs/knowledge.md, "At a turn"):

1. Retrieval before the model runs when the profile holds knowledge (the compiled snapshot knows it: no query
   otherwise), the profile's and the specialist's ``retrieval`` are on, their tags leave something to read, the
   message is no small talk, and the run is offered no MCP tool unless its specialist's ``with_tools`` is on.
   A run offered MCP tools (``with_tools`` off) is offered the ``search_knowledge`` tool beside them instead, on the
   same conditions: its model searches when none of its tools answers, and a question a tool answers searches nothing.
   A question naming fewer than :data:`agents.passages.MIN_WORDS_HELD` content words of its own, in a conversation
   whose previous customer message asked something, is searched with that message (and those it followed up in
   turn) first, their words weighing less, in the conversation's language; alone when that finds nothing at the bar
   (:func:`follow_up_of`, :func:`_thread_retrieved`; docs/knowledge.md, "A follow-up").
2. The passages at or above the profile's bar (``min_score``) go to the model, at most :data:`NOTE_MAX_CHARS` of
   text, numbered, with the instruction to answer from them and cite them by number: in a system note before the
   customer's message (:func:`agents.passages.passages_note`), or as the tool's result (numbered on across calls).
3. Tools first: a run whose MCP tools answered answers from what they returned; where it searched before
   (``with_tools``) the passages are extra context there, and no bar makes it say it does not know. A run that
   answers from the documents alone — offered no MCP tool, or one whose model searched and called no MCP tool —
   with no passage at the bar says :data:`DONT_KNOW` in the customer's language, whatever its model wrote (its text
   is not streamed); a handoff, a delegation or a request for a person it makes still stands.
4. The answer cites the passages whose number it names: a line of sources (the documents' titles) follows it, and
   ``metadata.knowledge`` says what was cited, what was considered and whether the answer came from the knowledge.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext_lazy

from agents.public import (
    MIN_WORDS_HELD,
    NotedPassage,
    asked_words,
    asks_documents,
    own_request,
    passages_note,
    quote_of,
)
from common.i18n import language_known, say
from common.infra.crossing import on_the_request_thread
from knowledge.public import (
    Considered,
    Retrieved,
    SynonymsHeld,
    document_link,
    knowledge_retrieve,
    knowledge_retrieve_followed,
)
from routing.public import ProfileSpec, SpecialistSpec, small_talk_read

# In the customer's language (common.i18n.say).
DONT_KNOW = gettext_lazy(
    "I'm sorry, I don't know the answer to that: our documents do not cover it. Could you put it another way, or ask "
    "me something else?"
)
SOURCES = gettext_lazy("Sources:")
NOTE_MAX_CHARS = 6000  # the passages' text handed to the model, about 1,500 tokens
QUOTE_MAX_CHARS = 300
_CITED = re.compile(r"\[(\d{1,2})\]")


def _fitted(passages: Iterable[Considered], size: int = 0) -> list[Considered]:
    """The first of ``passages`` that fit in :data:`NOTE_MAX_CHARS` beside ``size`` characters given already (the
    first always, when nothing was given)."""
    fitted: list[Considered] = []
    before = size
    for passage in passages:
        size += len(passage.hit.text)
        if size > NOTE_MAX_CHARS and (fitted or before):
            break
        fitted.append(passage)
    return fitted


@dataclass(frozen=True)
class KnowledgeUse:
    """What one specialist run retrieved, what it handed its model (``given``: number ``i + 1`` is ``given[i]``), and
    whether its answer may come from elsewhere (``tools_first``: MCP tools offered to a run that searched before, or
    called by one that searched through the tool)."""

    retrieved: Retrieved
    question: str
    tools_first: bool
    given: tuple[Considered, ...]
    follows_up: bool = False  # found with the conversation's previous question (rule 1); ``question`` holds both

    @classmethod
    def before(
        cls, retrieved: Retrieved, question: str, *, tools_offered: bool, follows_up: bool = False
    ) -> KnowledgeUse:
        """The use of a search run before the model: the passages at the bar that fit, best first."""
        return cls(retrieved, question, tools_offered, tuple(_fitted(retrieved.used)), follows_up)

    @property
    def unknown(self) -> bool:
        """No passage at the bar and no tool to answer from: the specialist says it does not know."""
        return not self.tools_first and not self.given

    def note(self) -> str:
        return _note(self.given, 1)

    def cited(self, answer: str) -> list[tuple[int, Considered]]:
        """The given passages whose number ``answer`` names, by number."""
        named = {int(number) for number in _CITED.findall(answer)}
        return [(number, passage) for number, passage in enumerate(self.given, 1) if number in named]


def _note(passages: Iterable[Considered], first: int) -> str:
    hits = enumerate((passage.hit for passage in passages), first)
    return passages_note([NotedPassage(number, hit.document_title, hit.heading, hit.text) for number, hit in hits])


@dataclass
class KnowledgeTool:
    """The knowledge of one run offered MCP tools: the message retrieved before the model (:meth:`before`: the
    passages at the bar go to it in a note, numbered from 1) and the ``search_knowledge`` tool beside its tools, each
    call searching as retrieval does (:func:`knowledge.retrieval.knowledge_retrieve`, for the query the model wrote)
    and returning the passages at the bar not given yet, numbered after those, within :data:`NOTE_MAX_CHARS` for the
    whole run. A query searched already in the run (the message, most often) is not searched again."""

    profile_pk: int
    tenant_pk: int | None
    language: str
    tags: tuple[str, ...]
    min_score: float
    question: str
    documents: frozenset[tuple[str, str, str]] | None = None  # the documents its version holds (ProfileSpec's)
    vector_bar: float | None = None  # the profile's search uses vectors: their cosine bar
    synonyms: SynonymsHeld | None = None  # the synonyms its version holds (ProfileSpec's)
    considered: list[Considered] = field(default_factory=list)
    given: list[Considered] = field(default_factory=list)
    calls: int = 0
    searched: dict[str, Retrieved] = field(default_factory=dict)  # by query, what the run found
    everywhere: set[str] = field(default_factory=set)  # the queries searched in every language too
    thread: str = ""  # the previous question the customer's message follows up (follow_up_of), or ""
    followed: bool = False  # the message's passages were found with it

    async def _retrieved(self, query: str, *, every_language: bool) -> Retrieved:
        """``query``'s passages in the conversation's language, and when none reaches the bar and ``every_language``
        is on, every language's after them (as :func:`knowledge.retrieval.knowledge_retrieve` orders them); what
        the run searched already is not searched again. The message of a follow-up (``thread``) is searched with
        its thread first, in the conversation's language, then alone, then with its thread in every language
        (:func:`_thread_retrieved`)."""
        retrieved = self.searched.get(query)
        threaded = bool(self.thread) and query == self.question and not self.followed
        if retrieved is None and threaded:  # with its thread, then alone: one crossing, one connection
            retrieved, self.followed = await on_the_request_thread(knowledge_retrieve_followed)(
                **self._scope(), query=query, language=self.language, every_language=False, thread=self.thread
            )
        if retrieved is None:
            retrieved = await self._search(query, self.language)
        if every_language and self.language and not retrieved.used and query not in self.everywhere:
            seen = {passage.hit.passage_id for passage in retrieved.considered}
            others = (await self._search(query, "")).considered
            more = tuple(passage for passage in others if passage.hit.passage_id not in seen)
            retrieved = Retrieved(retrieved.considered + more, self.min_score, self.vector_bar)
            self.everywhere.add(query)
        if threaded and every_language and not retrieved.used:
            followed = await on_the_request_thread(knowledge_retrieve)(
                **self._scope(), query=query, language=self.language, every_language=True, thread=self.thread
            )
            if followed.used:
                retrieved, self.followed = followed, True
        self.searched[query] = retrieved
        return retrieved

    def _scope(self) -> dict[str, Any]:
        """What every search of the run reads besides its query and language."""
        return {
            "profile_pk": self.profile_pk,
            "tenant_pk": self.tenant_pk,
            "tags": self.tags,
            "min_score": self.min_score,
            "documents": self.documents,
            "vector_bar": self.vector_bar,
            "synonyms": self.synonyms,
        }

    @property
    def asked(self) -> str:
        """What the run's quotes are read against: the message, and the question it follows up when its passages
        were found with it."""
        return f"{self.question}\n{self.thread}" if self.followed else self.question

    async def _search(self, query: str, language: str) -> Retrieved:
        return await on_the_request_thread(knowledge_retrieve)(
            **self._scope(), query=query, language=language, every_language=False
        )

    async def _given(self, query: str, *, every_language: bool = True) -> list[Considered]:
        """The passages at the bar for ``query`` not given yet, that fit: now given."""
        retrieved = await self._retrieved(query, every_language=every_language)
        seen = {passage.hit.passage_id for passage in self.considered}
        self.considered += [passage for passage in retrieved.considered if passage.hit.passage_id not in seen]
        given = {passage.hit.passage_id for passage in self.given}
        fresh = [passage for passage in retrieved.used if passage.hit.passage_id not in given]
        added = _fitted(fresh, sum(len(passage.hit.text) for passage in self.given)) if fresh else []
        self.given += added
        return added

    async def before(self) -> KnowledgeUse | None:
        """The message retrieved before the model answers, in the conversation's language only (every message to a
        tool's specialist pays it; the other languages are the tool's, when its model asks): what to hand it in a
        note, the passages at the bar (``None``: none, and the model is handed nothing but the tool). Its answer may
        come from its tools: no bar makes it say it does not know unless it searches itself."""
        added = await self._given(self.question, every_language=False)
        if not added:
            return None
        retrieved = Retrieved(tuple(self.considered), self.min_score, self.vector_bar)
        return KnowledgeUse(retrieved, self.asked, True, tuple(added), self.followed)

    async def search(self, query: str) -> str:
        """The tool's result for ``query`` (the customer's message when empty): a note of :func:`passages_note`."""
        self.calls += 1
        first = len(self.given) + 1
        return _note(await self._given(query.strip() or self.question), first)

    @property
    def found_nothing(self) -> bool:
        """It was called and has given no passage."""
        return self.calls > 0 and not self.given

    def use(self, *, tools_ran: bool) -> KnowledgeUse | None:
        """What the run used, once it ended (``None``: nothing was searched); ``tools_ran``: an MCP tool of the run
        answered. A run whose model did not call the tool answered from its tools or its own words, the passages
        given before beside them: it is never made to say it does not know."""
        if not self.searched:
            return None
        retrieved = Retrieved(tuple(self.considered), self.min_score, self.vector_bar)
        return KnowledgeUse(retrieved, self.asked, tools_ran or not self.calls, tuple(self.given), self.followed)


def knowledge_tags(profile: ProfileSpec, specialist: SpecialistSpec) -> tuple[str, ...] | None:
    """The tags a search for ``specialist`` keeps to (``()``: any document); ``None``: it does not search."""
    settings = profile.knowledge
    if not settings.retrieval or not specialist.knowledge.retrieval:
        return None
    return settings.tags_for(specialist.knowledge)


async def knowledge_prepared(
    *,
    profile: ProfileSpec,
    specialist: SpecialistSpec,
    held: bool,
    tenant_pk: int | None,
    text: str,
    language: str,
    tools_offered: bool,
    earlier: Sequence[str] = (),
) -> tuple[KnowledgeUse | None, KnowledgeTool | None]:
    """What a run reads of its profile's knowledge (rule 1): the passages retrieved before its model answers, or the
    ``search_knowledge`` tool offered beside its MCP tools (``tools_offered``), or neither. ``held`` is whether the
    profile holds knowledge (``routing.snapshot.Snapshot.knowledge``); ``earlier``: the customer's messages before
    this one (:func:`asked_before`), which a follow-up is searched with when it finds nothing alone
    (:func:`follow_up_of`)."""
    tags = _searched_tags(profile=profile, specialist=specialist, held=held, text=text)
    if tags is None:
        return None, None
    min_score = profile.knowledge.min_score
    thread = follow_up_of(text, earlier)
    if tools_offered and not specialist.knowledge.with_tools:
        tool = KnowledgeTool(
            profile.pk,
            tenant_pk,
            language,
            tags,
            min_score,
            text,
            profile.knowledge_documents,
            vector_bar=profile.knowledge.vector_bar,
            synonyms=profile.knowledge_synonyms,
            thread=thread,
        )
        # A request about the customer's own things (their bill, their order) is its tools' to answer: retrieved
        # before the model, it would hand it passages no answer uses, at a search's cost on most of a tools
        # specialist's messages. Its model may still search. One that asks a question in general besides ("meu fone
        # parou, tem garantia?") is retrieved.
        return (None if own_request(text) else await tool.before()), tool
    retrieved, asked = await on_the_request_thread(_thread_retrieved)(
        thread=thread,
        profile_pk=profile.pk,
        tenant_pk=tenant_pk,
        query=text,
        language=language,
        tags=tags,
        min_score=min_score,
        documents=profile.knowledge_documents,
        vector_bar=profile.knowledge.vector_bar,
        synonyms=profile.knowledge_synonyms,
    )
    follows_up = asked != text
    return KnowledgeUse.before(retrieved, asked, tools_offered=tools_offered, follows_up=follows_up), None


def _thread_retrieved(*, thread: str, query: str, **scope: Any) -> tuple[Retrieved, str]:
    """``query``'s passages (:func:`knowledge.retrieval.knowledge_retrieve`), with the text their quotes are read
    against (``query``, or ``query`` and ``thread``). A follow-up (``thread``: the question it follows up) is searched
    with its thread first, in the conversation's language: a passage holding both the follow-up's word and what the
    conversation was about outranks one holding the word alone ("¿y cuántos días tengo?" after a question on returns:
    the returns article, not the delivery one), while a one-word change of subject ("e a garantia?") still reaches
    the bar on its own word, the thread weighing less (docs/knowledge.md, "A follow-up"). When nothing reaches the bar
    so, the message alone, then with its thread in every language, on one connection
    (:func:`knowledge.retrieval.knowledge_retrieve_followed`). One crossing to the request's thread for all."""
    if not thread:
        return knowledge_retrieve(query=query, **scope), query
    retrieved, followed = knowledge_retrieve_followed(query=query, thread=thread, **scope)
    return retrieved, f"{query}\n{thread}" if followed else query


THREAD_MESSAGES = 3  # the customer's earlier messages a follow-up's thread may read (follow_up_of)


def asked_before(history: Iterable[tuple[Any, ...]]) -> tuple[str, ...]:
    """The customer's messages in ``history`` (``(role, content, …)`` entries, oldest first), newest first, at most
    :data:`THREAD_MESSAGES` of them."""
    asked = (str(entry[1]) for entry in reversed(tuple(history)) if entry[0] == "user")
    return tuple(itertools.islice(asked, THREAD_MESSAGES))


def follow_up_of(text: str, earlier: Sequence[str]) -> str:
    """The question ``text`` may follow up, or ``""``: when ``text`` names fewer than
    :data:`agents.passages.MIN_WORDS_HELD` content words of its own — "e quanto tempo eu tenho pra isso?", "and for
    Europe?", "¿hay multa?": what it is about is what the conversation was about —, the customer's message before it
    (``earlier``: theirs, newest first), and when that one followed up the one before it as well (fewer than two
    content words, no small talk), that one too, and so on back to the message that named the subject: "e se for pelo
    app?" after "e quanto tempo eu tenho pra isso?" after "posso trocar um produto?" is about exchanges. Not when the
    message before it is small talk ("obrigado" closes what came before) or the thread names no content word. A
    message naming two things or more is a question of its own, which the thread does not complete: a topic change
    is searched alone."""
    if not earlier or len(asked_words(text)) >= MIN_WORDS_HELD:
        return ""
    thread: list[str] = []
    named = 0
    for said in earlier:
        if small_talk_read(said) is not None:
            break
        thread.append(said)
        words = len(asked_words(said))
        named += words
        if words >= MIN_WORDS_HELD:
            break
    return "\n".join(thread) if named else ""


async def knowledge_answers(
    *, profile: ProfileSpec, held: bool, tenant_pk: int | None, text: str, language: str, earlier: Sequence[str] = ()
) -> bool:
    """Whether the profile's knowledge answers ``text`` by itself: ``text`` asks a question in general
    (:func:`agents.passages.asks_documents`: "a cotação tem atraso?",
    not "quero uma cotação", a request its goal serves), retrieval is on, and a passage reaches the bar holding at
    least :data:`agents.passages.MIN_WORDS_HELD` of its content words (one word shared, even all of a one-word
    question's — "qual o preço?" —, is not enough here). A follow-up (:func:`follow_up_of` of ``earlier``, the
    customer's messages before it, newest first) is searched with its thread as a specialist searches it, the
    thread's words counted among those held: "e o preço?" after "as cotações de vocês têm atraso?" is the help
    centre's, as the specialist that answers it will find. Goal mode asks it before it asks the customer for what a
    goal lacks (:mod:`conversations.goals.turn`). ``held``: as for :func:`knowledge_prepared`."""
    settings = profile.knowledge
    if not held or not settings.retrieval or not asks_documents(text):
        return False
    if small_talk_read(text) is not None:
        return False
    retrieved, _ = await on_the_request_thread(_thread_retrieved)(
        thread=follow_up_of(text, earlier),
        profile_pk=profile.pk,
        tenant_pk=tenant_pk,
        query=text,
        language=language,
        tags=settings.tags,
        min_score=settings.min_score,
        documents=profile.knowledge_documents,
        vector_bar=settings.vector_bar,
        synonyms=profile.knowledge_synonyms,
    )
    return any(passage.held >= MIN_WORDS_HELD for passage in retrieved.used)


def _searched_tags(
    *, profile: ProfileSpec, specialist: SpecialistSpec, held: bool, text: str
) -> tuple[str, ...] | None:
    """The tags a search of this run keeps to, or ``None`` when the run reads no knowledge: the profile holds none,
    retrieval is off, or the message is empty or small talk."""
    if not held or not text.strip():
        return None
    tags = knowledge_tags(profile, specialist)
    if tags is None or small_talk_read(text) is not None:
        return None
    return tags


def _row(passage: Considered) -> dict[str, Any]:
    hit = passage.hit
    return {
        "document": hit.document_id,
        "title": hit.document_title,
        "passage": hit.passage_id,
        "score": passage.relevance,  # what the bar is held to
        "search_score": hit.score,  # the search's, which orders the passages (the words held, then the engine)
        "found_by": list(hit.found_by),  # the rankings that found it: lexical, vectors
        **({"cosine": hit.cosine} if hit.cosine is not None else {}),
    }


@dataclass(frozen=True)
class Settled:
    """What the run's answer becomes: its text, what is added to the text already streamed (``""``: nothing; the
    whole answer when the model's text was held back), and ``metadata.knowledge``."""

    answer: str
    streamed_tail: str
    metadata: dict[str, Any]


def knowledge_settle(use: KnowledgeUse, answer: str, *, answered: bool, language: str) -> Settled:
    """The run's answer with its sources (rule 4), or :data:`DONT_KNOW` (rule 3). ``answered``: the run ended with
    an answer of its own (no move, no question for permission, no failure)."""
    considered = [{**_row(passage), "used": use.retrieved.reaching(passage)} for passage in use.retrieved.considered]
    metadata: dict[str, Any] = {"citations": [], "retrieved": considered, "answered_from_knowledge": False}
    if not answered:
        return Settled(answer, "", metadata)
    if use.unknown:
        said = say(language, DONT_KNOW)
        return Settled(said, said, {**metadata, "unknown": True})
    if use.follows_up:
        metadata["follows_up"] = True
    cited = use.cited(answer)
    if not cited:
        return Settled(answer, "", metadata)
    citations = [
        {**_row(passage), "number": number, "link": document_link(passage.hit.document_id)}
        | {"quote": quote_of(passage.hit.text, use.question, heading=passage.hit.heading, max_chars=QUOTE_MAX_CHARS)}
        for number, passage in cited
    ]
    # The customer reads the titles; the link (the admin's page of the document) is the business's, in the metadata.
    sources = " ".join(f"[{c['number']}] {c['title']}" for c in citations)
    tail = f"\n\n{sources_said(language_known(language))} {sources}"
    return Settled(answer + tail, tail, {**metadata, "citations": citations, "answered_from_knowledge": True})


@functools.cache  # one a language the platform speaks: a process's catalogues do not change
def sources_said(language: str) -> str:
    """:data:`SOURCES` in ``language``, translated once a process (:func:`common.i18n.say` activates the language and
    restores the one before, about 5 µs, for each cited answer)."""
    return say(language, SOURCES)


def knowledge_merged(parts: Iterable[dict[str, Any] | None]) -> dict[str, Any] | None:
    """``metadata.knowledge`` of a turn from its answering runs' (one, or a supervisor plan's parts); ``None`` when
    none retrieved."""
    found = [part for part in parts if part is not None]
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    return {
        "citations": [citation for part in found for citation in part["citations"]],
        "retrieved": [row for part in found for row in part["retrieved"]],
        "answered_from_knowledge": any(part["answered_from_knowledge"] for part in found),
        **({"unknown": True} if all(part.get("unknown") for part in found) else {}),
    }
