"""A stored message as the draft of a saved test: the "Add as routing test case" and "Add as conversation test"
links of the conversation's pages, and the saved tests made from selected decisions (``releases``). A draft holds
what happened — the message, what was decided, the state and specialist it arrived in, the customer's earlier
messages — for an editor to correct into what should have happened."""

from __future__ import annotations

from typing import Any

from conversations.models import Message, MessageRole, RouteDecisionRecord
from routing.public import (
    CONVERSATION_TEST_MAX_TURNS,
    ROUTING_TEST_MAX_TURNS,
    ConversationTestDraft,
    RoutingTestDraft,
    conversation_test_expect,
    test_case_expect,
)


def _arrived_in(message: Message) -> tuple[str, str]:
    """The state and active specialist the conversation had when ``message`` arrived, as far as the store knows:
    what the previous turn's decision left (its next state; the specialist that answered it)."""
    earlier = RouteDecisionRecord.objects.filter(conversation_id=message.conversation_id, message__lt=message.pk)
    previous = earlier.order_by("-created_at", "-id").values_list("next_state", flat=True).first()
    answered = (
        Message.objects.filter(conversation_id=message.conversation_id, role="assistant", pk__lt=message.pk)
        .order_by("-created_at", "-id")
        .values_list("agent", flat=True)
        .first()
    )
    return previous or "", answered or ""


def _earlier_turns(message: Message) -> tuple[tuple[dict[str, Any], ...], Message]:
    """The customer's messages before ``message`` in its conversation, oldest first — at most the
    :data:`~routing.models.ROUTING_TEST_MAX_TURNS` a saved test holds — each expecting what was decided for it; and
    the message the test starts from (the first of them, or ``message`` itself)."""
    earlier = list(
        Message.objects.filter(conversation_id=message.conversation_id, role="user", pk__lt=message.pk).order_by(
            "-created_at", "-id"
        )[:ROUTING_TEST_MAX_TURNS]
    )[::-1]
    decided = {
        record.message_id: test_case_expect(intent=record.intent, agent=record.agent)
        for record in RouteDecisionRecord.objects.filter(message__in=earlier)
    }
    turns = tuple(
        {"message": said.content, **({"expect": decided[said.pk]} if decided.get(said.pk) else {})} for said in earlier
    )
    return turns, (earlier[0] if earlier else message)


def decision_draft(record: RouteDecisionRecord) -> RoutingTestDraft | None:
    if record.message is None:
        return None
    turns, start = _earlier_turns(record.message)
    state, specialist = _arrived_in(start)
    return RoutingTestDraft(
        profile_id=record.conversation.profile_id,
        message=record.message.content,
        state=state,
        active_specialist=str(specialist if turns else record.metadata.get("previous_agent") or specialist),
        expect=test_case_expect(intent=record.intent, agent=record.agent),
        when=record.created_at.date(),
        source_message_id=record.message.pk,
        source_intent=record.intent,
        source_agent=record.agent,
        turns=turns,
    )


def message_draft(message: Message) -> RoutingTestDraft | None:
    if message.role != "user":
        return None
    decision = RouteDecisionRecord.objects.filter(message=message).order_by("id").first()
    if decision is not None:
        return decision_draft(decision)
    turns, start = _earlier_turns(message)
    state, specialist = _arrived_in(start)
    return RoutingTestDraft(
        profile_id=message.conversation.profile_id,
        message=message.content,
        state=state,
        active_specialist=specialist,
        when=message.created_at.date(),
        turns=turns,
    )


def conversation_test_draft(message: Message) -> ConversationTestDraft | None:
    """A conversation test of ``message``'s conversation up to it: an answer (the customer's messages before it) or
    a customer message (those up to it, with the answer it got). Each turn expects what was decided for it and an
    answer in the conversation's language; the last shows the answer given, for the editor to mark what was wrong."""
    conversation = message.conversation
    if conversation.profile_id is None or message.role not in (MessageRole.USER, MessageRole.ASSISTANT):
        return None
    asked = message.role == MessageRole.USER
    before = {"pk__lte" if asked else "pk__lt": message.pk}
    questions = list(
        Message.objects.filter(conversation_id=conversation.pk, role=MessageRole.USER, **before).order_by(
            "-created_at", "-id"
        )[:CONVERSATION_TEST_MAX_TURNS]
    )[::-1]
    if not questions:
        return None
    answer = message if not asked else _answer_to(message)
    decided = {record.message_id: record for record in RouteDecisionRecord.objects.filter(message__in=questions)}
    turns = []
    for question in questions:
        record = decided.get(question.pk)
        expect = conversation_test_expect(
            intent=record.intent if record else "", agent=record.agent if record else "", language=conversation.language
        )
        turns.append({"user": question.content, **({"expect": expect} if expect else {})})
    turns[-1]["answer_given"] = answer.content if answer is not None else ""
    return ConversationTestDraft(
        profile_id=conversation.profile_id,
        turns=tuple(turns),
        language=conversation.language,
        channel=conversation.channel,
        when=message.created_at.date(),
        source_message_id=questions[-1].pk,
    )


def _answer_to(question: Message) -> Message | None:
    return (
        Message.objects.filter(conversation_id=question.conversation_id, role=MessageRole.ASSISTANT, pk__gt=question.pk)
        .order_by("created_at", "id")
        .first()
    )
