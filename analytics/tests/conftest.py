"""The analytics tests' cast: the hand-built traffic (see :mod:`analytics.tests.traffic`) and session clients."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

# Project modules are imported inside the fixtures: conftest modules load before Django is set up.


@pytest.fixture
def traffic(tenant, outsider):
    from analytics.tests.traffic import build_traffic

    return build_traffic(tenant_a=tenant, tenant_b=outsider)


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
