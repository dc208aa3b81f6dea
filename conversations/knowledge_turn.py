"""A specialist's use of its profile's knowledge in one run: retrieval before it answers, the passages handed to its
model, the citations its answer carries, and "I don't know" below the relevance bar.

The specialist runtime (:mod:`conversations.runtime`) asks :func:`knowledge_use` before the first model step and
:func:`knowledge_settle` after the last. The rules, in order (docs/knowledge.md, "At a turn"):

1. Retrieval runs when the profile holds knowledge (the compiled snapshot knows it: no query otherwise), the profile's
   and the specialist's ``retrieval`` are on, their tags leave something to read, the message is no small talk, and
   the run is offered no MCP tool (tools first: it answers from them) unless its specialist's ``with_tools`` is on.
2. The passages at or above the profile's bar (``min_score``) go to the model in a system note before the customer's
   message (:func:`agents.passages.passages_note`), at most :data:`NOTE_MAX_CHARS` of text, with the instruction to
   answer from them and cite them by number.
3. Tools first: a run offered MCP tools answers from what the tools return; where it searches too (``with_tools``)
   the passages are extra context there, and no bar makes it say it does not know. A run offered none (the intent
   has no tool) answers from the passages, and with none at the bar says :data:`DONT_KNOW` in the customer's
   language, whatever its model wrote (its text is not streamed); a handoff, a delegation or a request for a person
   it makes still stands.
4. The answer cites the passages whose number it names: a line of sources (the documents' titles) follows it, and
   ``metadata.knowledge`` says what was cited, what was considered and whether the answer came from the knowledge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.utils.translation import gettext_lazy

from agents.passages import NotedPassage, passages_note, relevant_sentences
from common.i18n import say
from knowledge.retrieval import Considered, Retrieved, document_link, knowledge_retrieve
from routing.small_talk import small_talk_read
from routing.specs import ProfileSpec, SpecialistSpec

# In the customer's language (common.i18n.say).
DONT_KNOW = gettext_lazy(
    "I'm sorry, I don't know the answer to that: our documents do not cover it. Could you put it another way, or ask "
    "me something else?"
)
SOURCES = gettext_lazy("Sources:")
NOTE_MAX_CHARS = 6000  # the passages' text handed to the model, about 1,500 tokens
QUOTE_MAX_CHARS = 300
_CITED = re.compile(r"\[(\d{1,2})\]")


@dataclass(frozen=True)
class KnowledgeUse:
    """What one specialist run retrieved, what it hands its model, and whether it must say it does not know."""

    retrieved: Retrieved
    question: str
    tools_offered: bool

    @property
    def given(self) -> tuple[Considered, ...]:
        """The passages at the bar that fit in :data:`NOTE_MAX_CHARS`, best first: number ``i + 1`` is ``given[i]``."""
        given: list[Considered] = []
        size = 0
        for passage in self.retrieved.used:
            size += len(passage.hit.text)
            if given and size > NOTE_MAX_CHARS:
                break
            given.append(passage)
        return tuple(given)

    @property
    def unknown(self) -> bool:
        """No passage at the bar and no tool to answer from: the specialist says it does not know."""
        return not self.tools_offered and not self.retrieved.used

    def note(self) -> str:
        hits = enumerate((passage.hit for passage in self.given), 1)
        return passages_note([NotedPassage(number, hit.document_title, hit.heading, hit.text) for number, hit in hits])

    def cited(self, answer: str) -> list[tuple[int, Considered]]:
        """The given passages whose number ``answer`` names, by number."""
        named = {int(number) for number in _CITED.findall(answer)}
        return [(number, passage) for number, passage in enumerate(self.given, 1) if number in named]


def knowledge_tags(profile: ProfileSpec, specialist: SpecialistSpec) -> tuple[str, ...] | None:
    """The tags a search for ``specialist`` keeps to (``()``: any document); ``None``: it does not search."""
    settings = profile.knowledge
    if not settings.retrieval or not specialist.knowledge.retrieval:
        return None
    return settings.tags_for(specialist.knowledge)


async def knowledge_use(
    *,
    profile: ProfileSpec,
    specialist: SpecialistSpec,
    held: bool,
    tenant_pk: int | None,
    text: str,
    language: str,
    tools_offered: bool,
) -> KnowledgeUse | None:
    """Retrieve for this run, or ``None`` when it does not (rule 1): ``held`` is whether the profile holds knowledge
    (``routing.snapshot.Snapshot.knowledge``)."""
    if not held or not text.strip() or (tools_offered and not specialist.knowledge.with_tools):
        return None
    tags = knowledge_tags(profile, specialist)
    if tags is None or small_talk_read(text) is not None:
        return None
    retrieved = await sync_to_async(knowledge_retrieve)(
        profile_pk=profile.pk,
        tenant_pk=tenant_pk,
        query=text,
        language=language,
        tags=tags,
        min_score=profile.knowledge.min_score,
    )
    return KnowledgeUse(retrieved=retrieved, question=text, tools_offered=tools_offered)


def _quote(passage: Considered, question: str) -> str:
    quote = " ".join(relevant_sentences(passage.hit.text, question))
    return quote if len(quote) <= QUOTE_MAX_CHARS else quote[: QUOTE_MAX_CHARS - 1].rstrip() + "…"


def _row(passage: Considered) -> dict[str, Any]:
    hit = passage.hit
    return {
        "document": hit.document_id,
        "title": hit.document_title,
        "passage": hit.passage_id,
        "score": passage.relevance,  # what the bar is held to
        "search_score": hit.score,  # the engine's, which orders the search
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
    bar = use.retrieved.min_score
    considered = [{**_row(passage), "used": passage.relevance >= bar} for passage in use.retrieved.considered]
    metadata: dict[str, Any] = {"citations": [], "retrieved": considered, "answered_from_knowledge": False}
    if not answered:
        return Settled(answer, "", metadata)
    if use.unknown:
        said = say(language, DONT_KNOW)
        return Settled(said, said, {**metadata, "unknown": True})
    cited = use.cited(answer)
    if not cited:
        return Settled(answer, "", metadata)
    citations = [
        {**_row(passage), "number": number, "link": document_link(passage.hit.document_id)}
        | {"quote": _quote(passage, use.question)}
        for number, passage in cited
    ]
    # The customer reads the titles; the link (the admin's page of the document) is the business's, in the metadata.
    sources = " ".join(f"[{c['number']}] {c['title']}" for c in citations)
    tail = f"\n\n{say(language, SOURCES)} {sources}"
    return Settled(answer + tail, tail, {**metadata, "citations": citations, "answered_from_knowledge": True})


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
