"""The escalations API: an external contact-center tool (an API key that may answer) or a staff session with the
answer right lists the queue, reads an escalation with its conversation, takes it, replies as a person, writes notes,
transfers it and hands it back; every other caller is refused, another tenant's escalation is a 404, bad input a 400
naming the field and a conflict a 409 (docs/external-desk.md)."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agents.escalation import EscalationSettings
from agents.models import ExternalDesk
from chat.desk.access import ERROR_API_FORBIDDEN, ERROR_PERSON_REQUIRED
from chat.desk.apis import ERROR_PERSON_SESSION
from common.config_version import config_version_bump
from conversations.desk.contract import ERROR_CURSOR
from conversations.desk.escalations import ERROR_TEXT_EMPTY, Person, desk_note, escalation_take
from conversations.desk.webhook import desk_webhooks_flush
from conversations.models import Escalation, EscalationStatus, Message, MessageRole
from handoffs.models import PERSON
from tenants.models import TenantGrant
from tenants.services import api_key_create
from tests.webhook_receiver import Receiver

SECRET = "contact-center-shared-secret-42"
ANA = {"name": "Ana", "id": "agent-4711"}


def key_client(tenant_slug: str, **flags) -> APIClient:
    _, raw = api_key_create(tenant_slug=tenant_slug, name="contact center", **flags)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def desk_api(tenant_key) -> APIClient:
    """The contact-center tool of ``tenant``: a key made with ``--answer``."""
    return key_client("tenant_a", can_answer=True)


@pytest.fixture
def outsider_desk_api(outsider_key) -> APIClient:
    """Another tenant's contact-center tool."""
    return key_client("outsider", can_answer=True)


def ask_for_person(api, session: str = "desk-1") -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": "quero falar com um atendente", "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def say(api, text: str, session: str = "desk-1") -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def escalated(api, session: str = "desk-1") -> str:
    return ask_for_person(api, session)["metadata"]["escalation"]["id"]


def act(client, escalation_id: str, action: str, body: dict | None = None, **headers):
    return client.post(f"/api/escalations/{escalation_id}/{action}", body or {}, format="json", **headers)


def error_fields(response) -> dict:
    return response.json()["error"]["fields"]


# -- the story: a customer, the bots, a contact-center tool ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_external_desk_hears_of_the_customer_replies_through_the_api_and_hands_back(
    api, desk_api, telecom, settings
):
    settings.DESK_WEBHOOK_EXECUTOR = "inprocess"
    receiver = Receiver()
    try:
        ExternalDesk.objects.create(name="acme_desk", url=receiver.url, secret=SECRET)
        telecom.escalation = EscalationSettings.from_json({**telecom.escalation, "desk": "acme_desk"}).as_json()
        telecom.save(update_fields=["escalation"])
        config_version_bump()

        opened = ask_for_person(api)
        escalation_id = opened["metadata"]["escalation"]["id"]
        events = wait_for(receiver, 1)
        headers, body = receiver.posts[0]
        digest = hmac.new(SECRET.encode(), headers["X-Platform-Timestamp"].encode() + b"." + body, hashlib.sha256)
        assert headers["X-Platform-Signature"] == f"sha256={digest.hexdigest()}"
        assert events[0]["type"] == "escalation.opened" and events[0]["escalation"]["id"] == escalation_id

        queue = desk_api.get("/api/escalations").json()["escalations"]
        assert [item["id"] for item in queue] == [escalation_id]
        taken = act(desk_api, escalation_id, "take", {"person": ANA})
        assert taken.status_code == 200, taken.content
        assert taken.json()["person"] == ANA and taken.json()["status"] == "assigned"
        reply = act(desk_api, escalation_id, "messages", {"text": "Olá, sou a Ana. Como posso ajudar?", "person": ANA})
        assert reply.status_code == 201, reply.content
        assert reply.json()["author"] == {"kind": "human", **ANA}

        shown = api.get(f"/api/sessions/{opened['conversation_key']}/messages").json()["messages"]
        assert shown[-1]["content"] == "Olá, sou a Ana. Como posso ajudar?"
        assert shown[-1]["author"] == {"kind": "human", "name": "Ana", "id": "agent-4711"}

        held = say(api, "minha fatura veio alta")
        assert held["answer"] == "" and held["agent"] == PERSON
        events = wait_for(receiver, 4)
        assert [event["type"] for event in events[1:4]] == [
            "escalation.taken",
            "escalation.message",
            "escalation.customer_message",
        ]
        assert events[3]["message"]["content"] == "minha fatura veio alta"

        back = act(desk_api, escalation_id, "hand-back", {"note": "Fatura explicada.", "person": ANA})
        assert back.status_code == 200, back.content
        assert back.json()["status"] == "returned"
        routed = say(api, "minha fatura veio alta")
        assert routed["agent"] == "billing_agent"
        assert routed["metadata"]["route_decision"]["method"] == "keyword"
        assert wait_for(receiver, 5)[4]["type"] == "escalation.returned"
    finally:
        assert desk_webhooks_flush(10)
        receiver.stop()


def wait_for(receiver: Receiver, count: int, timeout: float = 60.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while len(receiver.posts) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(receiver.posts) >= count
    return [json.loads(body) for _, body in receiver.posts]


# -- who may -----------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_key_that_may_not_answer_is_refused_on_every_route(api, telecom):
    escalation_id = escalated(api)

    listing = api.get("/api/escalations")
    assert listing.status_code == 403
    assert listing.json()["error"]["message"] == ERROR_API_FORBIDDEN
    assert api.get(f"/api/escalations/{escalation_id}").status_code == 403
    assert act(api, escalation_id, "take", {"person": ANA}).status_code == 403
    assert Escalation.objects.get(pk=escalation_id).status == EscalationStatus.QUEUED


@pytest.mark.django_db
def test_another_tenants_desk_sees_nothing_and_finds_nothing(api, outsider_desk_api, telecom):
    escalation_id = escalated(api)

    assert outsider_desk_api.get("/api/escalations").json() == {"escalations": [], "next": None}
    assert outsider_desk_api.get(f"/api/escalations/{escalation_id}").status_code == 404
    for action, body in (
        ("take", {"person": ANA}),
        ("messages", {"text": "oi", "person": ANA}),
        ("notes", {"text": "oi", "person": ANA}),
        ("transfer", {"team": "support", "person": ANA}),
        ("hand-back", {"person": ANA}),
    ):
        response = act(outsider_desk_api, escalation_id, action, body)
        assert response.status_code == 404, action
        assert "escalation" in error_fields(response)
    assert Escalation.objects.get(pk=escalation_id).status == EscalationStatus.QUEUED
    assert not Message.objects.filter(role__in=[MessageRole.HUMAN, MessageRole.NOTE]).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("unknown", ["00000000-0000-0000-0000-000000000000", "not-a-uuid"])
def test_an_unknown_escalation_is_a_404(desk_api, unknown):
    assert desk_api.get(f"/api/escalations/{unknown}").status_code == 404


def staff_client(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/admin/")  # sets the CSRF cookie
    return client


@pytest.mark.django_db
def test_a_staff_session_with_the_answer_right_acts_as_its_user_with_the_csrf_token(
    api, telecom, tenant, django_user_model
):
    escalation_id = escalated(api)
    user = django_user_model.objects.create_user("bia", "bia@example.com", "bia-password", is_staff=True)
    user.first_name = "Bia"
    user.save(update_fields=["first_name"])
    TenantGrant.objects.create(tenant=tenant, user=user, answer_as_person=True)
    client = staff_client(user)
    token = {"X-CSRFToken": client.cookies["csrftoken"].value}
    url = f"/api/escalations/{escalation_id}/messages"

    refused = client.post(url, {"text": "Oi!"}, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]["message"]
    named = client.post(url, {"text": "Oi!", "person": ANA}, content_type="application/json", headers=token)
    assert named.status_code == 400 and error_fields(named) == {"person": [ERROR_PERSON_SESSION]}

    reply = client.post(url, {"text": "Oi, sou a Bia!"}, content_type="application/json", headers=token)
    assert reply.status_code == 201, reply.content
    assert reply.json()["author"] == {"kind": "human", "name": "Bia", "id": str(user.pk)}
    assert Escalation.objects.get(pk=escalation_id).assigned_to_id == user.pk
    assert [item["id"] for item in client.get("/api/escalations").json()["escalations"]] == [escalation_id]


@pytest.mark.django_db
def test_a_staff_session_without_the_answer_right_is_refused(api, telecom, tenant, django_user_model):
    escalation_id = escalated(api)
    user = django_user_model.objects.create_user("reader", "r@example.com", "reader-password", is_staff=True)
    TenantGrant.objects.create(tenant=tenant, user=user, read_conversations=True)
    client = staff_client(user)

    assert client.get("/api/escalations").status_code == 403
    assert client.get(f"/api/escalations/{escalation_id}").status_code == 403


# -- the queue ---------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_queue_is_listed_in_serving_order_a_page_at_a_time(api, desk_api, telecom):
    first, second, third = (escalated(api, f"line-{n}") for n in range(3))
    Escalation.objects.filter(pk=third).update(priority=1)  # urgent: served first

    page = desk_api.get("/api/escalations", {"limit": 2}).json()
    assert [item["id"] for item in page["escalations"]] == [third, first]
    assert [item["position"] for item in page["escalations"]] == [1, 2]
    rest = desk_api.get(page["next"]).json()
    assert [item["id"] for item in rest["escalations"]] == [second]
    assert rest["escalations"][0]["position"] == 3 and rest["next"] is None


@pytest.mark.django_db
def test_the_list_filters_by_status_team_and_profile(api, desk_api, telecom):
    waiting, taken = escalated(api, "a"), escalated(api, "b")
    escalation_take(escalation_id=taken, person=Person(name="Ana", ref="agent-4711"))

    def ids(**query) -> list[str]:
        response = desk_api.get("/api/escalations", query)
        assert response.status_code == 200, response.content
        return [item["id"] for item in response.json()["escalations"]]

    assert set(ids()) == {waiting, taken}
    assert ids(status="queued") == [waiting]
    assert ids(status="assigned") == [taken]
    assert ids(status="returned") == []
    assert set(ids(team="support")) == {waiting, taken} and ids(team="billing") == []
    assert set(ids(profile="telecom_contas")) == {waiting, taken}


@pytest.mark.django_db
def test_ended_escalations_are_listed_newest_first(api, desk_api, telecom):
    ended = []
    for n in range(3):
        escalation_id = escalated(api, f"ended-{n}")
        act(desk_api, escalation_id, "take", {"person": ANA})
        act(desk_api, escalation_id, "hand-back", {"person": ANA})
        ended.append(escalation_id)

    page = desk_api.get("/api/escalations", {"status": "returned", "limit": 2}).json()
    rest = desk_api.get(page["next"]).json()

    assert [item["id"] for item in page["escalations"] + rest["escalations"]] == ended[::-1]
    assert all(item["position"] is None and item["ended_at"] for item in page["escalations"])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"status": "lost"}, "status"),
        ({"profile": "nobody"}, "profile"),
        ({"cursor": "garbage"}, "cursor"),
        ({"limit": "0"}, "limit"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_bad_query_is_a_400_naming_it(desk_api, query, field):
    response = desk_api.get("/api/escalations", query)

    assert response.status_code == 400
    assert field in error_fields(response)
    if field == "cursor":
        assert error_fields(response)["cursor"] == [ERROR_CURSOR]


@pytest.mark.django_db
def test_the_list_costs_the_same_queries_for_two_escalations_as_for_eight(api, desk_api, telecom):
    def queries() -> int:
        desk_api.get("/api/escalations")  # the key is read and cached
        with CaptureQueriesContext(connection) as captured:
            assert desk_api.get("/api/escalations").status_code == 200
        return len(captured)

    for n in range(2):
        escalated(api, f"few-{n}")
    few = queries()
    for n in range(6):
        escalated(api, f"many-{n}")

    assert queries() == few


# -- one escalation ----------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_escalation_is_read_with_its_summary_messages_notes_and_routing(api, desk_api, telecom):
    say(api, "minha fatura veio alta")
    escalation_id = escalated(api)
    desk_note(escalation_id=escalation_id, person=Person(name="Ana", ref="agent-4711"), text="Cliente VIP.")

    body = desk_api.get(f"/api/escalations/{escalation_id}").json()

    assert body["escalation"]["id"] == escalation_id and body["escalation"]["summary"]
    assert body["escalation"]["position"] == 1
    assert body["conversation"]["conversation_key"] == body["escalation"]["conversation_key"]
    roles = [(message["role"], message["author"]["kind"]) for message in body["messages"]]
    assert roles[0] == ("user", "customer") and ("assistant", "assistant") in roles
    assert body["messages"][-1]["role"] == "note" and body["messages"][-1]["content"] == "Cliente VIP."
    assert body["messages"][-1]["author"] == {"kind": "human", **ANA}
    assert body["route_decisions"][0]["method"] == "keyword"


# -- acting on it ------------------------------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("action", "body", "field"),
    [
        ("take", {}, "person.name"),
        ("take", {"person": {"id": "x"}}, "person.name"),
        ("take", {"person": {"name": ""}}, "person.name"),
        ("messages", {"text": "   ", "person": ANA}, "text"),
        ("messages", {"person": ANA}, "text"),
        ("messages", {"text": 42, "person": ANA}, "text"),
        ("notes", {"text": "", "person": ANA}, "text"),
        ("transfer", {"team": "nowhere", "person": ANA}, "team"),
        ("transfer", {"team": "support", "priority": "asap", "person": ANA}, "priority"),
        ("hand-back", {"person": ANA, "reason": "x"}, "reason"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_changes_nothing(api, desk_api, telecom, action, body, field):
    escalation_id = escalated(api)
    if action in ("transfer", "hand-back"):
        act(desk_api, escalation_id, "take", {"person": ANA})
    before = Escalation.objects.filter(pk=escalation_id).values().get()

    response = act(desk_api, escalation_id, action, body)

    assert response.status_code == 400, response.content
    assert field in error_fields(response), error_fields(response)
    assert Escalation.objects.filter(pk=escalation_id).values().get() == before
    assert not Message.objects.filter(role__in=[MessageRole.HUMAN]).exists()


@pytest.mark.django_db
def test_a_key_must_name_the_person_who_writes(api, desk_api, telecom):
    response = act(desk_api, escalated(api), "messages", {"text": "Oi"})

    assert response.status_code == 400
    assert error_fields(response) == {"person.name": [ERROR_PERSON_REQUIRED]}


@pytest.mark.django_db
def test_text_over_the_answer_limit_is_refused(api, desk_api, telecom, settings):
    settings.ANSWER_MAX_CHARS = 10
    response = act(desk_api, escalated(api), "messages", {"text": "x" * 11, "person": ANA})

    assert response.status_code == 400 and "text" in error_fields(response)


@pytest.mark.django_db
def test_an_empty_text_says_so(api, desk_api, telecom):
    response = act(desk_api, escalated(api), "notes", {"text": " ", "person": ANA})

    assert error_fields(response) == {"text": [ERROR_TEXT_EMPTY]}


@pytest.mark.django_db
def test_taking_what_someone_else_holds_or_acting_on_an_ended_one_is_a_409(api, desk_api, telecom):
    escalation_id = escalated(api)
    assert act(desk_api, escalation_id, "take", {"person": ANA}).status_code == 200
    assert act(desk_api, escalation_id, "take", {"person": ANA}).status_code == 200  # one's own again: no change

    other = {"name": "Caio", "id": "agent-9"}
    taken = act(desk_api, escalation_id, "take", {"person": other})
    assert taken.status_code == 409 and "Ana" in taken.json()["error"]["message"]
    assert act(desk_api, escalation_id, "messages", {"text": "Oi", "person": other}).status_code == 409

    assert act(desk_api, escalation_id, "hand-back", {"person": ANA}).status_code == 200
    for action, body in (("take", {"person": ANA}), ("messages", {"text": "Oi", "person": ANA})):
        ended = act(desk_api, escalation_id, action, body)
        assert ended.status_code == 409 and ended.json()["error"]["code"] == "conflict"


@pytest.mark.django_db
def test_a_transfer_puts_it_back_in_line_in_another_team_with_a_priority_and_a_note(api, desk_api, telecom):
    telecom.escalation = EscalationSettings.from_json({**telecom.escalation, "teams": ["support", "billing"]}).as_json()
    telecom.save(update_fields=["escalation"])
    config_version_bump()
    escalation_id = escalated(api)
    act(desk_api, escalation_id, "take", {"person": ANA})

    response = act(
        desk_api,
        escalation_id,
        "transfer",
        {"team": "billing", "priority": "urgent", "note": "Cobrança.", "person": ANA},
    )

    assert response.status_code == 200, response.content
    moved = response.json()
    assert (moved["status"], moved["team"], moved["priority"], moved["person"]) == ("queued", "billing", "urgent", None)
    assert moved["position"] == 1
    note = Message.objects.get(role=MessageRole.NOTE)
    assert "Transferred from support to billing by Ana." in note.content and "Cobrança." in note.content


@pytest.mark.django_db
def test_the_schema_documents_the_escalations_api_under_its_own_tag(api):
    schema = api.get("/api/schema/", {"format": "json"}).json()

    operations = {
        (path, method): operation
        for path, methods in schema["paths"].items()
        if path.startswith("/api/escalations")
        for method, operation in methods.items()
    }
    assert len(operations) == 7
    assert all(operation["tags"] == ["Escalations"] for operation in operations.values())
    assert "409" in operations[("/api/escalations/{escalation_id}/take", "post")]["responses"]
