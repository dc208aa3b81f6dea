"""Who may use the chat API's guarded routes: the debug routes and the multi-agent preview."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from chat.intake import preview_allowed, principal_is_staff
from common.errors import ERROR_DEBUG_FORBIDDEN, ERROR_PREVIEW_FORBIDDEN
from tenants.auth import ApiClient


class IsDebugClient(permissions.BasePermission):
    """A key created with ``--debug``, or a staff user's session."""

    message = ERROR_DEBUG_FORBIDDEN

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        return user.can_debug if isinstance(user, ApiClient) else principal_is_staff(user)


class IsPreviewClient(permissions.BasePermission):
    """A key allowed to preview the multi-agent graph, or a staff user's session."""

    message = ERROR_PREVIEW_FORBIDDEN

    def has_permission(self, request: Request, view: Any) -> bool:
        return preview_allowed(request.user)
