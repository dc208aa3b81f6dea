"""Nothing holds a conversation after a fault: a database outage during a turn, a client that goes away.

The database outage is real: the test database stops accepting connections and every backend on it is
terminated (what ``pg_ctl stop -m fast`` does to the platform's connections), then it accepts them again.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError, connection

from common.tests.database_outage import database_outage
from conversations import ordering
from conversations.graph import run_turn
from conversations.models import Conversation, Message
from conversations.turn import TurnInput
from routing import snapshot

# A hang guard far below the lease (300 s): a turn that waited for a stalled ticket's lease fails here, however slow
# the machine, while one that did not has ended long before.
HANG_GUARD_SECONDS = 60


def message(tenant, text: str, session_id: str) -> TurnInput:
    profile = snapshot.current().profiles["telecom_contas"]
    return TurnInput(tenant_pk=tenant.pk, tenant_slug=tenant.slug, profile=profile, text=text, session_id=session_id)


def wait_for(condition, timeout: float = HANG_GUARD_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def database_answers() -> bool:
    """Whether a query of this thread gets through. With ``STOCK_PATHS`` psycopg_pool retries a lost connection 1,
    2, 4 … s apart, so after an outage of some seconds (longer on a busy machine) it may take as long again; the
    platform's own pool retries every second (common/infra/postgresql/base.py)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except OperationalError:
        connection.close()
        return False
    return True


def tickets(session_id: str) -> tuple[int, int]:
    row = Conversation.objects.filter(session_id=session_id).values("turn_tickets_issued", "turn_tickets_done")
    first = row.first()
    return (first["turn_tickets_issued"], first["turn_tickets_done"]) if first else (0, 0)


async def ticket_taken(session_id: str, issued: int = 1) -> None:
    """Until the conversation's ``issued``-th turn holds its ticket, none done yet (a pause instead raced a busy
    machine's turns)."""
    deadline = time.monotonic() + HANG_GUARD_SECONDS
    while await sync_to_async(tickets)(session_id) != (issued, 0):
        assert time.monotonic() < deadline, f"turn {issued} did not take its ticket"
        await asyncio.sleep(0.02)


def promptly(turn):
    """``turn`` run behind the hang guard."""
    return asyncio.wait_for(turn, HANG_GUARD_SECONDS)


@pytest.mark.django_db(transaction=True)
def test_a_turn_that_failed_with_the_database_hands_its_ticket_on_when_the_database_returns(
    tenant, telecom, settings, caplog
):
    settings.OFFLINE_LLM_LATENCY_MS = 1500
    settings.CONVERSATION_TURN_LEASE_SECONDS = 300
    failed: list[BaseException] = []

    def first_turn() -> None:
        try:
            asyncio.run(run_turn(message(tenant, "m1 minha fatura", "outage")))
        except BaseException as exc:  # noqa: BLE001 — the turn is expected to fail with the database
            failed.append(exc)

    with database_outage() as (down, up):
        thread = threading.Thread(target=first_turn)
        thread.start()
        wait_for(lambda: tickets("outage") == (1, 0))  # the turn holds its ticket and is in its model call
        connection.close()
        down()
        thread.join(timeout=60)
        assert failed, "the turn should have failed without its database"
        # Its release could not be written either: the hand-on thread holds it until the database answers.
        assert ordering.hand_on.pending() == 1
        assert "retrying in the background" in caplog.text
        time.sleep(1)
        up()

    wait_for(database_answers, timeout=120)  # the test is of the ticket's hand-on, not of the pool's reconnection
    asyncio.run(promptly(run_turn(message(tenant, "m2 minha fatura de novo", "outage"))))  # not after the lease

    conversation = Conversation.objects.get(session_id="outage")
    assert (conversation.turn_tickets_issued, conversation.turn_tickets_done) == (2, 2)
    # The failed turn stored nothing; the next one stored its message and its answer once.
    assert list(Message.objects.filter(conversation=conversation).values_list("role", flat=True)) == [
        "user",
        "assistant",
    ]
    assert Message.objects.get(conversation=conversation, role="user").content.startswith("m2")
    assert ordering.hand_on.pending() == 0


@pytest.mark.django_db(transaction=True)
def test_a_request_cancelled_while_waiting_does_not_delay_the_next_message(tenant, telecom, settings):
    settings.OFFLINE_LLM_LATENCY_MS = 1000
    settings.CONVERSATION_TURN_LEASE_SECONDS = 300

    m1, m2, m3 = (message(tenant, text, "gone") for text in ("m1 primeira", "m2 segunda", "m3 terceira"))

    async def main() -> None:
        first = asyncio.create_task(run_turn(m1))
        await ticket_taken("gone")
        waiting = asyncio.create_task(run_turn(m2))
        await ticket_taken("gone", 2)
        assert not waiting.done()
        waiting.cancel()  # what Django's ASGI handler does when the client disconnects
        with pytest.raises(asyncio.CancelledError):
            await waiting
        third = await promptly(run_turn(m3))  # not after the cancelled ticket's lease
        await first
        assert "m3" in third.answer

    asyncio.run(main())

    wait_for(lambda: ordering.hand_on.pending() == 0)
    conversation = Conversation.objects.get(session_id="gone")
    assert (conversation.turn_tickets_issued, conversation.turn_tickets_done) == (3, 3)
    users = list(
        Message.objects.filter(conversation=conversation, role="user")
        .order_by("created_at", "id")
        .values_list("content", flat=True)
    )
    assert [text[:2] for text in users] == ["m1", "m3"]  # in order; the abandoned message stored nothing
    assert Message.objects.filter(conversation=conversation).count() == 4


@pytest.mark.django_db(transaction=True)
def test_a_turn_cancelled_while_it_runs_hands_the_conversation_on_at_once(tenant, telecom, settings):
    settings.OFFLINE_LLM_LATENCY_MS = 1000
    settings.CONVERSATION_TURN_LEASE_SECONDS = 300

    m1, m2 = message(tenant, "m1 primeira", "cut"), message(tenant, "m2 segunda", "cut")

    async def main() -> None:
        running = asyncio.create_task(run_turn(m1))
        await ticket_taken("cut")
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        await promptly(run_turn(m2))  # not after the cancelled turn's lease

    asyncio.run(main())

    wait_for(lambda: ordering.hand_on.pending() == 0)
    conversation = Conversation.objects.get(session_id="cut")
    assert (conversation.turn_tickets_issued, conversation.turn_tickets_done) == (2, 2)
    assert [
        text[:2]
        for text in Message.objects.filter(conversation=conversation, role="user").values_list("content", flat=True)
    ] == ["m2"]


@pytest.mark.django_db(transaction=True)
def test_a_ticket_abandoned_behind_a_running_turn_waits_for_its_turn_before_moving_the_conversation(tenant, telecom):
    key = f"{tenant.slug}:telecom_contas:queue"
    defaults = {"tenant_id": tenant.pk, "profile_id": telecom.pk, "session_id": "queue"}
    pk, running, _ = ordering.ticket_take(conversation_key=key, defaults=defaults)
    _, abandoned, _ = ordering.ticket_take(conversation_key=key, defaults=defaults)
    _, last, state = ordering.ticket_take(conversation_key=key, defaults=defaults)
    assert state is None

    ordering.ticket_abandon(conversation_pk=pk, ticket=abandoned)
    time.sleep(0.5)
    assert tickets("queue") == (3, 0)  # the running turn still holds the conversation: nothing moved past it

    ordering.ticket_release(conversation_pk=pk, ticket=running)
    wait_for(lambda: ordering.ticket_ready(conversation_pk=pk, ticket=last))
    assert tickets("queue") == (3, 2)


@pytest.mark.django_db(transaction=True)
def test_a_turn_that_took_its_ticket_but_could_not_read_its_conversation_hands_the_ticket_on(
    tenant, telecom, settings, monkeypatch
):
    """The ticket is taken, then reading what it brought of the conversation fails: the next message must not wait
    for the failed one's lease."""
    from django.db import OperationalError

    from conversations import turn_store

    settings.CONVERSATION_TURN_LEASE_SECONDS = 300
    parse = turn_store.history_parse

    def failing_once(*args, **kwargs):
        monkeypatch.setattr(turn_store, "history_parse", parse)
        raise OperationalError("the history could not be read")

    asyncio.run(run_turn(message(tenant, "m1 minha fatura", "unread")))
    monkeypatch.setattr(turn_store, "history_parse", failing_once)

    with pytest.raises(OperationalError):
        asyncio.run(run_turn(message(tenant, "m2 minha fatura de novo", "unread")))

    wait_for(lambda: tickets("unread") == (2, 2))
    asyncio.run(promptly(run_turn(message(tenant, "m3 e agora", "unread"))))  # not after the failed turn's lease
    assert tickets("unread") == (3, 3)


@pytest.mark.django_db(transaction=True)
def test_a_waiting_ticket_released_while_an_earlier_one_is_held_is_handed_on_when_its_turn_comes(
    tenant, telecom, settings
):
    """A turn that failed while it waited (its poll met the outage) releases a ticket whose turn has not come: the
    release must hold until it has, not find the conversation elsewhere and forget it."""
    settings.CONVERSATION_TURN_LEASE_SECONDS = 300
    key = f"{tenant.slug}:telecom_contas:held"
    defaults = {"tenant_id": tenant.pk, "profile_id": telecom.pk, "session_id": "held"}
    pk, running, _ = ordering.ticket_take(conversation_key=key, defaults=defaults)
    _, failed, _ = ordering.ticket_take(conversation_key=key, defaults=defaults)
    _, last, _ = ordering.ticket_take(conversation_key=key, defaults=defaults)

    ordering.ticket_release(conversation_pk=pk, ticket=failed)
    time.sleep(0.3)
    assert tickets("held") == (3, 0)  # nothing moved past the running turn

    ordering.ticket_release(conversation_pk=pk, ticket=running)
    wait_for(lambda: ordering.ticket_ready(conversation_pk=pk, ticket=last))  # not the 300 s lease
    assert tickets("held") == (3, 2)
    wait_for(lambda: ordering.hand_on.pending() == 0)


@pytest.mark.django_db(transaction=True)
def test_a_turn_whose_wait_for_its_ticket_fails_hands_the_ticket_on_after_the_turn_before_it(
    tenant, telecom, settings, monkeypatch
):
    """The probe's outage: the earlier turn is still in its model call when the waiting one's poll fails and its
    release finds the database again. The next message must not wait for the failed turn's lease."""
    from django.db import OperationalError

    settings.OFFLINE_LLM_LATENCY_MS = 500
    settings.CONVERSATION_TURN_LEASE_SECONDS = 300
    ready = ordering.ticket_ready

    def failing_for_the_second_ticket(*, conversation_pk: int, ticket: int) -> bool:
        if ticket == 1:
            raise OperationalError("the poll met the outage")
        return ready(conversation_pk=conversation_pk, ticket=ticket)

    monkeypatch.setattr(ordering, "ticket_ready", failing_for_the_second_ticket)
    m1, m2 = message(tenant, "m1 minha fatura", "polled"), message(tenant, "m2 minha fatura de novo", "polled")

    async def first_two() -> list[object]:
        first = asyncio.create_task(run_turn(m1))
        await ticket_taken("polled")  # the first turn holds the conversation, in its model call
        return await asyncio.gather(first, run_turn(m2), return_exceptions=True)

    first, second = asyncio.run(first_two())
    assert not isinstance(first, BaseException) and isinstance(second, OperationalError)
    monkeypatch.setattr(ordering, "ticket_ready", ready)

    third = asyncio.run(promptly(run_turn(message(tenant, "m3 e agora", "polled"))))  # not after the lease
    assert "m3" in third.answer
    wait_for(lambda: tickets("polled") == (3, 3))
