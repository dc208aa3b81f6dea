"""The built-in ``remember`` tool (:mod:`agents.remember_tool`) as the specialist runtime answers it, and the facts a
turn's runs saved with it.

A call is answered at once, with no I/O: its fact is checked (a non-empty string of at most
:data:`agents.remember_tool.FACT_MAX_CHARS`), masked as the model's arguments are recorded, and returned as the
call's result, which tells the model it was saved. It is kept once the customer's message is stored
(:func:`conversations.memory.stage.memory_persist`, source ``saved``, the specialist and that message) — no row is
written while the model runs, and a run may save at most :data:`REMEMBER_PER_RUN` facts. A conversation that does not
say who the customer is (no user id) is answered that nothing can be remembered, and nothing is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from agents.public import FACT_MAX_CHARS, REMEMBER_TOOL, STATUS_ERROR, STATUS_INVALID, STATUS_OK, ToolResult
from common.infra.metrics import tool_call_observe

REMEMBER_PER_RUN = 3
SAVED_NOTE = "Saved. The customer's next conversations will carry this fact; do not save it again."
NOT_IDENTIFIED_ERROR = "nothing can be remembered: this conversation does not say who the customer is"
TOO_MANY_ERROR = f"at most {REMEMBER_PER_RUN} facts may be saved per message"
FACT_ERROR = f"fact: a non-empty string of at most {FACT_MAX_CHARS} characters is required"


def remember_answer(arguments: Any, *, identified: bool, mask: Callable[[Any], Any], saved_before: int) -> ToolResult:
    """The result of one ``remember`` call with ``arguments`` (as the model wrote them): ``ok`` with the masked fact
    (``arguments["fact"]``), or why nothing is kept. ``saved_before``: the facts this run saved already."""
    fact = arguments.get("fact") if isinstance(arguments, dict) else None
    fact = " ".join(fact.split()) if isinstance(fact, str) else ""
    if not fact or len(fact) > FACT_MAX_CHARS:
        written = mask(arguments) if isinstance(arguments, dict) else {}
        result = ToolResult(REMEMBER_TOOL, "", written, STATUS_INVALID, error=FACT_ERROR)
    elif not identified or saved_before >= REMEMBER_PER_RUN:
        error = NOT_IDENTIFIED_ERROR if not identified else TOO_MANY_ERROR
        result = ToolResult(REMEMBER_TOOL, "", {"fact": mask(fact)}, STATUS_ERROR, error=error)
    else:
        masked = mask(fact)
        result = ToolResult(REMEMBER_TOOL, "", {"fact": masked}, STATUS_OK, result={"fact": masked, "note": SAVED_NOTE})
    tool_call_observe(REMEMBER_TOOL, result.status, 0.0)
    return result


def facts_saved(results: Iterable[ToolResult]) -> list[str]:
    """The facts ``results`` (one run's tool results) saved with the ``remember`` tool, in order."""
    return [str(result.arguments["fact"]) for result in results if result.tool == REMEMBER_TOOL and result.ok]
