"""The permission gate (docs/handoffs.md): tools marked needs-permission run only after the user agreed.

The specialist's run stops when it calls such a tool without a grant
(:mod:`conversations.runtime`); the user is asked; the next message is read as
the answer by :mod:`routing.replies` with the profile's yes and no words: a yes
or no that leads the message (or ends a short one) answers; a question holding a
yes word does not; a refusal wins over agreement ("não pode"), so a refusal is
never taken for a grant. A grant lasts for the rest of the conversation. What the
specialist is told of the reply: :mod:`agents.permission_notes`.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy

from common.i18n import say
from routing.public import NO, YES, ProfileSpec, Reply, ToolSpec

GRANTED = "granted"
DENIED = "denied"


def permission_reply(reply: Reply) -> str | None:
    """``granted`` for a yes, ``denied`` for a no, ``None`` when the message is neither (the waiting request is
    dropped and the message routed as usual). ``reply`` is the message read by the profile's words
    (``profile.reply_words.read(text)``)."""
    return {YES: GRANTED, NO: DENIED}.get(reply.reads_as or "")


PERMISSION_ASK = gettext_lazy(
    'To go on I need your permission to use {tool} (“{what}”). May I proceed? Reply "{yes}" to allow it or "{no}" to '
    "go on without it."
)
YES_WORD = gettext_lazy("yes")
NO_WORD = gettext_lazy("no")


def permission_question(profile: ProfileSpec, tool: ToolSpec, language: str | None = None) -> str:
    """What the specialist asks the user, in the conversation's ``language``: the tool's name and description are
    the business's words; the yes and no to reply with are the language's own when the profile reads them so, else
    the profile's first confirmation and denial words."""
    yes, no = say(language, YES_WORD), say(language, NO_WORD)
    if profile.reply_words.read(yes).reads_as != YES:
        yes = profile.confirmation_words[0] if profile.confirmation_words else yes
    if profile.reply_words.read(no).reads_as != NO:
        no = profile.denial_words[0] if profile.denial_words else no
    what = tool.description.strip().rstrip(".") or tool.name
    return say(language, PERMISSION_ASK, tool=tool.name, what=what, yes=yes, no=no)


def permission_context(tools, context: dict[str, Any]) -> dict[str, Any]:
    """The request context values the waiting request's tools take as arguments (kept until the reply)."""
    keys = {name for tool in tools for name in (tool.args_schema or {}).get("properties", {})}
    return {key: value for key, value in context.items() if key in keys}
