"""A tenant's retention in the admin, on PostgreSQL and SQLite: the window set on the tenant's page is the one the
purge applies, a window out of range is refused naming its field, and the purges are listed read-only, tenant by
tenant."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.utils import timezone

from conversations.models import Conversation
from conversations.tests.stored_turns import conversation_of, stored_turn
from tenants.models import RetentionPurge, Tenant, TenantGrant
from tests.adminkit import add_url, change_url, changelist_url, error_messages, form_data
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]


def expired_conversation(tenant: Tenant, days: int) -> Conversation:
    when = timezone.now() - dt.timedelta(days=days)
    conversation = conversation_of(tenant, session=f"old-{tenant.slug}")
    stored_turn(conversation, "minha fatura veio alta", tool="consultar_fatura", when=when)
    Conversation.objects.filter(pk=conversation.pk).update(created_at=when, updated_at=when)
    return conversation


def test_a_window_set_on_the_tenant_page_is_the_one_the_purge_applies(staff_client, tenant, settings):
    settings.RETENTION_DAYS = 0
    old = expired_conversation(tenant, 20)
    page = staff_client.get(change_url(tenant)).content.decode()
    assert "Retention" in page and "now forever" in page

    data = form_data(staff_client.get(change_url(tenant)))
    assert data["retention_days"] == ""
    data["retention_days"] = "14"
    response = staff_client.post(change_url(tenant), data)
    assert response.status_code == 302, error_messages(response)
    call_command("purge_expired", "--tenant", tenant.slug, stdout=None)

    assert not Conversation.objects.filter(pk=old.pk).exists()
    purge = RetentionPurge.objects.get()
    listing = staff_client.get(changelist_url(RetentionPurge)).content.decode()
    assert tenant.slug in listing and "14 days" in staff_client.get(changelist_url(Tenant)).content.decode()
    record = staff_client.get(change_url(purge)).content.decode()
    assert "conversations.Message" in record and 'name="counts"' not in record  # shown, not editable
    assert staff_client.get(add_url(RetentionPurge)).status_code == 403


@pytest.mark.parametrize("days", ["-1", "36501", "soon"])
def test_a_window_out_of_range_is_refused_naming_its_field(staff_client, tenant, days):
    data = form_data(staff_client.get(change_url(tenant)))
    data["retention_days"] = days
    response = staff_client.post(change_url(tenant), data)
    assert response.status_code == 200
    assert set(response.context["adminform"].form.errors) == {"retention_days"}
    assert Tenant.objects.values_list("retention_days", flat=True).get(pk=tenant.pk) is None


def test_staff_see_the_purges_of_the_tenants_they_may_read_only(client, django_user_model):
    alpha = TenantFactory(slug="tenant_a", retention_days=7)
    beta = TenantFactory(slug="tenant_b", retention_days=7)
    for tenant in (alpha, beta):
        expired_conversation(tenant, 9)
    call_command("purge_expired", stdout=None)
    assert RetentionPurge.objects.count() == 2
    reader = django_user_model.objects.create_user("reader", "reader@example.com", "pw", is_staff=True)
    reader.user_permissions.add(Permission.objects.get(codename="view_retentionpurge"))
    TenantGrant.objects.create(tenant=beta, user=reader, read_conversations=True)
    client.force_login(reader)

    listing = client.get(changelist_url(RetentionPurge)).content.decode()

    assert "tenant_b" in listing and "tenant_a" not in listing
    assert client.get(change_url(RetentionPurge.objects.get(tenant=alpha))).status_code == 404
