"""The analytics dashboard at ``/analytics/``: a page inside the admin's frame that draws the analytics API.

The page holds no numbers of its own. Its script (``analytics/static/analytics/dashboard.js``) reads the
filters from the query string, calls the ``/api/analytics/`` endpoints with the same session and the same
parameters, and draws each answer as a chart with its figures beside it. So the page, the API and the
browser test all read one source.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.mixins import PermissionRequiredMixin
from django.http import HttpRequest
from django.urls import reverse
from django.views.generic import TemplateView

from agents.models import AgentProfile
from analytics.filters import ANALYTICS_PERMISSION, analytics_tenant_scope
from analytics.rollouts import can_view_rollouts
from routing.models import RoutingVersion
from tenants.models import Tenant
from tenants.public import request_tenant_rights

PERMISSION = ANALYTICS_PERMISSION
DAY_PRESETS = (7, 30, 90)
DEFAULT_DAYS = 30


class DashboardView(PermissionRequiredMixin, TemplateView):
    """Staff with ``analytics.view_analytics`` (superusers have it) see every tenant's analytics; staff whose tenant
    grants let them read some tenants' conversations see those tenants' (:func:`analytics_tenant_scope`).

    Anonymous visitors are sent to the admin login (``LOGIN_URL``); a logged-in user who may read no tenant, or
    who is not staff, gets 403.
    """

    template_name = "analytics/dashboard.html"
    permission_required = PERMISSION

    def has_permission(self) -> bool:
        return (
            self.request.user.is_staff
            and analytics_tenant_scope(self.request.user, rights=request_tenant_rights(self.request)) != frozenset()
        )

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        request: HttpRequest = self.request
        readable = analytics_tenant_scope(request.user, rights=request_tenant_rights(request))
        tenants = Tenant.objects.order_by("slug")
        if readable is not None:
            tenants = tenants.filter(pk__in=readable)
        return {
            **super().get_context_data(**kwargs),
            **admin.site.each_context(request),
            "title": "Handoff analytics",
            "is_nav_sidebar_enabled": False,  # the charts need the width
            # The script appends each endpoint's path (handoffs, handoffs/timeline, agents, ...) to this.
            "api_base": reverse("analytics-handoffs").removesuffix("handoffs"),
            "day_presets": DAY_PRESETS,
            "default_days": DEFAULT_DAYS,
            "profiles": list(AgentProfile.objects.order_by("agent_id").values_list("agent_id", "name")),
            # The tenants the user may read, and only those: every one, or those a grant names.
            "tenants": list(tenants.values_list("slug", "name")),
            "every_tenant": readable is None,
            "may_view_rollouts": can_view_rollouts(request.user),
            # Published version numbers (per profile: v2 of one profile is not v2 of another), newest first.
            "versions": list(RoutingVersion.objects.order_by("-number").values_list("number", flat=True).distinct()),
            **panel_links(request),
        }


def panel_links(request: HttpRequest) -> dict[str, Any]:
    """Where the ratings and rollout panels may send the user: each link only for a user it opens for (the ratings
    inbox and conversation pages are the admin's, which keep to the user's tenants); the rollout section only for
    those who may read rollout plans. Empty: not shown."""
    user = request.user
    return {
        "ratings_inbox_url": (
            reverse("admin:conversations_messagefeedback_changelist")
            if user.has_perm("conversations.view_messagefeedback")
            else ""
        ),
        "ratings_conversation_url": (
            reverse("admin:conversations_conversation_change", args=[0])
            if user.has_perm("conversations.view_conversation")
            else ""
        ),
        "rollouts_shown": can_view_rollouts(user),
    }
