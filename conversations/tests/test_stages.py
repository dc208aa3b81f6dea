"""A turn's stages (conversations/stages.py): a feature registered as a stage claims the messages it is for before the
profile's routing, in the registry's order, and settles and writes once the turn is answered and stored."""

from __future__ import annotations

from functools import partial

import pytest

from conversations import stages
from conversations.stages import Stage
from conversations.tests.memory_talk import said
from routing.router import RouteDecision

pytestmark = pytest.mark.django_db

say = partial(said, user="cust-stages", session="s-stages")


def test_a_stage_added_to_the_registry_claims_its_messages_and_settles_and_writes_after_every_turn(
    api, telecom, monkeypatch
):
    seen: list[object] = []

    async def claim(turn):
        if "carimbo" not in turn.guardrails.sanitized_text:
            return None
        seen.append("claim")
        agent = turn.input.profile.fallback_agent
        return RouteDecision(
            route=agent, agent=agent, intent="", confidence=1.0, reason="the stamp stage", method="stamp"
        )

    async def settle(turn):
        seen.append("settle")

    def stored(turn):
        seen.append(("stored", turn.store.user_message_id is not None))

    monkeypatch.setattr(stages, "STAGES", (*stages.STAGES, Stage("stamp", claim=claim, settle=settle, stored=stored)))

    claimed = say(api, "quero um carimbo na fatura")
    assert claimed["metadata"]["route_decision"]["method"] == "stamp"
    assert seen == ["claim", "settle", ("stored", True)]

    routed = say(api, "Minha fatura veio alta")
    assert routed["metadata"]["route_decision"]["method"] != "stamp"
    assert seen[3:] == ["settle", ("stored", True)]  # not claimed, still settled and told of the stored rows

    first_stage_wins = say(api, "lembre que prefiro um carimbo azul")  # memory is registered before it
    assert first_stage_wins["metadata"]["route_decision"]["method"] == "memory"
