"""The analytics tests' cast: the hand-built traffic (see :mod:`analytics.tests.traffic`) and session clients."""

from __future__ import annotations

import datetime as dt

import pytest
from rest_framework.test import APIClient

# Project modules are imported inside the fixtures: conftest modules load before Django is set up.


# Every figure must be the same whichever days are read from the daily totals: all closed days summed (the
# usual case), none (ANALYTICS_ROLLUPS off, every row read), or only some (D2 and D40 summed; with a grace of a
# year no other day closes, so the rest is read from the rows around them).
READS = ("daily_totals", "rows", "mixed")


@pytest.fixture(params=READS)
def traffic(request, stored_traffic, settings):
    """The hand-built traffic, read each of the three ways (:data:`READS`)."""
    from analytics.services import rollup_build

    built = stored_traffic
    if request.param == "rows":
        settings.ANALYTICS_ROLLUPS = False
    elif request.param == "daily_totals":
        settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
    else:
        settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 0
        for days_ago in (2, 40):
            day = built.today - dt.timedelta(days=days_ago)
            assert rollup_build(first=day, last=day) == [day]
        settings.ANALYTICS_ROLLUP_GRACE_SECONDS = 366 * 86400
    return built


@pytest.fixture
def stored_traffic(tenant, outsider):
    """The hand-built traffic read one way only (the settings' own): for the refusals (401, 403, 404), decided before
    any figure is read, which :func:`traffic`'s three ways would only repeat."""
    from analytics.tests.traffic import build_traffic

    return build_traffic(tenant_a=tenant, tenant_b=outsider)


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
