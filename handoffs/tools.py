"""The control tools a specialist may be offered besides its MCP tools.

They are not run anywhere: the runtime (:mod:`conversations.runtime`) stops the
specialist's loop when one is called and hands the call to the graph, which
moves the turn (:mod:`conversations.graph`).

* ``request_handoff`` — give the conversation to another
  specialist; the target must be one the admin lets this one hand off to.
* ``request_specialist_sub_conversation`` — the profile's
  coordinator delegates the conversation to a specialist.
* ``end_specialist_sub_conversation`` — the delegated specialist
  gives control back with its result.
* ``request_human`` — hand the conversation to a person of one of the
  profile's teams (docs/desk.md); offered when the profile lets specialists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REQUEST_HANDOFF = "request_handoff"
REQUEST_SUB_CONVERSATION = "request_specialist_sub_conversation"
END_SUB_CONVERSATION = "end_specialist_sub_conversation"
REQUEST_HUMAN = "request_human"
CONTROL_TOOLS = frozenset({REQUEST_HANDOFF, REQUEST_SUB_CONVERSATION, END_SUB_CONVERSATION, REQUEST_HUMAN})
# Control calls that name no agent: accepted whatever their arguments say (the graph reads them).
UNTARGETED = frozenset({END_SUB_CONVERSATION, REQUEST_HUMAN})
PRIORITIES = ("urgent", "high", "normal", "low")

# Sub-conversation statuses with a meaning of their own; a specialist may send any other word.
STATUS_COMPLETED = "completed"
STATUS_OUT_OF_SCOPE = "out_of_scope"


@dataclass(frozen=True)
class ControlTool:
    """A control tool as offered to one specialist in one run: its name and, for moves, the allowed agents (for
    ``request_human``, the profile's teams)."""

    name: str
    targets: tuple[str, ...] = ()

    def definition(self) -> dict[str, Any]:
        """The OpenAI function definition the model is given."""
        if self.name == REQUEST_HANDOFF:
            return _function(
                REQUEST_HANDOFF,
                "Hand the conversation to another specialist when the request belongs to their scope. "
                "Do not tell the user about the transfer; the other specialist answers them directly.",
                {
                    "target_agent": {
                        "type": "string",
                        "enum": list(self.targets),
                        "description": "The specialist to hand the conversation to.",
                    },
                    "reason": {"type": "string", "description": "Why this specialist should take over."},
                    "context_summary": {
                        "type": "string",
                        "description": "What you found so far that the next specialist needs.",
                    },
                },
                ["target_agent", "reason", "context_summary"],
            )
        if self.name == REQUEST_HUMAN:
            return _function(
                REQUEST_HUMAN,
                "Hand the conversation to a person of the team: when the customer asks for a person, or when you "
                "cannot help and a person can. Call only this tool; the customer is told they are in line.",
                {
                    "reason": {"type": "string", "description": "Why a person should take over."},
                    "context_summary": {
                        "type": "string",
                        "description": "What the person needs to know first: the request and what you found.",
                    },
                    "team": {"type": "string", "enum": list(self.targets), "description": "The team to hand to."},
                    "priority": {"type": "string", "enum": list(PRIORITIES), "description": "How urgent (normal)."},
                },
                ["reason", "context_summary"],
            )
        if self.name == REQUEST_SUB_CONVERSATION:
            return _function(
                REQUEST_SUB_CONVERSATION,
                "Delegate the conversation to a specialist. Call only this tool, with no text for the user: "
                "the specialist receives the user's message and answers it directly.",
                {
                    "specialist_role": {
                        "type": "string",
                        "enum": list(self.targets),
                        "description": "The exact role of the specialist.",
                    },
                    "initial_context": {
                        "type": "string",
                        "description": "A short summary of what matters so far (the user's message is passed on).",
                    },
                },
                ["specialist_role", "initial_context"],
            )
        return _function(
            END_SUB_CONVERSATION,
            "End your sub-conversation and give control back to the coordinator: when the task is done, or at "
            "once with status out_of_scope when the user's request is outside your scope.",
            {
                "status": {
                    "type": "string",
                    "description": "completed, out_of_scope, needs_followup, cannot_resolve, ...",
                },
                "final_result": {
                    "type": "object",
                    "description": "Structured result for the coordinator (never shown to the user).",
                },
                "last_user_message": {"type": "string", "description": "The user's last message."},
                "message_to_coordinator": {"type": "string", "description": "Optional internal note."},
            },
            ["status", "final_result", "last_user_message"],
        )


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


@dataclass(frozen=True)
class ControlCall:
    """A control tool the model called, with its arguments as given."""

    name: str
    args: dict[str, Any]

    @property
    def target(self) -> str:
        return str(self.args.get("target_agent") or self.args.get("specialist_role") or "").strip()

    def text(self, key: str) -> str:
        value = self.args.get(key)
        return value.strip() if isinstance(value, str) else ""

    @property
    def status(self) -> str:
        return self.text("status").lower() or STATUS_COMPLETED
