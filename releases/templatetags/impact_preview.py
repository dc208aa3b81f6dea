"""``{% impact_preview_allowed as may_preview %}``: whether the page's user may open the impact preview, so that the
pages linking it (the conversation list, a profile's page) show the link only to those it opens for."""

from __future__ import annotations

from typing import Any

from django import template

from releases.admin.impact import impact_may_view

register = template.Library()


@register.simple_tag(takes_context=True)
def impact_preview_allowed(context: dict[str, Any]) -> bool:
    user = getattr(context.get("request"), "user", None)
    return user is not None and impact_may_view(user)
