"""The questions the business's documents did not answer — knowledge gaps —, for the analytics API and the dashboard.

``GET /api/analytics/knowledge/gaps``: of the answers given in the window whose turn searched the profile's knowledge
(``metadata.knowledge``), how many said the specialist does not know (``metadata.knowledge.unknown``: no passage
reached the profile's relevance bar and no tool answered), and those questions grouped by what they are about, so
that the business sees which articles its help centre lacks.

The counts are read in the database through the two partial indexes of such answers
(:data:`conversations.models.KNOWLEDGE_SEARCHED`, :data:`~conversations.models.KNOWLEDGE_UNKNOWN`); the grouping reads
the latest :data:`GAPS_READ` unanswered questions at most — the customer's message each answer followed — and says
how many it read. A group is the word its questions share most (words compared by their first letters, as the
relevance bar compares them: "refund" and "refunds" alike), each question in the group of its most shared word:
"roaming", asked 14 times in three languages, with the words its questions share next and the latest questions.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery
from django.template.defaultfilters import truncatechars
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from analytics.apis import ERRORS, FILTER_PARAMETERS, AnalyticsApi
from analytics.filters import MAX_RECENT_LIMIT, limit_parse
from analytics.selectors import window_rows
from conversations.models import KNOWLEDGE_SEARCHED, KNOWLEDGE_UNKNOWN, Message, MessageRole
from knowledge.public import question_words
from tenants.public import TenantScope

GAPS_READ = 2000  # the latest unanswered questions grouped, at most
EXAMPLES = 3  # the latest questions shown in a group
SHARED_WORDS = 3  # the words a group's questions share next, shown beside its own
EXCERPT = 200  # characters of a question shown
NO_WORD = ""  # the group of questions with no word that tells what they are about ("?", "hm")


def _answers(condition: Any, **scope: Any) -> QuerySet[Message]:
    """The answers of ``condition`` in the window and scope (:func:`analytics.selectors.window_rows`'s keywords)."""
    return window_rows(
        Message.objects.filter(condition), time_field="created_at", tenant_path="conversation__tenant_id", **scope
    )


@dataclass(frozen=True)
class _Gap:
    question: str
    stems: tuple[str, ...]  # of its content words, in order, each once
    words: dict[str, str]  # stem → the word as the question wrote it (folded)
    language: str
    profile: str
    conversation_id: int
    message_id: int
    asked_at: dt.datetime


def _gaps_read(rows: QuerySet[Message]) -> list[_Gap]:
    """The latest :data:`GAPS_READ` of ``rows`` (unanswered answers), each with the customer's message it followed."""
    asked = Message.objects.filter(
        conversation_id=OuterRef("conversation_id"),
        role=MessageRole.USER,
        created_at__lte=OuterRef("created_at"),
        pk__lt=OuterRef("pk"),  # written before its answer, in the same statement when the time is the same
    ).order_by("-created_at", "-pk")
    latest = rows.annotate(question=Subquery(asked.values("content")[:1])).order_by("-created_at", "-pk")
    gaps = []
    for row in latest.values(
        "pk", "conversation_id", "created_at", "question", "conversation__language", "profile__agent_id"
    )[:GAPS_READ]:
        question = row["question"] or ""
        words = question_words(question)
        gaps.append(
            _Gap(
                question=question,
                stems=tuple(words),
                words=words,
                language=row["conversation__language"] or "",
                profile=row["profile__agent_id"] or "",
                conversation_id=row["conversation_id"],
                message_id=row["pk"],
                asked_at=row["created_at"],
            )
        )
    return gaps


def gaps_grouped(gaps: Iterable[_Gap]) -> list[dict[str, Any]]:
    """``gaps`` grouped by the word their questions share most (see the module), most asked first, then the latest
    asked: ``[{topic, words, questions, languages, profiles, last_asked, examples}]``."""
    gaps = list(gaps)
    shared = Counter(stem for gap in gaps for stem in gap.stems)
    groups: dict[str, list[_Gap]] = defaultdict(list)
    for gap in gaps:  # the latest first: a group's examples are its latest questions
        topic = max(gap.stems, key=lambda stem: (shared[stem], -gap.stems.index(stem)), default=NO_WORD)
        groups[topic].append(gap)
    ranked = sorted(groups.items(), key=lambda item: (-len(item[1]), -item[1][0].asked_at.timestamp(), item[0]))
    return [_group(topic, members) for topic, members in ranked]


def _group(topic: str, members: list[_Gap]) -> dict[str, Any]:
    spelled = Counter(gap.words[topic] for gap in members if topic in gap.words)
    others = Counter(stem for gap in members for stem in gap.stems if stem != topic)
    spelling = {stem: gap.words[stem] for gap in reversed(members) for stem in gap.stems}
    return {
        "topic": spelled.most_common(1)[0][0] if spelled else NO_WORD,
        "words": [spelling[stem] for stem, count in others.most_common(SHARED_WORDS) if count > 1],
        "questions": len(members),
        "languages": dict(Counter(gap.language for gap in members if gap.language).most_common()),
        "profiles": sorted({gap.profile for gap in members if gap.profile}),
        "last_asked": members[0].asked_at.isoformat(),
        "examples": [
            {
                "question": truncatechars(gap.question, EXCERPT),
                "language": gap.language,
                "profile": gap.profile,
                "conversation_id": gap.conversation_id,
                "message_id": gap.message_id,
                "asked_at": gap.asked_at.isoformat(),
            }
            for gap in members[:EXAMPLES]
        ],
    }


def knowledge_gaps(
    *,
    start: dt.datetime,
    end: dt.datetime,
    tenant_id: TenantScope,
    profile_id: int | None = None,
    cohort: str | None = None,
    version: int | str | None = None,
    limit: int = 20,
) -> dict[str, Any]:
    """The window's answers that searched the profile's knowledge, those that did not know, and the ``limit``
    largest groups of the latest unanswered questions: ``{searched, unknown, unknown_percentage, read, groups}``
    (``read``: how many questions the groups were made of, at most :data:`GAPS_READ`). Three queries."""
    scope: dict[str, Any] = {
        "start": start,
        "end": end,
        "tenant_id": tenant_id,
        "profile_id": profile_id,
        "cohort": cohort,
        "version": version,
    }
    searched = _answers(KNOWLEDGE_SEARCHED, **scope).count()
    unknown_rows = _answers(KNOWLEDGE_UNKNOWN, **scope)
    unknown = unknown_rows.count() if searched else 0
    gaps = _gaps_read(unknown_rows) if unknown else []
    return {
        "searched": searched,
        "unknown": unknown,
        "unknown_percentage": round(100 * unknown / searched, 2) if searched else None,
        "read": len(gaps),
        "groups": gaps_grouped(gaps)[:limit],
    }


GAP_EXAMPLE = inline_serializer(
    "KnowledgeGapExample",
    {
        "question": serializers.CharField(),
        "language": serializers.CharField(),
        "profile": serializers.CharField(),
        "conversation_id": serializers.IntegerField(),
        "message_id": serializers.IntegerField(),
        "asked_at": serializers.DateTimeField(),
    },
    many=True,
)
GAPS_RESPONSE = inline_serializer(
    "KnowledgeGaps",
    {
        "searched": serializers.IntegerField(),
        "unknown": serializers.IntegerField(),
        "unknown_percentage": serializers.FloatField(allow_null=True),
        "read": serializers.IntegerField(),
        "groups": inline_serializer(
            "KnowledgeGapGroup",
            {
                "topic": serializers.CharField(),
                "words": serializers.ListField(child=serializers.CharField()),
                "questions": serializers.IntegerField(),
                "languages": serializers.DictField(child=serializers.IntegerField()),
                "profiles": serializers.ListField(child=serializers.CharField()),
                "last_asked": serializers.DateTimeField(),
                "examples": GAP_EXAMPLE,
            },
            many=True,
        ),
    },
)


class KnowledgeGapsApi(AnalyticsApi):
    @extend_schema(
        summary="Knowledge gaps: the questions the profile's documents did not answer, grouped by what they ask",
        description=(
            "`searched`: answers given in the window whose turn searched the profile's knowledge; `unknown`: those "
            "that said the specialist does not know (no passage reached the relevance bar, no tool answered); "
            "`unknown_percentage` = 100 × unknown / searched (null when nothing searched). `groups`: the latest "
            f"unanswered questions (`read` of them, at most {GAPS_READ}) grouped by the word they share most "
            "(`topic`, blank for questions with no such word), with the words they share next, how many, in which "
            "languages and profiles, and the latest ones (`conversation_id` and `message_id` open "
            "/admin/conversations/conversation/<conversation_id>/change/#answer-<message_id> for staff who may read "
            "the conversation). Most asked first."
        ),
        parameters=[
            *FILTER_PARAMETERS,
            OpenApiParameter(
                "limit", OpenApiTypes.INT, description=f"How many groups (1–{MAX_RECENT_LIMIT}, default 20)."
            ),
        ],
        responses={200: GAPS_RESPONSE, **ERRORS},
    )
    def get(self, request):
        filters = self.filters(request)
        limit = limit_parse(params=request.query_params)
        return Response(knowledge_gaps(**filters.selector_kwargs(), limit=limit))
