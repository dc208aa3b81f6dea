"""How a profile and each of its specialists use the profile's knowledge at a turn (docs/knowledge.md, "At a turn").

Two JSON fields, read and checked here only: ``AgentProfile.knowledge`` (:class:`KnowledgeSettings`: retrieval before
a specialist answers, the tags it keeps to, the relevance bar, the vector search and its bar) and
``Specialist.knowledge`` (:class:`SpecialistKnowledge`: the specialist may turn retrieval off or keep to tags of its
own). Every key is
optional; the defaults below fill the rest, so ``{}`` is "search every document of the profile before answering".
The tags' form is the knowledge app's too (``knowledge.models`` re-exports :func:`validate_tags`). Pure data: no ORM.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from django.core.exceptions import ValidationError

TAG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
MAX_TAGS = 20
# The relevance bar's default, on the share of a question's content words a passage holds, each weighed by how general
# it is (agents.passages.held_share, knowledge.retrieval): on the help centre of knowledge/tests/test_retrieval.py the
# passage that answers held 0.67–1 of them (counted alike), the best passage for a question the articles do not answer
# at most 0.33, on both engines (docs/knowledge.md, "The relevance bar").
DEFAULT_MIN_SCORE = 0.5
# The bar of a passage the vector search alone found, on the cosine similarity of the question's embedding to its
# own (knowledge.vectors): it holds too few of the question's words for the bar above, so the cosine must say it
# answers. Not measured on a real embeddings model here (docs/knowledge.md, "Vectors"): raise it when passages are
# cited for questions they do not answer.
DEFAULT_VECTOR_MIN_SCORE = 0.5

ERROR_KEYS = "Unknown key {keys}: use {allowed}."
ERROR_SWITCH = "{key} is true or false."
ERROR_MIN_SCORE = "{key} is a number from 0 up to (not including) 1."


def validate_tags(value: object) -> None:
    """A list of at most :data:`MAX_TAGS` distinct tags, each lowercase letters, digits, ``-`` or ``_``."""
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise ValidationError("Tags are a list of words.")
    if len(value) > MAX_TAGS:
        raise ValidationError(f"At most {MAX_TAGS} tags.")
    if bad := [tag for tag in value if not TAG.match(tag)]:
        raise ValidationError(f"Tags are lowercase letters, digits, '-' or '_' (at most 40): {', '.join(bad)}.")


@dataclass(frozen=True)
class SpecialistKnowledge:
    """What one specialist does with its profile's knowledge.

    * ``retrieval`` — search the knowledge before it answers (off: it answers from its prompt and tools alone, and the
      profile's bar never makes it say it does not know);
    * ``with_tools`` — search even in a run that is offered MCP tools (off, the default: such a run answers from its
      tools, and searches nothing — a question for an account's data is not a help-centre question);
    * ``tags`` — keep to documents holding one of these tags (their own or their source's), within the profile's.
    """

    retrieval: bool = True
    with_tools: bool = False
    tags: tuple[str, ...] = ()

    KEYS: ClassVar[tuple[str, ...]] = ("retrieval", "with_tools", "tags")

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> SpecialistKnowledge:
        data = dict(value or {})
        return cls(
            retrieval=bool(data.get("retrieval", True)),
            with_tools=bool(data.get("with_tools", False)),
            tags=tuple(data.get("tags") or ()),
        )


@dataclass(frozen=True)
class KnowledgeSettings:
    """What a profile does with its knowledge at a turn.

    * ``retrieval`` — its specialists search its knowledge (the shared sources and the conversation's tenant's, the
      conversation's language first) before they answer; off: no specialist does, whatever its own setting;
    * ``tags`` — keep to documents holding one of these tags;
    * ``min_score`` — the relevance bar in [0, 1): a passage scoring below it (or holding fewer than two of the
      question's content words: :data:`agents.passages.MIN_WORDS_HELD`) is not used, and a specialist with no
      passage at the bar (and no tool to answer from) says it does not know;
    * ``vectors`` — the search ranks the passages by the cosine similarity of their embeddings to the question's too,
      fused with the words' ranking (the operator's endpoint, ``KNOWLEDGE_EMBEDDINGS_*``; off by default);
    * ``vector_min_score`` — the bar, on that cosine, of a passage the vectors found that does not reach ``min_score``.
    """

    retrieval: bool = True
    tags: tuple[str, ...] = ()
    min_score: float = DEFAULT_MIN_SCORE
    vectors: bool = False
    vector_min_score: float = DEFAULT_VECTOR_MIN_SCORE

    KEYS: ClassVar[tuple[str, ...]] = ("retrieval", "tags", "min_score", "vectors", "vector_min_score")

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> KnowledgeSettings:
        data = dict(value or {})
        return cls(
            retrieval=bool(data.get("retrieval", True)),
            tags=tuple(data.get("tags") or ()),
            min_score=float(data.get("min_score", DEFAULT_MIN_SCORE)),
            vectors=bool(data.get("vectors", False)),
            vector_min_score=float(data.get("vector_min_score", DEFAULT_VECTOR_MIN_SCORE)),
        )

    @property
    def vector_bar(self) -> float | None:
        """The cosine bar of a passage the vectors alone found, or ``None`` when the search uses no vectors."""
        return self.vector_min_score if self.vectors else None

    def tags_for(self, specialist: SpecialistKnowledge) -> tuple[str, ...] | None:
        """The tags a search for ``specialist`` keeps to (``()``: every document), or ``None`` when the two
        restrictions share no tag (nothing may be read)."""
        if not self.tags or not specialist.tags:
            return self.tags or specialist.tags
        shared = tuple(tag for tag in specialist.tags if tag in self.tags)
        return shared or None


def knowledge_problems(value: object, keys: tuple[str, ...]) -> list[tuple[str, str]]:
    """What is wrong with a knowledge setting of ``keys``, as (key, message); ``[]`` when it is valid."""
    if not isinstance(value, dict):
        return [("", 'The knowledge settings are a mapping, e.g. {"retrieval": true}.')]
    problems: list[tuple[str, str]] = []
    if unknown := sorted(set(value) - set(keys)):
        problems.append(("", ERROR_KEYS.format(keys=", ".join(unknown), allowed=", ".join(keys))))
    for key in ("retrieval", "with_tools", "vectors"):
        if key in value and not isinstance(value[key], bool):
            problems.append((key, ERROR_SWITCH.format(key=key)))
    if "tags" in value:
        try:
            validate_tags(value["tags"])
        except ValidationError as error:
            problems.append(("tags", error.messages[0]))
    for key in ("min_score", "vector_min_score"):
        score = value.get(key, 0)
        if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score < 1:
            problems.append((key, ERROR_MIN_SCORE.format(key=key)))
    return problems


def _raise(problems: list[tuple[str, str]]) -> None:
    if problems:
        raise ValidationError([f"{key}: {message}" if key else message for key, message in problems])


def validate_knowledge_settings(value: object) -> None:
    """The profile's ``knowledge``: the keys of :class:`KnowledgeSettings`, each of its type."""
    _raise(knowledge_problems(value, KnowledgeSettings.KEYS))


def validate_specialist_knowledge(value: object) -> None:
    """A specialist's ``knowledge``: the keys of :class:`SpecialistKnowledge`, each of its type."""
    _raise(knowledge_problems(value, SpecialistKnowledge.KEYS))
