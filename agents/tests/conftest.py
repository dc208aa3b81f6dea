"""Fixtures the model settings' tests share: a profile of its own and a scripted endpoint for it."""

from __future__ import annotations

import pytest

from agents.llm import reset_clients
from agents.models import AgentProfile
from tests.factories import AgentProfileFactory, SpecialistFactory
from tests.llm_server import ScriptedLLMServer

OWN_ANSWER = "answer from the retail endpoint"


@pytest.fixture
def own_server():
    """A second scripted server: the endpoint of one profile alone."""
    server = ScriptedLLMServer(default=OWN_ANSWER).start()
    yield server
    server.stop()
    reset_clients()


@pytest.fixture
def retail(db) -> AgentProfile:
    """A profile whose every message goes to its fallback specialist."""
    profile = AgentProfileFactory(agent_id="retail_loja", name="Loja", domain="retail")
    profile.fallback_specialist = SpecialistFactory(profile=profile, name="store_agent")
    profile.save(update_fields=["fallback_specialist"])
    return profile
