"""The impact preview in the admin: /admin/conversations/conversation/impact/?profile=<agent_id>&days=7.

Before publishing, an editor sees how many of the profile's real user messages of the last days the draft would
route differently from the live version, grouped by old → new intent, each sample opening its conversation. For
staff who may view conversations and the routing (``conversations.view_conversation`` and
``routing.view_intent``); the messages replayed are those of the tenants the user may read (a tenant grant's "read
conversations"; every tenant for superusers and holders of ``tenants.read_conversations``). A page of the
conversation admin, added through its extension point (:class:`ImpactPage`); linked from the conversation list's
object tools and the profile's page (``{% impact_preview_link %}``, :mod:`releases.templatetags.impact_preview`)."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse

from agents.models import AgentProfile
from common.adminkit import AdminExtension, admin_extend
from conversations.models import Conversation
from releases.impact import impact_preview
from tenants.models import TenantRight
from tenants.public import tenant_ids_with_right

PERMISSIONS = ("conversations.view_conversation", "routing.view_intent")
DAYS_DEFAULT = 7
DAYS_MAX = 90
NO_TENANT_READ = (
    "You may read no tenant's conversations, so there is nothing to replay: the preview uses the messages of the "
    'tenants you may read. An operator gives you that with a tenant grant that has "Read conversations" ticked.'
)


def impact_may_view(user: Any) -> bool:
    """Staff with ``conversations.view_conversation`` and ``routing.view_intent``."""
    return bool(user.is_active and user.is_staff and user.has_perms(PERMISSIONS))


def _days(value: str | None) -> tuple[int, str]:
    if not value:
        return DAYS_DEFAULT, ""
    try:
        days = int(value)
    except ValueError:
        return DAYS_DEFAULT, "Days must be a whole number."
    if not 1 <= days <= DAYS_MAX:
        return DAYS_DEFAULT, f"Days must be between 1 and {DAYS_MAX}."
    return days, ""


def impact_view(model_admin: ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    if not impact_may_view(request.user):
        raise PermissionDenied
    agent_id = (request.GET.get("profile") or "").strip()
    days, error = _days(request.GET.get("days"))
    readable = tenant_ids_with_right(user=request.user, right=TenantRight.READ)  # None: every tenant
    result: dict[str, Any] | None = None
    if agent_id and not error and readable != set():
        if not AgentProfile.objects.filter(agent_id=agent_id).exists():
            error = f"No profile {agent_id!r}."
        else:
            result = impact_preview(agent_id=agent_id, days=days, tenant_ids=readable)
            for group in result["groups"]:
                for sample in group["samples"]:
                    sample["url"] = reverse("admin:conversations_conversation_change", args=[sample["conversation_id"]])
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": Conversation._meta,
        "title": "Impact preview",
        "changelist_url": reverse("admin:conversations_conversation_changelist"),
        "profiles": list(AgentProfile.objects.order_by("agent_id").values_list("agent_id", flat=True)),
        "agent_id": agent_id,
        "days": days,
        "error": error,
        "no_tenant": NO_TENANT_READ if readable == set() else "",
        "result": result,
        "share_percent": f"{result['share_changed']:.1%}" if result else "",
        "has_view_permission": model_admin.has_view_permission(request),
    }
    return TemplateResponse(request, "admin/conversations/impact.html", context)


class ImpactPage(AdminExtension):
    """The impact preview, a page of the conversation admin (the engine's)."""

    def urls(self, model_admin: ModelAdmin[Any]) -> list[Any]:
        view = model_admin.admin_site.admin_view(partial(impact_view, model_admin))
        return [path("impact/", view, name="conversations_conversation_impact")]


admin_extend(Conversation, ImpactPage())
