"""Trying a profile's draft on a face: the version a client names, who may try the draft, and the turn.

Customers are served each profile's released version (``Snapshot.profiles``); its editors try the draft
(``Snapshot.drafts``) wherever they can try the live one. Trying the draft needs what the routing debug needs: a
debug key, or a session holding the debug right over the tenant (:class:`tenants.models.TenantRight`).

A turn on the draft runs the draft's profile everywhere — graph, specialists, handoffs, plan parts on workers
(:mod:`conversations.steps` carries it) — and says so: its spec's ``version`` is ``None`` (a draft), and the
stored answer's ``metadata.version`` is ``"draft"`` for a profile that has a released version.
"""

from __future__ import annotations

import enum
from dataclasses import replace
from typing import Any

from rest_framework import status

from chat.intake import TextTooLong, principal_is_staff
from common.errors import DomainError
from conversations.public import TurnInput
from routing.public import ProfileSpec, Snapshot, snapshot_current
from tenants.models import Tenant, TenantRight
from tenants.public import ApiClient, tenant_right_held


class Version(enum.StrEnum):
    """Which version of a profile a turn runs."""

    LIVE = "live"  # the released version customers are served
    DRAFT = "draft"  # what the profile's editors are changing


ERROR_UNKNOWN_VERSION = "Unknown version {version!r}: one of live, draft."
ERROR_DRAFT_FORBIDDEN = (
    "Trying the draft (version=draft) needs a debug key, or the right to use the debug routes "
    "(tenants.debug_tenant) for tenant {slug!r}; use version=live."
)
ERROR_DRAFT_DISABLED = "The draft of {agent_id!r} is disabled: there is nothing to try (version=draft)."


class DraftForbidden(DomainError):
    """The client may not try drafts for this tenant."""

    status_code = status.HTTP_403_FORBIDDEN
    code = "permission_denied"


class DraftDisabled(DomainError):
    """The profile's draft is disabled (or gone): nothing to try."""


def version_parse(value: str | None, *, field_name: str = "version") -> Version:
    """The version a client named (``None`` or ``""``: live); raises :class:`DomainError` naming the field."""
    if not value:
        return Version.LIVE
    try:
        return Version(value)
    except ValueError:
        message = ERROR_UNKNOWN_VERSION.format(version=value)
        raise DomainError(message, fields={field_name: [message]}) from None


def draft_allowed(*, principal: Any, tenant: Tenant) -> bool:
    """A debug key (of its own tenant), or a staff session holding the debug right over ``tenant``."""
    if isinstance(principal, ApiClient):
        return principal.can_debug and principal.tenant.pk == tenant.pk
    return principal_is_staff(principal) and tenant_right_held(
        user=principal, tenant_id=tenant.pk, right=TenantRight.DEBUG
    )


def draft_check(*, principal: Any, tenant: Tenant, version: Version, field_name: str = "version") -> None:
    """Raises :class:`DraftForbidden` when ``version`` is the draft and ``principal`` may not try it for ``tenant``."""
    if version is Version.DRAFT and not draft_allowed(principal=principal, tenant=tenant):
        message = ERROR_DRAFT_FORBIDDEN.format(slug=tenant.slug)
        raise DraftForbidden(message, fields={field_name: [message]})


def draft_profile(agent_id: str, current: Snapshot | None = None, *, field_name: str = "version") -> ProfileSpec:
    """The draft of ``agent_id`` as a turn runs it; raises :class:`DraftDisabled`.

    A draft unchanged since the release is the released spec itself in the snapshot; the turn gets a copy whose
    ``version`` is ``None``, so that what it stores and what a worker rebuilds say "the draft" all the same.
    """
    draft = (current or snapshot_current()).profile(agent_id, draft=True)
    if draft is None:
        message = ERROR_DRAFT_DISABLED.format(agent_id=agent_id)
        raise DraftDisabled(message, fields={field_name: [message]})
    return draft if draft.version is None else replace(draft, version=None)


def draft_apply(turn_input: TurnInput, *, field_name: str = "version") -> TurnInput:
    """``turn_input`` on its profile's draft (its size limit checked again, the draft's own); raises
    :class:`DraftDisabled` or :class:`~chat.intake.TextTooLong`."""
    draft = draft_profile(turn_input.profile.agent_id, turn_input.snapshot, field_name=field_name)
    if len(turn_input.text) > draft.max_input_chars:
        raise TextTooLong(draft.max_input_chars)
    return replace(turn_input, profile=draft)
