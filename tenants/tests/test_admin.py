"""The tenants admin: a new API key shown once in its own response, and the staff rights over a tenant.

Every page's smoke test (list, search, add, change) is in ``tests/test_admin_smoke.py``.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from tenants.auth import key_hash
from tenants.models import ApiKey, Tenant, TenantGrant, TenantRight
from tenants.selectors import tenant_ids_with_right, tenant_right_held, tenant_right_held_anywhere
from tests.adminkit import add_url, change_url, error_messages, form_data
from tests.factories import TenantFactory

pytestmark = pytest.mark.django_db


def test_a_new_api_key_travels_in_no_cookie_and_in_no_session(staff_client, tenant):
    data = form_data(staff_client.get(add_url(ApiKey)))
    data.update({"tenant": tenant.pk, "name": "website chat"})
    response = staff_client.post(add_url(ApiKey), data)

    raw = response.context["raw_key"]
    assert key_hash(raw) == ApiKey.objects.get(name="website chat").key_hash
    assert raw in response.content.decode()
    assert "no-store" in response["Cache-Control"]
    assert all(raw not in morsel.value for morsel in response.cookies.values())
    assert "messages" not in response.cookies  # no flash message at all: nothing to decode later
    assert raw not in str(dict(staff_client.session))
    assert raw not in staff_client.get(change_url(ApiKey.objects.get(name="website chat"))).content.decode()


def test_the_tenant_page_edits_its_grants_inline(staff_client, tenant, editor):
    data = form_data(staff_client.get(change_url(tenant)))
    data.update(
        {
            "grants-TOTAL_FORMS": "1",
            "grants-0-user": str(editor.pk),
            "grants-0-read_conversations": "on",
        }
    )
    response = staff_client.post(change_url(tenant), data)
    assert response.status_code == 302, error_messages(response)
    grant = TenantGrant.objects.get(tenant=tenant)
    assert (grant.user, grant.read_conversations, grant.act_for_tenant) == (editor, True, False)


def test_a_grant_is_for_a_user_or_a_group_not_both_nor_neither(staff_client, tenant, editor):
    data = form_data(staff_client.get(add_url(TenantGrant)))
    data.update({"tenant": tenant.pk})
    assert "A grant is for a user or for a group (exactly one)." in error_messages(
        staff_client.post(add_url(TenantGrant), data)
    )
    group = Group.objects.create(name="Support")
    data.update({"user": editor.pk, "group": group.pk})
    assert staff_client.post(add_url(TenantGrant), data).status_code == 200
    assert not TenantGrant.objects.exists()


def test_a_user_has_one_grant_per_tenant(staff_client, tenant, editor):
    TenantGrant.objects.create(tenant=tenant, user=editor, read_conversations=True)
    data = form_data(staff_client.get(add_url(TenantGrant)))
    data.update({"tenant": tenant.pk, "user": editor.pk, "act_for_tenant": "on"})
    response = staff_client.post(add_url(TenantGrant), data)
    assert response.status_code == 200 and error_messages(response)
    assert TenantGrant.objects.count() == 1


def test_an_editor_may_not_open_the_grants(editor_client, tenant):
    assert editor_client.get("/admin/tenants/tenantgrant/").status_code == 403


# -- the selectors ------------------------------------------------------------------------------------------------


def test_a_routing_editor_holds_no_right_over_any_tenant(editor, tenant):
    for right in TenantRight:
        assert not tenant_right_held(user=editor, tenant_id=tenant.pk, right=right)
        assert not tenant_right_held_anywhere(user=editor, right=right)
        assert tenant_ids_with_right(user=editor, right=right) == set()


def test_a_superuser_holds_every_right_over_every_tenant(staff_user, tenant):
    for right in TenantRight:
        assert tenant_right_held(user=staff_user, tenant_id=tenant.pk, right=right)
        assert tenant_ids_with_right(user=staff_user, right=right) is None


def test_grants_of_the_user_and_of_its_groups_add_up_tenant_by_tenant(django_user_model):
    a, b, c = TenantFactory(slug="a"), TenantFactory(slug="b"), TenantFactory(slug="c")
    user = django_user_model.objects.create_user("agent", is_staff=True)
    group = Group.objects.create(name="desk")
    user.groups.add(group)
    TenantGrant.objects.create(tenant=a, user=user, read_conversations=True)
    TenantGrant.objects.create(tenant=b, group=group, read_conversations=True, act_for_tenant=True)
    TenantGrant.objects.create(tenant=c, group=Group.objects.create(name="other"), read_conversations=True)

    assert tenant_ids_with_right(user=user, right=TenantRight.READ) == {a.pk, b.pk}
    assert tenant_ids_with_right(user=user, right=TenantRight.ACT) == {b.pk}
    assert not tenant_right_held(user=user, tenant_id=c.pk, right=TenantRight.READ)


def test_the_permission_on_tenant_holds_the_right_over_every_tenant(django_user_model):
    user = django_user_model.objects.create_user("auditor", is_staff=True)
    user.user_permissions.add(Permission.objects.get(content_type__app_label="tenants", codename="debug_tenant"))
    assert tenant_ids_with_right(user=user, right=TenantRight.DEBUG) is None
    assert tenant_ids_with_right(user=user, right=TenantRight.READ) == set()


def test_an_inactive_user_or_tenant_gives_no_right(django_user_model):
    gone = TenantFactory(slug="gone", is_active=False)
    user = django_user_model.objects.create_user("agent", is_staff=True)
    TenantGrant.objects.create(tenant=gone, user=user, act_for_tenant=True)
    assert not tenant_right_held_anywhere(user=user, right=TenantRight.ACT)
    user.is_active = False
    TenantGrant.objects.create(tenant=Tenant.objects.create(slug="live"), user=user, act_for_tenant=True)
    assert not tenant_right_held_anywhere(user=user, right=TenantRight.ACT)


def granted_desk_person(django_user_model, tenant):
    """Staff who may read the tenant's conversations, chat as it and answer as a person there, by a grant."""
    user = django_user_model.objects.create_user("desk-person", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="conversations", codename="view_conversation")
    )
    TenantGrant.objects.create(
        tenant=tenant, user=user, read_conversations=True, act_for_tenant=True, answer_as_person=True
    )
    return user


def grant_reads(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return sum(1 for query in queries.captured_queries if TenantGrant._meta.db_table in query["sql"])


def test_an_admin_page_reads_its_users_tenant_grants_once(client, django_user_model, tenant):
    # The list keeps the tenants the user may read, the header asks whether to link the chat page, the desk and
    # the analytics: one read of the grants answers them all.
    client.force_login(granted_desk_person(django_user_model, tenant))
    page = reverse("admin:conversations_conversation_changelist")
    assert grant_reads(client, page) == 1
    html = client.get(page).content.decode()
    assert all(f'href="{reverse(name)}"' in html for name in ("chat", "desk", "analytics-dashboard"))


def test_a_grant_taken_back_holds_from_the_next_request(client, django_user_model, tenant):
    user = granted_desk_person(django_user_model, tenant)
    client.force_login(user)
    page = reverse("admin:conversations_conversation_changelist")
    desk_link = f'href="{reverse("desk")}"'
    assert desk_link in client.get(page).content.decode()

    TenantGrant.objects.filter(user=user).update(answer_as_person=False)
    assert desk_link not in client.get(page).content.decode()


# -- message limits ---------------------------------------------------------------------------------------------


def test_a_message_limit_set_on_the_tenant_page_applies_to_the_next_message(staff_client, tenant_key, telecom):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant_key.raw}")
    body = {"agent_id": "telecom_contas", "payload": {"text": "oi", "session_id": "admin-set"}}
    assert api.post("/api/gateway/message", body, format="json").status_code == 200  # this process knows the key

    data = form_data(staff_client.get(change_url(tenant_key.tenant)))
    assert (data["message_rate_per_key"], data["message_rate_per_session"]) == ("", "")  # blank: the settings
    data["message_rate_per_session"] = "1/day"
    response = staff_client.post(change_url(tenant_key.tenant), data)
    assert response.status_code == 302, error_messages(response)

    statuses = [api.post("/api/gateway/message", body, format="json").status_code for _ in range(2)]
    assert statuses == [200, 429]  # a count of its own per rate: one message under the new one, then refused


def test_a_message_limit_that_is_no_rate_is_refused_naming_its_field(staff_client, tenant):
    data = form_data(staff_client.get(change_url(tenant)))
    data.update({"message_rate_per_key": "lots", "message_rate_per_session": "5/fortnight"})
    response = staff_client.post(change_url(tenant), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert set(errors) == {"message_rate_per_key", "message_rate_per_session"}
    assert Tenant.objects.values_list("message_rate_per_key", flat=True).get(pk=tenant.pk) == ""
