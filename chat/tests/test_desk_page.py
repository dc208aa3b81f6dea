"""The desk page, ``/desk/``: who gets it, what it lists (the queues of the tenants the person answers for, in serving
order with their places; the conversations they hold), an opened conversation, and what a person of another tenant
never sees. On SQLite as well (``sqlite_too``): the embedded default serves the desk too."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.utils.html import escape

from chat.desk.access import ERROR_DESK_FORBIDDEN, desk_tenants
from conversations.desk.escalations import (
    ERROR_ESCALATION_NOT_FOUND,
    desk_note,
    desk_reply,
    escalation_take,
    person_of_user,
)
from conversations.desk.reads import desk_mine, desk_queues, desk_snapshot
from conversations.escalation import EscalationAsk
from conversations.models import EscalationPriority
from tests.desk_fixtures import waiting_conversation

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

DESK = "/desk/"


def page_state(response) -> dict:
    """The page's JSON: what the desk shows when it opens."""
    found = re.search(
        r'<script id="desk-state" type="application/json">(.*?)</script>', response.content.decode(), re.S
    )
    assert found, "the page carries no desk-state"
    return json.loads(found.group(1))


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_anonymous_visitors_are_sent_to_the_login_page(client):
    response = client.get(DESK)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_staff_without_the_right_get_a_403_page_that_names_the_missing_right(editor):
    response = logged_in(editor).get(DESK)

    assert response.status_code == 403
    assert escape(ERROR_DESK_FORBIDDEN) in response.content.decode()
    assert escape('"Answer as person"') in response.content.decode()


def test_the_desk_link_is_shown_only_to_those_who_may_answer(desk_person, editor):
    assert 'id="desk-link"' in logged_in(desk_person).get("/admin/").content.decode()
    assert 'id="desk-module"' in logged_in(desk_person).get("/admin/").content.decode()
    assert 'id="desk-link"' not in logged_in(editor).get("/admin/").content.decode()
    assert 'id="desk-module"' not in logged_in(editor).get("/admin/").content.decode()


def test_the_queues_are_listed_in_serving_order_with_each_conversations_place(desk_person, tenant, telecom):
    first = waiting_conversation(tenant=tenant, profile=telecom, session="first")
    second = waiting_conversation(tenant=tenant, profile=telecom, session="second")
    urgent = waiting_conversation(tenant=tenant, profile=telecom, session="urgent", priority=EscalationPriority.URGENT)

    state = page_state(logged_in(desk_person).get(DESK))

    rows = state["queues"]
    assert [row["id"] for row in rows] == [str(urgent.pk), str(first.pk), str(second.pk)]
    assert [row["position"] for row in rows] == [1, 2, 3]
    assert rows[0]["priority"] == "urgent" and rows[0]["priority_number"] == 1
    assert rows[1]["reason"] == "customer_request"
    assert rows[1]["tenant"] == tenant.slug and rows[1]["profile"] == "telecom_contas" and rows[1]["queue"] == "support"
    assert state["reasons"]["customer_request"] == "The customer asked for a person"
    assert state["mine"] == []


def test_each_team_is_a_queue_of_its_own_and_the_filter_lists_one(desk_person, tenant, telecom):
    telecom.escalation = {**telecom.escalation, "teams": ["support", "retention"]}
    telecom.save(update_fields=["escalation"])
    support = waiting_conversation(tenant=tenant, profile=telecom, session="s")
    retention = waiting_conversation(tenant=tenant, profile=telecom, session="r", team="retention")

    every = page_state(logged_in(desk_person).get(DESK))
    filtered = page_state(logged_in(desk_person).get(DESK + "?team=retention"))

    assert {(row["queue"], row["position"]) for row in every["queues"]} == {("support", 1), ("retention", 1)}
    assert [row["id"] for row in filtered["queues"]] == [str(retention.pk)]
    assert filtered["team"] == "retention"
    assert str(support.pk) not in json.dumps(filtered["queues"])


def test_the_conversations_a_person_holds_are_theirs_alone(desk_person, tenant, telecom, django_user_model):
    held = waiting_conversation(tenant=tenant, profile=telecom, session="held")
    left = waiting_conversation(tenant=tenant, profile=telecom, session="left")
    escalation_take(escalation_id=held.pk, person=person_of_user(desk_person))

    state = page_state(logged_in(desk_person).get(DESK))

    assert [row["id"] for row in state["mine"]] == [str(held.pk)]
    assert state["mine"][0]["person"] == "Ana" and state["mine"][0]["assigned_to"] == desk_person.pk
    assert [(row["id"], row["position"]) for row in state["queues"]] == [(str(left.pk), 1)]


def test_an_opened_conversation_shows_why_the_summary_the_history_notes_and_decisions(desk_person, tenant, telecom):
    escalation = waiting_conversation(tenant=tenant, profile=telecom, session="open-me")
    ana = person_of_user(desk_person)
    desk_reply(escalation_id=escalation.pk, person=ana, text="Olá, sou a Ana.")
    desk_note(escalation_id=escalation.pk, person=ana, text="Cliente antigo, tratar com prioridade.")

    response = logged_in(desk_person).get(f"{DESK}?escalation={escalation.pk}")

    opened = page_state(response)["opened"]
    assert opened["escalation"]["status"] == "assigned"
    assert opened["reason_text"] == "The customer asked for a person."
    assert opened["summary"].startswith("Why: The customer asked for a person.")
    assert [(m["role"], m["author"]["kind"]) for m in opened["history"]] == [
        ("user", "customer"),
        ("assistant", "assistant"),
        ("human", "human"),
        ("note", "human"),
    ]
    assert opened["history"][2]["author"]["name"] == "Ana"
    assert opened["decisions"][0]["method"] == "keyword"
    assert opened["decisions"][0]["message_id"] == opened["history"][0]["id"]
    assert opened["teams"] == ["support"]


def test_a_person_of_another_tenant_never_sees_this_tenants_queue_nor_opens_its_conversation(
    outsider_person, tenant, outsider, telecom
):
    theirs = waiting_conversation(tenant=tenant, profile=telecom, session="theirs")
    own = waiting_conversation(tenant=outsider, profile=telecom, session="own")

    response = logged_in(outsider_person).get(f"{DESK}?escalation={theirs.pk}")

    state = page_state(response)
    assert [row["id"] for row in state["queues"]] == [str(own.pk)]
    assert [tenant_row["slug"] for tenant_row in state["tenants"]] == [outsider.slug]
    assert state["opened"] is None
    assert ERROR_ESCALATION_NOT_FOUND in response.content.decode()
    assert str(theirs.pk) not in response.content.decode().replace(f"escalation={theirs.pk}", "")
    assert f"{tenant.slug}:telecom_contas:theirs" not in response.content.decode()


def test_the_desk_reads_its_queues_in_a_fixed_number_of_queries(
    desk_person, tenant, telecom, django_assert_num_queries
):
    for number in range(5):
        waiting_conversation(tenant=tenant, profile=telecom, session=f"q-{number}")
    tenants = desk_tenants(desk_person)

    with django_assert_num_queries(1):
        assert len(desk_queues(tenants=tenants)) == 5
    with django_assert_num_queries(1):
        desk_mine(tenants=tenants, user_id=desk_person.pk)
    with django_assert_num_queries(2):
        desk_snapshot(tenants=tenants, user_id=desk_person.pk)


def test_an_ask_of_another_tenant_is_queued_in_its_own_queue(desk_person, outsider_person, tenant, outsider, telecom):
    waiting_conversation(tenant=tenant, profile=telecom, session="a")
    waiting_conversation(
        tenant=outsider, profile=telecom, session="b", ask=EscalationAsk("intent", "Intent.", "support")
    )

    mine = page_state(logged_in(desk_person).get(DESK))["queues"]
    theirs = page_state(logged_in(outsider_person).get(DESK))["queues"]

    assert [(row["tenant"], row["position"]) for row in mine] == [(tenant.slug, 1)]
    assert [(row["tenant"], row["position"], row["reason"]) for row in theirs] == [(outsider.slug, 1, "intent")]
