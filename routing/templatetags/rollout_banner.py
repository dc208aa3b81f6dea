"""``{% rollout_banner %}``: every admin page says when a rollout plan rolled itself back in the last day.

One query per admin page, for staff who may view rollout plans."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import template
from django.utils import timezone

from routing.models import RolloutPlan, RolloutPlanStatus

register = template.Library()

BANNER_HOURS = 24


@register.inclusion_tag("admin/routing/rollout_banner.html", takes_context=True)
def rollout_banner(context: dict[str, Any]) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not user.is_staff or not user.has_perm("routing.view_rolloutplan"):
        return {"plans": []}
    since = timezone.now() - timedelta(hours=BANNER_HOURS)
    plans = RolloutPlan.objects.filter(status=RolloutPlanStatus.ROLLED_BACK, finished_at__gte=since).select_related(
        "profile", "candidate"
    )
    return {"plans": list(plans.order_by("-finished_at")[:5])}
