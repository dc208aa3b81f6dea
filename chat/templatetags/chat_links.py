"""``{% chat_allowed as may_chat %}``: whether the page's user may use the chat page, so that the admin's header
and home show the Chat link only to those it opens for (:func:`chat.chat_page.chat_may_use`)."""

from __future__ import annotations

from typing import Any

from django import template

from chat.chat_page import chat_may_use

register = template.Library()


@register.simple_tag(takes_context=True)
def chat_allowed(context: dict[str, Any]) -> bool:
    return chat_may_use(getattr(context.get("request"), "user", None))
