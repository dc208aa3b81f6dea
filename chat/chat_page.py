"""The chat page at ``/chat/``: staff talk to a profile's agents for a tenant, over the WebSocket chat.

The page carries the pickers (profile, tenant: those the user may act for, route) and an empty transcript;
``chat/static/chat/chat.js`` opens ``/ws/chat/<agent_id>/<session_id>/?tenant=<slug>&route=<route>`` with the
staff session's cookie and draws the turn's events (:mod:`common.events`) as they arrive: which agent answers,
moves between agents, tool calls, the answer's tokens, then the final answer of ``done``. A goal-mode profile's
turn (seed 002) also shows the goal and entities read, the plan's steps as they run, and a clarification's
candidates as buttons that answer it. The profile picker names each profile's routing mode.

Users who may try drafts (the debug right over a tenant, as ``/api/debug/route`` asks) also get a Version picker:
Live, or the profile's Draft (``?version=draft``, :mod:`chat.drafts`). Each tenant option says whether its drafts
may be tried there; switching the version starts a new conversation, and while the draft is tried the transcript
carries a "Draft" marker.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from routing import snapshot
from tenants.models import TenantRight
from tenants.selectors import tenant_choices, tenant_ids_with_right

ERROR_CHAT_FORBIDDEN = "The chat page needs the right to chat as a tenant (tenants.act_for_tenant)."


@staff_member_required
def chat_page(request: HttpRequest) -> HttpResponse:
    """Staff who may act for some tenant, and only those tenants in the picker; anonymous visitors (and users who
    are not staff) are sent to the admin login, other staff get 403."""
    allowed = tenant_ids_with_right(user=request.user, right=TenantRight.ACT)
    tenants = tenant_choices(tenant_ids=allowed)
    if not tenants and allowed is not None:
        raise PermissionDenied(ERROR_CHAT_FORBIDDEN)
    debuggable = tenant_ids_with_right(user=request.user, right=TenantRight.DEBUG)  # None: every tenant
    drafts = {slug for slug, _ in (tenants if debuggable is None else tenant_choices(tenant_ids=debuggable))}
    profiles = sorted(snapshot.current().profiles.values(), key=lambda profile: profile.agent_id)
    context = {
        **admin.site.each_context(request),
        "title": "Chat",
        "is_nav_sidebar_enabled": False,
        "profiles": [(profile.agent_id, profile.name, profile.effective_mode) for profile in profiles],
        "tenants": tenants,
        "draft_tenants": drafts,  # the slugs whose drafts the user may try (the debug right)
        "may_try_drafts": any(slug in drafts for slug, _ in tenants),
    }
    return render(request, "chat/chat.html", context)
