"""The ``agent_handoffs`` table: every move of a conversation between agents."""

from __future__ import annotations

from django.db import models


class HandoffKind(models.TextChoices):
    HANDOFF = "handoff", "Agent handoff"
    ROUTING = "routing_handoff", "Routing handoff"
    DELEGATION = "delegation", "Delegation"
    RETURN = "return", "Return"
    FANOUT = "supervisor_fanout", "Supervisor fan-out"


class HandoffStatus(models.TextChoices):
    COMPLETED = "completed", "Completed"
    REFUSED = "refused", "Refused"
    STOPPED = "stopped", "Stopped by loop safety"


class Handoff(models.Model):
    """One row per handoff.

    ``tenant`` and ``profile`` repeat what the conversation knows so that the
    analytics aggregate over this table alone, on indexes that lead with them.
    """

    conversation = models.ForeignKey(
        "routing.Conversation",
        on_delete=models.CASCADE,
        related_name="handoffs",
    )
    tenant = models.ForeignKey("routing.Tenant", on_delete=models.CASCADE, related_name="+")
    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="+")
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
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_handoffs"
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="agent_handoffs_conv_time"),
            models.Index(fields=["created_at"], name="agent_handoffs_time"),
            models.Index(fields=["tenant", "created_at"], name="agent_handoffs_tenant_time"),
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
