"""``{% rollout_banner %}``: every admin page says when a rollout plan rolled itself back in the last day.

Shown to the staff who may edit or release a profile's routing — whose change it may have been — and to those who
may read rollout plans; the plan's name links to its page for those who may open it. One query per admin page."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import template
from django.utils import timezone

from releases.models import RolloutPlan, RolloutPlanStatus

register = template.Library()

BANNER_HOURS = 24
# A plan's page opens for who may view or change plans; the banner shows to them and to who edits or publishes.
PLAN_PAGE = ("releases.view_rolloutplan", "releases.change_rolloutplan")
SHOWN_TO = (*PLAN_PAGE, "routing.change_intent", "routing.add_routingversion")


@register.inclusion_tag("admin/routing/rollout_banner.html", takes_context=True)
def rollout_banner(context: dict[str, Any]) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_staff or not any(user.has_perm(permission) for permission in SHOWN_TO):
        return {"plans": []}
    since = timezone.now() - timedelta(hours=BANNER_HOURS)
    # Only the columns the banner shows: the three tables' every column cost a millisecond of each admin page.
    plans = (
        RolloutPlan.objects.filter(status=RolloutPlanStatus.ROLLED_BACK, finished_at__gte=since)
        .select_related("profile", "candidate")
        .only("name", "finished_at", "profile__agent_id", "candidate__number")
    )
    plan_links = any(user.has_perm(permission) for permission in PLAN_PAGE)
    return {"plans": list(plans.order_by("-finished_at")[:5]), "plan_links": plan_links}
