"""The offline model's own words, in the conversation's language (:mod:`agents.llm`'s offline model).

English message ids, translated in the catalogues (common.i18n); Portuguese when the language is not known. Names,
tool results and the customer's own words are business data: they are quoted, never translated; a specialist's
display name and an intent's subject line come in the conversation's language (common.translations: the caller hands
the subject line only when it has one in that language).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.utils.translation import gettext_lazy

from common.i18n import say

OFFLINE_LANGUAGE = "pt"
OFFLINE_MESSAGES: dict[str, Any] = {
    "notice": gettext_lazy("(offline model)"),
    "consulted": gettext_lazy("I checked our systems about your message."),
    "not_consulted": gettext_lazy("I could not check it right now ({error})."),
    "resumed": gettext_lazy("Picking up where we left off:"),
    "received": gettext_lazy("I received your message."),
    "subject": gettext_lazy("Subject: {topic}."),
    "you_said": gettext_lazy('You said: "{text}".'),
    "will_handle": gettext_lazy("I will look into it as a specialist."),
    "glad": gettext_lazy("glad I could help! If you need anything else, just ask."),
    "closed": gettext_lazy("The customer closed the matter ({closing!r})."),
    "out_of_scope": gettext_lazy("Out of my scope; this looks like a matter for {agent}."),
    "delegated": gettext_lazy("The customer wrote: {text}"),
    "handoff_reason": gettext_lazy("The message is in the scope of {target}, not of {agent}."),
    "handoff_summary": gettext_lazy('{name} received: "{text}"; nothing checked yet.'),
    "human_reason": gettext_lazy("The customer asked for a person."),
    "documents": gettext_lazy("Our documents say:"),
    "noted": gettext_lazy("I have noted it for your next conversations: \u201c{fact}\u201d."),
    "declined": gettext_lazy("As you asked, I did not use {tool}, so I could not check what it checks."),
}
# The offline model's answer to small talk (routing.small_talk's kinds; a request for a person is the escalation's).
OFFLINE_SMALL_TALK: dict[str, Any] = {
    "greeting": gettext_lazy("Hello! How can I help you?"),
    "thanks": gettext_lazy("You're welcome! If you need anything else, just ask."),
    "goodbye": gettext_lazy("Goodbye, and thank you for getting in touch!"),
    "bot_question": gettext_lazy("I am the virtual assistant of this service. How can I help you?"),
}


@lru_cache(maxsize=8)
def offline_words(language: str | None) -> dict[str, str]:
    """The offline model's own words (:data:`OFFLINE_MESSAGES`) in ``language``."""
    return {key: say(language, message) for key, message in OFFLINE_MESSAGES.items()}
