"""The routing decision for one message of one profile."""

from __future__ import annotations

from routing.router import RouteDecision
from routing.snapshot import ProfileSpec


async def route_decide(
    *,
    profile: ProfileSpec,
    text: str,
    state: str | None = None,
    active_agent: str = "",
    active_intent: str = "",
) -> RouteDecision:
    """State policy → (hybrid: short follow-up) → keywords, or a supervisor plan → classifier → fallback.

    The mode is the profile's, unless ``ROUTING_MODE`` overrides it. Pure apart
    from the classifier, which may call a model; never touches the ORM.
    """
    from agents.llm import intent_classifier

    classifier = intent_classifier(profile) if profile.llm_router_enabled else None
    return await profile.router.route(
        text,
        state=state,
        active_agent=active_agent,
        active_intent=active_intent,
        classifier=classifier,
        mode=profile.effective_mode,
        followup_max_chars=profile.hybrid_followup_max_chars,
    )
