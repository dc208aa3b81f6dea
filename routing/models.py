"""Tenants and keys, routing content (intents, keywords, state policies), rollout flags and conversation data."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from routing.text import normalize


class Tenant(models.Model):
    """An organisation. API keys belong to one; it sees only its own conversations."""

    slug = models.SlugField(max_length=64, unique=True, help_text="The tenant_id in conversation keys.")
    name = models.CharField(max_length=200, blank=True)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class ApiKey(models.Model):
    """A hashed bearer key. Only the prefix is kept readable; the key is shown once."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, blank=True)
    prefix = models.CharField(max_length=16, db_index=True, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    is_debug = models.BooleanField(default=False, help_text="May call /api/debug/*.")
    can_preview = models.BooleanField(default=False, help_text="May call POST /api/chat/multi-agent/message.")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.tenant})"


class Intent(models.Model):
    """A routable intention of one profile; its keywords are rows of :class:`Keyword`."""

    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="intents")
    name = models.SlugField(max_length=100, help_text="e.g. billing_invoice_explanation")
    domain = models.CharField(max_length=64, blank=True)
    specialist = models.ForeignKey("agents.Specialist", on_delete=models.PROTECT, related_name="intents")
    description = models.TextField(blank=True)
    priority = models.IntegerField(default=100, help_text="Lower number wins when several intents match.")
    enabled = models.BooleanField(default=True)
    examples = models.JSONField(default=list, blank=True, help_text="Example messages (a JSON list of strings).")
    mcp_tools = models.ManyToManyField(
        "agents.McpTool",
        blank=True,
        related_name="intents",
        help_text="MCP tools authorised when this intent wins.",
    )
    next_state = models.CharField(
        max_length=100,
        blank=True,
        help_text="Conversation state to set after this intent answers, e.g. WAITING_PAYMENT_CONFIRMATION.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile__agent_id", "priority", "name"]
        constraints = [
            models.UniqueConstraint(fields=["profile", "name"], name="intent_unique_name_per_profile"),
        ]

    def __str__(self) -> str:
        return self.name


class Keyword(models.Model):
    """A word or phrase of an intent, matched accent- and case-insensitively on word boundaries."""

    intent = models.ForeignKey(Intent, on_delete=models.CASCADE, related_name="keywords")
    text = models.CharField(max_length=200)
    normalized = models.CharField(max_length=200, editable=False, db_index=True)

    class Meta:
        ordering = ["intent", "text"]
        constraints = [
            models.UniqueConstraint(fields=["intent", "normalized"], name="keyword_unique_per_intent"),
        ]

    def __str__(self) -> str:
        return self.text

    def save(self, *args, **kwargs) -> None:
        # Derived column, not business logic: the normalised form the matcher and
        # the uniqueness rule compare.
        self.normalized = normalize(self.text)
        super().save(*args, **kwargs)


class StatePolicy(models.Model):
    """While a conversation is in ``state``, short replies stay with this specialist and intent."""

    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="state_policies")
    state = models.CharField(max_length=100, help_text="e.g. WAITING_PAYMENT_CONFIRMATION")
    specialist = models.ForeignKey("agents.Specialist", on_delete=models.PROTECT, related_name="state_policies")
    intent = models.ForeignKey(
        Intent,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="state_policies",
        help_text="Intent reported (and whose tools are authorised) when the policy decides.",
    )
    description = models.TextField(blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["profile__agent_id", "state"]
        verbose_name = "state policy"
        verbose_name_plural = "state policies"
        constraints = [
            models.UniqueConstraint(fields=["profile", "state"], name="state_policy_unique_per_profile"),
        ]

    def __str__(self) -> str:
        return f"{self.state} → {self.specialist.name}"


class RoutingConfigVersion(models.Model):
    """Single row counting changes to routing configuration; see :mod:`routing.config`."""

    version = models.BigIntegerField(default=0)
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "routing configuration version"

    def __str__(self) -> str:
        return f"v{self.version}"


# -- rollout flags -----------------------------------------------------------------
# Written only through the services (routing/services.py), which keep the history; read on the message
# path from the compiled snapshot (routing/snapshot.py), never from these tables.


class Stickiness(models.TextChoices):
    USER_ID = "user_id", "User id"
    SESSION_ID = "session_id", "Session id"


class RolloutFlag(models.Model):
    """A percentage rollout: who gets a feature (e.g. ``multi_agent``: the multi-agent graph)."""

    key = models.SlugField(max_length=64, unique=True, help_text="e.g. multi_agent")
    description = models.TextField(blank=True)
    kill_switch = models.BooleanField(
        "kill switch (everyone off)",
        default=False,
        help_text="On: the flag is off for everyone, overrides included. The instant rollback.",
    )
    percentage = models.PositiveSmallIntegerField(
        default=0,
        validators=[MinValueValidator(0), MaxValueValidator(100)],
        help_text="Share of users (0–100) that get the flag; the same user always lands on the same side.",
    )
    stickiness = models.CharField(
        max_length=16,
        choices=Stickiness.choices,
        default=Stickiness.USER_ID,
        help_text="What keeps a person on one side of the percentage: their user id or their session id.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["key"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(percentage__gte=0, percentage__lte=100), name="rollout_flag_percentage_0_100"
            ),
        ]

    def __str__(self) -> str:
        return self.key


class RolloutUserOverride(models.Model):
    """One user always on (or always off) for a flag, whatever the percentage; the kill switch still wins."""

    flag = models.ForeignKey(RolloutFlag, on_delete=models.CASCADE, related_name="user_overrides")
    user_id = models.CharField(max_length=200, help_text="The user_id the chat API receives.")
    enabled = models.BooleanField(default=True, help_text="Ticked: always on; unticked: always off.")
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["flag", "user_id"]
        verbose_name = "user override"
        constraints = [
            models.UniqueConstraint(fields=["flag", "user_id"], name="rollout_user_override_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}: {'on' if self.enabled else 'off'}"


class RolloutTenantOverride(models.Model):
    """Every user of one tenant on (or off) for a flag; a user override wins over it."""

    flag = models.ForeignKey(RolloutFlag, on_delete=models.CASCADE, related_name="tenant_overrides")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="rollout_overrides")
    enabled = models.BooleanField(default=True, help_text="Ticked: always on; unticked: always off.")
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["flag", "tenant"]
        verbose_name = "tenant override"
        constraints = [
            models.UniqueConstraint(fields=["flag", "tenant"], name="rollout_tenant_override_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant}: {'on' if self.enabled else 'off'}"


class RolloutFlagChange(models.Model):
    """One change to a flag or one of its overrides: who, when, what, old → new. Written once, never edited.

    ``what`` is a field name (``percentage``, ``kill_switch``, ``stickiness``, ``description``), ``created``,
    ``deleted``, ``user_override:<user_id>`` or ``tenant_override:<tenant slug>``; an absent value reads ``none``.
    """

    # SET_NULL and a copy of the key: the history of a deleted flag stays readable.
    flag = models.ForeignKey(RolloutFlag, on_delete=models.SET_NULL, null=True, blank=True, related_name="changes")
    flag_key = models.CharField(max_length=64)
    what = models.CharField(max_length=300)
    old_value = models.TextField(blank=True)
    new_value = models.TextField(blank=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    actor = models.CharField(max_length=200, help_text='"admin: <username>" or "manage.py set_rollout (<OS user>)".')
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-changed_at", "-id"]
        verbose_name = "rollout flag change"
        indexes = [models.Index(fields=["flag", "-changed_at"], name="rollout_change_flag_recent")]

    def __str__(self) -> str:
        return f"{self.flag_key} {self.what}: {self.old_value} → {self.new_value}"


COHORT_HELP = "Which side of the multi_agent flag answered: multi_agent, single_agent, or blank (not decided)."


class Conversation(models.Model):
    """One conversation, keyed ``tenant_id:agent_id:session_id``."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="conversations")
    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="conversations")
    session_id = models.CharField(max_length=200)
    conversation_key = models.CharField(max_length=400, unique=True)
    user_id = models.CharField(max_length=200, blank=True)
    channel = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=100, blank=True)
    active_specialist = models.CharField(max_length=64, blank=True)
    active_intent = models.CharField(max_length=100, blank=True)
    sub_conversation = models.JSONField(
        null=True,
        blank=True,
        help_text="The open delegated sub-conversation: specialist, coordinator, initial context, start.",
    )
    pending_result = models.JSONField(
        null=True,
        blank=True,
        help_text="A finished sub-conversation's result, given to the coordinator once with the next message.",
    )
    pending_permission = models.JSONField(
        null=True,
        blank=True,
        help_text="The tool call waiting for the user's agreement: tool, specialist, intent, request.",
    )
    granted_permissions = models.JSONField(default=list, blank=True, help_text="Tools the user agreed to.")
    # Turn ordering: tickets are taken on arrival and served one at a time (see routing.ordering).
    turn_tickets_issued = models.PositiveBigIntegerField(default=0)
    turn_tickets_done = models.PositiveBigIntegerField(default=0)
    turn_started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True, help_text="When the session was last ended via the API.")
    message_count = models.PositiveIntegerField(default=0)
    cohort = models.CharField(max_length=16, blank=True, help_text=COHORT_HELP)
    handoff_kinds = models.PositiveSmallIntegerField(
        default=0,
        help_text="The kinds of completed move the conversation has had, one bit each (handoffs.models.KIND_BITS).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        # The analytics' indexes (analytics/selectors.py) carry every column those queries read, so PostgreSQL
        # answers from the index alone: conversations created in a window per tenant, profile and cohort, and
        # the ids of a tenant's conversations that messages, decisions and tool calls are joined to.
        indexes = [
            models.Index(fields=["tenant", "-updated_at"], name="conversation_tenant_recent"),
            models.Index(fields=["tenant", "created_at", "profile", "cohort"], name="conversation_tenant_window"),
            models.Index(fields=["created_at", "tenant", "profile", "cohort"], name="conversation_window"),
            models.Index(fields=["tenant", "profile", "id", "cohort"], name="conversation_tenant_ids"),
        ]

    def __str__(self) -> str:
        return self.conversation_key


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    AGENT = "agent", "Agent (a specialist's part of a supervisor turn)"
    SYSTEM = "system", "System"


class Message(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=MessageRole.choices)
    agent = models.CharField(max_length=64, blank=True, help_text="Specialist that wrote an assistant message.")
    content = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    step = models.PositiveSmallIntegerField(default=0)
    cohort = models.CharField(max_length=16, blank=True, help_text=COHORT_HELP)
    # Kept apart from metadata on answers, so the analytics average them in the database.
    latency_ms = models.FloatField(null=True, blank=True, help_text="An answer: the turn's time in the graph.")
    judge_score = models.FloatField(null=True, blank=True, help_text="An answer: the rule-based judge's score.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="message_conversation_time"),
            # The analytics (covering, see Conversation): answers per specialist and cohort, user messages per cohort.
            models.Index(
                fields=["created_at", "agent", "cohort", "latency_ms", "judge_score", "conversation"],
                condition=models.Q(role="assistant"),
                name="message_answer_window",
            ),
            models.Index(
                fields=["created_at", "cohort", "conversation"],
                condition=models.Q(role="user"),
                name="message_user_window",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class RouteDecisionRecord(models.Model):
    """A stored routing decision (the contract lives in :class:`routing.router.RouteDecision`)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="route_decisions")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    mode = models.CharField(max_length=16)
    route = models.CharField(max_length=64)
    agent = models.CharField(max_length=64)
    intent = models.CharField(max_length=100)
    confidence = models.FloatField(default=0.0)
    reason = models.TextField(blank=True)
    method = models.CharField(max_length=16)
    next_state = models.CharField(max_length=100, blank=True)
    handoff = models.BooleanField(default=False)
    domain = models.CharField(max_length=64, blank=True)
    mcp_tools = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = "route decision"
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="decision_conversation_time"),
            # The analytics' routing-method mix (covering, see Conversation).
            models.Index(fields=["created_at", "method", "conversation"], name="decision_window_method"),
        ]

    def __str__(self) -> str:
        return f"{self.method}: {self.agent}/{self.intent}"


class ToolCallStatus(models.TextChoices):
    OK = "ok", "OK"
    ERROR = "error", "Error"
    TIMEOUT = "timeout", "Timeout"
    INVALID = "invalid_arguments", "Invalid arguments"
    UNAVAILABLE = "unavailable", "Server unavailable"
    NOT_OFFERED = "not_offered", "Not offered to the specialist"
    PERMISSION_REQUIRED = "permission_required", "Waiting for the user's permission"


class ToolCall(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="tool_calls")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, null=True, blank=True, related_name="tool_calls")
    agent = models.CharField(max_length=64)
    tool = models.CharField(max_length=100)
    server = models.CharField(max_length=64, blank=True)
    arguments = models.JSONField(default=dict, blank=True, help_text="Masked.")
    status = models.CharField(max_length=32, choices=ToolCallStatus.choices)
    latency_ms = models.FloatField(default=0.0)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="toolcall_conversation_time"),
            models.Index(fields=["tool", "created_at"], name="toolcall_tool_time"),
            # The analytics' per-tool figures (covering, see Conversation).
            models.Index(
                fields=["created_at", "tool", "server", "status", "latency_ms", "conversation"],
                name="toolcall_window",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} ({self.status})"
