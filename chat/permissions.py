"""Who may use the chat API's guarded routes: the debug routes and the multi-agent preview (the escalations API's is
the desk's: :class:`chat.desk.access.IsDeskClient`)."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from chat.intake import preview_allowed, principal_is_staff
from common.errors import ERROR_DEBUG_FORBIDDEN, ERROR_PREVIEW_FORBIDDEN
from tenants.models import TenantRight
from tenants.public import ApiClient, tenant_right_held_anywhere


class IsDebugClient(permissions.BasePermission):
    """A key created with ``--debug``, or a staff session holding the debug right over some tenant.

    MCP tools belong to no tenant: a session with the debug right over one tenant may list and call them, as that
    tenant's debug key may. The routing debug then needs the right over the tenant it names (:mod:`chat.intake`).
    """

    message = ERROR_DEBUG_FORBIDDEN

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if isinstance(user, ApiClient):
            return user.can_debug
        return principal_is_staff(user) and tenant_right_held_anywhere(user=user, right=TenantRight.DEBUG)


class IsPreviewClient(permissions.BasePermission):
    """A key allowed to preview the multi-agent graph, or a staff session that may act for some tenant."""

    message = ERROR_PREVIEW_FORBIDDEN

    def has_permission(self, request: Request, view: Any) -> bool:
        return preview_allowed(request.user)
