"""The ``agent_handoffs`` table: every move of a conversation between agents."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models


class HandoffKind(models.TextChoices):
    HANDOFF = "handoff", "Agent handoff"
    ROUTING = "routing_handoff", "Routing handoff"
    DELEGATION = "delegation", "Delegation"
    RETURN = "return", "Return"
    FANOUT = "supervisor_fanout", "Supervisor fan-out"
    BACKEND = "backend_handoff", "Backend handoff"
    HUMAN = "human", "To or from a person"


# One bit per kind, for Conversation.handoff_kinds (the kinds of completed move a conversation has had). Fixed
# values, not the choices' order: stored masks must keep their meaning when a kind is added.
KIND_BITS: dict[str, int] = {
    HandoffKind.HANDOFF: 1,
    HandoffKind.ROUTING: 2,
    HandoffKind.DELEGATION: 4,
    HandoffKind.RETURN: 8,
    HandoffKind.FANOUT: 16,
    HandoffKind.BACKEND: 32,
    HandoffKind.HUMAN: 64,
}
# A conversation handed to a person is a move to this agent; handed back, a move from it (kind ``human`` both ways).
PERSON = "human"


def kinds_mask(kinds: Iterable[str]) -> int:
    """The bits of ``kinds`` (see :data:`KIND_BITS`) or'ed together."""
    mask = 0
    for kind in kinds:
        mask |= KIND_BITS[kind]
    return mask


class HandoffStatus(models.TextChoices):
    COMPLETED = "completed", "Completed"
    REFUSED = "refused", "Refused"
    STOPPED = "stopped", "Stopped by loop safety"


class Handoff(models.Model):
    """One row per handoff.

    ``tenant`` and ``profile`` repeat what the conversation knows so that the
    analytics aggregate over this table alone, on indexes that lead with them.
    """

    # No index of their own: each leads a wider one (conversation agent_handoffs_conv_time, tenant
    # agent_handoffs_tenant_time, profile agent_handoffs_version_cover), which its lookups and cascades read.
    conversation = models.ForeignKey(
        "conversations.Conversation",
        on_delete=models.CASCADE,
        related_name="handoffs",
        db_index=False,
    )
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="+", db_index=False)
    from_agent = models.CharField(max_length=64)
    to_agent = models.CharField(max_length=64)
    kind = models.CharField(max_length=32, choices=HandoffKind.choices)
    status = models.CharField(max_length=16, choices=HandoffStatus.choices, default=HandoffStatus.COMPLETED)
    reason = models.TextField(blank=True)
    context_summary = models.TextField(blank=True)
    outcome = models.CharField(
        max_length=32,
        blank=True,
        help_text=(
            "How it ended: a return's sub-conversation status (completed, out_of_scope, ...); a stop's or "
            "refusal's cause (ping_pong, path_repeated, handoff_limit, step_limit, not_allowed)."
        ),
    )
    cohort = models.CharField(
        max_length=16,
        blank=True,
        help_text="The rollout cohort of the turn that made the move (multi_agent or single_agent; blank: none).",
    )
    routing_version = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The published routing version of the profile that served the turn that made the move (blank: a "
        "draft tried by an editor, or a profile never published).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_handoffs"
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="agent_handoffs_conv_time"),
            models.Index(fields=["created_at"], name="agent_handoffs_time"),
            models.Index(fields=["tenant", "created_at"], name="agent_handoffs_tenant_time"),
            # A rollout plan's cohorts: one profile's moves under one version, in a window.
            # Covering what a rollout plan's guard counts (releases.rollout.guard): no table row read.
            models.Index(
                fields=["profile", "routing_version", "created_at"],
                include=["status", "kind", "conversation"],
                name="agent_handoffs_version_cover",
            ),
            # The analytics count by status and kind over a window, reading tenant, profile, path, conversation
            # and outcome from this index alone (an index-only scan on PostgreSQL; see analytics/selectors.py).
            models.Index(
                fields=[
                    "status",
                    "kind",
                    "created_at",
                    "tenant",
                    "profile",
                    "from_agent",
                    "to_agent",
                    "conversation",
                    "outcome",
                ],
                name="agent_handoffs_status_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.from_agent} → {self.to_agent} ({self.kind})"
