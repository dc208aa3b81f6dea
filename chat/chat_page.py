"""The chat page at ``/chat/``: staff talk to a profile's agents for a tenant, over the WebSocket chat.

The page carries the pickers (profile, tenant, route) and an empty transcript; ``chat/static/chat/chat.js`` opens
``/ws/chat/<agent_id>/<session_id>/?tenant=<slug>&route=<route>`` with the staff session's cookie and draws the turn's
events (:mod:`common.events`) as they arrive: which agent answers, moves between agents, tool calls, the
answer's tokens, then the final answer of ``done``.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from routing import snapshot
from tenants.selectors import tenant_choices


@staff_member_required
def chat_page(request: HttpRequest) -> HttpResponse:
    """Staff only; anonymous visitors (and users who are not staff) are sent to the admin login."""
    profiles = sorted(snapshot.current().profiles.values(), key=lambda profile: profile.agent_id)
    context = {
        **admin.site.each_context(request),
        "title": "Chat",
        "is_nav_sidebar_enabled": False,
        "profiles": [(profile.agent_id, profile.name) for profile in profiles],
        "tenants": tenant_choices(),
    }
    return render(request, "chat/chat.html", context)
