"""The agent_handoffs table in the admin: viewable and filterable.

That it is listed, searched and never written is checked in ``tests/test_admin_smoke.py``.
"""

from __future__ import annotations

import pytest

from handoffs.models import Handoff, HandoffKind, HandoffStatus
from tests.adminkit import change_url, changelist_url, conversation_with_history

pytestmark = pytest.mark.django_db


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


def test_handoffs_filter_by_kind_status_and_date(staff_client, handoff, delegation):
    url = changelist_url(Handoff)
    assert list(staff_client.get(url, {"kind__exact": "delegation"}).context["cl"].result_list) == [delegation]
    assert list(staff_client.get(url, {"status__exact": "completed"}).context["cl"].result_list) == [handoff]
    today = handoff.created_at
    by_day = staff_client.get(
        url, {"created_at__year": today.year, "created_at__month": today.month, "created_at__day": today.day}
    )
    assert set(by_day.context["cl"].result_list) == {handoff, delegation}


def test_the_handoff_page_shows_the_reason(staff_client, handoff):
    response = staff_client.get(change_url(handoff))
    assert response.status_code == 200
    assert "The user asks about the invoice." in response.content.decode()


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
