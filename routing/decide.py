"""The routing decision for one message of one profile: state, delegation, the compiled router, the classifier."""

from __future__ import annotations

from routing.classifier import intent_classifier
from routing.planner import MODEL_PLANNER, PLAN_BY_KEYWORDS, model_plan
from routing.router import RouteDecision
from routing.specs import ProfileSpec

COORDINATION_INTENT = "coordination"


def delegation_decide(
    *, profile: ProfileSpec, text: str, delegated_to: str = "", delegated_intent: str = ""
) -> RouteDecision:
    """A profile with a coordinator: the open sub-conversation's specialist, else the coordinator.

    State policies, keywords and the classifier do not route here: the
    coordinator decides whether to delegate (the keyword hits are in the
    metadata, and are what the offline model delegates on). Small talk outside a sub-conversation is the
    coordinator's own (no candidates: it opens no delegation); inside one, the specialist keeps the conversation.
    """
    router = profile.router
    if not delegated_to or delegated_to not in profile.specialists:
        talk = router.by_small_talk(text, agent=profile.coordinator)
        if talk is not None:
            return talk
    candidates = [hit.describe() for hit in router.checked_match(text)]
    examples = _examples_candidate(profile, text) if not candidates and not delegated_to else None
    if examples is not None:
        candidates.append(examples)
    if delegated_to and delegated_to in profile.specialists:
        intent = router.intent_of(delegated_to, text, preferred=delegated_intent)
        return RouteDecision(
            route=delegated_to,
            agent=delegated_to,
            intent=intent.name if intent else delegated_intent,
            confidence=1.0,
            reason=f"Sub-conversation open with {delegated_to}: it receives the messages until it ends it.",
            method="sub_conversation",
            domain=(intent.domain or None) if intent else None,
            mcp_tools=list(intent.mcp_tools) if intent else [],
            metadata={"candidates": candidates},
        )
    coordinator = profile.coordinator
    intent = router.intent_of(coordinator, text)
    return RouteDecision(
        route=coordinator,
        agent=coordinator,
        intent=intent.name if intent else COORDINATION_INTENT,
        confidence=1.0,
        reason=f"{coordinator} coordinates: it answers or delegates every message outside a sub-conversation.",
        method="coordinator",
        domain=(intent.domain or None) if intent else None,
        mcp_tools=list(intent.mcp_tools) if intent else [],
        metadata={"candidates": candidates},
    )


def _examples_candidate(profile: ProfileSpec, text: str) -> dict[str, object] | None:
    """With no keyword hit, the intent the examples tier routes ``text`` to, as a coordinator's candidate (the offline
    vectoriser; an embeddings tier is not asked here)."""
    router = profile.router
    decided = router.examples_decide_here(text)
    if decided is None:
        return None
    intent = router.intents_by_name[decided.intent]
    return {
        "intent": intent.name,
        "agent": intent.agent,
        "priority": intent.priority,
        "matched_keywords": [],
        "examples": decided.metadata["examples"],
    }


def single_agent_decide(decision: RouteDecision, profile: ProfileSpec) -> RouteDecision:
    """The single-agent path: the profile's general specialist answers everything.

    The general specialist is the profile's fallback specialist. The router still decides the intent (its
    tools, its next state, the routing analytics), in router mode: no supervisor plan, no coordinator, no
    handoffs. The intent's tools are then limited to what the general specialist may use, as always.
    """
    general = profile.fallback_agent
    decision.metadata["routed_agent"] = decision.agent
    decision.route = decision.agent = general
    decision.agents = [general]
    decision.handoff = False
    decision.reason = f"Single-agent path: {general} answers every message. Router: {decision.reason}"
    return decision


def delegation_active(profile: ProfileSpec) -> bool:
    """Delegation applies to profiles with a coordinator in router and hybrid modes (a supervisor plans instead)."""
    return bool(profile.coordinator) and profile.effective_mode != "supervisor"


def delegated_of(profile: ProfileSpec, active_agent: str) -> str:
    """The sub-conversation open when ``active_agent`` answered last, for callers that know only the active agent
    (saved routing tests, the route preview, the impact replay): under a coordinator, any other specialist
    answering means the coordinator had delegated to it, and it ends the sub-conversation by handing back."""
    if not delegation_active(profile) or active_agent in ("", profile.coordinator):
        return ""
    return active_agent


async def route_decide(
    *,
    profile: ProfileSpec,
    text: str,
    state: str | None = None,
    active_agent: str = "",
    active_intent: str = "",
    delegated_to: str = "",
    delegated_intent: str = "",
    single_agent: bool = False,
) -> RouteDecision:
    """State policy → (hybrid: short follow-up) → keywords, or a supervisor plan → classifier → fallback.

    A supervisor plan is the model's when the profile's ``supervisor_planner`` is ``model`` and the model gives
    one (:mod:`routing.planner`), else the keyword plan (its metadata says why the model's did not stand). A message
    whose best keyword hit is a remote backend is not planned: it goes to that backend, as in router mode.

    A profile with a coordinator routes by :func:`delegation_decide` instead; the single-agent path (the
    rollout flag's other cohort) by :func:`single_agent_decide`.

    The mode is the profile's, unless ``ROUTING_MODE`` overrides it. Pure apart
    from the classifier (:mod:`routing.classifier`), which may call a model; never touches the ORM.
    """
    if single_agent:
        return single_agent_decide(await _routed(profile, text, state, active_agent, active_intent, "router"), profile)
    if delegation_active(profile):
        return delegation_decide(
            profile=profile, text=text, delegated_to=delegated_to, delegated_intent=delegated_intent
        )
    return await _routed(profile, text, state, active_agent, active_intent, profile.effective_mode)


def _for_a_backend(profile: ProfileSpec, text: str) -> bool:
    """Whether the message's best keyword hit is a remote backend: the gateway sends it there whole, no supervisor
    plans it (:meth:`routing.router.CompiledRouter.by_plan`)."""
    if not profile.backends:
        return False
    hits = profile.router.match(text)
    return bool(hits) and hits[0].intent.remote


async def _routed(
    profile: ProfileSpec, text: str, state: str | None, active_agent: str, active_intent: str, mode: str
) -> RouteDecision:
    planner_error = ""
    router = profile.router
    if (
        mode == "supervisor"
        and profile.supervisor_planner == MODEL_PLANNER
        and router.by_small_talk(text) is None
        and router.by_state(state) is None
        and not _for_a_backend(profile, text)
    ):
        planned, planner_error = await model_plan(profile, text)
        if planned is not None:
            return profile.router.mark_handoff(planned, active_agent)
    classifier = intent_classifier(profile) if profile.llm_router_enabled else None
    decision = await profile.router.route(
        text,
        state=state,
        active_agent=active_agent,
        active_intent=active_intent,
        classifier=classifier,
        mode=mode,
        followup_max_chars=profile.hybrid_followup_max_chars,
    )
    if planner_error:
        # The model could not plan: the keyword plan stands in, and says why.
        decision.metadata.update(plan_source=PLAN_BY_KEYWORDS, planner_error=planner_error)
    if profile.backends and decision.agent in profile.backends:
        decision.metadata["backend"] = decision.agent  # a remote backend answers (conversations/gateway.py)
    return decision
