"""Bad filters get a 400 naming the field; nothing is counted on a guess."""

from __future__ import annotations

import datetime as dt

import pytest

from analytics.filters import (
    ERROR_BUCKET,
    ERROR_DATE,
    ERROR_DATE_RANGE,
    ERROR_DAYS,
    ERROR_DAYS_WITH_DATES,
    ERROR_HOUR_BUCKET_RANGE,
    ERROR_LIMIT,
    ERROR_RANGE_TOO_LONG,
    ERROR_START_AFTER_END,
    ERROR_UNKNOWN_KIND,
    ERROR_UNKNOWN_PROFILE,
    FIRST_DATE,
    LAST_DATE,
    analytics_filters_parse,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("path", "params", "field", "message"),
    [
        ("handoffs", {"days": "0"}, "days", ERROR_DAYS),
        ("handoffs", {"days": "367"}, "days", ERROR_DAYS),
        ("handoffs", {"days": "-3"}, "days", ERROR_DAYS),
        ("handoffs", {"days": "thirty"}, "days", ERROR_DAYS),
        ("handoffs", {"days": "³"}, "days", ERROR_DAYS),  # a digit to str.isdigit, not to int (was a 500)
        ("handoffs", {"days": "7", "start": "2026-01-01"}, "days", ERROR_DAYS_WITH_DATES),
        ("handoffs", {"start": "2026-13-01"}, "start", ERROR_DATE),
        ("handoffs", {"end": "yesterday"}, "end", ERROR_DATE),
        ("handoffs", {"start": "2026-03-02", "end": "2026-03-01"}, "start", ERROR_START_AFTER_END),
        ("handoffs", {"start": "2025-01-01", "end": "2026-01-02"}, "start", ERROR_RANGE_TOO_LONG),
        ("agents", {"profile": "nope"}, "profile", ERROR_UNKNOWN_PROFILE.format(profile="nope")),
        ("handoffs", {"kind": "teleport"}, "kind", ERROR_UNKNOWN_KIND.format(kind="teleport")),
        ("handoffs/timeline", {"kind": "handoff,teleport"}, "kind", ERROR_UNKNOWN_KIND.format(kind="teleport")),
        ("loop-stops", {"kind": "teleport"}, "kind", ERROR_UNKNOWN_KIND.format(kind="teleport")),
        ("handoffs/timeline", {"bucket": "week"}, "bucket", ERROR_BUCKET),
        ("handoffs/timeline", {"bucket": "hour", "days": "60"}, "bucket", ERROR_HOUR_BUCKET_RANGE),
        ("handoffs/recent", {"limit": "0"}, "limit", ERROR_LIMIT),
        ("handoffs/recent", {"limit": "101"}, "limit", ERROR_LIMIT),
        ("handoffs/recent", {"limit": "²"}, "limit", ERROR_LIMIT),
    ],
)
def test_a_bad_filter_gets_400_naming_the_field(api, path, params, field, message):
    response = api.get(f"/api/analytics/{path}", params)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {field: [message]}


def test_every_bad_field_is_named_at_once(api):
    response = api.get("/api/analytics/handoffs", {"days": "0", "profile": "nope", "kind": "teleport"})
    assert set(response.json()["error"]["fields"]) == {"days", "profile", "kind"}


def test_a_366_day_range_and_an_hourly_month_are_allowed(api):
    assert api.get("/api/analytics/handoffs", {"start": "2025-01-01", "end": "2026-01-01"}).status_code == 200
    assert api.get("/api/analytics/handoffs/timeline", {"bucket": "hour", "days": "31"}).status_code == 200


def test_days_means_the_last_n_utc_days_today_included(tenant_key):
    from tenants.auth import ApiClient

    user = ApiClient(tenant=tenant_key.tenant, key=tenant_key)
    filters = analytics_filters_parse(params={"days": "7"}, user=user, today=dt.date(2026, 3, 10))
    assert filters.start == dt.datetime(2026, 3, 4, tzinfo=dt.UTC)
    assert filters.end == dt.datetime(2026, 3, 11, tzinfo=dt.UTC)
    assert filters.tenant_id == tenant_key.tenant_id


def test_start_alone_runs_to_today_and_end_alone_reaches_back_thirty_days(tenant_key):
    from tenants.auth import ApiClient

    user = ApiClient(tenant=tenant_key.tenant, key=tenant_key)
    today = dt.date(2026, 3, 10)
    since = analytics_filters_parse(params={"start": "2026-03-01"}, user=user, today=today)
    assert (since.start.date(), since.end.date()) == (dt.date(2026, 3, 1), dt.date(2026, 3, 11))
    until = analytics_filters_parse(params={"end": "2026-02-28"}, user=user, today=today)
    assert (until.start.date(), until.end.date()) == (dt.date(2026, 1, 30), dt.date(2026, 3, 1))


def test_kinds_come_from_a_plain_dict_too(tenant_key):
    from tenants.auth import ApiClient

    user = ApiClient(tenant=tenant_key.tenant, key=tenant_key)
    for params in ({"kind": "return,handoff"}, {"kind": ["return", "handoff", "return"]}):
        assert analytics_filters_parse(params=params, user=user, kinds_allowed=True).kinds == ("return", "handoff")


def test_kind_is_ignored_where_an_endpoint_does_not_take_it(api):
    assert api.get("/api/analytics/agents", {"kind": "teleport"}).status_code == 200


EVERY_ROUTE = [
    "handoffs",
    "handoffs/timeline",
    "handoffs/recent",
    "loop-stops",
    "delegations",
    "agents",
    "routing-methods",
    "tools",
    "cohorts",
    "goals",
    "usage",
    "feedback",
]


@pytest.mark.parametrize(
    ("params", "fields"),
    [
        ({"end": "9999-12-31"}, ["end"]),
        ({"end": "0001-01-01"}, ["end"]),
        ({"start": "9999-12-31", "end": "9999-12-31"}, ["start", "end"]),
        ({"start": "0001-01-01", "end": "0001-01-30"}, ["start", "end"]),
        ({"start": (FIRST_DATE - dt.timedelta(days=1)).isoformat()}, ["start"]),
        ({"end": (LAST_DATE + dt.timedelta(days=1)).isoformat()}, ["end"]),
    ],
)
@pytest.mark.parametrize("path", EVERY_ROUTE)
def test_a_date_beyond_the_range_the_analytics_count_is_a_400_naming_it(api, path, params, fields):
    """The calendar's first and last days were a 500 (the window's arithmetic overflowed Python's dates)."""
    response = api.get(f"/api/analytics/{path}", params)

    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {field: [ERROR_DATE_RANGE] for field in fields}


@pytest.mark.parametrize(
    "params",
    [
        {"start": FIRST_DATE.isoformat(), "end": (FIRST_DATE + dt.timedelta(days=6)).isoformat()},
        {"start": (LAST_DATE - dt.timedelta(days=6)).isoformat(), "end": LAST_DATE.isoformat()},
        {"end": (FIRST_DATE + dt.timedelta(days=1)).isoformat()},
    ],
)
@pytest.mark.parametrize("path", EVERY_ROUTE)
def test_the_first_and_last_days_of_the_range_are_counted(api, path, params):
    response = api.get(f"/api/analytics/{path}", params)

    assert response.status_code == 200, response.content
