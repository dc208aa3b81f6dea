"""The routing decision for one message of one profile (router mode)."""

from __future__ import annotations

from routing.router import RouteDecision
from routing.snapshot import ProfileSpec


async def route_decide(
    *, profile: ProfileSpec, text: str, state: str | None = None, active_agent: str = ""
) -> RouteDecision:
    """State policy → keywords → classifier (when enabled for the profile) → fallback.

    Pure apart from the classifier, which may call a model; never touches the ORM.
    """
    from agents.llm import intent_classifier

    classifier = intent_classifier(profile) if profile.llm_router_enabled else None
    return await profile.router.route(text, state=state, active_agent=active_agent, classifier=classifier)
