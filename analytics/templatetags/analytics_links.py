"""``{% analytics_allowed as may_read_analytics %}``: whether the page's user may read the analytics dashboard
(every tenant's, or those a grant lets them read), so that the admin links it only for them
(:func:`analytics.filters.analytics_may_read`)."""

from __future__ import annotations

from typing import Any

from django import template

from analytics.filters import analytics_may_read

register = template.Library()


@register.simple_tag(takes_context=True)
def analytics_allowed(context: dict[str, Any]) -> bool:
    user = getattr(context.get("request"), "user", None)
    return bool(getattr(user, "is_staff", False)) and analytics_may_read(user)
