"""The routing decision: pure functions over plain data, no ORM.

A :class:`CompiledRouter` is built once per profile from :class:`IntentSpec` and
:class:`StatePolicySpec` values (see :mod:`routing.snapshot`) and then decides
without touching the database. Keywords are compiled into one Aho-Corasick
automaton (:class:`routing.keywords.KeywordScan`), so a message is scanned
once whatever the number of keywords.

Decision order (router mode), recorded as ``method``:

0. ``small_talk`` — a greeting, thanks, a goodbye, a question about the assistant or a request for a person
   (:mod:`routing.small_talk`): the fallback answers, and the conversation's state, active specialist and intent
   stay as they were;
1. ``state``   — the conversation's state has an enabled state policy;
2. ``keyword`` — enabled intents whose keywords occur in the message;
3. ``examples`` — the intent whose examples the message is most similar to,
   when that similarity reaches the profile's threshold and beats the
   runner-up intent's — or "none of these" — by its margin (:mod:`routing.examples`);
   an intent that sets a conversation state sets it only at or above the
   profile's stricter ``examples_state_threshold``;
4. ``llm``     — the classifier, when enabled for the profile and confident
   enough (at or above the profile's threshold);
5. ``fallback`` — the profile's fallback specialist.

Keywords, their exclusions and their languages, and how keyword ties are broken: :mod:`routing.keywords`.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from routing.background import none_label
from routing.examples import ExampleIndex, ExamplesMatch
from routing.keywords import NO_KEYWORDS, IntentSpec, KeywordHit, KeywordMatch, KeywordScan
from routing.replies import NO_REPLY_WORDS, ReplyWords
from routing.small_talk import SMALL_TALK_INTENT, small_talk_read, small_talk_reader

logger = logging.getLogger(__name__)

Method = Literal[
    "small_talk",
    "state",
    "followup",
    "keyword",
    "examples",
    "llm",
    "llm_plan",
    "fallback",
    "coordinator",
    "sub_conversation",
    "permission",
    "goal",
    "human",
    "repair",
    "memory",
]

FALLBACK_INTENT = "fallback"


MULTI_INTENT = "multi_intent"
SUPERVISOR_ROUTE = "supervisor_agent"


async def examples_amatch(index: ExampleIndex | None, text: str) -> ExamplesMatch | None:
    """How ``text`` scores against ``index`` (``None``: no examples tier), the message embedded over HTTP when the
    index uses an embeddings endpoint; an endpoint that fails gives ``None`` (the tier does not decide). The router's
    intents and the goal-mode profile's goals (:mod:`routing.goals.intent`) are both scored through it."""
    if index is None:
        return None
    vectoriser = index.vectoriser
    if not vectoriser.remote:
        return index.match_text(text)
    try:
        vector = await vectoriser.avector(text)  # type: ignore[attr-defined]  # a remote vectoriser's
    except Exception as exc:  # noqa: BLE001 — any endpoint failure means "the tier does not decide"
        logger.warning("examples tier: the embeddings endpoint failed: %s", exc)
        return None
    return index.match(vector)


Reliability = tuple[tuple[float, float, float, int], ...]  # (low, high, share right, samples) by score range


def reliability_rows(table: Any) -> Reliability:
    """A calibration's reliability table (``releases.calibration.reliability_table``: rows with ``low``, ``high``,
    ``right_rate`` and ``routed``) as the router reads it; rows it cannot read are left out."""
    rows = []
    for row in table or ():
        try:
            rows.append((float(row["low"]), float(row["high"]), float(row["right_rate"]), int(row["routed"])))
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(sorted(rows))


@dataclass(frozen=True)
class StatePolicySpec:
    state: str
    agent: str
    intent: str = ""
    domain: str = ""
    mcp_tools: tuple[str, ...] = ()
    next_state: str = ""


@dataclass
class RouteDecision:
    """The contract of a routing decision (docs/routing.md), stored for every message."""

    route: str
    agent: str
    intent: str
    confidence: float = 0.0
    reason: str = ""
    method: Method = "fallback"
    next_state: str | None = None
    handoff: bool = False
    domain: str | None = None
    mcp_tools: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    agents: list[str] = field(default_factory=list)
    plan: list[PlanStep] = field(default_factory=list)
    # The conversation stays where it was: its state, active specialist and intent are not changed by this message
    # (small talk), and the message is no handoff.
    keeps_conversation: bool = False

    def __post_init__(self) -> None:
        if not self.agents and self.agent:
            self.agents = [self.agent]

    @property
    def is_plan(self) -> bool:
        """Several specialists answer this message (supervisor mode)."""
        return self.route == SUPERVISOR_ROUTE

    def as_dict(self) -> dict[str, Any]:
        """The decision as plain data. ``metadata`` is the decision's own dict, not a deep copy: it is read to be
        shown and stored on every message, and ``dataclasses.asdict`` copying it cost more than routing did."""
        return {
            "route": self.route,
            "agent": self.agent,
            "intent": self.intent,
            "confidence": self.confidence,
            "reason": self.reason,
            "method": self.method,
            "next_state": self.next_state,
            "handoff": self.handoff,
            "domain": self.domain,
            "mcp_tools": list(self.mcp_tools),
            "metadata": self.metadata,
            "agents": list(self.agents),
            "plan": [asdict(step) for step in self.plan],
            "keeps_conversation": self.keeps_conversation,
        }


@dataclass(frozen=True)
class PlanStep:
    """One specialist of a supervisor plan, with the intent that brought it in."""

    agent: str
    intent: str
    mcp_tools: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    next_state: str = ""


def plan_decision(
    steps: list[PlanStep], *, domains: set[str], reason: str, method: Method, metadata: dict[str, Any]
) -> RouteDecision:
    """A plan of several specialists as a decision: ``supervisor_agent`` with ``intent: multi_intent``, the
    domain when the plan's intents share one, and every step's tools."""
    return RouteDecision(
        route=SUPERVISOR_ROUTE,
        agent=SUPERVISOR_ROUTE,
        intent=MULTI_INTENT,
        confidence=0.9,
        reason=reason,
        method=method,
        domain=next(iter(domains)) if len(domains) == 1 else None,
        mcp_tools=sorted({tool for step in steps for tool in step.mcp_tools}),
        metadata=metadata,
        agents=[step.agent for step in steps],
        plan=steps,
    )


# The last text whose keywords a router checked in this context (a request's task), and what they said: a turn reads
# the customer's message to route it and again for the offline model's moves (conversations.runtime), and a request
# never reuses another's.
_last_checked: contextvars.ContextVar[tuple[CompiledRouter, str, KeywordMatch] | None] = contextvars.ContextVar(
    "keywords_checked", default=None
)


@dataclass(frozen=True)
class Classification:
    """What a classifier (LLM or offline) says about a message."""

    intent: str
    confidence: float
    reason: str = ""


Classifier = Callable[[str, tuple[IntentSpec, ...]], Awaitable[Classification | None]]


class CompiledRouter:
    """The routing of one profile, compiled for repeated decisions."""

    def __init__(
        self,
        *,
        intents: tuple[IntentSpec, ...],
        state_policies: tuple[StatePolicySpec, ...] = (),
        fallback_agent: str = "",
        llm_enabled: bool = False,
        llm_threshold: float = 0.6,
        examples: ExampleIndex | None = None,
        examples_threshold: float = 1.0,
        examples_margin: float = 0.0,
        examples_state_threshold: float = 1.0,
        examples_reliability: Reliability = (),
        keyword_check: float = 1.0,
        reply_words: ReplyWords = NO_REPLY_WORDS,
        flow_examples: ExampleIndex | None = None,
    ) -> None:
        self.intents = intents
        self.reply_words = reply_words
        self.examples = examples
        # The examples of the intents reached only through a state policy (a flow's replies), against "none of
        # these": whether a message inside the flow reads as its reply or as chat (routing.stack).
        self.flow_examples = flow_examples
        self.examples_threshold = examples_threshold
        self.examples_margin = examples_margin
        self.examples_state_threshold = examples_state_threshold
        self.examples_reliability = examples_reliability
        self.keyword_check = keyword_check
        self.intents_by_name = {intent.name: intent for intent in intents}
        self.state_policies = {policy.state: policy for policy in state_policies}
        self.fallback_agent = fallback_agent
        self.llm_enabled = llm_enabled
        self.llm_threshold = llm_threshold
        self._keywords = KeywordScan(intents)
        small_talk_reader()  # read once per process, when the first profile compiles: not on a customer's message

    # -- steps ----------------------------------------------------------------

    def match(self, text: str) -> list[KeywordHit]:
        """Every enabled intent whose keywords occur in ``text`` (and count: see the exclusions), best first."""
        return self.keyword_match(text).hits

    def keyword_match(self, text: str) -> KeywordMatch:
        """:meth:`match`'s hits, with the keywords their exclusions cancelled and those the message's language left
        out (:mod:`routing.keywords`)."""
        return self._keywords.keyword_match(text)

    def checked_keyword_match(self, text: str) -> KeywordMatch:
        """:meth:`keyword_match`, its hit set aside when the profile's keyword check is on (``keyword_check`` < 1), the
        message holds one keyword and the examples tier is at least that sure the whole message is not the keyword's
        intent — it reads as none of these, or as another intent: a keyword in another sense ("a entrega do TCC", "o
        plano cartesiano") leaves the message to the examples tier and the fallback, a keyword naming what the
        message is about but not what it asks ("do the headphones in that order cancel noise?") to the examples
        tier. Two keywords or more are evidence enough ("minha fatura e meu pedido"). The offline tier only (no
        endpoint is called for it). The same text asked again in the same context is answered from the last check
        (the answer is shared: read it, never change it)."""
        last = _last_checked.get()
        if last is not None and last[0] is self and last[1] == text:
            return last[2]
        found = self._checked_keyword_match(text)
        _last_checked.set((self, text, found))
        return found

    def _checked_keyword_match(self, text: str) -> KeywordMatch:
        found = self.keyword_match(text)
        if (
            len(found.hits) != 1
            or len(found.hits[0].keywords) != 1
            or self.keyword_check >= 1.0
            or self.examples is None
            or self.examples.vectoriser.remote
        ):
            return found
        match = self.examples.match_text(text, nearest=0)  # the scores alone: no example is read here
        if match.elsewhere(found.hits[0].intent.name) < self.keyword_check:
            return found
        kind, none = match.none_of_these
        aside: dict[str, Any] = {
            "keywords": [hit.describe() for hit in found.hits],
            "none_of_these": {"score": round(none, 3), "kind": kind, "label": none_label(kind)},
            "bar": self.keyword_check,
        }
        if not match.reads_as_none:
            aside["reads_as"] = {"intent": match.best[0], "score": round(match.best[1], 3)}
        return KeywordMatch([], found.excluded, aside, found.off_language)

    def checked_match(self, text: str) -> list[KeywordHit]:
        """:meth:`checked_keyword_match`'s hits: the intents a message hits, for whoever moves on them (a coordinator's
        candidates, the offline model's handoffs)."""
        return self.checked_keyword_match(text).hits

    def intent_of(self, agent: str, text: str, *, preferred: str = "") -> IntentSpec | None:
        """The intent ``agent`` works under for ``text``: its best keyword hit, else ``preferred`` when that
        intent is its own, else its first intent by priority (decides a handoff or delegation target's tools)."""
        for hit in self.match(text):
            if hit.intent.agent == agent:
                return hit.intent
        chosen = self.intents_by_name.get(preferred)
        if chosen is not None and chosen.agent == agent:
            return chosen
        return next(
            (intent for intent in sorted(self.intents, key=lambda i: i.priority) if intent.agent == agent), None
        )

    def by_small_talk(self, text: str, *, agent: str = "") -> RouteDecision | None:
        """Small talk (:mod:`routing.small_talk`) is answered by ``agent`` (the fallback specialist by default; a
        coordinator answers its own) and leaves the conversation where it was: no state set or cleared, no handoff,
        no pending flow captured."""
        talk = small_talk_read(text)
        if talk is None:
            return None
        agent = agent or self.fallback_agent
        phrases = ", ".join(repr(phrase) for phrase in talk.phrases)
        return RouteDecision(
            route=agent,
            agent=agent,
            intent=SMALL_TALK_INTENT.format(kind=talk.kind),
            confidence=1.0,
            reason=f"Small talk ({talk.kind.replace('_', ' ')}: {phrases}): {agent} answers, the conversation stays "
            "where it was.",
            method="small_talk",
            metadata={"small_talk": talk.as_dict()},
            keeps_conversation=True,
        )

    def by_state(self, state: str | None, text: str | None = None) -> RouteDecision | None:
        """The state policy of ``state``: it takes every message. With the message's ``text``, a yes or no the
        message reads as (:mod:`routing.replies`, with the profile's words) is recorded as ``metadata["reply"]``:
        the specialist of the flow then answers it without moving the conversation on the reply's words."""
        policy = self.state_policies.get(state or "")
        if policy is None:
            return None
        metadata: dict[str, Any] = {"state": policy.state}
        if text is not None and (reply := self.reply_words.read(text)):
            metadata["reply"] = reply.as_metadata()
        return RouteDecision(
            route=policy.agent,
            agent=policy.agent,
            intent=policy.intent or f"state:{policy.state}",
            confidence=1.0,
            reason=f"Conversation state {policy.state} is handled by {policy.agent}.",
            method="state",
            next_state=policy.next_state or None,
            domain=policy.domain or None,
            mcp_tools=list(policy.mcp_tools),
            metadata=metadata,
        )

    def by_keywords(self, text: str, hits: list[KeywordHit] | None = None) -> RouteDecision | None:
        hits = self.match(text) if hits is None else hits
        if not hits:
            return None
        winner, beaten = hits[0], hits[1:]
        intent = winner.intent
        confidence = min(0.99, 0.8 + 0.05 * (len(winner.keywords) - 1))
        quoted = ", ".join(repr(keyword) for keyword in winner.keywords)
        return RouteDecision(
            route=intent.agent,
            agent=intent.agent,
            intent=intent.name,
            confidence=round(confidence, 2),
            reason=f"Keyword {quoted} matched intent {intent.name} (priority {intent.priority}).",
            method="keyword",
            next_state=intent.next_state or None,
            domain=intent.domain or None,
            mcp_tools=list(intent.mcp_tools),
            metadata={
                "matched_keywords": list(winner.keywords),
                "candidates": [hit.describe() for hit in beaten],
            },
        )

    def by_plan(self, text: str, hits: list[KeywordHit] | None = None) -> RouteDecision | None:
        """Supervisor planning: every intent the message hits brings its specialist, best first, once each.

        One specialist → the same decision as router mode; several → route
        ``supervisor_agent`` with ``intent: multi_intent`` and the plan.

        Remote backends are left to the gateway, which sends one the whole message (its own deployment plans its
        parts): when the best hit is a backend, the decision is router mode's, that backend; otherwise the plan is
        the local specialists', and the backends the message also hit are named in
        ``metadata["backends_set_aside"]``.
        """
        hits = self.match(text) if hits is None else hits
        if hits and hits[0].intent.remote:
            return self.by_keywords(text, hits)
        set_aside = sorted({hit.intent.agent for hit in hits if hit.intent.remote})
        hits = [hit for hit in hits if not hit.intent.remote]
        decision = self._local_plan(text, hits)
        if decision is not None and set_aside:
            decision.metadata["backends_set_aside"] = set_aside
        return decision

    def _local_plan(self, text: str, hits: list[KeywordHit]) -> RouteDecision | None:
        """:meth:`by_plan` over the hits of local specialists."""
        steps: list[PlanStep] = []
        for hit in hits:
            if all(step.agent != hit.intent.agent for step in steps):
                steps.append(
                    PlanStep(
                        agent=hit.intent.agent,
                        intent=hit.intent.name,
                        mcp_tools=hit.intent.mcp_tools,
                        keywords=hit.keywords,
                        next_state=hit.intent.next_state,
                    )
                )
        if len(steps) < 2:
            return self.by_keywords(text, hits)
        return plan_decision(
            steps,
            domains={hit.intent.domain for hit in hits if hit.intent.domain},
            reason=(
                f"Supervisor found {len(steps)} intents ("
                + ", ".join(f"{step.intent} → {step.agent}" for step in steps)
                + ") and will consult each specialist."
            ),
            method="keyword",
            metadata={"matched_keywords": [k for step in steps for k in step.keywords]},
        )

    def by_followup(
        self, text: str, *, active_agent: str, active_intent: str, max_chars: int, hits: list[KeywordHit]
    ) -> RouteDecision | None:
        """Hybrid mode: a short message that hits no intent stays with the active specialist, no model asked."""
        if not active_agent or hits or len(text.strip()) > max_chars:
            return None
        intent = self.intents_by_name.get(active_intent)
        return RouteDecision(
            route=active_agent,
            agent=active_agent,
            intent=active_intent or "followup",
            confidence=0.7,
            reason=f"Short follow-up ({len(text.strip())} ≤ {max_chars} characters) kept by {active_agent}.",
            method="followup",
            domain=(intent.domain or None) if intent else None,
            mcp_tools=list(intent.mcp_tools) if intent else [],
            metadata={"followup_max_chars": max_chars},
        )

    def examples_match(self, text: str) -> ExamplesMatch | None:
        """How ``text`` scores against the examples (offline vectoriser), or ``None`` without an examples tier."""
        return self.examples.match_text(text) if self.examples is not None else None

    def examples_decide_here(self, text: str) -> RouteDecision | None:
        """The examples tier's decision where no endpoint may be called (sync code: benchmarks, a coordinator's
        candidates, the offline model's hits): ``None`` when the tier is off or embeds each message over HTTP."""
        if self.examples is None or self.examples.vectoriser.remote:
            return None
        return self.from_examples(self.examples.match_text(text))

    async def examples_amatch(self, text: str) -> ExamplesMatch | None:
        """:meth:`examples_match`, the message embedded over HTTP when the tier uses an embeddings endpoint; an
        endpoint that fails leaves the decision to the next tier (``None``)."""
        return await examples_amatch(self.examples, text)

    def from_examples(self, match: ExamplesMatch | None) -> RouteDecision | None:
        """A decision from the examples tier, when its best intent clears the threshold and the margin."""
        if match is None or not match.decides(self.examples_threshold, self.examples_margin):
            return None
        intent = self.intents_by_name.get(match.best[0])
        if intent is None:
            return None
        score = match.best[1]
        reason = match.why(self.examples_threshold, self.examples_margin)
        metadata: dict[str, Any] = {"examples": match.as_metadata(self.examples_threshold, self.examples_margin)}
        next_state = intent.next_state or None
        reliable = self.reliability_at(score)
        if reliable is not None:
            metadata["examples"]["reliability"] = reliable
            reason += (
                f" When the tier was calibrated, decisions scoring {reliable['low']:.2f}–{reliable['high']:.2f} were "
                f"right {round(reliable['right_rate'] * 100)} times in 100 ({reliable['routed']} samples)."
            )
        bar = self.examples_state_threshold
        if next_state and score < bar:
            # A state captures the customer's next message: the examples' evidence must clear the stricter bar.
            metadata["state_withheld"] = {"state": next_state, "score": round(score, 3), "bar": bar}
            reason += (
                f" Its state {next_state} is not set: {score:.2f} is below the bar for moves that set a state, "
                f"{bar:.2f}."
            )
            next_state = None
        return RouteDecision(
            route=intent.agent,
            agent=intent.agent,
            intent=intent.name,
            confidence=round(score, 2),
            reason=reason,
            method="examples",
            next_state=next_state,
            domain=intent.domain or None,
            mcp_tools=list(intent.mcp_tools),
            metadata=metadata,
        )

    def reliability_at(self, score: float) -> dict[str, Any] | None:
        """How often the tier's decisions at ``score`` were right when it was calibrated (its reliability table's
        row for the score), or ``None`` without a calibration."""
        for low, high, right_rate, routed in self.examples_reliability:
            if low <= score < high or (high >= 1.0 and score >= low):
                return {"low": low, "high": min(high, 1.0), "right_rate": right_rate, "routed": routed}
        return None

    def from_classification(self, result: Classification | None) -> RouteDecision | None:
        """A decision from the classifier's answer, or ``None`` when it is unknown or not confident."""
        if result is None:
            return None
        intent = self.intents_by_name.get(result.intent)
        if intent is None or result.confidence < self.llm_threshold:
            return None
        return RouteDecision(
            route=intent.agent,
            agent=intent.agent,
            intent=intent.name,
            confidence=round(result.confidence, 2),
            reason=result.reason or f"Classifier chose {intent.name}.",
            method="llm",
            next_state=intent.next_state or None,
            domain=intent.domain or None,
            mcp_tools=list(intent.mcp_tools),
            metadata={},
        )

    def fallback(self, reason: str = "No state policy, keyword or classifier decided.") -> RouteDecision:
        return RouteDecision(
            route=self.fallback_agent,
            agent=self.fallback_agent,
            intent=FALLBACK_INTENT,
            confidence=0.0,
            reason=reason,
            method="fallback",
        )

    # -- the decision ---------------------------------------------------------

    def decide_before_examples(
        self,
        text: str,
        *,
        state: str | None,
        mode: str,
        active_agent: str,
        active_intent: str,
        followup_max_chars: int,
    ) -> RouteDecision | None:
        """The steps before the examples tier — a reply to the state's flow, small talk, the state policy, (hybrid)
        follow-up, keywords or a supervisor plan — or ``None`` when none decided (what calibration asks: does a saved
        test reach the tier?). A yes or no goes to the flow that asked, before small talk ("ok, obrigado")."""
        decision, found = self._before_examples(
            text,
            state=state,
            mode=mode,
            active_agent=active_agent,
            active_intent=active_intent,
            followup_max_chars=followup_max_chars,
        )
        return self.excluded_note(decision, found) if decision is not None else None

    def _before_examples(
        self,
        text: str,
        *,
        state: str | None,
        mode: str,
        active_agent: str,
        active_intent: str,
        followup_max_chars: int,
    ) -> tuple[RouteDecision | None, KeywordMatch]:
        """:meth:`decide_before_examples`, with what the keywords said (:meth:`checked_keyword_match`: none when a
        state or small talk decided, the keywords were not read), for whichever step decides in the end."""
        by_state = self.by_state(state, text)
        replied = by_state is not None and "reply" in by_state.metadata
        decision = by_state if replied else self.by_small_talk(text) or by_state
        if decision is not None:
            return decision, NO_KEYWORDS
        found = self.checked_keyword_match(text)
        if mode == "hybrid":
            decision = self.by_followup(
                text,
                active_agent=active_agent,
                active_intent=active_intent,
                max_chars=followup_max_chars,
                hits=found.hits,
            )
            if decision is not None:
                return decision, found
        plan = self.by_plan(text, found.hits) if mode == "supervisor" else self.by_keywords(text, found.hits)
        return plan, found

    @staticmethod
    def excluded_note(decision: RouteDecision, found: KeywordMatch) -> RouteDecision:
        """``decision`` with the keywords their exclusions cancelled in its ``metadata["excluded_keywords"]``
        (``intent``, ``keyword``, ``exclusion``, ``kind``) and the hits the keyword check set aside in
        ``metadata["keywords_set_aside"]`` and the keywords off the message's language in
        ``metadata["keywords_off_language"]`` (``intent``, ``keyword``, ``languages``, ``language``) and the exclusions
        that cancelled nothing in it in ``metadata["exclusions_off_language"]`` (the same and ``exclusion``), whichever
        step decided: the route preview says why they did or did not count."""
        if found.off_language:
            decision.metadata["keywords_off_language"] = [item.describe() for item in found.off_language]
        if found.exclusions_off_language:
            decision.metadata["exclusions_off_language"] = [item.describe() for item in found.exclusions_off_language]
        if found.excluded:
            decision.metadata["excluded_keywords"] = [exclusion.describe() for exclusion in found.excluded]
        if found.set_aside:
            decision.metadata["keywords_set_aside"] = found.set_aside
        return decision

    @staticmethod
    def mark_handoff(decision: RouteDecision, active_agent: str) -> RouteDecision:
        """A routing handoff is a decision that moves the conversation off its active specialist (not a plan, not one
        that keeps the conversation where it was). A decision that sets a state says what set it."""
        if decision.next_state and decision.method != "state":
            decision.metadata["state_set_by"] = decision.method
        decision.handoff = (
            bool(active_agent)
            and not decision.is_plan
            and not decision.keeps_conversation
            and decision.agent != active_agent
        )
        if decision.handoff:
            decision.metadata["previous_agent"] = active_agent
        return decision

    async def route(
        self,
        text: str,
        *,
        state: str | None = None,
        active_agent: str = "",
        active_intent: str = "",
        classifier: Classifier | None = None,
        mode: str = "router",
        followup_max_chars: int = 0,
    ) -> RouteDecision:
        """Decide in the documented order; ``classifier`` is consulted only when enabled.

        ``mode`` is the profile's effective routing mode: ``supervisor`` plans
        every specialist the message hits; ``hybrid`` first keeps short
        follow-ups with ``active_agent``; both route like ``router`` otherwise.
        """
        decision, found = self._before_examples(
            text,
            state=state,
            mode=mode,
            active_agent=active_agent,
            active_intent=active_intent,
            followup_max_chars=followup_max_chars,
        )
        match: ExamplesMatch | None = None
        if decision is None and self.examples is not None:
            match = await self.examples_amatch(text)
            decision = self.from_examples(match)
        classification: Classification | None = None
        if decision is None and self.llm_enabled and classifier is not None and self.intents:
            classification = await classifier(text, self.intents)
            decision = self.from_classification(classification)
        if decision is None:
            reason = "No state policy, keyword or classifier decided."
            if match is not None:
                reason = f"No state policy or keyword decided; examples: {match.why(*self._examples_rule)}"
            if classification is not None:
                reason = (
                    f"Classifier proposed {classification.intent!r} with confidence "
                    f"{classification.confidence:.2f}, below the threshold {self.llm_threshold:.2f} or unknown."
                )
            decision = self.fallback(reason)
        if classification is not None:
            decision.metadata["classifier"] = asdict(classification)
        if match is not None and decision.method != "examples":
            # Why the examples did not decide (the route preview explains it).
            decision.metadata["examples"] = match.as_metadata(*self._examples_rule)
        return self.mark_handoff(self.excluded_note(decision, found), active_agent)

    @property
    def _examples_rule(self) -> tuple[float, float]:
        return self.examples_threshold, self.examples_margin

    def route_sync(
        self, text: str, *, state: str | None = None, active_agent: str = "", mode: str = "router"
    ) -> RouteDecision:
        """The same order without the classifier step (for benchmarks); the examples tier with its offline
        vectoriser only."""
        decision, found = self._before_examples(
            text, state=state, mode=mode, active_agent=active_agent, active_intent="", followup_max_chars=0
        )
        if decision is None:
            decision = self.examples_decide_here(text)
        return self.mark_handoff(self.excluded_note(decision or self.fallback(), found), active_agent)
