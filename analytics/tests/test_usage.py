"""``GET /api/analytics/usage`` and the dashboard's usage section: tokens and cost per tenant, profile, day, model."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone

from agents.models import ModelPrice
from analytics.tests.traffic import ANSWER_USAGE, messages_over_ninety_days
from conversations.models import Message
from conversations.selectors import answers_usage_by_day

pytestmark = pytest.mark.django_db

URL = "/api/analytics/usage"


def test_staff_read_every_tenants_usage_per_tenant_profile_day_and_model(staff_api, traffic):
    ModelPrice.objects.create(model="gpt-4o-mini", prompt_per_million="0.15", completion_per_million="0.6")

    body = staff_api.get(URL, {"days": "30"}).json()

    answers = Message.objects.filter(role="assistant", created_at__date__gte=traffic.day(29)).count()
    assert body["totals"]["answers"] == answers > 0
    assert body["totals"]["prompt_tokens"] == 1000 * answers
    assert body["totals"]["cost"] == round(answers * (1000 * 0.15 + 200 * 0.6) / 1e6, 6)
    assert {row["tenant"] for row in body["rows"]} == {traffic.tenant_a.slug, traffic.tenant_b.slug}
    assert body["unpriced_models"] == []
    days = [row["day"] for row in body["rows"]]
    assert days == sorted(days, reverse=True)


def test_an_api_key_reads_its_own_tenant_only(api, traffic):
    body = api.get(URL).json()

    assert {row["tenant"] for row in body["rows"]} == {traffic.tenant_a.slug}
    assert body["unpriced_models"] == ["gpt-4o-mini"]
    assert api.get(URL, {"tenant": traffic.tenant_b.slug}).status_code == 404


def test_a_profile_and_a_window_narrow_it(staff_api, traffic):
    one = staff_api.get(URL, {"profile": traffic.p2.agent_id, "start": traffic.day(5), "end": traffic.day(0)}).json()

    assert {row["profile"] for row in one["rows"]} <= {traffic.p2.agent_id}
    assert all(traffic.day(5) <= row["day"] <= traffic.day(0) for row in one["rows"])
    assert staff_api.get(URL, {"days": "x"}).status_code == 400


def test_a_routing_editor_is_refused(editor_api):
    assert editor_api.get(URL).status_code == 403


def test_the_dashboard_has_a_usage_section_that_reads_the_usage_api(staff_client):
    html = staff_client.get("/analytics/").content.decode()

    assert 'id="panel-usage"' in html and 'id="chart-usage"' in html and 'id="table-usage"' in html


@pytest.mark.django_db(transaction=True)
def test_the_usage_query_reads_the_usage_index_on_postgresql(tenant, outsider, telecom):
    """On a table of 90 days of messages, vacuumed and analysed as autovacuum leaves a store, the last week's usage
    is read from the covering ``message_usage_window`` alone (the planner's own choice)."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's plan")
    now = timezone.now()
    messages_over_ninety_days([tenant, outsider], telecom, lambda turn: ANSWER_USAGE)

    plan = answers_usage_by_day(start=now - dt.timedelta(days=7), end=now, tenant_id=tenant.pk).explain()

    assert "Index Only Scan using message_usage_window" in plan, plan
