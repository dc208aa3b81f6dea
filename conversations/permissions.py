"""The permission gate (seed 003): tools marked needs-permission run only after the user agreed.

The specialist's run stops when it calls such a tool without a grant
(:mod:`conversations.runtime`); the user is asked; the next reply is read here. A
denial word wins over a confirmation word ("não pode"), so a refusal is never
taken for a grant. A grant lasts for the rest of the conversation.
"""

from __future__ import annotations

from typing import Any

from common.text import phrase_found
from routing.snapshot import ProfileSpec, ToolSpec

GRANTED = "granted"
DENIED = "denied"


def permission_reply(text: str, profile: ProfileSpec) -> str | None:
    """``granted``, ``denied``, or ``None`` when the reply is neither (the waiting request is dropped)."""
    if phrase_found(text, profile.denial_words):
        return DENIED
    if phrase_found(text, profile.confirmation_words):
        return GRANTED
    return None


def permission_question(profile: ProfileSpec, tool: ToolSpec) -> str:
    """What the specialist asks the user, in Portuguese and English, with the profile's own words."""
    yes = profile.confirmation_words[0] if profile.confirmation_words else "sim"
    no = profile.denial_words[0] if profile.denial_words else "não"
    what = tool.description.strip().rstrip(".") or tool.name
    return (
        f"Para seguir preciso da sua autorização para usar {tool.name} ({what}). Posso prosseguir? "
        f'Responda "{yes}" para autorizar ou "{no}" para continuar sem isso. '
        f'(I need your permission to use {tool.name}: reply "yes" to allow it or "no" to go on without it.)'
    )


def permission_note(tool: str, reply: str) -> str:
    """The system note the specialist gets with the user's reply."""
    if reply == GRANTED:
        return f"The user agreed to let you use {tool} for their request above. Use it now and answer the request."
    return (
        f"The user did not agree to let you use {tool}. Do not call it; answer their request above without it "
        "and say plainly what you could not check."
    )


def permission_context(tools, context: dict[str, Any]) -> dict[str, Any]:
    """The request context values the waiting request's tools take as arguments (kept until the reply)."""
    keys = {name for tool in tools for name in (tool.args_schema or {}).get("properties", {})}
    return {key: value for key, value in context.items() if key in keys}
