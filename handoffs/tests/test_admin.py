"""The agent_handoffs table in the admin: viewable, filterable, never written."""

from __future__ import annotations

import pytest
from django.urls import reverse

from handoffs.models import Handoff, HandoffKind, HandoffStatus
from routing.tests.adminkit import add_url, change_url, changelist_url, conversation_with_history

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


@pytest.fixture
def handoff(tenant, telecom) -> Handoff:
    return conversation_with_history(tenant=tenant, profile=telecom).handoffs.get()


@pytest.fixture
def delegation(handoff) -> Handoff:
    return Handoff.objects.create(
        conversation=handoff.conversation,
        tenant=handoff.tenant,
        profile=handoff.profile,
        from_agent="billing_agent",
        to_agent="orders_agent",
        kind=HandoffKind.DELEGATION,
        status=HandoffStatus.REFUSED,
    )


def test_the_handoff_changelist_lists_handoffs(staff_client, handoff):
    response = staff_client.get(changelist_url(Handoff))
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [handoff]


@pytest.mark.parametrize("term", ["support_agent", "billing_agent", "tenant_a:telecom_contas:s-1"])
def test_the_handoff_search_finds_handoffs_by_agent_or_conversation(staff_client, handoff, term):
    response = staff_client.get(changelist_url(Handoff), {"q": term})
    assert handoff in response.context["cl"].result_list


def test_handoffs_filter_by_kind_status_and_date(staff_client, handoff, delegation):
    url = changelist_url(Handoff)
    assert list(staff_client.get(url, {"kind__exact": "delegation"}).context["cl"].result_list) == [delegation]
    assert list(staff_client.get(url, {"status__exact": "completed"}).context["cl"].result_list) == [handoff]
    today = handoff.created_at
    by_day = staff_client.get(
        url, {"created_at__year": today.year, "created_at__month": today.month, "created_at__day": today.day}
    )
    assert set(by_day.context["cl"].result_list) == {handoff, delegation}


def test_a_handoff_can_be_viewed_but_not_added_changed_or_deleted(staff_client, handoff):
    response = staff_client.get(change_url(handoff))
    assert response.status_code == 200
    assert "The user asks about the invoice." in response.content.decode()
    assert staff_client.get(add_url(Handoff)).status_code == 403
    assert staff_client.post(add_url(Handoff), {}).status_code == 403
    assert staff_client.post(change_url(handoff), {"reason": "edited"}).status_code == 403
    delete = reverse("admin:handoffs_handoff_delete", args=[handoff.pk])
    assert staff_client.post(delete, {"post": "yes"}).status_code == 403
    handoff.refresh_from_db()
    assert handoff.reason == "The user asks about the invoice."


def test_the_handoff_changelist_does_not_query_per_row(staff_client, handoff, django_assert_max_num_queries):
    staff_client.get(changelist_url(Handoff))
    with django_assert_max_num_queries(20) as few:
        staff_client.get(changelist_url(Handoff))
    for index in range(10):
        Handoff.objects.create(
            conversation=handoff.conversation,
            tenant=handoff.tenant,
            profile=handoff.profile,
            from_agent=f"agent_{index}",
            to_agent="billing_agent",
            kind=HandoffKind.HANDOFF,
        )
    with django_assert_max_num_queries(len(few.captured_queries)):
        response = staff_client.get(changelist_url(Handoff))
    assert response.context["cl"].result_count == 11
