"""A real message turned into a saved routing test: the pre-filled "Add as routing test case" link of
the admin (a stored route decision, a user message, the route preview), and the drafts the release lifecycle saves
as tests (``releases.from_messages``; the tests are its rows, a layer above).

The case expects what was decided; the editor corrects it to the right answer, which makes a misroute a test. A
draft's name is the message's first words and the date; the page that saves it makes it unique in the profile.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import date
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse

from routing.expectations import ROUTING_TEST_NAME_MAX
from routing.forms import expect_field, turns_text

ADD_PERMISSION = "releases.add_routingtestcase"
NAME_WORDS = 6


@dataclass(frozen=True)
class RoutingTestDraft:
    """What a new saved routing test would hold: ``expect`` is what was decided (``intent``, ``agent``). A stored
    message's draft names it (``source_message_id``) and keeps what was decided (``source_intent``,
    ``source_agent``), which the test keeps when the editor corrects its expectation. ``turns``: the customer's
    earlier messages of the conversation, oldest first (each ``{"message", "expect"}``, as a saved test keeps them),
    played from ``state`` before ``message`` — a test of the message in its conversation."""

    profile_id: int
    message: str
    state: str = ""
    active_specialist: str = ""
    expect: dict[str, Any] = field(default_factory=dict)
    when: date | None = None
    source_message_id: int | None = None
    source_intent: str = ""
    source_agent: str = ""
    turns: tuple[dict[str, Any], ...] = ()


def test_case_may_add(request: HttpRequest) -> bool:
    """Whether the user may add saved routing tests (routing editors and superusers may)."""
    return bool(request.user.has_perm(ADD_PERMISSION))


def test_case_expect(*, intent: str, agent: str) -> dict[str, str]:
    """The expectation of a case made from a decision: its intent and agent (the method is left out, since the
    right answer is often reached another way)."""
    return {key: value for key, value in (("intent", intent), ("agent", agent)) if value}


def test_case_name(draft: RoutingTestDraft) -> str:
    """The message's first words and the date: "minha fatura veio alta (2026-11-22)" (:func:`name_unique` makes it
    "… (2026-11-22) 2" where the profile has that one)."""
    return draft_name(draft.message, draft.when, limit=ROUTING_TEST_NAME_MAX)


def draft_name(message: str, when: date | None, *, limit: int) -> str:
    """A new saved test's name from the message it starts with: its first words and the date, in ``limit``
    characters, with room left for :func:`name_unique`'s number."""
    words = " ".join(message.split()[:NAME_WORDS]) or "message"
    suffix = f" ({when.isoformat()})" if when else ""
    return words[: limit - len(suffix) - 4] + suffix


def name_unique(name: str, taken: Collection[str]) -> str:
    """``name``, or with the first number from 2 that makes it none of ``taken``: "… (2026-11-22) 2"."""
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name} {n}"
    return unique


def test_case_add_url(draft: RoutingTestDraft) -> str:
    """The admin's add form of a saved routing test, pre-filled with ``draft`` (the page makes its name unique): its
    expectation fills the form's fields, one per key (:func:`routing.forms.expect_field`)."""
    params = {
        "profile": draft.profile_id,
        "name": test_case_name(draft),
        "message": draft.message,
        "state": draft.state,
        "active_specialist": draft.active_specialist,
        "turns": turns_text(list(draft.turns)),
        **{expect_field(key): value for key, value in draft.expect.items()},
        "source_message_id": draft.source_message_id,
        "source_intent": draft.source_intent,
        "source_agent": draft.source_agent,
    }
    query = urlencode({key: value for key, value in params.items() if value not in ("", None)})
    return f"{reverse('admin:releases_routingtestcase_add')}?{query}"
