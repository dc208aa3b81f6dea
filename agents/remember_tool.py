"""The built-in ``remember`` tool a specialist may be offered beside its MCP tools (``Specialist.remember_tool``): its
name, the definition its model is given, and the rule by which the offline model calls it.

The call is not run over MCP: the specialist runtime answers it (``conversations.memory.tool``) and the turn keeps the
fact once the customer's message is stored (docs/memory.md).

The offline model calls it when the customer states a preference (:func:`preference_stated`): a sentence that starts
with "prefiro …", "eu preferiria …" (pt), "I prefer …", "I'd rather …" (en), "prefiero …", "yo preferiría …" (es),
after an "and", "also", "e", "y" or the like. The check that comes first costs a lower-casing of the message and three
substring tests; only a message holding one of :data:`PREFERENCE_STEMS` is split into sentences and matched.
"""

from __future__ import annotations

import re
from typing import Any

REMEMBER_TOOL = "remember"
FACT_MAX_CHARS = 500  # what one fact keeps: the tool's bound and a told fact's (conversations.memory.commands)

# Every preference the rule reads holds one of these (prefiro, prefiero; prefer, preferiria, preferiría; rather).
PREFERENCE_STEMS = ("prefi", "prefer", "rather")
_LEADS = r"(?:(?:and|also|but|ok|okay|e|mas|também|tambem|aliás|y|pero|también|tambien)[\s,]+)*"
_PREFERENCE = re.compile(
    r"^\W*" + _LEADS + r"(?:"
    r"(?:eu\s+|yo\s+)?(?:sempre\s+|siempre\s+)?(?:prefiro|preferiria|prefiero|preferiría)"
    r"|(?:i|we)(?:(?:'|’)d|\s+would)?(?:\s+(?:always|really))?\s+(?:prefer|rather)"
    r")\s+\S",
    re.IGNORECASE,
)
_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")


def remember_definition() -> dict[str, Any]:
    """The OpenAI function definition the model is given."""
    return {
        "type": "function",
        "function": {
            "name": REMEMBER_TOOL,
            "description": "Save a lasting fact about the customer that should be known in their next conversations: "
            "a preference they stated, a detail of their situation (e.g. 'prefers to be contacted by e-mail'). "
            "One short sentence; keep placeholders such as [EMAIL_1] as they are. Do not save what matters to "
            "this conversation only.",
            "parameters": {
                "type": "object",
                "properties": {
                    "fact": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": FACT_MAX_CHARS,
                        "description": "The fact, in one short sentence.",
                    }
                },
                "required": ["fact"],
            },
        },
    }


def preference_stated(text: str) -> str:
    """The first sentence of ``text`` that states a preference of the customer's (its closing punctuation dropped, at
    most :data:`FACT_MAX_CHARS`), or ``""``."""
    lowered = text.lower()
    if not any(stem in lowered for stem in PREFERENCE_STEMS):
        return ""
    for sentence in _SENTENCES.split(text):
        sentence = " ".join(sentence.split())
        if _PREFERENCE.match(sentence):
            return sentence.rstrip(".!?;, ")[:FACT_MAX_CHARS]
    return ""
