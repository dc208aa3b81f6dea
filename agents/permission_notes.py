"""The system note a specialist's model gets with the customer's answer to its permission question, and how it is read
back.

A real model reads the note's words; the offline model (:mod:`agents.llm`) and the specialist runtime read which tool
a refusal left unrun (:func:`declined_tool`): on a "no" the specialist answers the request the question was asked
for, without the tool, and says what it did not check (docs/handoffs.md) — the customer's "no thanks, leave my line
alone" is not the thing to answer, nor to search the help centre for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_DECLINED = re.compile(r"^The user did not agree to let you use (\S+)\. ")


def permission_note(tool: str, granted: bool) -> str:
    """The system note the specialist gets with the user's reply."""
    if granted:
        return f"The user agreed to let you use {tool} for their request above. Use it now and answer the request."
    return (
        f"The user did not agree to let you use {tool}. Do not call it; answer their request above without it "
        "and say plainly what you could not check."
    )


def declined_tool(notes: Iterable[str]) -> str | None:
    """The tool a refusal note among ``notes`` names, or ``None`` when none says the user refused."""
    for note in notes:
        match = _DECLINED.match(note)
        if match is not None:
            return match.group(1)
    return None
