"""A real conversation turned into a saved conversation test: "Add as conversation test" on an answer of the
conversation's page and of the ratings inbox opens the test's add form filled in with the conversation's customer
turns up to that answer, each expecting what happened (the specialist and intent it was routed to, the answer in the
conversation's language), and the answer itself shown on the last turn, where the editor marks what was wrong with it
(a phrase it must not contain, a judge's rubric). A thumbs-down becomes a regression test with one click and a save.

The conversation store and the tests are layers above: the store's admin builds the :class:`ConversationTestDraft`
and asks :func:`conversation_test_add_url` for the address. The turns are too long for an address, so the draft waits
in the user's session under a random key the address names (the last :data:`DRAFTS_KEPT`); the add page reads it
back (:func:`conversation_test_draft_initial`) and makes the name unique among the profile's tests. Messages are
stored masked, and so is the draft.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import date
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse

from routing.conversation_tests.cases import NAME_MAX_CHARS
from routing.routing_test_drafts import draft_name

ADD_PERMISSION = "releases.add_conversationtest"
SESSION_KEY = "conversation_test_drafts"
DRAFT_PARAMETER = "draft"
DRAFTS_KEPT = 5


@dataclass(frozen=True)
class ConversationTestDraft:
    """What a new conversation test would hold. ``turns``: the customer's messages, oldest first, each ``{"user",
    "expect", "answer_given"}`` (the answer shown beside its row, never saved); ``source_message_id``: the customer
    message of the last turn."""

    profile_id: int
    turns: tuple[dict[str, Any], ...]
    language: str = ""
    channel: str = ""
    when: date | None = None
    source_message_id: int | None = None


def conversation_test_may_add(request: HttpRequest) -> bool:
    """Whether the user may add saved conversation tests (routing editors and superusers may)."""
    return bool(request.user.has_perm(ADD_PERMISSION))


def conversation_test_expect(*, intent: str, agent: str, language: str) -> dict[str, str]:
    """What a turn is expected to show, from what happened: the specialist and intent it was routed to and the
    language of its answer (the conversation's)."""
    said = (("agent", agent), ("intent", intent), ("answer_language", language))
    return {key: value for key, value in said if value}


def conversation_test_add_url(request: HttpRequest, draft: ConversationTestDraft) -> str:
    """The add form of a conversation test, to be filled in with ``draft`` (kept in the user's session)."""
    first = next((turn["user"] for turn in draft.turns), "")
    name = draft_name(first, draft.when, limit=NAME_MAX_CHARS)  # the add page makes it unique in the profile
    kept: dict[str, Any] = dict(request.session.get(SESSION_KEY) or {})
    for old in list(kept)[: max(0, len(kept) - DRAFTS_KEPT + 1)]:
        del kept[old]
    token = secrets.token_urlsafe(12)
    kept[token] = {
        "profile": draft.profile_id,
        "name": name,
        "language": draft.language,
        "channel": draft.channel,
        "source_message_id": draft.source_message_id,
        "turns": [dict(turn) for turn in draft.turns],
    }
    request.session[SESSION_KEY] = kept
    return f"{reverse('admin:releases_conversationtest_add')}?{urlencode({DRAFT_PARAMETER: token})}"


def conversation_test_draft_initial(request: HttpRequest) -> dict[str, Any]:
    """The add form's initial values of the draft the address names (nothing when it names none, or one gone)."""
    token = request.GET.get(DRAFT_PARAMETER) or ""
    drafted = (request.session.get(SESSION_KEY) or {}).get(token)
    return {key: value for key, value in drafted.items() if value not in ("", None)} if drafted else {}
