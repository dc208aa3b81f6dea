"""The desk socket's rights are checked again on every event it would forward, not only on the frames the person sends:
a person whose right to answer for a tenant is taken away — the grant's box cleared (through the admin's save or a
bulk update), the grant deleted, a group left, the every-tenant permission removed, the user deactivated or no longer
staff — hears nothing more of that tenant's queue or customers on a socket opened before."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.consumers import CLOSE_FORBIDDEN, CLOSE_UNAUTHORIZED
from chat.desk.access import ERROR_DESK_FORBIDDEN, desk_tenants
from chat.desk.socket import CLOSE_RIGHTS_CHANGED, ERROR_DESK_LOGIN, ERROR_DESK_RIGHTS_CHANGED, Desk
from chat.tests.test_desk_socket import desk_for, next_of, waiting
from conversations.desk.escalations import person_of_user
from tenants.models import TenantGrant
from tests.streaming import run

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "segredo do cliente depois da revogação"
HEARD_SECONDS = 3.0  # how long a socket is listened to for what it should not say (it closes long before)


def _box_cleared(user, tenant) -> None:
    grant = TenantGrant.objects.get(user=user, tenant=tenant)
    grant.answer_as_person = False
    grant.save()


def _box_cleared_in_bulk(user, tenant) -> None:
    TenantGrant.objects.filter(user=user, tenant=tenant).update(answer_as_person=False)


def _grant_deleted(user, tenant) -> None:
    TenantGrant.objects.filter(user=user, tenant=tenant).delete()


def _deactivated(user, tenant) -> None:
    user.is_active = False
    user.save()


def _staff_status_removed(user, tenant) -> None:
    user.is_staff = False
    user.save()


def _through_a_group(user, tenant) -> None:
    group = Group.objects.create(name="Desk of tenant_a")
    TenantGrant.objects.filter(user=user).delete()
    TenantGrant.objects.create(group=group, tenant=tenant, answer_as_person=True)
    user.groups.add(group)


def _group_left(user, tenant) -> None:
    user.groups.clear()


def _on_every_tenant(user, tenant) -> None:
    TenantGrant.objects.filter(user=user).delete()
    user.user_permissions.add(Permission.objects.get(codename="answer_as_person", content_type__app_label="tenants"))


def _permission_removed(user, tenant) -> None:
    user.user_permissions.clear()


# How the right is held, how it is taken away, and the refusal the socket closes with.
TAKEN_AWAY = {
    "the grant's box cleared": (None, _box_cleared, CLOSE_FORBIDDEN),
    "the grant's box cleared in bulk": (None, _box_cleared_in_bulk, CLOSE_FORBIDDEN),
    "the grant deleted": (None, _grant_deleted, CLOSE_FORBIDDEN),
    "the group holding the grant left": (_through_a_group, _group_left, CLOSE_FORBIDDEN),
    "the every-tenant permission removed": (_on_every_tenant, _permission_removed, CLOSE_FORBIDDEN),
    "the user deactivated": (None, _deactivated, CLOSE_UNAUTHORIZED),
    "the staff status removed": (None, _staff_status_removed, CLOSE_UNAUTHORIZED),
}


async def heard_until_closed(socket) -> tuple[list[dict], int | None]:
    """The events a socket sends until it closes (its close code) or stays quiet for :data:`HEARD_SECONDS` (None)."""
    heard = list(socket.events)
    while True:
        try:
            output = await socket.receive_output(timeout=HEARD_SECONDS)
        except TimeoutError:
            return heard, None
        if output["type"] == "websocket.close":
            return heard, output["code"]
        heard.append(json.loads(output["text"]))


@pytest.mark.parametrize("held, take_away, code", TAKEN_AWAY.values(), ids=TAKEN_AWAY.keys())
def test_an_open_desk_hears_nothing_more_of_a_tenant_once_the_right_is_taken_away(
    held, take_away, code, desk_person, tenant, telecom, api
):
    if held is not None:
        held(desk_person, tenant)

    def customer(text: str, session: str) -> dict:
        body = {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}}
        return api.post("/api/gateway/message", body, format="json").json()

    async def go():
        desk = await desk_for(desk_person)
        first = await sync_to_async(customer)("quero falar com um atendente humano", "revoked-1")
        await next_of(desk, "queued")
        await sync_to_async(take_away)(desk_person, tenant)
        await sync_to_async(customer)(SECRET, "revoked-1")  # the conversation waits for a person: a desk event
        later = await sync_to_async(customer)("quero falar com um atendente humano", "revoked-2")
        heard, closed = await heard_until_closed(desk)
        return first, later, heard, closed

    first, later, heard, closed = run(go())

    assert first["metadata"]["escalation"] and later["metadata"]["escalation"]  # both reached the tenant's desks
    told = repr(heard)
    assert SECRET not in told and later["metadata"]["escalation"]["id"] not in told
    assert closed == code
    expected = ERROR_DESK_LOGIN if code == CLOSE_UNAUTHORIZED else ERROR_DESK_FORBIDDEN
    assert heard[-1]["type"] == "error" and heard[-1]["error"]["message"] == expected


def test_a_desk_that_loses_one_of_its_tenants_closes_to_reopen_on_the_others(desk_person, tenant, outsider, telecom):
    TenantGrant.objects.create(user=desk_person, tenant=outsider, answer_as_person=True)

    async def go():
        desk = await desk_for(desk_person)
        await sync_to_async(_box_cleared)(desk_person, tenant)
        theirs = await waiting(tenant=tenant, profile=telecom, session="no-longer-hers")
        heard, closed = await heard_until_closed(desk)
        again = await desk_for(desk_person)
        kept = await waiting(tenant=outsider, profile=telecom, session="still-hers")
        queued = await next_of(again, "queued")
        await again.disconnect()
        return desk.snapshot, theirs, heard, closed, again.snapshot, kept, queued

    snapshot, theirs, heard, closed, reopened, kept, queued = run(go())

    assert [t["slug"] for t in snapshot["tenants"]] == sorted([tenant.slug, outsider.slug])
    assert str(theirs.pk) not in repr(heard)
    assert closed == CLOSE_RIGHTS_CHANGED
    assert heard[-1]["error"] == {"code": "rights_changed", "message": ERROR_DESK_RIGHTS_CHANGED, "fields": {}}
    assert [t["slug"] for t in reopened["tenants"]] == [outsider.slug]
    assert queued["escalation"]["id"] == str(kept.pk)


def test_the_check_on_each_event_reads_the_rights_only_when_they_may_have_changed(desk_person, tenant):
    desk = Desk(user=desk_person, person=person_of_user(desk_person), tenants=desk_tenants(desk_person))
    assert desk.refusal() is None  # the rights read once

    with CaptureQueriesContext(connection) as unchanged:
        for _ in range(50):
            assert desk.refusal() is None
    _box_cleared(desk_person, tenant)
    with CaptureQueriesContext(connection) as changed:
        refusal = desk.refusal()

    assert len(unchanged) == 0  # fifty events: one cache read each, no query
    assert 0 < len(changed) <= 5  # the user, their permissions and grants, the tenants
    assert refusal is not None and refusal.close_code == CLOSE_FORBIDDEN
