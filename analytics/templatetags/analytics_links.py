"""``{% analytics_allowed as may_read_analytics %}``: whether the page's user may read the analytics dashboard
(every tenant's, or those a grant lets them read), so that the admin links it only for them
(:func:`analytics.filters.analytics_may_read`), from the rights the request read once
(:func:`tenants.selectors.request_tenant_rights`)."""

from __future__ import annotations

from typing import Any

from django import template

from analytics.filters import analytics_may_read
from tenants.public import request_tenant_rights

register = template.Library()


@register.simple_tag(takes_context=True)
def analytics_allowed(context: dict[str, Any]) -> bool:
    request = context.get("request")
    if request is None or not getattr(request.user, "is_staff", False):
        return False
    return analytics_may_read(request.user, rights=request_tenant_rights(request))
