"""``Idempotency-Key`` on the message POSTs: a retry gets the stored answer, never a second turn. On SQLite as well
(``sqlite_too``): the embedded default takes the header too."""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import replace
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import AsyncClient
from django.utils import timezone

from chat.idempotency import ERROR_IN_PROGRESS, ERROR_KEY_REUSED, ERROR_NOT_ON_STREAMS, HEADER, body_fingerprint
from conversations.graph import run_turn
from conversations.models import Conversation, IdempotentRequest, Message
from conversations.turn import ClaimTakenOver, TurnInput
from routing import snapshot
from tests.streaming import run

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]


def body(text="Minha fatura veio alta", session="idem-1"):
    return {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}}


def post(client, path="/api/gateway/message", data=None, key="k-1"):
    return client.post(path, data or body(), format="json", HTTP_IDEMPOTENCY_KEY=key)


def turns() -> int:
    return Message.objects.filter(role="user").count()


@pytest.mark.parametrize("path", ["/api/gateway/message", "/api/chat/message"])
def test_the_same_key_twice_runs_one_turn_and_answers_the_same_body(api, telecom, path):
    first = post(api, path)
    again = post(api, path)

    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert turns() == 1


def test_without_a_key_every_post_is_a_turn(api, telecom):
    api.post("/api/gateway/message", body(), format="json")
    api.post("/api/gateway/message", body(), format="json")

    assert turns() == 2


def test_the_same_key_with_another_body_is_a_422_naming_the_header(api, telecom):
    post(api)
    response = post(api, data=body(text="Outra mensagem"))

    assert response.status_code == 422
    assert response.json()["error"] == {
        "code": "idempotency_key_reused",
        "message": ERROR_KEY_REUSED,
        "fields": {HEADER: [ERROR_KEY_REUSED]},
    }
    assert turns() == 1


def test_a_retry_while_the_first_is_still_answered_is_a_409(api, telecom, tenant):
    IdempotentRequest.objects.create(
        tenant=tenant,
        endpoint="/api/gateway/message",
        key="k-1",
        body_sha256=body_fingerprint(body()),
        expires_at=timezone.now() + dt.timedelta(hours=1),
    )

    response = post(api)

    assert response.status_code == 409
    assert response.json()["error"]["message"] == ERROR_IN_PROGRESS
    assert turns() == 0


def test_the_same_key_from_two_tenants_or_two_routes_is_two_keys(api, outsider_api, telecom):
    assert post(api).status_code == 200
    assert post(outsider_api).status_code == 200
    assert post(api, "/api/chat/message").status_code == 200

    assert turns() == 3
    assert IdempotentRequest.objects.count() == 3


def test_an_expired_key_runs_again_and_the_purge_deletes_expired_keys(api, telecom):
    post(api)
    IdempotentRequest.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))

    again = post(api)

    assert again.status_code == 200 and "Idempotent-Replayed" not in again
    assert turns() == 2
    IdempotentRequest.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    call_command("idempotency_purge", stdout=StringIO())
    assert not IdempotentRequest.objects.exists()


def test_a_streaming_route_refuses_the_key_naming_the_header(api, telecom):
    response = post(api, "/api/gateway/message/stream")

    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {HEADER: [ERROR_NOT_ON_STREAMS]}
    assert turns() == 0


def test_an_openai_completion_retried_with_its_key_is_answered_once(api, telecom):
    completion = {"model": "telecom_contas", "messages": [{"role": "user", "content": "Minha fatura veio alta"}]}

    first = post(api, "/v1/chat/completions", completion, key="oa-1")
    again = post(api, "/v1/chat/completions", completion, key="oa-1")
    other = post(api, "/v1/chat/completions", {**completion, "user": "x"}, key="oa-1")
    streamed = post(api, "/v1/chat/completions", {**completion, "stream": True}, key="oa-2")

    assert first.status_code == again.status_code == 200 and again.json() == first.json()
    assert other.status_code == 422 and other.json()["error"]["param"] == HEADER
    assert streamed.status_code == 400 and streamed.json()["error"]["message"] == ERROR_NOT_ON_STREAMS
    assert turns() == 1


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_requests_with_the_same_key_run_exactly_one_turn(tenant_key, telecom, settings):
    settings.OFFLINE_LLM_LATENCY_MS = 300

    async def send():
        return await AsyncClient().post(
            "/api/gateway/message",
            body(session="idem-race"),
            content_type="application/json",
            headers={"Authorization": f"Bearer {tenant_key.raw}", HEADER: "race-1"},
        )

    async def both():
        return await asyncio.gather(*(send() for _ in range(4)))

    responses = run(both())

    codes = sorted(response.status_code for response in responses)
    assert codes.count(200) >= 1 and set(codes) <= {200, 409}
    answered = [r.json() for r in responses if r.status_code == 200]
    assert all(answer == answered[0] for answer in answered)
    assert turns() == 1


def test_the_schema_documents_the_header_on_the_four_message_routes(api):
    schema = api.get("/api/schema/?format=json").json()

    for path in ("/api/gateway/message", "/api/chat/message", "/api/chat/multi-agent/message", "/v1/chat/completions"):
        parameters = schema["paths"][path]["post"].get("parameters", [])
        assert {"in": "header", "name": HEADER} in [{"in": p["in"], "name": p["name"]} for p in parameters], path


def died_after_its_turn_was_stored(older_than_the_lease: bool = True) -> None:
    """The keys' rows as a request leaves them that died (its host killed) after its turn's transaction committed
    and before it stored its answer: no answer on the row."""
    created = timezone.now() - dt.timedelta(hours=1) if older_than_the_lease else timezone.now()
    IdempotentRequest.objects.update(status_code=None, response=None, created_at=created)


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("/api/gateway/message", body()),
        ("/api/chat/message", body()),
        ("/v1/chat/completions", {"model": "telecom_contas", "messages": [{"role": "user", "content": "Oi"}]}),
        ("/v1/responses", {"model": "telecom_contas", "input": "Minha fatura veio alta"}),
    ],
)
def test_a_retry_of_a_request_that_died_after_its_turn_was_stored_gets_that_turns_answer_not_a_second_turn(
    api, telecom, path, data
):
    first = post(api, path, data)
    died_after_its_turn_was_stored()

    again = post(api, path, data)
    replayed = post(api, path, data)

    assert first.status_code == again.status_code == replayed.status_code == 200, again.json()
    assert turns() == 1
    answered, retried = dict(first.json()), dict(again.json())
    for made_at in ("created", "created_at", "completed_at"):  # when the body was made: the retry's
        for made in (answered, retried):
            made.pop(made_at, None)
    if path.startswith("/api/"):  # the metadata as stored with the turn: its trace lacks the persisting step's time
        assert retried.pop("metadata")["turn"] == answered.pop("metadata")["turn"]
    assert retried == answered
    assert replayed.json() == again.json() and replayed["Idempotent-Replayed"] == "true"


def test_a_retry_while_the_first_stores_its_answer_gets_the_stored_turns_answer_at_once(api, telecom):
    first = post(api)
    died_after_its_turn_was_stored(older_than_the_lease=False)

    again = post(api)

    assert again.status_code == 200 and again.json()["message_id"] == first.json()["message_id"]
    assert turns() == 1


@pytest.mark.django_db(transaction=True)
def test_a_turn_whose_key_a_retry_took_over_meanwhile_stores_nothing_and_hands_the_conversation_on(tenant, telecom):
    profile = snapshot.current().profiles["telecom_contas"]
    data = TurnInput(tenant_pk=tenant.pk, tenant_slug=tenant.slug, profile=profile, text="oi", session_id="late")
    held = IdempotentRequest.objects.create(
        tenant=tenant, endpoint="/api/chat/message", key="k-late", body_sha256="-", expires_at=timezone.now()
    )
    claim = held.pk
    held.delete()  # what a retry does to the row of a request older than the turn lease, before it runs its own

    with pytest.raises(ClaimTakenOver):
        run(run_turn(replace(data, idempotency_claim=claim)))

    assert turns() == 0
    run(run_turn(data))  # the conversation's next message is not held behind the one that stored nothing
    conversation = Conversation.objects.get(session_id="late")
    assert conversation.turn_tickets_issued == conversation.turn_tickets_done == 2
    assert turns() == 1
