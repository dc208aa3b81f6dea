"""The analytics tests' cast: the hand-built traffic (see :mod:`analytics.tests.traffic`) and session clients."""

from __future__ import annotations

import datetime as dt

import pytest
from rest_framework.test import APIClient

# Project modules are imported inside the fixtures: conftest modules load before Django is set up.


# Every figure must be the same whichever days and hours are read from the daily totals: all closed days summed (the
# usual case), none (ANALYTICS_ROLLUPS off, every row read), only some (D2 and D40 summed, and D1's hours 09:00 and
# 10:00 as though D1 were the live day; with a grace of a year no other day or hour closes, so the rest is read from
# the rows around them), or D1 as the live day at 23:30 (every earlier day summed, and D1's closed hours 00:00-22:00
# at hour grain, by the first read).
READS = ("daily_totals", "rows", "mixed", "hours")


def live_day_at(settings, moment: dt.datetime) -> None:
    """Make ``moment`` the point up to which days and hours are closed (by the grace): its day is the live one, summed
    by the hour up to ``moment``'s hour."""
    from django.utils import timezone

    settings.ANALYTICS_ROLLUP_GRACE_SECONDS = (timezone.now() - moment).total_seconds()


@pytest.fixture(params=READS)
def read_way(request, settings):
    """One of the four ways (:data:`READS`) of reading rows built by hand around ``today``: call it with ``today`` once
    the rows are stored (it sums what that way reads from the totals)."""
    from analytics.rollups import FACTS
    from analytics.services import rollup_build, rollup_hours_build

    def read(today: dt.date) -> None:
        d1 = today - dt.timedelta(days=1)
        if request.param == "rows":
            settings.ANALYTICS_ROLLUPS = False
        elif request.param == "daily_totals":
            settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
        elif request.param == "hours":
            live_day_at(settings, dt.datetime.combine(d1, dt.time(23, 30), tzinfo=dt.UTC))
        else:
            settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
            for days_ago in (2, 40):
                day = today - dt.timedelta(days=days_ago)
                assert rollup_build(first=day, last=day) == [day]
            live_day_at(settings, dt.datetime.combine(d1, dt.time(12, 30), tzinfo=dt.UTC))
            hours = [dt.datetime.combine(d1, dt.time(hour), tzinfo=dt.UTC) for hour in (9, 10)]
            assert rollup_hours_build(hours) == {(fact.name, hour) for fact in FACTS for hour in hours}
            settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 366 * 86400

    return read


@pytest.fixture
def traffic(read_way, stored_traffic):
    """The hand-built traffic, read each of the four ways (:data:`READS`)."""
    read_way(stored_traffic.today)
    return stored_traffic


@pytest.fixture
def stored_traffic(request, tenant, outsider):
    """The hand-built traffic read one way only (the settings' own): for the refusals (401, 403, 404), decided before
    any figure is read, which :func:`traffic`'s four ways would only repeat. In a module that uses
    :func:`module_traffic`, the rows it built once (``tenant`` and ``outsider`` are its tenants, given a key each);
    elsewhere built for the test."""
    from analytics.tests.traffic import build_traffic

    if "module_traffic" in request.fixturenames:
        shared = request.getfixturevalue("module_traffic")
        assert (shared.tenant_a.pk, shared.tenant_b.pk) == (tenant.pk, outsider.pk)
        return shared
    return build_traffic(tenant_a=tenant, tenant_b=outsider)


@pytest.fixture(scope="module")
def module_traffic(request, django_db_setup, django_db_blocker):
    """The hand-built traffic built once for every test of the module that uses it (``pytestmark`` with
    ``pytest.mark.usefixtures("module_traffic")``): each test sees the rows as built and nothing another test wrote
    (tests/shared_rows.py), where building them for each test took 0.3-0.5 s of a test's 0.5-0.8. Only for modules
    whose every test may see the traffic: a test that needs a store without it (its own profile ``telecom_contas``,
    its own ratings counted alone) belongs elsewhere. Its ``today`` is the day it was built: a module run across
    midnight UTC would count one day off, as a test run across it would."""
    from analytics.tests.traffic import build_traffic
    from tenants.services import tenant_get_or_create
    from tests.shared_rows import rows_shared

    def build():
        # The tenants ``tenant`` and ``outsider`` name (their keys get or create them by slug).
        tenant_a, _ = tenant_get_or_create(slug="tenant_a")
        tenant_b, _ = tenant_get_or_create(slug="outsider")
        return build_traffic(tenant_a=tenant_a, tenant_b=tenant_b)

    with rows_shared(request, django_db_blocker, build) as built:
        yield built


@pytest.fixture
def goal_traffic(tenant, outsider):
    from analytics.tests.goal_traffic import build_goal_traffic

    return build_goal_traffic(tenant_a=tenant, tenant_b=outsider)


def _session(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture
def staff_api(staff_user) -> APIClient:
    return _session(staff_user)


@pytest.fixture
def editor_api(editor) -> APIClient:
    return _session(editor)
