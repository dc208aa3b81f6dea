"""The desk socket, ``/ws/desk/``, through the whole ASGI application with the Redis channel layer: who may open it,
its snapshot and live events, the actions and their answers, the errors that name the frame's field, what a person
of another tenant never hears nor touches, and a layer that fails."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connections

from chat.consumers import CLOSE_FORBIDDEN, CLOSE_UNAUTHORIZED
from chat.desk.access import ERROR_DESK_FORBIDDEN, desk_tenants
from chat.desk.socket import ERROR_ESCALATION_REQUIRED, ERROR_PRIORITY, Desk
from chat.pushes import group_listen
from chat.tests.test_websocket import session_cookie
from conversations.desk.escalations import ERROR_ESCALATION_NOT_FOUND, ERROR_TEXT_EMPTY, person_of_user
from conversations.models import Conversation, Escalation, EscalationStatus, Message, MessageRole
from handoffs.models import PERSON, Handoff, HandoffKind
from platform.asgi import application
from tenants.models import TenantGrant
from tests.desk_fixtures import waiting_conversation
from tests.streaming import run

pytestmark = pytest.mark.django_db(transaction=True)

DESK = "/ws/desk/"
DEAD_REDIS = "redis://127.0.0.1:9/0"  # the discard port: nothing answers there


async def desk_for(user) -> WebsocketCommunicator:
    """The user's desk socket, open, its snapshot read (``socket.snapshot``); the events an answer was awaited past
    wait in ``socket.events`` for :func:`next_of`."""
    socket = WebsocketCommunicator(application, DESK, headers=await sync_to_async(session_cookie)(user))
    connected, _ = await socket.connect(timeout=5)
    assert connected
    socket.snapshot = await socket.receive_json_from(timeout=5)  # type: ignore[attr-defined]
    assert socket.snapshot["type"] == "snapshot"  # type: ignore[attr-defined]
    socket.events = []  # type: ignore[attr-defined]
    return socket


async def ask(socket: WebsocketCommunicator, frame_id: str | int, action: str, **fields) -> dict:
    """Send an action frame and read until its answer; the events on the way are kept for :func:`next_of` (an action's
    own event may come before its answer)."""
    await socket.send_json_to({"id": frame_id, "action": action, **fields})
    while (answer := await socket.receive_json_from(timeout=5)).get("id") != frame_id:
        socket.events.append(answer)  # type: ignore[attr-defined]
    return answer


async def next_of(socket: WebsocketCommunicator, kind: str) -> dict:
    """The next event of ``kind``, from those kept first."""
    kept = socket.events  # type: ignore[attr-defined]
    for index, event in enumerate(kept):
        if event["type"] == kind:
            del kept[: index + 1]
            return event
    kept.clear()
    while (event := await socket.receive_json_from(timeout=5))["type"] != kind:
        pass
    return event


async def waiting(**kwargs) -> Escalation:
    return await sync_to_async(waiting_conversation)(**kwargs)


async def refused(socket: WebsocketCommunicator) -> tuple[dict, int]:
    connected, _ = await socket.connect(timeout=5)
    assert connected  # accepted, then told why and closed
    error = await socket.receive_json_from(timeout=5)
    closing = await socket.receive_output(timeout=5)
    assert closing["type"] == "websocket.close"
    return error, closing["code"]


def test_an_anonymous_socket_is_refused_with_4401_and_staff_without_the_right_with_4403(editor):
    async def go():
        anonymous = await refused(WebsocketCommunicator(application, DESK))
        cookie = await sync_to_async(session_cookie)(editor)
        without = await refused(WebsocketCommunicator(application, DESK, headers=cookie))
        return anonymous, without

    (anonymous, anonymous_code), (without, without_code) = run(go())

    assert anonymous_code == CLOSE_UNAUTHORIZED and anonymous["error"]["code"] == "not_authenticated"
    assert without_code == CLOSE_FORBIDDEN
    assert without["error"] == {"code": "permission_denied", "message": ERROR_DESK_FORBIDDEN, "fields": {}}


def test_the_desk_opens_on_its_queues_and_hears_a_conversation_queued_then_takes_and_answers_it(
    desk_person, tenant, telecom, tenant_key
):
    async def go():
        earlier = await waiting(tenant=tenant, profile=telecom, session="earlier")
        desk = await desk_for(desk_person)
        customer = WebsocketCommunicator(application, f"/ws/chat/telecom_contas/later/?key={tenant_key.raw}")
        assert (await customer.connect(timeout=5))[0]
        later = await waiting(tenant=tenant, profile=telecom, session="later")
        queued = await next_of(desk, "queued")
        taken = await ask(desk, "t1", "take", escalation=str(later.pk))
        taken_event = await next_of(desk, "taken")
        replied = await ask(desk, 2, "reply", escalation=str(later.pk), text="Olá! Sou a Ana.")
        heard = await next_of(desk, "message")
        while (pushed := await customer.receive_json_from(timeout=5))["type"] != "human":
            pass
        opened = await ask(desk, "o1", "open", escalation=str(later.pk))
        await customer.disconnect()
        await desk.disconnect()
        return earlier, later, desk.snapshot, queued, taken, taken_event, replied, heard, pushed, opened

    earlier, later, snapshot, queued, taken, taken_event, replied, heard, pushed, opened = run(go())

    assert [row["id"] for row in snapshot["queues"]] == [str(earlier.pk)]
    assert snapshot["tenants"] == [{"id": tenant.pk, "slug": tenant.slug, "name": tenant.name}]
    assert queued["escalation"]["id"] == str(later.pk)
    assert queued["escalation"]["position"] == 2 and queued["escalation"]["tenant"] == tenant.slug
    assert taken["type"] == "result" and taken["action"] == "take"
    assert taken["escalation"]["status"] == "assigned" and taken["escalation"]["assigned_to"] == desk_person.pk
    assert taken_event["escalation"]["person"] == "Ana"
    assert replied["id"] == 2 and replied["message"]["role"] == "human"
    assert replied["message"]["author"] == {"kind": "human", "name": "Ana", "id": str(desk_person.pk)}
    assert heard["escalation"] == str(later.pk) and heard["message"]["id"] == replied["message"]["id"]
    assert pushed["message"]["content"] == "Olá! Sou a Ana."
    assert [message["role"] for message in opened["history"]] == ["user", "assistant", "human"]
    assert opened["escalation"]["status"] == "assigned"
    assert Message.objects.get(pk=replied["message"]["id"]).role == MessageRole.HUMAN


def test_a_person_transfers_to_another_team_with_a_priority_then_hands_back(desk_person, tenant, telecom):
    telecom.escalation = {**telecom.escalation, "teams": ["support", "retention"]}
    telecom.save(update_fields=["escalation"])

    async def go():
        escalation = await waiting(tenant=tenant, profile=telecom, session="moving")
        desk = await desk_for(desk_person)
        key = str(escalation.pk)
        await ask(desk, "1", "take", escalation=key)
        moved = await ask(desk, "2", "transfer", escalation=key, team="retention", priority="urgent", note="VIP")
        transferred = await next_of(desk, "transferred")
        await ask(desk, "3", "take", escalation=key)
        back = await ask(desk, "4", "hand_back", escalation=key, note="Resolvido.")
        returned = await next_of(desk, "returned")
        await desk.disconnect()
        return escalation, moved, transferred, back, returned

    escalation, moved, transferred, back, returned = run(go())

    assert moved["escalation"]["queue"] == "retention" and moved["escalation"]["priority"] == "urgent"
    assert moved["escalation"]["status"] == "queued"
    assert transferred["escalation"]["position"] == 1
    assert back["escalation"]["status"] == "returned" and returned["escalation"]["status"] == "returned"
    assert Conversation.objects.get(pk=escalation.conversation_id).escalation_id is None
    notes = Message.objects.filter(conversation_id=escalation.conversation_id, role=MessageRole.NOTE)
    assert [note.content for note in notes.order_by("id")] == [
        "Transferred from support to retention by Ana. VIP",
        "Handed back: Resolvido.",
    ]
    returned_move = Handoff.objects.get(conversation_id=escalation.conversation_id, from_agent=PERSON)
    assert returned_move.kind == HandoffKind.HUMAN and returned_move.to_agent == "billing_agent"


def test_a_bad_frame_gets_an_error_naming_its_field_and_the_socket_stays_open(desk_person, tenant, telecom):
    async def go():
        escalation = await waiting(tenant=tenant, profile=telecom, session="bad")
        key = str(escalation.pk)
        desk = await desk_for(desk_person)
        answers = []
        await desk.send_to(text_data="{not json")
        answers.append(await desk.receive_json_from(timeout=5))
        await desk.send_json_to(["a list"])
        answers.append(await desk.receive_json_from(timeout=5))
        answers.append(await ask(desk, "a", "dance", escalation=key))
        answers.append(await ask(desk, "b", "take"))
        answers.append(await ask(desk, "c", "reply", escalation=key, text="   "))
        answers.append(await ask(desk, "d", "transfer", escalation=key))
        answers.append(await ask(desk, "e", "transfer", escalation=key, team="support", priority=9))
        answers.append(await ask(desk, "f", "transfer", escalation=key, team="sales"))
        answers.append(await ask(desk, "g", "open", escalation="not-an-id"))
        await desk.send_json_to({"id": {"nested": 1}, "action": "open", "escalation": key})
        answers.append(await desk.receive_json_from(timeout=5))
        still = await ask(desk, "h", "open", escalation=key)
        await desk.disconnect()
        return answers, still

    answers, still = run(go())

    fields = [sorted(answer["error"]["fields"]) for answer in answers]
    assert fields == [
        ["frame"],
        ["frame"],
        ["action"],
        ["escalation"],
        ["text"],
        ["team"],
        ["priority"],
        ["team"],
        ["escalation"],
        ["id"],
    ]
    assert all(answer["type"] == "error" for answer in answers)
    assert answers[3]["error"]["message"] == ERROR_ESCALATION_REQUIRED
    assert answers[4]["error"]["message"] == ERROR_TEXT_EMPTY
    assert answers[6]["error"]["message"] == ERROR_PRIORITY
    assert answers[7]["error"]["message"] == "'sales' is not one of the profile's teams (support)."
    assert answers[8]["error"]["code"] == "not_found"
    assert [answer.get("id") for answer in answers[2:9]] == ["a", "b", "c", "d", "e", "f", "g"]
    assert still["type"] == "result" and still["escalation"]["status"] == "queued"


def test_someone_elses_conversation_answers_a_conflict_that_names_who_holds_it(
    desk_person, tenant, telecom, django_user_model
):
    colleague = django_user_model.objects.create_user("carla", is_staff=True, first_name="Carla")
    TenantGrant.objects.create(tenant=tenant, user=colleague, answer_as_person=True)

    async def go():
        escalation = await waiting(tenant=tenant, profile=telecom, session="shared")
        ana, carla = await desk_for(desk_person), await desk_for(colleague)
        await ask(ana, "1", "take", escalation=str(escalation.pk))
        taken = await ask(carla, "1", "take", escalation=str(escalation.pk))
        replied = await ask(carla, "2", "reply", escalation=str(escalation.pk), text="Oi")
        noted = await ask(carla, "3", "note", escalation=str(escalation.pk), text="Conheço este cliente.")
        await ana.disconnect()
        await carla.disconnect()
        return taken, replied, noted

    taken, replied, noted = run(go())

    assert taken["error"] == {"code": "conflict", "message": "Ana has already taken this conversation.", "fields": {}}
    assert replied["error"]["code"] == "conflict" and "Ana" in replied["error"]["message"]
    assert noted["type"] == "result" and noted["message"]["role"] == "note"


def test_a_person_of_another_tenant_hears_nothing_of_this_tenants_desk_and_cannot_touch_its_conversations(
    desk_person, outsider_person, tenant, outsider, telecom
):
    async def go():
        bruno = await desk_for(outsider_person)
        ana = await desk_for(desk_person)
        theirs = await waiting(tenant=tenant, profile=telecom, session="not-bruno")
        await next_of(ana, "queued")
        await ask(ana, "1", "take", escalation=str(theirs.pk))
        await ask(ana, "2", "reply", escalation=str(theirs.pk), text="Só a Ana vê isto")
        own = await waiting(tenant=outsider, profile=telecom, session="bruno")
        first_heard = await bruno.receive_json_from(timeout=5)  # this tenant's events, had they come, came before
        tries = [
            await ask(bruno, action, action, escalation=str(theirs.pk), text="Oi", team="support")
            for action in ("open", "take", "reply", "note", "transfer", "hand_back")
        ]
        await ana.disconnect()
        await bruno.disconnect()
        return bruno.snapshot, own, first_heard, tries

    snapshot, own, first_heard, tries = run(go())

    assert snapshot["queues"] == [] and [t["slug"] for t in snapshot["tenants"]] == [outsider.slug]
    assert first_heard["type"] == "queued" and first_heard["escalation"]["id"] == str(own.pk)
    for answer in tries:
        assert answer["error"] == {
            "code": "not_found",
            "message": ERROR_ESCALATION_NOT_FOUND,
            "fields": {"escalation": [ERROR_ESCALATION_NOT_FOUND]},
        }
    assert not Message.objects.filter(role__in=[MessageRole.HUMAN, MessageRole.NOTE], metadata__author__name="Bruno")


def test_a_reply_costs_the_rights_check_and_the_services_own_queries(
    desk_person, tenant, telecom, django_assert_num_queries
):
    escalation = waiting_conversation(tenant=tenant, profile=telecom, session="lean")
    desk = Desk(user=desk_person, person=person_of_user(desk_person), tenants=desk_tenants(desk_person))
    desk.snapshot()  # the escalation seen, as the socket sees it when it opens
    desk.act("take", {"escalation": str(escalation.pk)})  # the user's permissions read too, once per socket

    # The grant (the right, checked again); the service's transaction: the escalation, the message.
    with django_assert_num_queries(5):
        answered = desk.act("reply", {"escalation": str(escalation.pk), "text": "Já verifico a sua fatura."})

    assert answered["message"]["content"] == "Já verifico a sua fatura."


def test_the_frames_give_their_pooled_connections_back(desk_person, tenant, telecom):
    """Each frame runs on a thread of the event loop's pool (not the thread Channels' wrapper keeps for the socket):
    its connection goes back to the pool when the frame is answered, even where Channels' own clean-up is off (its
    test communicator turns it off), or every socket's frames would take one of the pool's few connections each."""
    pool = connections["default"].pool
    assert pool is not None  # the suite runs on PostgreSQL with the pool, as production does

    async def go():
        escalations = [await waiting(tenant=tenant, profile=telecom, session=f"pooled-{n}") for n in range(3)]
        for n, escalation in enumerate(escalations):
            desk = await desk_for(desk_person)
            await ask(desk, f"t{n}", "take", escalation=str(escalation.pk))
            await ask(desk, f"r{n}", "reply", escalation=str(escalation.pk), text="Um momento.")
            await desk.disconnect()

    before = pool.get_stats()
    run(go())
    after = pool.get_stats()

    assert after["pool_size"] - after["pool_available"] <= before["pool_size"] - before["pool_available"]


def test_a_revoked_grant_stops_the_next_frame(desk_person, tenant, telecom):
    escalation = waiting_conversation(tenant=tenant, profile=telecom, session="revoked")
    desk = Desk(user=desk_person, person=person_of_user(desk_person), tenants=desk_tenants(desk_person))
    desk.snapshot()
    TenantGrant.objects.filter(user=desk_person).update(answer_as_person=False)

    with pytest.raises(Exception) as refused:
        desk.act("reply", {"escalation": str(escalation.pk), "text": "Oi"})

    assert getattr(refused.value, "code", "") == "not_found"
    assert Escalation.objects.get(pk=escalation.pk).status == EscalationStatus.QUEUED


def test_with_the_layer_down_the_desk_opens_and_its_replies_are_stored(desk_person, tenant, telecom, settings):
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [DEAD_REDIS]}}
    }

    async def go():
        escalation = await waiting(tenant=tenant, profile=telecom, session="no-redis")
        desk = await desk_for(desk_person)
        replied = await ask(desk, "1", "reply", escalation=str(escalation.pk), text="Sem Redis, mas aqui.")
        await desk.disconnect()
        return desk.snapshot, replied

    snapshot, replied = run(go())

    assert len(snapshot["queues"]) == 1
    assert replied["type"] == "result" and replied["message"]["content"] == "Sem Redis, mas aqui."


def test_the_group_listener_survives_a_layer_that_fails_and_stops_when_told(settings):
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [DEAD_REDIS]}}
    }
    stop = False

    async def go() -> bool:
        nonlocal stop
        ready = asyncio.Event()
        listener = asyncio.create_task(
            group_listen(["desk.1", "desk.2"], lambda event: None, ready=ready, gone=lambda: stop)
        )
        await asyncio.wait_for(ready.wait(), timeout=5)
        stop = True
        await asyncio.wait_for(listener, timeout=5)
        return listener.exception() is None

    assert asyncio.run(go())


def test_a_conversation_the_assistants_hand_over_reaches_the_desk_with_its_place(desk_person, tenant, telecom, api):
    async def go():
        desk = await desk_for(desk_person)
        body = await sync_to_async(api.post)(
            "/api/gateway/message",
            {"agent_id": "telecom_contas", "payload": {"text": "quero falar com um atendente", "session_id": "g-1"}},
            format="json",
        )
        queued = await next_of(desk, "queued")
        await desk.disconnect()
        return body.json(), queued

    body, queued = run(go())

    assert queued["escalation"]["id"] == body["metadata"]["escalation"]["id"]
    assert queued["escalation"]["position"] == 1 and queued["escalation"]["tenant"] == tenant.slug
    assert queued["escalation"]["conversation_key"] == body["conversation_key"]
