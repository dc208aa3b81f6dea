"""Rows built once for a module's tests (tests/shared_rows.py): each test sees them as built, never what an earlier
test of the module changed or wrote. The two tests run in this order (a file's tests stay together, in order)."""

from __future__ import annotations

import pytest

from tenants.models import Tenant
from tests.factories import TenantFactory
from tests.shared_rows import rows_shared

pytestmark = pytest.mark.django_db

BUILT_NAME = "Built once"
CHANGED_NAME = "Changed by the first test"
WRITTEN_SLUG = "written_by_the_first_test"


@pytest.fixture(scope="module")
def shared_tenant(request, django_db_setup, django_db_blocker):
    with rows_shared(request, django_db_blocker, lambda: TenantFactory(slug="shared_rows", name=BUILT_NAME).pk) as pk:
        yield pk


def test_a_test_sees_the_shared_rows_and_may_change_them(shared_tenant):
    tenant = Tenant.objects.get(pk=shared_tenant)
    assert tenant.name == BUILT_NAME
    tenant.name = CHANGED_NAME
    tenant.save(update_fields=["name"])
    TenantFactory(slug=WRITTEN_SLUG)

    assert Tenant.objects.get(pk=shared_tenant).name == CHANGED_NAME


def test_the_next_test_sees_them_as_built_and_nothing_the_first_one_wrote(shared_tenant):
    assert Tenant.objects.get(pk=shared_tenant).name == BUILT_NAME
    assert not Tenant.objects.filter(slug=WRITTEN_SLUG).exists()
