"""The chat page shows its Version picker only to users who may try drafts, tenant by tenant."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tenants.models import TenantGrant, TenantRight
from tests.factories import TenantFactory

pytestmark = pytest.mark.django_db


def page_for(user) -> str:
    client = Client()
    client.force_login(user)
    response = client.get("/chat/")
    assert response.status_code == 200
    return response.content.decode()


def tenant_options(html: str) -> dict[str, str]:
    """Each tenant option's slug and whether its drafts may be tried there."""
    return dict(re.findall(r'<option value="([\w-]+)" data-drafts="(true|false)"', html))


@pytest.fixture
def tenants(db):
    return TenantFactory(slug="tenant_a"), TenantFactory(slug="tenant_b")


def test_a_user_with_the_debug_right_everywhere_gets_the_version_picker(staff_user, tenants, telecom):
    html = page_for(staff_user)

    assert 'id="chat-version"' in html
    assert '<option value="live">' in html and '<option value="draft">' in html
    assert tenant_options(html) == {"tenant_a": "true", "tenant_b": "true"}
    assert 'id="chat-draft-marker"' in html


def test_a_user_who_may_only_chat_gets_no_version_picker(django_user_model, tenants, telecom):
    user = django_user_model.objects.create_user("agent", "agent@example.com", "agent-password", is_staff=True)
    TenantGrant.objects.create(tenant=tenants[0], user=user, **{TenantRight.ACT.value: True})

    html = page_for(user)

    assert 'id="chat-version"' not in html
    assert tenant_options(html) == {"tenant_a": "false"}


def test_the_draft_is_offered_only_for_the_tenants_whose_debug_right_the_user_holds(
    django_user_model, tenants, telecom
):
    user = django_user_model.objects.create_user("agent", "agent@example.com", "agent-password", is_staff=True)
    TenantGrant.objects.create(tenant=tenants[0], user=user, **{TenantRight.ACT.value: True})
    TenantGrant.objects.create(
        tenant=tenants[1], user=user, **{TenantRight.ACT.value: True, TenantRight.DEBUG.value: True}
    )

    html = page_for(user)

    assert 'id="chat-version"' in html
    assert tenant_options(html) == {"tenant_a": "false", "tenant_b": "true"}
