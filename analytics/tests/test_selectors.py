"""The selectors as the dashboard calls them: plain data, a fixed number of queries however many rows."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.conf import settings
from django.db import connection

from analytics import selectors
from analytics.services import window_open

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("module_traffic")]  # built once (conftest.py)

# How many sources each selector reads (handoff_list_recent reads the latest rows, not a window's totals), and
# whether it names agents (one more query: the agent_id of the profiles they belong to).
SOURCES = [
    (selectors.handoff_summary, 2, 1),
    (selectors.handoff_timeline, 1, 0),
    (selectors.handoff_stops, 1, 1),
    (selectors.handoff_list_recent, 0, 0),
    (selectors.delegation_outcomes, 1, 1),
    (selectors.agent_utilisation, 1, 1),
    (selectors.route_method_mix, 1, 0),
    (selectors.tool_call_stats, 1, 0),
    (selectors.cohort_comparison, 5, 0),
    (selectors.language_mix, 4, 0),
]


def window(traffic, days: int = 30) -> dict:
    end = dt.datetime.combine(traffic.today + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC)
    return {"start": end - dt.timedelta(days=days), "end": end}


@pytest.mark.parametrize(("selector", "sources", "names"), SOURCES, ids=[s.__name__ for s, _, _ in SOURCES])
def test_each_selector_runs_a_fixed_number_of_queries_for_one_tenant_or_all(
    selector, sources, names, traffic, django_assert_num_queries
):
    """Read from the rows alone: one query per source. With daily totals: which days are summed and which hours, then
    per source the totals and the rest's rows. Once the closed days and hours are summed (the first read does it). On
    PostgreSQL each read of rows is wrapped in a transaction that switches the JIT off (a savepoint here, inside the
    test's transaction; the ``SET LOCAL``; the release: :func:`analytics.rollups.without_jit`)."""
    window_open(**window(traffic))
    rows_read = 1 + (3 if connection.vendor == "postgresql" else 0)
    if not sources:
        queries = 1
    elif settings.ANALYTICS_ROLLUPS:
        queries = 2 + (1 + rows_read) * sources
    else:
        queries = rows_read * sources
    queries += names
    for tenant_id in (traffic.tenant_a.pk, None):
        with django_assert_num_queries(queries):
            result = selector(**window(traffic), tenant_id=tenant_id, profile_id=traffic.p1.pk)
        json.dumps(result, default=str)  # plain data, ready for a template or a JSON response


def test_the_dashboard_gets_the_same_numbers_as_the_api(api, traffic):
    body = api.get("/api/analytics/handoffs").json()
    assert selectors.handoff_summary(**window(traffic), tenant_id=traffic.tenant_a.pk) == body


def test_the_timeline_stops_at_now(traffic):
    now = dt.datetime.combine(traffic.today, dt.time(5, 30), tzinfo=dt.UTC)
    start = dt.datetime.combine(traffic.today, dt.time.min, tzinfo=dt.UTC)
    timeline = selectors.handoff_timeline(
        start=start, end=start + dt.timedelta(days=1), tenant_id=None, bucket="hour", now=now
    )
    assert [period["period"][11:16] for period in timeline] == ["00:00", "01:00", "02:00", "03:00", "04:00", "05:00"]
