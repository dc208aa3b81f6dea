"""The chat page at ``/chat/``: staff talk to a profile's agents for a tenant, over the WebSocket chat.

The page carries the pickers (profile, tenant: those the user may act for, route) and an empty transcript;
``chat/static/chat/chat.js`` opens ``/ws/chat/<agent_id>/<session_id>/?tenant=<slug>&route=<route>`` with the
staff session's cookie and draws the turn's events (:mod:`common.events`) as they arrive: which agent answers,
moves between agents, tool calls, the answer's tokens, then the final answer of ``done``. A goal-mode profile's
turn also shows the goal and entities read, the plan's steps as they run, and a clarification's
candidates as buttons that answer it. The profile picker names each profile's routing mode.

Users who may try drafts (the debug right over a tenant, as ``/api/debug/route`` asks) also get a Version picker:
Live, or the profile's Draft (``?version=draft``, :mod:`chat.drafts`). Each tenant option says whether its drafts
may be tried there; switching the version starts a new conversation, and while the draft is tried the transcript
carries a "Draft" marker.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from routing.public import snapshot_current
from tenants.models import TenantRight
from tenants.public import TenantRights, request_tenant_rights, tenant_choices

ERROR_CHAT_FORBIDDEN = (
    "You may not chat as any tenant yet. Chatting here needs the right to chat as a tenant, given tenant by tenant: "
    'ask an operator for a tenant grant with "Act for tenant" ticked for each tenant you work for.'
)
ERROR_TENANT_NOT_ALLOWED = (
    "You may not chat as the tenant {slug}: it is not one of the tenants a grant of yours lets you act for. Pick "
    'one of yours below, or ask an operator for a tenant grant with "Act for tenant" ticked for it.'
)


def chat_may_use(user: Any, *, rights: TenantRights | None = None) -> bool:
    """Whether ``user`` may use the chat page (and so is shown links to it): active staff who may act for at least
    one active tenant."""
    return bool(
        getattr(user, "is_active", False)
        and getattr(user, "is_staff", False)
        and (rights or TenantRights(user=user)).anywhere(TenantRight.ACT)
    )


@staff_member_required
def chat_page(request: HttpRequest) -> HttpResponse:
    """Staff who may act for some tenant, and only those tenants in the picker; anonymous visitors (and users who
    are not staff) are sent to the admin login, other staff get a 403 page that says which right is missing.

    ``?profile=<agent_id>&tenant=<slug>`` picks a profile and a tenant (a link that opens the chat for them); a
    tenant the user may not act for is named in words above the pickers, like an unknown one."""
    rights = request_tenant_rights(request)  # the page's header asks too
    allowed = rights.ids(TenantRight.ACT)
    tenants = tenant_choices(tenant_ids=allowed)
    base = {**admin.site.each_context(request), "title": "Chat", "is_nav_sidebar_enabled": False}
    if not tenants and allowed is not None:
        return render(request, "chat/chat_forbidden.html", {**base, "reason": ERROR_CHAT_FORBIDDEN}, status=403)
    debuggable = rights.ids(TenantRight.DEBUG)  # None: every tenant
    drafts = {slug for slug, _ in (tenants if debuggable is None else tenant_choices(tenant_ids=debuggable))}
    profiles = sorted(snapshot_current().profiles.values(), key=lambda profile: profile.agent_id)
    asked_tenant = (request.GET.get("tenant") or "").strip()
    tenant_refused = asked_tenant and asked_tenant not in {slug for slug, _ in tenants}
    context = {
        **base,
        "profiles": [(profile.agent_id, profile.name, profile.effective_mode) for profile in profiles],
        "tenants": tenants,
        "draft_tenants": drafts,  # the slugs whose drafts the user may try (the debug right)
        "may_try_drafts": any(slug in drafts for slug, _ in tenants),
        "picked_profile": (request.GET.get("profile") or "").strip(),
        "picked_tenant": "" if tenant_refused else asked_tenant,
        "tenant_refused": ERROR_TENANT_NOT_ALLOWED.format(slug=asked_tenant) if tenant_refused else "",
    }
    return render(request, "chat/chat.html", context)
