"""The desk at ``/desk/``: staff who may answer as a person take escalated conversations, answer, hand them back.

The page carries what the desk shows when it opens (:func:`conversations.desk.reads.desk_snapshot`: the queues of
the tenants the user answers for, in serving order with each conversation's place, and the conversations the user
holds) as JSON, and ``chat/static/chat/desk.js`` draws it, then opens the desk socket (``/ws/desk/``,
:mod:`chat.desk.socket`) with the staff session's cookie: the queues change live, a conversation opens on a click
(its summary, history and the assistants' route decisions), and the person takes it, replies, writes internal notes,
transfers it to another team of its profile or hands it back to the assistants, each over the socket.

``?team=<team>`` lists one team's queues (the filter's form); ``?escalation=<id>`` opens one conversation (a link
from elsewhere) — another tenant's is named as not found, as an unknown id.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from chat.desk.access import ERROR_DESK_FORBIDDEN, desk_tenants, escalation_for
from common.errors import NotFound
from conversations.public import desk_snapshot, escalation_detail
from routing.public import snapshot_current
from tenants.models import TenantRight
from tenants.public import TenantRights


def desk_may_use(user: Any, *, rights: TenantRights | None = None) -> bool:
    """Whether ``user`` may use the desk (and so is shown links to it): active staff who may answer as a person for at
    least one active tenant."""
    return bool(
        getattr(user, "is_active", False)
        and getattr(user, "is_staff", False)
        and (rights or TenantRights(user=user)).anywhere(TenantRight.ANSWER)
    )


def desk_teams() -> list[str]:
    """Every team of the published profiles, sorted (the team filter's choices)."""
    return sorted({team for profile in snapshot_current().profiles.values() for team in profile.escalation.teams})


@staff_member_required
def desk_page(request: HttpRequest) -> HttpResponse:
    """Staff who may answer as a person for some tenant, and only those tenants' queues; anonymous visitors (and users
    who are not staff) are sent to the admin login, other staff get a 403 page that says which right is missing."""
    base = {**admin.site.each_context(request), "title": "Desk", "is_nav_sidebar_enabled": False}
    tenants = desk_tenants(request.user)
    if not tenants:
        return render(request, "chat/desk_forbidden.html", {**base, "reason": ERROR_DESK_FORBIDDEN}, status=403)
    teams = desk_teams()
    team = (request.GET.get("team") or "").strip()
    if team not in teams:
        team = ""
    user_id = request.user.pk
    assert user_id is not None  # staff_member_required: a logged-in user
    state = desk_snapshot(tenants=tenants, user_id=user_id, team=team)
    asked = (request.GET.get("escalation") or "").strip()
    opened: dict[str, Any] | None = None
    not_found = ""
    if asked:
        try:
            opened = escalation_detail(escalation=escalation_for(request.user, asked), tenants=tenants)
        except NotFound as exc:
            not_found = exc.message
    context = {
        **base,
        "teams": teams,
        "team": team,
        "desk_state": {**state, "team": team, "opened": opened, "user_id": user_id},
        "escalation_not_found": not_found,
    }
    return render(request, "chat/desk.html", context)
