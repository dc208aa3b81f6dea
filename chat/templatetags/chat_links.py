"""``{% chat_allowed as may_chat %}`` and ``{% desk_allowed as may_answer %}``: whether the page's user may use the
chat page, and the desk, so that the admin's header and home show the Chat and Desk links only to those they open
for (:func:`chat.chat_page.chat_may_use`, :func:`chat.desk.page.desk_may_use`), from the rights the request
read once (:func:`tenants.selectors.request_tenant_rights`)."""

from __future__ import annotations

from typing import Any

from django import template

from chat.chat_page import chat_may_use
from chat.desk.page import desk_may_use
from tenants.public import request_tenant_rights

register = template.Library()


@register.simple_tag(takes_context=True)
def chat_allowed(context: dict[str, Any]) -> bool:
    request = context.get("request")
    if request is None:
        return False
    return chat_may_use(request.user, rights=request_tenant_rights(request))


@register.simple_tag(takes_context=True)
def desk_allowed(context: dict[str, Any]) -> bool:
    request = context.get("request")
    if request is None:
        return False
    return desk_may_use(request.user, rights=request_tenant_rights(request))
