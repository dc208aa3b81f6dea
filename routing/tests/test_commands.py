"""Management commands of the routing app (other than the YAML ones)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tenants.auth import key_hash
from tenants.models import ApiKey, Tenant

pytestmark = pytest.mark.django_db


def create_key(*args: str) -> str:
    out, err = StringIO(), StringIO()
    call_command("create_api_key", *args, stdout=out, stderr=err)
    return out.getvalue().strip().splitlines()[-1]


def test_create_api_key_creates_the_tenant_and_prints_the_key_alone_on_the_last_line():
    raw = create_key("--tenant", "tenant_new")

    tenant = Tenant.objects.get(slug="tenant_new")
    key = ApiKey.objects.get(tenant=tenant)
    assert key.key_hash == key_hash(raw)
    assert raw.startswith(f"ark_{key.prefix}_")
    assert not key.is_debug


def test_create_api_key_reuses_an_existing_tenant_and_can_make_debug_keys():
    create_key("--tenant", "tenant_a")
    raw = create_key("--tenant", "tenant_a", "--debug")

    assert Tenant.objects.filter(slug="tenant_a").count() == 1
    assert ApiKey.objects.get(key_hash=key_hash(raw)).is_debug


def test_the_raw_key_is_never_stored():
    raw = create_key("--tenant", "tenant_a")
    assert not ApiKey.objects.filter(key_hash=raw).exists()
    assert raw not in str(list(ApiKey.objects.values()))


def test_a_new_key_authenticates_against_the_api(client):
    raw = create_key("--tenant", "tenant_a")
    assert client.get("/api/agents", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200


@pytest.mark.parametrize("slug", ["", "tenant a", "tenant/a"])
def test_create_api_key_refuses_a_tenant_that_is_not_a_slug(slug):
    with pytest.raises(CommandError):
        call_command("create_api_key", "--tenant", slug, stdout=StringIO(), stderr=StringIO())
