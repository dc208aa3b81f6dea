"""A conversation's messages read one after another as the chat reads them, without answering any: each through
:func:`routing.stack.conversation_decide` with the frames, specialist and intent the messages before it left — for
the route preview, which shows what the last message meets and does.

What is carried from one message to the next is what the conversation keeps (``conversations.stack_turn`` and the
turn's store): the state and queued-request frames, and — unless the message kept the conversation where it was
(small talk, a repeat) — the specialist that answered and its intent. Nothing is answered, so no frame holds the
question an answer would have asked, and no permission question or delegation opens. Pure apart from the routing
(which may ask a classifier): no ORM.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from routing.decide import delegated_of
from routing.router import RouteDecision
from routing.specs import ProfileSpec
from routing.stack import STATE, STORED_KINDS, Frame, StackStep, conversation_decide


@dataclass(frozen=True)
class PlayedMessage:
    """One message read: the frames it met (bottom first), its decision and what it did to them."""

    text: str
    frames_before: list[Frame]
    decision: RouteDecision
    step: StackStep


def flow_of(profile: ProfileSpec, state: str, active_agent: str = "") -> Frame:
    """The frame of a conversation found in ``state``: the flow the intent that sets this state opened (the one a
    conversation would have), else the state policy's specialist, else ``active_agent``."""
    openers = sorted(
        (intent for intent in profile.router.intents_by_name.values() if intent.next_state == state),
        key=lambda intent: (intent.priority, intent.name),
    )
    if openers:
        return Frame(kind=STATE, name=state, agent=openers[0].agent, intent=openers[0].name)
    policy = profile.router.state_policies.get(state)
    agent = policy.agent if policy is not None else active_agent
    return Frame(kind=STATE, name=state, agent=agent, intent=policy.intent if policy is not None else "")


async def conversation_replay(
    *, profile: ProfileSpec, messages: Sequence[str], now: dt.datetime, state: str = "", active_agent: str = ""
) -> list[PlayedMessage]:
    """``messages``, oldest first, read from a conversation in ``state`` (``""``: none) whose active specialist is
    ``active_agent`` (``""``: a new conversation): one :class:`PlayedMessage` each, the last one's decision the one
    the chat would make for it."""
    frames = [flow_of(profile, state, active_agent)] if state else []
    active_intent = frames[0].intent if frames else ""
    played = []
    for turn, text in enumerate(messages, start=1):
        decision, step = await conversation_decide(
            profile=profile,
            text=text,
            frames=frames,
            turn=turn,
            now=now,
            active_agent=active_agent,
            active_intent=active_intent,
            delegated_to=delegated_of(profile, active_agent),
        )
        played.append(PlayedMessage(text=text, frames_before=list(frames), decision=decision, step=step))
        frames = [frame for frame in step.frames if frame.kind in STORED_KINDS]
        if not decision.keeps_conversation:  # a plan's first step holds the conversation, as the chat stores it
            first = decision.plan[0] if decision.plan else decision
            active_agent, active_intent = first.agent, first.intent
    return played
