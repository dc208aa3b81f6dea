"""Messages of one conversation are answered one at a time, in arrival order, with nothing lost or doubled."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from agents.llm import OfflineChatModel
from conversations import ordering
from conversations.graph import run_turn
from conversations.history import history_read, history_rows
from conversations.models import Conversation, Message
from conversations.turn import TurnInput
from routing import snapshot

CONCURRENT = 20
SAID = re.compile(r'Você disse: "(m\d+) ')


def history_of(conversation: Conversation) -> list[tuple[str, str]]:
    return list(conversation.messages.order_by("created_at", "id").values_list("role", "content"))


def assert_consistent(conversation: Conversation, texts: list[str]) -> list[str]:
    """Every message once, each followed by its own answer; returns the users' texts in stored order."""
    history = history_of(conversation)
    assert len(history) == 2 * len(texts)
    users = []
    for (role, content), (answer_role, answer) in zip(history[::2], history[1::2], strict=True):
        assert (role, answer_role) == ("user", "assistant")
        said = SAID.search(answer)
        assert said and content.startswith(said.group(1) + " "), (content, answer)
        users.append(content)
    assert sorted(users) == sorted(texts)
    # Answered in arrival order: the order in which the messages took their place in the conversation.
    turns = [
        metadata["turn"]
        for metadata in conversation.messages.filter(role="assistant")
        .order_by("created_at", "id")
        .values_list("metadata", flat=True)
    ]
    assert turns == list(range(1, len(texts) + 1))
    conversation.refresh_from_db()
    assert conversation.message_count == 2 * len(texts)
    assert conversation.turn_tickets_issued == conversation.turn_tickets_done == len(texts)
    return users


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_messages_over_http_leave_one_consistent_history_in_arrival_order(
    live_server, tenant_key, telecom, settings
):
    # Each answer takes 100 ms and the 20 messages are sent within half a second, so they all overlap.
    settings.OFFLINE_LLM_LATENCY_MS = 100
    texts = [f"m{i:02d} tenho uma dúvida geral" for i in range(CONCURRENT)]
    statuses: dict[str, int] = {}
    start = threading.Barrier(CONCURRENT)

    def send(index: int, text: str) -> None:
        start.wait()
        time.sleep(index * 0.025)
        response = httpx.post(
            f"{live_server.url}/api/gateway/message",
            json={"channel": "api", "agent_id": "telecom_contas", "payload": {"text": text, "session_id": "busy"}},
            headers={"Authorization": f"Bearer {tenant_key.raw}"},
            timeout=60,
        )
        statuses[text] = response.status_code

    threads = [threading.Thread(target=send, args=(i, text)) for i, text in enumerate(texts)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started

    assert set(statuses.values()) == {200}
    conversation = Conversation.objects.get(session_id="busy")
    assert_consistent(conversation, texts)
    assert elapsed >= CONCURRENT * 0.1  # the turns really ran one after the other
    waited = [
        node
        for metadata in Message.objects.filter(conversation=conversation, role="assistant").values_list(
            "metadata", flat=True
        )
        for node in metadata["trace"]
        if node["node"] == "wait_for_previous_message"
    ]
    assert waited  # later messages did wait for earlier ones


@pytest.mark.django_db(transaction=True)
def test_concurrent_turns_in_one_event_loop_are_serialised_too(tenant, telecom, monkeypatch):
    # Later messages answer faster (m19: 5 ms, m00: 100 ms): unordered, they would overtake earlier ones.
    original = OfflineChatModel._agenerate

    async def slower_for_earlier_messages(self, messages, *args, **kwargs):
        index = int(re.search(r"m(\d+)", messages[-1].content).group(1))
        await asyncio.sleep((CONCURRENT - index) * 0.005)
        return await original(self, messages, *args, **kwargs)

    monkeypatch.setattr(OfflineChatModel, "_agenerate", slower_for_earlier_messages)
    profile = snapshot.current().profiles["telecom_contas"]
    texts = [f"m{i:02d} outra dúvida geral" for i in range(CONCURRENT)]

    async def main():
        return await asyncio.gather(
            *(
                run_turn(
                    TurnInput(
                        tenant_pk=tenant.pk, tenant_slug=tenant.slug, profile=profile, text=text, session_id="loop"
                    )
                )
                for text in texts
            )
        )

    results = asyncio.run(main())

    assert len(results) == CONCURRENT
    assert_consistent(Conversation.objects.get(session_id="loop"), texts)


@pytest.mark.django_db
def test_a_conversations_first_message_creates_it_and_takes_its_ticket_in_two_statements(
    tenant, telecom, django_assert_num_queries
):
    key = f"{tenant.slug}:telecom_contas:first"
    defaults = {"tenant_id": tenant.pk, "profile_id": telecom.pk, "session_id": "first", "channel": "api"}

    with django_assert_num_queries(2):  # the take that finds no row, the insert that takes the first ticket
        pk, ticket, state = ordering.ticket_take(conversation_key=key, defaults=defaults)
    with django_assert_num_queries(1):
        again, second, _ = ordering.ticket_take(conversation_key=key, defaults=defaults)

    assert (ticket, second, again) == (0, 1, pk)
    assert state is not None and state["state"] == ""
    created = Conversation.objects.get(pk=pk)
    assert (created.tenant_id, created.session_id, created.channel) == (tenant.pk, "first", "api")
    assert (created.turn_tickets_issued, created.turn_tickets_done) == (2, 0)
    assert created.turn_started_at is not None


@pytest.mark.django_db
def test_a_new_sessions_first_message_creates_its_conversation_with_its_ticket_in_one_statement(
    tenant, telecom, django_assert_num_queries
):
    key = f"{tenant.slug}:telecom_contas:made"
    defaults = {"tenant_id": tenant.pk, "profile_id": telecom.pk, "session_id": "made", "channel": "api"}

    with django_assert_num_queries(1):
        pk, ticket, state = ordering.ticket_take(conversation_key=key, defaults=defaults, new=True)
    with django_assert_num_queries(2):  # a client that reuses the session id it was given: found after the insert
        again, second, _ = ordering.ticket_take(conversation_key=key, defaults=defaults, new=True)

    assert (ticket, second, again) == (0, 1, pk) and state is not None
    assert Conversation.objects.get(pk=pk).turn_tickets_issued == 2


@pytest.mark.django_db
def test_a_conversation_created_by_another_message_meanwhile_is_taken_not_written_again(tenant, telecom, monkeypatch):
    key = f"{tenant.slug}:telecom_contas:raced"
    defaults = {"tenant_id": tenant.pk, "profile_id": telecom.pk, "session_id": "raced", "channel": "api"}
    take = ordering._take
    calls = []

    def take_missing_the_other_message(conversation_key, and_read=None):
        calls.append(conversation_key)
        if len(calls) == 1:  # the other message creates it between this one's take and insert
            Conversation.objects.create(conversation_key=key, tenant=tenant, profile=telecom, session_id="raced")
            return None
        return take(conversation_key, and_read)

    monkeypatch.setattr(ordering, "_take", take_missing_the_other_message)

    pk, ticket, state = ordering.ticket_take(conversation_key=key, defaults=defaults)

    assert len(calls) == 2 and Conversation.objects.filter(conversation_key=key).count() == 1
    assert (pk, ticket) == (Conversation.objects.get(conversation_key=key).pk, 0) and state is not None


@pytest.mark.django_db(transaction=True)
def test_a_turn_whose_process_died_stops_holding_up_the_conversation_after_its_lease(tenant, telecom, settings):
    settings.CONVERSATION_TURN_LEASE_SECONDS = 1
    key = f"{tenant.slug}:telecom_contas:stalled"
    defaults = {"tenant_id": tenant.pk, "profile_id": telecom.pk, "session_id": "stalled"}
    pk, dead_ticket, state = ordering.ticket_take(conversation_key=key, defaults=defaults)
    assert state is not None and dead_ticket == 0  # this holder "dies" without persisting

    _, ticket, state = ordering.ticket_take(conversation_key=key, defaults=defaults)
    assert state is None and not ordering.ticket_ready(conversation_pk=pk, ticket=ticket)

    Conversation.objects.filter(pk=pk).update(turn_started_at=timezone.now() - timedelta(seconds=2))
    assert not ordering.ticket_ready(conversation_pk=pk, ticket=ticket)  # this poll skips the dead ticket
    assert ordering.ticket_ready(conversation_pk=pk, ticket=ticket)

    # The dead turn coming back late moves nothing backwards.
    ordering.ticket_pass(pk, dead_ticket)
    assert Conversation.objects.get(pk=pk).turn_tickets_done == 1


@pytest.mark.django_db(transaction=True)
def test_a_turn_that_fails_unexpectedly_hands_the_conversation_on(tenant, telecom, monkeypatch):
    from conversations import graph

    profile = snapshot.current().profiles["telecom_contas"]
    data = TurnInput(tenant_pk=tenant.pk, tenant_slug=tenant.slug, profile=profile, text="oi", session_id="boom")

    def explode(turn, **_):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(graph, "turn_persist", explode)
    with pytest.raises(RuntimeError):
        asyncio.run(run_turn(data))
    monkeypatch.undo()

    asyncio.run(run_turn(data))  # not stuck behind the failed turn
    conversation = Conversation.objects.get(session_id="boom")
    assert conversation.turn_tickets_issued == conversation.turn_tickets_done == 2


@pytest.mark.django_db
def test_the_tickets_statement_is_made_once_for_what_it_brings_along_and_the_history_read_once_per_table():
    table = ordering.conversation_table()
    history = history_read(conversation=table, limit=10)
    again = history_read(conversation=table, limit=20)
    brought = history[0] if history is not None else ""  # SQLite reads the history on its own

    first = ordering._take_sql("".join(["json_build_array(", brought, ")::text"]))
    second = ordering._take_sql("".join(["json_build_array(", brought, ")::text"]))  # equal, another object

    assert second is first  # the same text object message after message: its hash kept downstream
    assert history_rows(table) is history_rows(table)
    if history is not None and again is not None:
        assert again[0] is history[0] and (history[1], again[1]) == ([10], [20])
