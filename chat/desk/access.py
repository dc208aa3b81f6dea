"""Who may act on an escalation, on every face of the desk (the desk page and socket, the escalations API).

A staff session acts where its user holds the *answer as a person* right over the escalation's tenant
(:class:`tenants.models.TenantRight`, ``ANSWER``: a tenant grant, the permission on every tenant, or a superuser);
an API key acts on its own tenant's escalations when it may answer (``can_answer``: an external contact-center
tool), naming the person who writes. Anything else is answered as if the escalation did not exist (a 404): another
tenant's escalation is indistinguishable from an unknown id.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from rest_framework import permissions
from rest_framework.request import Request

from chat.intake import principal_is_staff
from common.errors import DomainError, NotFound
from conversations.models import Escalation
from conversations.public import ERROR_ESCALATION_NOT_FOUND, DeskTenant, Person, escalation_get, person_of_user
from tenants.models import Tenant, TenantRight
from tenants.public import ApiClient, tenant_ids_with_right, tenant_right_held, tenant_right_held_anywhere

ERROR_DESK_FORBIDDEN = (
    "You may not answer as a person for any tenant yet. The desk needs the right to answer as a person, given tenant "
    'by tenant: ask an operator for a tenant grant with "Answer as person" ticked for each tenant whose customers you '
    "serve."
)
ERROR_API_FORBIDDEN = (
    "The escalations API needs an API key that may answer (create_api_key --answer) or a session whose user may "
    "answer as a person for a tenant."
)
ERROR_PERSON_REQUIRED = "Name the person who writes: person.name (and person.id, your desk's id for them)."
PERSON_NAME_MAX = 150


def may_answer(principal: Any, tenant_id: int) -> bool:
    """Whether ``principal`` (an API key's client or a logged-in user) may answer the tenant's escalations."""
    if isinstance(principal, ApiClient):
        return principal.can_answer and principal.tenant.pk == tenant_id
    return tenant_right_held(user=principal, tenant_id=tenant_id, right=TenantRight.ANSWER)


def may_answer_somewhere(principal: Any) -> bool:
    """Whether ``principal`` may answer some tenant's escalations (an answering key, or a user holding the right over
    a tenant): who may use the escalations API at all."""
    if isinstance(principal, ApiClient):
        return principal.can_answer
    return tenant_right_held_anywhere(user=principal, right=TenantRight.ANSWER)


def desk_tenant_ids(principal: Any) -> set[int] | None:
    """The tenants whose queues ``principal`` sees: an answering key's own, a user's granted ones (``None``: every
    tenant)."""
    if isinstance(principal, ApiClient):
        return {principal.tenant.pk} if principal.can_answer else set()
    return tenant_ids_with_right(user=principal, right=TenantRight.ANSWER)


def desk_tenants(principal: Any) -> dict[int, DeskTenant]:
    """The active tenants whose queues ``principal`` sees (:func:`desk_tenant_ids`), by id, in slug order. One query
    (two for a user with grants)."""
    allowed = desk_tenant_ids(principal)
    tenants = Tenant.objects.filter(is_active=True)
    if allowed is not None:
        if not allowed:
            return {}
        tenants = tenants.filter(pk__in=allowed)
    return {
        pk: DeskTenant(id=pk, slug=slug, name=name)
        for pk, slug, name in tenants.order_by("slug").values_list("pk", "slug", "name")
    }


def desk_user_reread(user_id: int) -> Any | None:
    """The user as the database holds them now (their permissions not yet read), or ``None`` once they are gone: the
    flags and rights an open desk socket was admitted with may have changed since."""
    return get_user_model()._default_manager.filter(pk=user_id).first()


def escalation_for(principal: Any, escalation_id: Any) -> Escalation:
    """The escalation ``principal`` may act on; raises :class:`NotFound` otherwise (as for an unknown id)."""
    escalation = escalation_get(escalation_id=escalation_id)
    if not may_answer(principal, escalation.tenant_id):
        raise NotFound(ERROR_ESCALATION_NOT_FOUND, fields={"escalation": [ERROR_ESCALATION_NOT_FOUND]})
    return escalation


def person_for(principal: Any, named: Any = None) -> Person:
    """Who writes: a staff user as themselves; for an API key, the person its request names
    (``{"name", "id"?}``), required (raises a 400 naming ``person.name``)."""
    if not isinstance(principal, ApiClient):
        return person_of_user(principal)
    name = named.get("name") if isinstance(named, dict) else None
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > PERSON_NAME_MAX:
        raise DomainError(ERROR_PERSON_REQUIRED, fields={"person.name": [ERROR_PERSON_REQUIRED]})
    ref = named.get("id") if isinstance(named, dict) else None
    return Person(
        name=name.strip(),
        ref=str(ref).strip()[:200] if ref not in (None, "") else f"key:{principal.key.prefix}:{name.strip()}",
    )


class IsDeskClient(permissions.BasePermission):
    """A key that may answer escalations (``can_answer``), or a staff session holding the answer right over some
    tenant: the escalations API. Which escalations then is this module's (another tenant's is a 404)."""

    message = ERROR_API_FORBIDDEN

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not isinstance(user, ApiClient) and not principal_is_staff(user):
            return False
        return may_answer_somewhere(user)
