"""The conversation stack: the flows a conversation has open, and what one message does to them.

A *frame* is a flow waiting on the customer: a conversation state whose policy takes the reply (``state``), a tool's
permission question (``permission``), a goal's clarification (``clarification``), an open delegation
(``delegation``), or the second request of a two-request message kept for later (``topic``). The frames are kept
bottom first; the top one is the flow the next reply belongs to.

:func:`conversation_decide` reads one message against the frames, in this order:

1. **Expiry.** A frame older than the profile's ``frame_expiry_turns`` turns or ``frame_expiry_minutes`` minutes is
   dropped (``expired``).
2. **Repair** (:mod:`routing.repairs`): *cancel* ends the top frame and its state; *repeat* says the last answer
   again; *correct* re-runs the previous step with the corrected value; *skip* passes the question; *already told*
   runs the step that asked again — the one that opened the flow or delegation on top, which still waits, else the
   last one — its specialist told to use what the customer said earlier. Outside any flow, cancel and skip are read
   as any message.
3. **A reply to the top frame**: a yes, no or "not sure" (:mod:`routing.replies`), a message that returns to the
   flow ("voltando ao pagamento: já paguei"), or a message the flow's own specialist takes that asks nothing else, is
   bound to the frame that asked.
4. **A digression**: a message the router sends elsewhere with evidence (keywords, examples, the classifier) is
   answered by whoever it belongs to; the frame is *pushed* under it and *resumed* at the end of the answer, in the
   customer's language — or stays under the new flow the side question opened, to be resumed when that one closes.
   Small talk and a message that reads as none of the profile's intents leave every frame as it was (the flow still
   waits, and is resumed).
5. **Several requests in one message** (router and hybrid modes, no flow open): each clause is routed; two or more
   for different specialists are answered together (the supervisor's fan-out, ``multi_topic: together``) or the
   first is answered and the others *queued* as ``topic`` frames (``multi_topic: in_turn``), offered next.

Pure apart from the routing it asks for (:func:`routing.decide.route_decide`, which may call a classifier); no ORM.
The conversation layer loads the frames, applies what the step says to the conversation's columns and writes the
answer's lines (``conversations.stack_turn``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from common.text import identifier_shape, identifiers
from routing.background import PREFIX as BACKGROUND_PREFIX
from routing.decide import delegation_active, route_decide
from routing.repairs import (
    ALREADY_TOLD,
    CANCEL,
    CORRECT,
    REPEAT,
    SKIP,
    Repair,
    marks_digression,
    return_cut,
    without_phrase,
)
from routing.replies import NO, YES
from routing.router import FALLBACK_INTENT, IntentSpec, PlanStep, RouteDecision, plan_decision
from routing.specs import ProfileSpec

STATE, PERMISSION, CLARIFICATION, DELEGATION, TOPIC = "state", "permission", "clarification", "delegation", "topic"
KINDS = (STATE, PERMISSION, CLARIFICATION, DELEGATION, TOPIC)
STORED_KINDS = (STATE, TOPIC)  # the others are read from the conversation's own columns each turn
REPAIR_INTENT = "repair:{pattern}"
# How a message's requests are told apart: its sentences, and the words that join two requests.
_CLAUSES = re.compile(
    r"[.;!?\n]+|,\s+(?:e|and|y|also|tamb[ée]m|adem[aá]s|al[ée]m disso|plus)\s+"
    r"|\s+(?:e também|e ainda|e tamb[ée]m|and also|y también|y además|além disso|also|plus|aparte)\s+"
    r"|\s+(?:e|and|y)\s+(?=(?:\w+\s+){1,}\w+)",
    re.IGNORECASE,
)
_QUESTION_WORDS = re.compile(
    r"^\s*¿|\?(?:\s|$)|^\s*(qual|quais|quando|onde|cad[eê]|como|quanto|quantos|por que|porque|o que|what|when|where|"
    r"how|why|which|who|can|could|is|are|do|does|did|cu[aá]l|cu[aá]ndo|d[oó]nde|c[oó]mo|cu[aá]nto|por qu[eé]|qu[eé])\b",
    re.IGNORECASE,
)
# Words that announce one more request ("also, …", "outra coisa: …", "y además …"): the clause after them is a
# request of its own, whatever the whole message reads as.
_ANNOUNCES = re.compile(
    r"^(?:and also|also|plus|another thing|one more thing|besides|e tamb[ée]m|tamb[ée]m|al[ée]m disso|outra coisa|"
    r"e outra coisa|e ainda|e mais|y tambi[ée]n|tambi[ée]n|adem[aá]s|y adem[aá]s|otra cosa|aparte)\b",
    re.IGNORECASE,
)
_ROUTED = ("keyword", "examples", "llm", "llm_plan")  # methods that found the message's own intent
MIN_CLAUSE_WORDS = 2
REFERENCE_WORDS = 3  # words before an identifier that only name it ("é o pedido P200"): a reference, no request
_COMMA = re.compile(r"\s*,\s*")
_OPENER = re.compile(r"^\s*(?:[^\s,;:.!?]+\s*){1,3}[,;:.!]+\s*")  # a short opening clause ("ok, ", "great thanks. ")
# The examples tier's weight (its posterior, offline) the whole message must give a request that only the examples
# found in its clause, for it to count as a request of its own.
TOPIC_MIN_WEIGHT = 0.05
# What the answering specialist is told of a repair (a system note).
CORRECTED_NOTE = (
    "[SYSTEM_NOTE: the customer corrected a value they gave earlier; redo the last step with the corrected value from "
    "this message.]"
)
SKIPPED_NOTE = "[SYSTEM_NOTE: the customer chose not to answer the question; go on without it.]"
ALREADY_TOLD_NOTE = (
    "[SYSTEM_NOTE: the customer says they already gave this information: use what they said earlier in the "
    "conversation.]"
)
# The background's kinds that are chat rather than a request: inside a flow they move nothing, asked or not.
CHAT_KINDS = ("greeting", "thanks", "goodbye", "bot_question", "chitchat")
OUT_OF_SCOPE_KIND = "out_of_scope"
CHAT_SCORE, CHAT_MARGIN = 0.6, 0.25
BARE_CORRECTION_WORDS = 6
Routed = Callable[[str, str | None], Awaitable[RouteDecision]]  # the message routed, in a state or none


@dataclass(frozen=True)
class Frame:
    """One open flow. ``question`` is what the flow asked (said again when it is resumed); ``text`` a queued topic's
    request."""

    kind: str
    name: str
    agent: str
    intent: str = ""
    opened_turn: int = 0
    opened_at: str = ""
    question: str = ""
    text: str = ""

    def as_dict(self) -> dict[str, Any]:
        data = {
            "kind": self.kind,
            "name": self.name,
            "agent": self.agent,
            "intent": self.intent,
            "opened_turn": self.opened_turn,
            "opened_at": self.opened_at,
        }
        if self.question:
            data["question"] = self.question
        if self.text:
            data["text"] = self.text
        return data

    def label(self) -> dict[str, str]:
        return {"kind": self.kind, "name": self.name}

    @classmethod
    def from_dict(cls, data: Any) -> Frame | None:
        """A stored frame, or ``None`` when what is stored is not one (a frame is never trusted blindly)."""
        if not isinstance(data, dict) or data.get("kind") not in KINDS or not isinstance(data.get("name"), str):
            return None
        if not isinstance(data.get("opened_turn", 0), int) or isinstance(data.get("opened_turn"), bool):
            return None
        return cls(
            kind=data["kind"],
            name=data["name"][:200],
            agent=str(data.get("agent", ""))[:64],
            intent=str(data.get("intent", ""))[:100],
            opened_turn=int(data.get("opened_turn") or 0),
            opened_at=str(data.get("opened_at", ""))[:40],
            question=str(data.get("question", ""))[:500],
            text=str(data.get("text", ""))[:1000],
        )


def frames_read(stored: Any) -> list[Frame]:
    """The frames of the conversation's ``stack`` column (what does not read as a frame is left out)."""
    if not isinstance(stored, list):
        return []
    return [frame for frame in (Frame.from_dict(item) for item in stored) if frame is not None]


@dataclass
class StackStep:
    """What one message does to the frames: the frames after it, the events in order, the repair pattern it read
    as, the requests it held, and what the answer ends with (a frame resumed, topics queued)."""

    frames: list[Frame]
    turn: int
    now: dt.datetime
    events: list[dict[str, Any]] = field(default_factory=list)
    repair: Repair | None = None
    topics: list[dict[str, Any]] = field(default_factory=list)
    resume: Frame | None = None
    queued: list[Frame] = field(default_factory=list)
    # A system note for the answering specialist (a correction, a skipped question, "I already told you").
    note: str = ""
    # The answer is the platform's own: "cancelled" (the flow that ended) or "repeat" (the last answer again).
    fixed: str = ""
    cancelled: Frame | None = None
    corrected: dict[str, str] = field(default_factory=dict)  # context key → the corrected value

    @property
    def top(self) -> Frame | None:
        return self.frames[-1] if self.frames else None

    @property
    def state(self) -> str:
        """The conversation state after the message: the top frame's when it is a state frame."""
        top = self.top
        return top.name if top is not None and top.kind == STATE else ""

    def event(self, name: str, frame: Frame, by: str) -> None:
        self.events.append({"event": name, "frame": frame.label(), "by": by})

    def pop(self, name: str, by: str) -> Frame | None:
        if not self.frames:
            return None
        frame = self.frames.pop()
        self.event(name, frame, by)
        return frame

    def open(self, frame: Frame, by: str, *, depth: int) -> None:
        self.frames.append(frame)
        self.event("opened" if frame.kind != TOPIC else "queued", frame, by)
        while len(self.frames) > max(1, depth):
            self.event("expired", self.frames.pop(0), "depth")

    def as_metadata(self) -> dict[str, Any]:
        return {
            "stack": [frame.as_dict() for frame in self.frames],
            "events": self.events,
            "repair": self.repair.pattern if self.repair else None,
            "topics": self.topics,
        }


def _expired(frame: Frame, step: StackStep, profile: ProfileSpec) -> bool:
    if frame.kind not in STORED_KINDS:
        return False  # a permission, a clarification, a delegation: their own rules end them
    if frame.opened_turn and step.turn - frame.opened_turn > profile.frame_expiry_turns:
        return True
    try:
        opened = dt.datetime.fromisoformat(frame.opened_at)
    except ValueError:
        return False
    return step.now - opened > dt.timedelta(minutes=profile.frame_expiry_minutes)


def is_question(text: str) -> bool:
    """Whether ``text`` asks something: a question mark (ending it or a sentence of it: "why this charge? I was only
    there 3 days"), or a question word leading it, in the three languages."""
    return bool(_QUESTION_WORDS.search(text.strip()))


def value_corrections(text: str, context: dict[str, Any]) -> dict[str, str]:
    """The context values ``text`` corrects: each identifier of the message (:func:`common.text.identifiers`)
    replaces the context value of the same form ("P200" for "P100", "INV002" for "INV001"), when exactly one value has
    that form and differs from it."""
    corrections: dict[str, str] = {}
    for token in identifiers(text):
        shape = identifier_shape(token)
        same = [key for key, value in context.items() if isinstance(value, str) and identifier_shape(value) == shape]
        if len(same) == 1 and context[same[0]] != token and same[0] not in corrections:
            corrections[same[0]] = token
    return corrections


def _bare_correction(text: str, context: dict[str, Any], active_intent: str, profile: ProfileSpec) -> Repair | None:
    """A short message that gives another value of the same form as one the last step used ("é o P200", "no,
    P200", "el P200") corrects it, apology or not; a longer one is read by its words."""
    if len(text.split()) > BARE_CORRECTION_WORDS or active_intent not in profile.router.intents_by_name:
        return None
    corrected = value_corrections(text, context)
    return Repair(CORRECT, next(iter(corrected.values()))) if corrected else None


async def conversation_decide(
    *,
    profile: ProfileSpec,
    text: str,
    frames: list[Frame],
    turn: int,
    now: dt.datetime,
    active_agent: str = "",
    active_intent: str = "",
    delegated_to: str = "",
    delegated_intent: str = "",
    single_agent: bool = False,
    context: dict[str, Any] | None = None,
) -> tuple[RouteDecision, StackStep]:
    """The routing decision for ``text`` with the conversation's open ``frames``, and what it does to them (see the
    module docstring). ``turn`` is the message's place in the conversation; ``context`` the client's, whose values a
    correction replaces."""
    step = StackStep(frames=[], turn=turn, now=now)
    for frame in frames:
        if _expired(frame, step, profile):
            step.event("expired", frame, "expiry")
        else:
            step.frames.append(frame)

    async def routed(message: str, state: str | None) -> RouteDecision:
        return await route_decide(
            profile=profile,
            text=message,
            state=state,
            active_agent=active_agent,
            active_intent=active_intent,
            delegated_to=delegated_to,
            delegated_intent=delegated_intent,
            single_agent=single_agent,
        )

    top = step.top
    repair = profile.repair_words.read(text) or _bare_correction(text, context or {}, active_intent, profile)
    cancel = repair is not None and repair.pattern == CANCEL and top is not None and top.kind != DELEGATION
    if cancel and repair is not None:
        rest = return_cut(without_phrase(text, repair.phrase))[0]
        if profile.reply_words.read_past_fillers(rest).reads_as == YES:
            repair = None  # "sí, cancélalo" confirms what the flow asked: a reply, not a cancel of the flow
    if repair is not None:
        decision = await _repaired(repair, step, profile, text, active_agent, active_intent, context or {}, routed)
        if decision is not None:
            step.repair = repair
            decision.metadata["repair"] = repair.as_metadata()
            return _done(decision, step, profile, active_agent), step
    if top is not None and top.kind == STATE and not delegation_active(profile) and not single_agent:
        decision = await _in_flow(top, step, profile, text, routed)
    elif top is not None and top.kind == TOPIC:
        decision = await _topic_offered(top, step, profile, text, routed)
    elif top is not None and top.kind in (PERMISSION, CLARIFICATION):
        decision = await _question_open(top, step, text, routed)
    else:
        decision = await routed(text, None)
        if decision.is_plan:  # a supervisor's plan: each of its specialists answers its own request
            step.topics = [
                {"intent": planned.intent, "agent": planned.agent, "text": "", "status": "answered"}
                for planned in decision.plan
            ]
        elif not step.frames and _may_split(decision, profile, single_agent, delegated_to):
            decision = _topics(decision, step, profile, text)
    return _done(decision, step, profile, active_agent), step


def _done(decision: RouteDecision, step: StackStep, profile: ProfileSpec, active_agent: str) -> RouteDecision:
    """Frames the decision opens or closes on its own: a state it sets is a new frame (pushed over the one the message
    digressed from); a flow's reply that clears the state closes it."""
    if decision.keeps_conversation or (decision.method == "repair" and step.fixed):
        return decision
    top = step.top
    wanted = decision.next_state or ""
    if decision.method == "state":
        assert top is not None
        step.frames.pop()
        if wanted:
            step.frames.append(replace(top, name=wanted, opened_turn=step.turn, opened_at=step.now.isoformat()))
            if wanted != top.name:
                step.event("closed", top, "reply")
                step.event("opened", step.frames[-1], decision.intent)
        else:
            step.event("closed", top, "reply")
        return decision
    if wanted and (top is None or top.kind != STATE or top.name != wanted or step.resume is None):
        if top is not None and top.kind == STATE and top.name == wanted:
            step.frames.pop()  # the same flow started again: one frame
        opened = Frame(
            kind=STATE,
            name=wanted,
            agent=decision.agent,
            intent=decision.intent,
            opened_turn=step.turn,
            opened_at=step.now.isoformat(),
        )
        step.open(opened, decision.intent, depth=profile.stack_depth)
        step.resume = None  # the new flow asks its own question; the one under it waits its turn
    elif step.resume is not None:
        decision.next_state = step.state or None
    return decision


async def _repaired(
    repair: Repair,
    step: StackStep,
    profile: ProfileSpec,
    text: str,
    active_agent: str,
    active_intent: str,
    context: dict[str, Any],
    routed: Routed,
) -> RouteDecision | None:
    """The decision a repair pattern makes, or ``None`` when it does not apply here (cancel with no flow open)."""
    top = step.top
    agent = active_agent or profile.fallback_agent
    if repair.pattern == CANCEL:
        if top is None:
            return None
        step.cancelled = step.pop("cancelled", CANCEL)
        step.fixed = CANCEL
        return _platform_decision(
            top.agent or agent, CANCEL, f"The customer dropped the {top.kind} {top.name}.", next_state=step.state
        )
    if repair.pattern == REPEAT:
        step.fixed = REPEAT
        decision = _platform_decision(
            agent, REPEAT, "The customer asked to hear the last answer again.", next_state=None
        )
        decision.keeps_conversation = True
        return decision
    if repair.pattern == CORRECT:
        step.corrected = value_corrections(text, context)
        redone = _redo(profile, active_intent, "with the corrected value")
        if redone is not None:
            step.note = CORRECTED_NOTE
            redone.metadata["corrected"] = sorted(step.corrected)
        return redone
    if repair.pattern == ALREADY_TOLD:
        told = _told_again(step, profile, active_intent)
        if told is not None:
            return told
    if top is None:
        return None
    if repair.pattern == SKIP and top.kind == DELEGATION:
        # The delegated specialist asked: it goes on without the answer, and the delegation stays open.
        return _asked_again(step, profile, top.intent, SKIPPED_NOTE, "the customer skipped its question")
    if repair.pattern == SKIP:
        step.note = SKIPPED_NOTE
        popped = step.pop("closed", SKIP)
        assert popped is not None
        decision = await _flow_or_platform(popped, SKIP, "The customer skipped the question.", agent, text, routed)
        decision.next_state = step.state or None
        return decision
    if repair.pattern == ALREADY_TOLD:  # a permission or a clarification: the one that asked answers
        step.note = ALREADY_TOLD_NOTE
        decision = await _flow_or_platform(
            top, ALREADY_TOLD, "The customer says they told it already.", agent, text, routed
        )
        decision.next_state = step.state or None
        decision.keeps_conversation = True
        return decision
    return None


async def _flow_or_platform(
    frame: Frame, pattern: str, reason: str, agent: str, text: str, routed: Routed
) -> RouteDecision:
    """The frame's flow takes the message (its state policy's decision), marked as the repair it is; a frame with no
    state policy, the specialist that asked."""
    decision = await routed(text, frame.name) if frame.kind == STATE else None
    if decision is None or decision.method != "state":
        return _platform_decision(frame.agent or agent, pattern, reason, next_state=None)
    decision.method = "repair"
    return decision


def _told_again(step: StackStep, profile: ProfileSpec, active_intent: str) -> RouteDecision | None:
    """ "I already told you": the step that asked runs again, its specialist told to use what the customer said
    earlier — the step that opened the state's flow or the delegation on top (which still waits: the conversation
    stays as it is), else the conversation's last step. ``None`` when the top frame is a question's (a permission,
    a clarification) or there is no such step."""
    top = step.top
    if top is not None and top.kind not in (STATE, DELEGATION):
        return None
    intent = (top.intent if top is not None else "") or active_intent
    return _asked_again(step, profile, intent, ALREADY_TOLD_NOTE, "the customer gave it already")


def _asked_again(step: StackStep, profile: ProfileSpec, intent: str, note: str, why: str) -> RouteDecision | None:
    """``intent``'s step runs again with ``note``; a frame on top stays open (the conversation stays as it is)."""
    redone = _redo(profile, intent, why)
    if redone is None:
        return None
    step.note = note
    if step.top is not None:
        redone.next_state, redone.keeps_conversation = step.state or None, True
    return redone


def _redo(profile: ProfileSpec, active_intent: str, why: str) -> RouteDecision | None:
    """The previous step (the conversation's active intent) again, ``why`` it runs again; ``None`` without one."""
    intent = profile.router.intents_by_name.get(active_intent)
    if intent is None:
        return None
    return RouteDecision(
        route=intent.agent,
        agent=intent.agent,
        intent=intent.name,
        confidence=1.0,
        reason=f"The previous step ({intent.name}) runs again, {why}.",
        method="repair",
        next_state=intent.next_state or None,
        domain=intent.domain or None,
        mcp_tools=list(intent.mcp_tools),
        metadata={"redo": intent.name},
    )


def _platform_decision(agent: str, pattern: str, reason: str, *, next_state: str | None) -> RouteDecision:
    return RouteDecision(
        route=agent,
        agent=agent,
        intent=REPAIR_INTENT.format(pattern=pattern),
        confidence=1.0,
        reason=reason,
        method="repair",
        next_state=next_state or None,
    )


async def _in_flow(top: Frame, step: StackStep, profile: ProfileSpec, text: str, routed: Routed) -> RouteDecision:
    """A message while a state's flow waits: its reply, a side question, small talk or something out of scope."""
    returned, mark = return_cut(text)
    if not mark and (opener := _OPENER.match(text)) is not None:
        after, after_mark = return_cut(text[opener.end() :])  # "great thanks. back to the bill, paid just now"
        if after_mark:
            returned, mark = after, after_mark
    if mark or profile.reply_words.read_past_fillers(text):
        decision = await routed(returned, top.name)
        if decision.method == "state":
            if mark:
                decision.metadata["returned"] = mark
            step.event("bound", top, "reply")
            return decision
    free = await routed(text, None)
    if free.method == "small_talk":
        return free
    side = free.method in _ROUTED and free.intent != top.intent
    if side and free.agent == top.agent and not marks_digression(text) and not is_question(text):
        side = False  # the flow's own specialist, asked nothing else: the flow's answer
    if side:
        step.event("pushed", top, free.intent)
        if not free.next_state:
            step.resume = top
            step.event("resumed", top, free.intent)
        free.metadata["digression_from"] = top.name
        return free
    if free.method == "fallback":
        asked = is_question(text) or bool(marks_digression(text))
        if asked and not _clearly_none(free):
            # A question the router cannot place, asked inside the flow: its specialist answers it on the side.
            return _aside_of_the_flow(top, step, profile, text, await routed(text, top.name))
        if asked or _reads_as_chat_in_the_flow(profile, top, text, free):
            # Out of scope, or a remark that is none of the flow's replies: answered by the fallback; the flow
            # still waits and is asked again.
            step.resume = top
            free.keeps_conversation = True
            free.metadata["digression_from"] = top.name
            return free
    decision = await routed(text, top.name)
    if decision.method == "state":
        step.event("bound", top, "reply")
    return decision


async def _question_open(top: Frame, step: StackStep, text: str, routed: Routed) -> RouteDecision:
    """A message that is no reply while a permission or clarification question waits: a side question (another
    specialist's, or out of scope, or one marked as a side question — "aproveitando, …" — whoever answers it) keeps it
    waiting and asks it again after its answer; small talk leaves it; a new request to the specialist that asked
    drops it."""
    free = await routed(text, None)
    if free.method == "small_talk":
        return free
    if free.method == "fallback" and (_out_of_scope(free) or is_question(text)):
        step.resume = top  # nothing of the profile's: the question still waits, asked again; no frame moves
        free.keeps_conversation = True
        free.metadata["digression_from"] = top.name
        return free
    if free.method in _ROUTED and (free.agent != top.agent or marks_digression(text)):
        step.event("pushed", top, free.intent)
        step.event("resumed", top, free.intent)
        step.resume = top
        free.metadata["digression_from"] = top.name
        return free
    step.pop("closed", "new request")
    return free


def _aside_of_the_flow(
    top: Frame, step: StackStep, profile: ProfileSpec, text: str, flow: RouteDecision
) -> RouteDecision:
    """The flow's specialist answers a side question with the intent of its own the question reads most like; the
    flow's frame stays, resumed after the answer."""
    intent = _closest_intent_of(profile, top, text) if flow.agent == top.agent else None
    if intent is not None:
        flow.intent, flow.mcp_tools = intent.name, sorted({*flow.mcp_tools, *intent.mcp_tools})
    flow.next_state = top.name
    flow.metadata["digression_from"] = top.name
    flow.metadata.pop("reply", None)
    step.event("pushed", top, flow.intent)
    step.event("resumed", top, flow.intent)
    step.resume = top
    return flow


def _reads_as_chat_in_the_flow(profile: ProfileSpec, top: Frame, text: str, free: RouteDecision) -> bool:
    """Whether a remark inside a flow is chat or out of scope rather than the flow's reply: against the examples of
    the flow's replies (``CompiledRouter.flow_examples``), "none of these" of a chat, off-topic or out-of-scope kind
    scores at least :data:`CHAT_SCORE` and beats the replies by :data:`CHAT_MARGIN` — "que calor hoje" inside a
    payment flow, not "pronto, transferi". Without examples of the flow's replies, the examples tier's reading of
    the message as chat decides."""
    index = profile.router.flow_examples
    policy = profile.router.state_policies.get(top.name)
    replies = policy.intent if policy is not None else ""
    if index is None or replies not in index.classes or index.vectoriser.remote:
        return _none_kind(free) in CHAT_KINDS
    match = index.match_text(text)
    kind = match.none_of_these[0].removeprefix(BACKGROUND_PREFIX)
    none_score, flow_score = match.none_of_these[1], dict(match.ranking).get(replies, 0.0)
    chat = kind in (*CHAT_KINDS, OUT_OF_SCOPE_KIND, "off_topic")
    return chat and none_score >= CHAT_SCORE and none_score - flow_score >= CHAT_MARGIN


def _closest_intent_of(profile: ProfileSpec, top: Frame, text: str) -> IntentSpec | None:
    """The intent of the flow's specialist, other than the flow's own, that ``text`` reads most like: its keywords,
    else the examples tier's ranking among its intents, else its first by priority."""
    router = profile.router
    for hit in router.match(text):
        if hit.intent.agent == top.agent and hit.intent.name != top.intent:
            return hit.intent
    match = router.examples_match(text)
    for name, _ in match.ranking if match is not None else ():
        intent = router.intents_by_name.get(name)
        if intent is not None and intent.agent == top.agent and name != top.intent:
            return intent
    return router.intent_of(top.agent, text)


def _none_kind(decision: RouteDecision) -> str:
    """The kind of "none of these" the fallback's decision read the message as (the examples tier's background: small
    talk, chitchat, off-topic, the profile's out-of-scope examples), ``""`` when it read as an intent or not at all."""
    examples = decision.metadata.get("examples")
    if not isinstance(examples, dict) or not isinstance(examples.get("none_of_these"), dict):
        return ""
    none_score = float(examples["none_of_these"].get("score") or 0)
    if none_score > 0 and none_score >= float(examples.get("score") or 0):
        return str(examples["none_of_these"].get("kind") or OUT_OF_SCOPE_KIND).removeprefix(BACKGROUND_PREFIX)
    return ""


def _clearly_none(decision: RouteDecision) -> bool:
    """The fallback's decision reads the message as "none of these" with at least :data:`CHAT_SCORE`."""
    examples = decision.metadata.get("examples")
    if not _none_kind(decision) or not isinstance(examples, dict):
        return False
    return float(examples["none_of_these"].get("score") or 0) >= CHAT_SCORE


def _out_of_scope(decision: RouteDecision) -> bool:
    return bool(_none_kind(decision))


async def _topic_offered(top: Frame, step: StackStep, profile: ProfileSpec, text: str, routed: Routed) -> RouteDecision:
    """A queued request was offered: a yes takes it up (its own words are routed), a no drops it; anything else is
    routed as usual and the topic waits."""
    reading = profile.reply_words.read_past_fillers(text).reads_as
    if reading in (YES, NO):
        step.pop("resumed" if reading == YES else "cancelled", "reply")
        if reading == YES:
            decision = await routed(top.text, None)
            decision.metadata["topic"] = top.text
            return decision
        step.fixed = CANCEL
        step.cancelled = top
        return _platform_decision(
            top.agent, CANCEL, "The customer did not want the queued request.", next_state=step.state
        )
    return await routed(text, None)


def _may_split(decision: RouteDecision, profile: ProfileSpec, single_agent: bool, delegated_to: str) -> bool:
    """Whether the message is read for several requests: in every mode but goal (a coordinator's profile with no
    delegation open; a supervisor's when its keyword plan found one specialist), a decision made by the message's own
    words or the fallback."""
    return (
        profile.multi_topic != "off"
        and not single_agent
        and not delegated_to
        and profile.effective_mode in ("router", "hybrid", "supervisor")
        and decision.method in (*_ROUTED, "fallback", "followup", "coordinator")
        and not decision.is_plan
        and decision.agent not in profile.backends  # a remote backend gets the whole message (its own plans it)
    )


def clauses(text: str) -> list[str]:
    """The message's requests, as its sentences and the clauses its joining words separate."""
    return [part for part, _ in clauses_announced(text)]


def clauses_announced(text: str) -> list[tuple[str, bool]]:
    """:func:`clauses`, each with whether it is announced as one more request: a joining word that adds one ("and
    also", "além disso", "y además") before it or leading it, or a question that follows a question."""
    cuts = list(_CLAUSES.finditer(text))
    joints = ["", *(cut.group(0) for cut in cuts)]  # what comes before each piece
    ends = [*(cut.start() for cut in cuts), len(text)]
    starts = [0, *(cut.end() for cut in cuts)]
    found: list[tuple[str, bool]] = []
    for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
        part = text[start:end].strip(" ,")
        if len(part.split()) < MIN_CLAUSE_WORDS:
            continue
        if not found:  # nothing comes before the first request: it is read for no announcement (most messages hold one)
            found.append((part, False))
            continue
        before, after = joints[index], joints[index + 1] if index + 1 < len(joints) else ""
        announced = bool(_ANNOUNCES.match(before.strip(" ,.;!?\n")) or _ANNOUNCES.match(part))
        found.append((part, announced or ("?" in before and (is_question(part) or "?" in after))))
    return found


def _requested(part: str) -> str:
    """``part`` less what only names the thing a request is about: a stretch between commas that ends with an
    identifier, has at most :data:`REFERENCE_WORDS` words before it and asks nothing ("pedido P200", "é o pedido
    P200", "order #P300", "es el pedido P100"). Such a reference is no request of its own: "quero trocar, pedido P200"
    asks for an exchange."""
    kept = []
    for piece in _COMMA.split(part):
        words = piece.split()
        found = identifiers(piece)
        if found and words and found[-1] in words[-1] and len(words) - 1 <= REFERENCE_WORDS and not is_question(piece):
            continue
        kept.append(piece)
    return ", ".join(kept)


def _examples_first(profile: ProfileSpec, part: str) -> str:
    """The intent the examples tier ranks first for ``part``, decided or not; ``""`` where the tier cannot say here
    (off, or embedding over HTTP)."""
    examples = profile.router.examples
    if examples is None or examples.vectoriser.remote:
        return ""
    match = profile.router.examples_match(part)
    return match.ranking[0][0] if match is not None and match.ranking else ""


def _clause_intents(profile: ProfileSpec, part: str) -> list[RouteDecision]:
    """What one clause asks for: the intents its keywords hit, best first, then the examples tier's."""
    router = profile.router
    hits = router.checked_match(part)
    found = [decision for hit in hits if (decision := router.by_keywords(part, [hit])) is not None]
    by_examples = router.examples_decide_here(part)
    if by_examples is not None:
        found.append(by_examples)
    intents = router.intents_by_name
    return [
        decision
        for decision in found
        if decision.intent != FALLBACK_INTENT and not (decision.intent in intents and intents[decision.intent].remote)
    ]


def _topics(decision: RouteDecision, step: StackStep, profile: ProfileSpec, text: str) -> RouteDecision:
    """Two or more requests in one message: answered together, or the first now and the rest queued. A clause takes
    the first intent it asks for that no earlier clause took; two requests for one specialist are one answer of
    that specialist with both intents' tools."""
    parts = clauses_announced(text)
    if len(parts) < 2:
        return decision
    found: list[tuple[str, RouteDecision]] = []
    weight: dict[str, float] | None = None  # the whole message's examples ranking, read when first needed
    for part, announced in parts:
        taken = {routed.intent for _, routed in found}
        asked = _requested(part)
        for option in _clause_intents(profile, asked) if asked else ():
            # A clause placed by the examples alone is a request of its own only where it is announced as one ("…?
            # also, …") or the whole message also reads partly as it: "a internet tá lenta e cai toda hora" is one
            # request, told in two clauses.
            alone = False
            if option.method == "examples" and found and option.intent not in taken and not announced:
                if weight is None:
                    whole = profile.router.examples_match(text)
                    weight = dict(whole.ranking) if whole is not None else {}
                alone = weight.get(option.intent, 0.0) < TOPIC_MIN_WEIGHT
            if option.intent not in taken and not alone:
                found.append((part, option))
                break
    if len(found) >= 2:
        found = _one_complaint(profile, found, parts)
        if len(found) == 1:
            return _one_specialist(found, decision.method)
    if len(found) < 2:
        return decision
    coordinated = delegation_active(profile)  # a coordinator delegates what one specialist answers
    by_agent: dict[str, list[tuple[str, RouteDecision]]] = {}
    for part, routed in found:
        by_agent.setdefault(routed.agent, []).append((part, routed))
    if coordinated and (len(by_agent) == 1 or profile.multi_topic != "together"):
        return decision
    if len(by_agent) == 1 or profile.multi_topic == "together":
        step.topics = [
            {"intent": routed.intent, "agent": routed.agent, "text": part, "status": "answered"}
            for part, routed in found
        ]
        if len(by_agent) == 1:
            return _one_specialist(found, decision.method)
        steps = [
            PlanStep(
                agent=agent,
                intent=parts_of[0][1].intent,
                mcp_tools=tuple(sorted({tool for _, routed in parts_of for tool in routed.mcp_tools})),
                keywords=tuple(k for _, routed in parts_of for k in routed.metadata.get("matched_keywords", ())),
                next_state=next((routed.next_state for _, routed in parts_of if routed.next_state), "") or "",
            )
            for agent, parts_of in by_agent.items()
        ]
        return plan_decision(
            steps,
            domains={routed.domain for _, routed in found if routed.domain},
            reason=f"The message holds {len(found)} requests ("
            + ", ".join(f"{routed.intent} → {routed.agent}" for _, routed in found)
            + "): each specialist answers its own.",
            method=decision.method if decision.method in _ROUTED else "keyword",
            metadata={"topics": [part for part, _ in found]},
        )
    first_agent = found[0][1].agent
    answered = by_agent[first_agent]
    step.topics = [
        {"intent": routed.intent, "agent": routed.agent, "text": part, "status": "answered"}
        for part, routed in answered
    ]
    for agent, parts_of in by_agent.items():
        if agent == first_agent:
            continue
        part, routed = parts_of[0]
        frame = Frame(
            kind=TOPIC,
            name=routed.intent,
            agent=routed.agent,
            intent=routed.intent,
            opened_turn=step.turn,
            opened_at=step.now.isoformat(),
            text=" ".join(text for text, _ in parts_of),
        )
        step.open(frame, "multi_topic", depth=profile.stack_depth)
        step.queued.append(frame)
        step.topics += [
            {"intent": other.intent, "agent": other.agent, "text": text, "status": "queued"} for text, other in parts_of
        ]
    return _one_specialist(answered, decision.method)


def _one_complaint(
    profile: ProfileSpec, found: list[tuple[str, RouteDecision]], parts: list[tuple[str, bool]]
) -> list[tuple[str, RouteDecision]]:
    """``found`` less the clauses that tell more of another clause's request: a clause, not announced as one more
    request, that the examples tier reads first as the intent another clause was placed on (decided or not), whatever
    a keyword of it hit. "my home internet is very slow" (the keyword "internet": product information) and "keeps
    cutting out every hour" (technical support) are one complaint: the examples read both as technical support."""
    announced = dict(parts)
    intents = {routed.intent for _, routed in found}
    kept = []
    for part, routed in found:
        first = _examples_first(profile, _requested(part))
        if not announced.get(part) and first != routed.intent and first in intents:
            continue
        kept.append((part, routed))
    return kept or found[:1]


def _one_specialist(found: list[tuple[str, RouteDecision]], method: str) -> RouteDecision:
    """Requests for one specialist: its first intent's decision, with every request's tools and the state one sets."""
    first = found[0][1]
    first.mcp_tools = sorted({tool for _, routed in found for tool in routed.mcp_tools})
    first.next_state = next((routed.next_state for _, routed in found if routed.next_state), None)
    first.metadata["topics"] = [part for part, _ in found]
    if len(found) > 1:
        first.reason = f"{first.agent} answers {len(found)} requests (" + ", ".join(r.intent for _, r in found) + ")."
    return first
