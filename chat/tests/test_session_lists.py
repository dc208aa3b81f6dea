"""Lists with cursors: a tenant's conversations (``GET /api/sessions``) and a conversation's messages in pages
(``GET /api/sessions/{key}/messages?limit=&cursor=``)."""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlsplit

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agents.models import McpServer
from chat.intake import ERROR_UNKNOWN_PARAMETER
from common.config_version import config_version_bump
from conversations.models import Conversation, Escalation, EscalationReason, Outcome
from tests.factories import AgentProfileFactory, ConversationFactory

pytestmark = pytest.mark.django_db

LIST_URL = "/api/sessions"
NOW = timezone.now().replace(microsecond=0)


def at(hours_ago: float) -> dt.datetime:
    return NOW - dt.timedelta(hours=hours_ago)


@pytest.fixture
def listed(tenant, outsider, telecom):
    """Six conversations of ``tenant`` over two profiles — open, resolved, abandoned, escalated, one a person holds
    now, one ended before outcomes were recorded — each last active an hour apart; and one of the outsider."""
    retail = AgentProfileFactory(agent_id="retail_orders")
    rows = [
        ("open-1", telecom, "", 1),
        ("resolved", telecom, Outcome.RESOLVED, 2),
        ("held", retail, Outcome.ESCALATED, 3),
        ("abandoned", retail, Outcome.ABANDONED, 4),
        ("escalated", telecom, Outcome.ESCALATED, 5),
        ("old", telecom, "unmeasured", 50),  # before yesterday, at any hour of today
    ]
    made = {}
    for session_id, profile, outcome, hours_ago in rows:
        conversation = ConversationFactory(tenant=tenant, profile=profile, session_id=session_id, outcome=outcome)
        made[session_id] = conversation
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=at(hours_ago), created_at=at(hours_ago + 1))
    held = Escalation.objects.create(
        conversation=made["held"], tenant=tenant, profile=retail, team="atendimento", reason=EscalationReason.INTENT
    )
    Conversation.objects.filter(pk=made["held"].pk).update(escalation=held)
    ConversationFactory(tenant=outsider, profile=telecom, session_id="open-1")
    return made


def keys(body: dict) -> list[str]:
    return [row["conversation_key"].rsplit(":", 1)[1] for row in body["sessions"]]


def listing(api, **query) -> dict:
    response = api.get(LIST_URL, query)
    assert response.status_code == 200, response.content
    return response.json()


def test_the_list_is_the_keys_tenants_conversations_newest_first_by_last_activity(api, listed):
    body = listing(api)

    assert keys(body) == ["open-1", "resolved", "held", "abandoned", "escalated", "old"]
    assert body["next"] is None
    first, held = body["sessions"][0], body["sessions"][2]
    assert first == {
        "conversation_key": "tenant_a:telecom_contas:open-1",
        "agent_id": "telecom_contas",
        "session_id": "open-1",
        "user_id": "",
        "channel": "",
        "status": "open",
        "with_person": False,
        "state": "",
        "active_specialist": "",
        "cohort": "",
        "message_count": 0,
        "created_at": at(2).isoformat().replace("+00:00", "Z"),
        "updated_at": at(1).isoformat().replace("+00:00", "Z"),
        "ended_at": None,
    }
    assert (held["agent_id"], held["status"], held["with_person"]) == ("retail_orders", "escalated", True)


def test_the_cursor_pages_through_every_conversation_once_in_a_bounded_number_of_queries(
    api, listed, django_assert_max_num_queries
):
    seen, url = [], f"{LIST_URL}?limit=3&agent_id=telecom_contas"
    while url is not None:
        path = urlsplit(url)
        # The profile named and the page; the key's row and the configuration version its cache follows when the
        # cache has let them go. None per conversation listed: three on the first page.
        with django_assert_max_num_queries(4):
            response = api.get(f"{path.path}?{path.query}")
        assert response.status_code == 200, response.content
        body = response.json()
        assert len(body["sessions"]) <= 3
        seen += keys(body)
        url = body["next"]

    assert seen == ["open-1", "resolved", "escalated", "old"]


def test_the_list_filters_by_profile_status_person_and_last_activity(api, listed):
    assert keys(listing(api, agent_id="retail_orders")) == ["held", "abandoned"]
    assert keys(listing(api, status="open")) == ["open-1"]
    assert keys(listing(api, status="escalated")) == ["held", "escalated"]
    assert keys(listing(api, status="escalated", with_person="true")) == ["held"]
    assert keys(listing(api, with_person="false", agent_id="retail_orders")) == ["abandoned"]
    assert keys(listing(api, status="unmeasured")) == ["old"]
    since = listing(api, updated_after=at(3.5).isoformat(), updated_before=at(1).isoformat())
    assert keys(since) == ["resolved", "held"]  # after is inclusive, before exclusive
    assert keys(listing(api, updated_before=(NOW - dt.timedelta(days=1)).date().isoformat())) == ["old"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"status": "closed"}, "status"),
        ({"agent_id": "no_such_profile"}, "agent_id"),
        ({"with_person": "maybe"}, "with_person"),
        ({"updated_after": "yesterday"}, "updated_after"),
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"offset": "10"}, "offset"),
        ({"tenant": "outsider"}, "tenant"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(api, listed, query, field):
    response = api.get(LIST_URL, query)

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert list(error["fields"]) == [field], error
    if field == "offset":
        assert error["fields"]["offset"] == [ERROR_UNKNOWN_PARAMETER]


def test_another_tenant_sees_none_of_these_conversations(outsider_api, listed):
    body = listing(outsider_api)
    assert [row["conversation_key"] for row in body["sessions"]] == ["outsider:telecom_contas:open-1"]


def test_a_staff_session_names_a_tenant_it_may_read(client, staff_user, tenant_analyst, listed, outsider):
    client.force_login(staff_user)
    assert keys(client.get(LIST_URL, {"tenant": "tenant_a", "status": "open"}).json()) == ["open-1"]
    assert list(client.get(LIST_URL).json()["error"]["fields"]) == ["tenant"]

    client.force_login(tenant_analyst)
    assert keys(client.get(LIST_URL, {"tenant": "tenant_a", "limit": 1}).json()) == ["open-1"]
    refused = client.get(LIST_URL, {"tenant": outsider.slug})
    assert refused.status_code == 403 and list(refused.json()["error"]["fields"]) == ["tenant"]


def test_a_signed_in_user_who_is_not_staff_gets_nothing(client, django_user_model, listed):
    client.force_login(django_user_model.objects.create_user("customer", password="pw"))
    refused = client.get(LIST_URL, {"tenant": "tenant_a"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"


# -- a conversation's messages, in pages -------------------------------------------------------------------------

KEY = "tenant_a:telecom_contas:paged"
MESSAGES_URL = f"/api/sessions/{KEY}/messages"
TURNS = ("Minha fatura veio alta", "E o meu pedido?", "Quero a segunda via do boleto", "Meu pedido atrasou")


@pytest.fixture
def talked(api, telecom):
    """Four turns of one conversation (eight messages, four decisions, routing handoffs between them); its tools
    fail fast (nothing listens on port 9)."""
    McpServer.objects.update(endpoint="http://127.0.0.1:9/mcp", timeout=2)
    config_version_bump()
    for text in TURNS:
        body = {"channel": "web", "agent_id": "telecom_contas", "payload": {"text": text, "session_id": "paged"}}
        assert api.post("/api/gateway/message", body, format="json").status_code == 200
    whole = api.get(MESSAGES_URL).json()
    assert (len(whole["messages"]), len(whole["route_decisions"])) == (8, 4) and whole["handoffs"]
    return whole


def test_pages_of_messages_carry_the_decisions_and_handoffs_of_their_span_and_add_up_to_the_whole(
    api, talked, django_assert_max_num_queries
):
    assert talked["next"] is None  # no paging parameter: the whole conversation, as before pages existed
    pages, url = [], f"{MESSAGES_URL}?limit=3"
    while url is not None:
        # The conversation, its messages, decisions and handoffs (and the key's when its cache let it go).
        with django_assert_max_num_queries(6):
            response = api.get(url)
        assert response.status_code == 200, response.content
        pages.append(response.json())
        url = pages[-1]["next"]

    assert [len(page["messages"]) for page in pages] == [3, 3, 2]
    for name in ("messages", "route_decisions", "handoffs"):
        assert [row for page in pages for row in page[name]] == talked[name], name
    for page in pages[:-1]:
        last = parse_datetime(page["messages"][-1]["created_at"])
        assert all(parse_datetime(row["created_at"]) <= last for row in page["route_decisions"] + page["handoffs"])
    assert all(page["conversation_key"] == KEY and page["state"] == talked["state"] for page in pages)


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=0", "limit"), ("limit=abc", "limit"), ("cursor=%%%", "cursor"), ("offset=2", "offset")],
)
def test_a_bad_paging_parameter_is_a_400_naming_it(api, tenant, telecom, query, field):
    ConversationFactory(tenant=tenant, profile=telecom, session_id="paged")

    response = api.get(f"{MESSAGES_URL}?{query}")

    assert response.status_code == 400, response.content
    assert list(response.json()["error"]["fields"]) == [field]
