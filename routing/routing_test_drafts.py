"""A real message turned into a saved routing test: the pre-filled "Add as routing test case" link of
the admin (a stored route decision, a user message, the route preview) and the cases the admin action creates.

The case expects what was decided; the editor corrects it to the right answer, which makes a misroute a test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest
from django.urls import reverse

from releases.models import RoutingTestCase
from routing.forms import expect_field, turns_text

ADD_PERMISSION = "releases.add_routingtestcase"
NAME_WORDS = 6
NAME_MAX = RoutingTestCase._meta.get_field("name").max_length or 200


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


def test_case_name(draft: RoutingTestDraft, *, taken: set[str] | None = None) -> str:
    """The message's first words and the date, made unique in the profile: "minha fatura veio alta (2026-11-22)",
    then "… (2026-11-22) 2"."""
    return draft_name(draft.message, draft.when, model=RoutingTestCase, profile_id=draft.profile_id, taken=taken)


def draft_name(message: str, when: date | None, *, model: Any, profile_id: int, taken: set[str] | None = None) -> str:
    """A new saved test's name from the message it starts with: its first words and the date, unique among the
    profile's tests of ``model`` (or ``taken``)."""
    limit = model._meta.get_field("name").max_length or NAME_MAX
    words = " ".join(message.split()[:NAME_WORDS]) or "message"
    suffix = f" ({when.isoformat()})" if when else ""
    base = words[: limit - len(suffix) - 4] + suffix
    if taken is None:
        taken = set(model.objects.filter(profile_id=profile_id, name__startswith=base).values_list("name", flat=True))
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base} {n}"
    return name


def test_case_add_url(draft: RoutingTestDraft) -> str:
    """The admin's add form of a saved routing test, pre-filled with ``draft`` (a unique name included): its
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


def test_cases_create(drafts: list[RoutingTestDraft]) -> list[RoutingTestCase]:
    """Save ``drafts`` as enabled routing tests, each under a unique name (also among themselves)."""
    taken: dict[int, set[str]] = {}
    cases = []
    for draft in drafts:
        names = taken.setdefault(
            draft.profile_id,
            set(RoutingTestCase.objects.filter(profile_id=draft.profile_id).values_list("name", flat=True)),
        )
        name = test_case_name(draft, taken=names)
        names.add(name)
        cases.append(
            RoutingTestCase.objects.create(
                profile_id=draft.profile_id,
                name=name,
                message=draft.message,
                state=draft.state,
                active_specialist=draft.active_specialist,
                turns=list(draft.turns),
                expect=draft.expect,
                source_message_id=draft.source_message_id,
                source_intent=draft.source_intent,
                source_agent=draft.source_agent,
            )
        )
    return cases
