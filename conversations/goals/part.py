"""Goal mode's part of one turn: the decision (a plan, a clarification, a refusal), the plan's run, the combined
output and the answer written from it.

Read and written by :mod:`.turn` (goal mode's nodes); the turn holds one when goal mode decides
(:attr:`conversations.turn.Turn.goal`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.public import ToolResult
from conversations.goals.engine import PlanRun
from routing.public import FAILURE, PLAN, GoalDecision


@dataclass
class GoalTurn:
    """Goal mode's part of one turn."""

    decision: GoalDecision
    run: PlanRun | None = None
    combined: dict[str, Any] | None = None
    writing: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        if self.decision.status == PLAN:
            return self.run.status if self.run is not None else FAILURE
        return self.decision.status

    def clarification(self) -> dict[str, Any] | None:
        if self.run is not None and self.run.clarification:
            return self.run.clarification
        return self.decision.clarification

    def limits(self) -> list[dict[str, Any]]:
        """The plan's and the run's limits that bit (``routing.goals.planner.limit_hit``)."""
        return [*self.decision.as_dict()["limits"], *(self.run.limits if self.run else ())]

    def metadata(self) -> dict[str, Any]:
        decided = self.decision.as_dict()
        return {
            "status": self.status,
            "intent_output": decided["intent_output"],
            "reading": decided["reading"],
            "execution_intents": decided["execution_intents"],
            "plan": decided["plan"],
            "outputs": {str(step): output.as_dict() for step, output in (self.run.outputs if self.run else {}).items()},
            "clarification": self.clarification(),
            "reason": decided["reason"],
            "threshold": decided["threshold"],
            "language": decided["language"],
            "combined": self.combined,
            "answer": self.writing,
            "latency_ms": round(self.run.latency_ms, 3) if self.run else 0.0,
            "limits": self.limits(),
        }

    def tool_results(self) -> list[ToolResult]:
        return list(self.run.tool_results) if self.run is not None else []
