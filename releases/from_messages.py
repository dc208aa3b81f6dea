"""Saved tests made from stored customer messages: the drafts the conversation store's pages build
(:mod:`conversations.saved_test_drafts`) become rows here, each under a name unique in its profile — the first words
of the message and the date (:func:`routing.routing_test_drafts.draft_name`), then "… 2", "… 3"."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.db import models

from releases.models import RoutingTestCase
from routing.public import RoutingTestDraft, name_unique, test_case_name


def saved_name_unique(
    model: type[models.Model], *, profile_id: Any, name: str, taken: Collection[str] | None = None
) -> str:
    """``name``, made unique among the saved tests of ``model`` of the profile (or among ``taken``)."""
    if taken is None:
        rows: Any = model._default_manager.filter(profile_id=profile_id, name__startswith=name)
        taken = set(rows.values_list("name", flat=True))
    return name_unique(name, taken)


def routing_tests_create(drafts: list[RoutingTestDraft]) -> list[RoutingTestCase]:
    """Save ``drafts`` as enabled routing tests, each under a unique name (also among themselves)."""
    taken: dict[int, set[str]] = {}
    cases = []
    for draft in drafts:
        names = taken.setdefault(
            draft.profile_id,
            set(RoutingTestCase.objects.filter(profile_id=draft.profile_id).values_list("name", flat=True)),
        )
        name = saved_name_unique(RoutingTestCase, profile_id=draft.profile_id, name=test_case_name(draft), taken=names)
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
