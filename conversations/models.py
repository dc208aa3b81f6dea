"""The conversation store: conversations, their messages, route decisions, tool calls, goal-mode runs, the
users' feedback on answers, the escalations to people and how each conversation ended.

Written by the turn (:mod:`conversations.records`) and the session services; read by the sessions API,
the admin (read-only) and the analytics. The tables kept their names when the models moved here from
``routing`` (``db_table``), so no row was copied.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

from conversations.side_models import A2ATask as A2ATask
from conversations.side_models import CustomerErasure as CustomerErasure
from conversations.side_models import CustomerFact as CustomerFact
from conversations.side_models import FactSource as FactSource

COHORT_HELP = "Which side of the multi_agent flag answered: multi_agent, single_agent, or blank (not decided)."

# The turn's tenant and language on its rows (conversations migration 0030), as agent_handoffs repeats the tenant:
# the analytics read the live day's messages, route decisions and tool calls by tenant and language from their own
# indexes, without joining each row to its conversation.
TURN_LANGUAGE_HELP = (
    "The conversation's language when the turn was written (what the customer was read and answered in); blank: none "
    "told yet. The analytics count the row under it."
)


class Outcome(models.TextChoices):
    RESOLVED = "resolved", "Resolved"
    ESCALATED = "escalated", "Escalated"
    ABANDONED = "abandoned", "Abandoned"


# A conversation's outcome column: blank while it is open; conversations stored before outcomes were recorded are
# marked so, and counted nowhere (a new message opens them again).
OPEN = ""
UNMEASURED = "unmeasured"
CONVERSATION_OUTCOMES = [(OPEN, "Open"), *Outcome.choices, (UNMEASURED, "Ended before outcomes were recorded")]


class Conversation(models.Model):
    """One conversation, keyed ``tenant_id:agent_id:session_id``."""

    # No index of its own (nor on the foreign keys below marked so): an index of the table's Meta leads with the
    # column, and the lookups by it and the cascade of a delete use that one — one index less to keep per row written.
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="conversations", db_index=False)
    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="conversations")
    session_id = models.CharField(max_length=200)
    # Unique by a constraint (conversation_key_unique), not unique=True: PostgreSQL then keeps no second,
    # pattern-matching index of the key, which no query reads (a key is looked up whole).
    conversation_key = models.CharField(max_length=400)
    user_id = models.CharField(max_length=200, blank=True)
    channel = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=100, blank=True)
    active_specialist = models.CharField(max_length=64, blank=True)
    active_intent = models.CharField(max_length=100, blank=True)
    active_backend = models.CharField(
        max_length=64,
        blank=True,
        help_text="The remote backend (agents.RemoteBackend) answering this conversation, blank: a local specialist.",
    )
    backend_task = models.CharField(
        max_length=200,
        blank=True,
        help_text="The active backend's task waiting for the customer's answer (an A2A agent's input-required "
        "task): the next message is that answer, sent to the backend as the task's continuation. Blank: none.",
    )
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
    goal_state = models.JSONField(
        null=True,
        blank=True,
        help_text="Goal mode: the goal waiting for the user's answer (a clarification) and the last goal served, "
        "with their entities, so that a reply or a follow-up completes them.",
    )
    stack = models.JSONField(
        default=list,
        blank=True,
        help_text="The flows the conversation keeps open, bottom first (routing.stack): a state a side question "
        "interrupted, a request queued for later.",
    )
    # Turn ordering: tickets are taken on arrival and served one at a time (see conversations.ordering).
    turn_tickets_issued = models.PositiveBigIntegerField(default=0)
    turn_tickets_done = models.PositiveBigIntegerField(default=0)
    turn_started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True, help_text="When the session was last ended via the API.")
    message_count = models.PositiveIntegerField(default=0)
    cohort = models.CharField(max_length=16, blank=True, help_text=COHORT_HELP)
    routing_version = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The published routing version that served the conversation's first user message, which the "
        "analytics count the conversation under (blank: a draft, a profile never published, or no message yet). "
        "Written with that message; later turns served by another version leave it.",
    )
    handoff_kinds = models.PositiveSmallIntegerField(
        default=0,
        help_text="The kinds of completed move the conversation has had, one bit each (handoffs.models.KIND_BITS).",
    )
    escalation = models.ForeignKey(
        "conversations.Escalation",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The escalation a person holds the conversation under (waiting or taken); blank: the assistants "
        "answer.",
    )
    fallbacks_in_row = models.PositiveSmallIntegerField(
        default=0, help_text="How many of the last answers in a row the fallback gave (the escalation rule's count)."
    )
    language = models.CharField(
        max_length=8,
        blank=True,
        help_text="The customer's language (pt, en, es): detected from their messages, or named by the channel. "
        "The platform's own words are written in it.",
    )
    outcome = models.CharField(
        max_length=16,
        blank=True,
        choices=CONVERSATION_OUTCOMES,
        help_text="How the conversation ended (its figures: the conversation's outcome row); blank: still open.",
    )
    # Summary memory (conversations.memory.summary): what the specialists read of the turns past the window.
    memory_summary = models.TextField(
        blank=True,
        help_text="A running summary of the conversation's messages older than the ones the specialists read "
        "(masked as the messages are); blank until the conversation outgrows that window.",
    )
    memory_summary_through = models.PositiveBigIntegerField(
        default=0, help_text="The last message the summary covers (its id; 0: none)."
    )
    memory_summary_at_count = models.PositiveIntegerField(
        default=0, help_text="The conversation's message count when the summary was last written."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "routing_conversation"
        ordering = ["-updated_at"]
        # The analytics' indexes (analytics/selectors.py) carry every column those queries read, so PostgreSQL
        # answers from the index alone: conversations created in a window per tenant, profile and cohort (with their
        # language, language_mix, the version they started on, a version's slice, and the kinds of move they have had,
        # the handoff rate), and the ids of a tenant's conversations that other reads join to. A turn that changes an
        # indexed column (a new language, a first move of a kind, the first turn's version) is not a HOT update.
        indexes = [
            models.Index(fields=["tenant", "-updated_at"], name="conversation_tenant_recent"),
            models.Index(
                fields=["tenant", "created_at", "profile", "cohort"],
                include=["language", "routing_version", "handoff_kinds"],
                name="conversation_tenant_window",
            ),
            models.Index(
                fields=["created_at", "tenant", "profile", "cohort"],
                include=["language", "routing_version", "handoff_kinds"],
                name="conversation_window",
            ),
            models.Index(fields=["tenant", "profile", "id", "cohort"], name="conversation_tenant_ids"),
            # The periodic close (conversations.outcomes): a profile's open conversations (closed ones leave the
            # index); which are idle is read from turn_started_at, left out so that a turn's update stays HOT.
            models.Index(fields=["profile", "created_at"], condition=models.Q(outcome=""), name="conversation_open"),
        ]
        constraints = [models.UniqueConstraint(fields=["conversation_key"], name="conversation_key_unique")]

    def __str__(self) -> str:
        return self.conversation_key


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    AGENT = "agent", "Agent (a specialist's part of a supervisor turn)"
    SYSTEM = "system", "System"
    HUMAN = "human", "A person (the desk's reply to the customer)"
    NOTE = "note", "Internal note (the desk's; never shown to the customer)"


# A specialist's part of a supervisor turn that failed or timed out: an error for a rollout plan's guard, read
# through its own partial index (few rows) rather than from every message's metadata.
PART_FAILED = models.Q(role=MessageRole.AGENT, metadata__status__in=("error", "timeout"))
# Answers whose turn searched the profile's knowledge, and those of them that said the specialist does not know (no
# passage at the bar, no tool answered): the analytics' knowledge gaps count and list them in a window through their
# own partial indexes, never reading every answer's metadata.
KNOWLEDGE_SEARCHED = models.Q(role=MessageRole.ASSISTANT, metadata__has_key="knowledge")
KNOWLEDGE_UNKNOWN = models.Q(role=MessageRole.ASSISTANT, metadata__knowledge__unknown=True)


class Message(models.Model):
    conversation = models.ForeignKey(  # indexed by message_conversation_time
        Conversation, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    role = models.CharField(max_length=16, choices=MessageRole.choices)
    agent = models.CharField(max_length=64, blank=True, help_text="Specialist that wrote an assistant message.")
    content = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    step = models.PositiveSmallIntegerField(default=0)
    cohort = models.CharField(max_length=16, blank=True, help_text=COHORT_HELP)
    routing_version = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The published routing version of the profile that served the turn (blank: a draft tried by an "
        "editor, or a profile never published).",
    )
    # The conversation's profile, repeated (as agent_handoffs does) so that a profile's version cohort is one index
    # range: a rollout plan's guard reads each cohort's turns every minute (releases.rollout.guard), and the
    # analytics count messages per profile without a join. Migration 0007 filled it in for the stored messages.
    profile = models.ForeignKey(
        "agents.AgentProfile", on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )
    # No index of its own: message_tenant_window leads with it. Nullable: added without a table rewrite (0030).
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )
    language = models.CharField(max_length=8, blank=True, help_text=TURN_LANGUAGE_HELP)
    # Kept apart from metadata on answers, so the analytics average them in the database.
    latency_ms = models.FloatField(null=True, blank=True, help_text="An answer: the turn's time in the graph.")
    judge_score = models.FloatField(null=True, blank=True, help_text="An answer: the rule-based judge's score.")
    # An answer's usage, as the model reported it (every model call of the turn added up); metadata["usage"] has it
    # per model and call kind.
    prompt_tokens = models.PositiveIntegerField(default=0, help_text="An answer: prompt tokens of the turn.")
    completion_tokens = models.PositiveIntegerField(default=0, help_text="An answer: completion tokens of the turn.")
    llm_model = models.CharField(max_length=200, blank=True, help_text="An answer: the model that wrote it.")
    other_models = models.BooleanField(
        default=False,
        help_text="An answer: some of the turn's model calls went to another model than llm_model (their tokens are "
        "in metadata['usage']['calls'], by model).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "routing_message"
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="message_conversation_time"),
            # The analytics (covering, see Conversation): answers per specialist and cohort, user messages per cohort.
            # The live day's reads filter by profile and routing version too: included, so they read no table row.
            # The live day of every tenant (a staff read) by time; of one tenant (an API key) by tenant, role and time,
            # the index a tenant's delete reads too. Both hold the turn's tenant and language: no conversation read.
            models.Index(
                fields=["created_at", "agent", "cohort", "latency_ms", "judge_score", "conversation"],
                include=["profile", "routing_version", "tenant", "language"],
                condition=models.Q(role="assistant"),
                name="message_answer_window",
            ),
            models.Index(
                fields=["created_at", "cohort", "conversation"],
                include=["profile", "routing_version", "latency_ms", "judge_score", "tenant", "language"],
                condition=models.Q(role="user"),
                name="message_user_window",
            ),
            models.Index(
                fields=["tenant", "role", "created_at"],
                include=["agent", "cohort", "profile", "routing_version", "latency_ms", "judge_score", "language"],
                name="message_tenant_window",
            ),
            # A rollout plan's cohorts: one profile's turns of one version, in a window (releases.rollout.guard),
            # covering what the guard counts so that its query reads no table row; failed parts apart (PART_FAILED).
            models.Index(
                fields=["profile", "routing_version", "created_at"],
                include=["role", "conversation", "judge_score", "latency_ms"],
                name="message_version_time",
            ),
            models.Index(
                fields=["profile", "routing_version", "created_at"], condition=PART_FAILED, name="message_part_failed"
            ),
            # Usage per tenant, profile, model and day (the usage API and analytics): answers in a window, covering;
            # those whose turn called more than one model apart, their tokens split by model when read.
            models.Index(
                fields=["created_at"],
                include=["profile", "tenant", "llm_model", "prompt_tokens", "completion_tokens"],
                condition=models.Q(role="assistant", other_models=False),
                name="message_usage_window",
            ),
            models.Index(
                fields=["created_at"],
                condition=models.Q(role="assistant", other_models=True),
                name="message_usage_other_models",
            ),
            models.Index(
                fields=["created_at"],
                include=["profile", "conversation", "cohort", "routing_version"],
                condition=KNOWLEDGE_SEARCHED,
                name="message_knowledge_searched",
            ),
            models.Index(fields=["created_at"], condition=KNOWLEDGE_UNKNOWN, name="message_knowledge_unknown"),
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"

    def save(self, *args, **kwargs) -> None:
        # Derived columns, not business logic: the conversation's profile, tenant and language, when the writer did
        # not say them (the turn's rows always do, in bulk; a message saved one by one costs one read).
        if self.conversation_id is not None and (self.profile_id is None or self.tenant_id is None):
            found = (
                Conversation.objects.filter(pk=self.conversation_id)
                .values_list("profile_id", "tenant_id", "language")
                .first()
            )
            if found is not None:
                profile, tenant, language = found
                self.profile_id = self.profile_id if self.profile_id is not None else profile
                if self.tenant_id is None:
                    self.tenant_id, self.language = tenant, self.language or language
        super().save(*args, **kwargs)


class RouteDecisionRecord(models.Model):
    """A stored routing decision (the contract lives in :class:`routing.router.RouteDecision`)."""

    conversation = models.ForeignKey(  # indexed by decision_conversation_time
        Conversation, on_delete=models.CASCADE, related_name="route_decisions", db_index=False
    )
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
    # The turn's profile, cohort and routing version, repeated from its message (as agent_handoffs repeats them), so
    # that a rollout plan's cohort is one index range here too (releases.rollout.guard) and the analytics
    # count them without a join. Migration 0008 filled them in for stored rows; a row saved alone reads them.
    profile = models.ForeignKey(
        "agents.AgentProfile", on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )
    cohort = models.CharField(max_length=16, blank=True, help_text=COHORT_HELP)
    routing_version = models.PositiveIntegerField(null=True, blank=True)
    # No index of its own: decision_tenant_window leads with it. Nullable: added without a table rewrite (0030).
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )
    language = models.CharField(max_length=8, blank=True, help_text=TURN_LANGUAGE_HELP)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "routing_routedecisionrecord"
        ordering = ["created_at", "id"]
        verbose_name = "route decision"
        indexes = [
            models.Index(
                fields=["profile", "routing_version", "created_at"], include=["method"], name="decision_version_time"
            ),
            models.Index(fields=["conversation", "created_at"], name="decision_conversation_time"),
            # The analytics' routing-method mix (covering, see Conversation).
            models.Index(
                fields=["created_at", "method", "conversation"],
                include=["profile", "cohort", "routing_version", "tenant", "language"],
                name="decision_window_method",
            ),
            models.Index(
                fields=["tenant", "created_at"],
                include=["method", "profile", "cohort", "routing_version", "language"],
                name="decision_tenant_window",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.method}: {self.agent}/{self.intent}"

    def save(self, *args, **kwargs) -> None:
        turn_columns_fill(self)
        super().save(*args, **kwargs)


class ToolCallStatus(models.TextChoices):
    OK = "ok", "OK"
    ERROR = "error", "Error"
    TIMEOUT = "timeout", "Timeout"
    INVALID = "invalid_arguments", "Invalid arguments"
    UNAVAILABLE = "unavailable", "Server unavailable"
    NOT_OFFERED = "not_offered", "Not offered to the specialist"
    PERMISSION_REQUIRED = "permission_required", "Waiting for the user's permission"


class ToolCall(models.Model):
    conversation = models.ForeignKey(  # indexed by toolcall_conversation_time
        Conversation, on_delete=models.CASCADE, related_name="tool_calls", db_index=False
    )
    message = models.ForeignKey(Message, on_delete=models.CASCADE, null=True, blank=True, related_name="tool_calls")
    agent = models.CharField(max_length=64)
    tool = models.CharField(max_length=100)
    server = models.CharField(max_length=64, blank=True)
    arguments = models.JSONField(default=dict, blank=True, help_text="Masked.")
    status = models.CharField(max_length=32, choices=ToolCallStatus.choices)
    latency_ms = models.FloatField(default=0.0)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # The turn's profile, cohort and routing version, repeated from its message (as agent_handoffs repeats them), so
    # that a rollout plan's cohort is one index range here too (releases.rollout.guard) and the analytics
    # count them without a join. Migration 0008 filled them in for stored rows; a row saved alone reads them.
    profile = models.ForeignKey(
        "agents.AgentProfile", on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )
    cohort = models.CharField(max_length=16, blank=True, help_text=COHORT_HELP)
    routing_version = models.PositiveIntegerField(null=True, blank=True)
    # No index of its own: toolcall_tenant_window leads with it. Nullable: added without a table rewrite (0030).
    tenant = models.ForeignKey(
        "tenants.Tenant", on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "routing_toolcall"
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(
                fields=["profile", "routing_version", "created_at"], include=["status"], name="toolcall_version_time"
            ),
            models.Index(fields=["conversation", "created_at"], name="toolcall_conversation_time"),
            models.Index(fields=["tool", "created_at"], name="toolcall_tool_time"),
            # The analytics' per-tool figures (covering, see Conversation).
            models.Index(
                fields=["created_at", "tool", "server", "status", "latency_ms", "conversation"],
                include=["tenant", "profile", "cohort", "routing_version"],
                name="toolcall_window",
            ),
            models.Index(
                fields=["tenant", "created_at"],
                include=["tool", "server", "status", "latency_ms", "profile", "cohort", "routing_version"],
                name="toolcall_tenant_window",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool} ({self.status})"

    def save(self, *args, **kwargs) -> None:
        turn_columns_fill(self)
        super().save(*args, **kwargs)


class FeedbackRating(models.TextChoices):
    UP = "up", "Up (helpful)"
    DOWN = "down", "Down (not helpful)"


FEEDBACK_COMMENT_MAX_LENGTH = 1000


class MessageFeedback(models.Model):
    """A user's rating of one answer (an assistant message): up or down, with an optional comment.

    One per answer: rating it again replaces the row (``conversations.feedback.feedback_give``). ``tenant``,
    ``profile``, ``cohort``, ``routing_version`` and ``answered_at`` repeat what the conversation and the answer
    know (as ``Handoff`` and ``GoalRun`` do), so that the analytics and the rollout guards count feedback per
    cohort and version over this table alone, by when the rated answers were given. ``agent`` repeats who wrote the
    answer, ``route_agent`` and ``route_intent`` the route decision of its turn (the customer's message it replied
    to), so that the quality analytics group ratings by them without a lookup per rating.
    """

    message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="feedback")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="feedback")
    # No index of its own: feedback_tenant_window leads with it.
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="+")
    rating = models.CharField(max_length=8, choices=FeedbackRating.choices)
    comment = models.TextField(blank=True, max_length=FEEDBACK_COMMENT_MAX_LENGTH)
    user_id = models.CharField(
        max_length=200, blank=True, help_text="Who rated, through an API key: the user id as the conversation keeps it."
    )
    staff_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Who rated, through a staff session (the chat page).",
    )
    cohort = models.CharField(max_length=16, blank=True, help_text=COHORT_HELP)
    routing_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="The answer's routing version (blank: a draft or a never-published profile)."
    )
    answered_at = models.DateTimeField(help_text="When the rated answer was given (the answer's created_at).")
    agent = models.CharField(max_length=64, blank=True, help_text="The specialist that wrote the rated answer.")
    route_agent = models.CharField(
        max_length=64, blank=True, help_text="The agent the turn's route decision chose (blank: the turn stored none)."
    )
    route_intent = models.CharField(
        max_length=100, blank=True, help_text="The intent of the turn's route decision (blank: the turn stored none)."
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "conversations_messagefeedback"
        ordering = ["answered_at", "id"]
        verbose_name = "customer rating"
        verbose_name_plural = "customer ratings"
        indexes = [
            # The feedback analytics and guards: answers given in a window, for one tenant or for every tenant,
            # counted per cohort and version (covering, see Conversation).
            models.Index(
                fields=["tenant", "answered_at", "profile", "cohort", "routing_version", "rating"],
                name="feedback_tenant_window",
            ),
            models.Index(
                fields=["answered_at", "tenant", "profile", "cohort", "routing_version", "rating"],
                name="feedback_window",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.rating}: message {self.message_id}"


class IdempotentRequest(models.Model):
    """A message POST sent with an ``Idempotency-Key``: its answer, kept so a retry gets it instead of a second turn.

    One row per (tenant, endpoint, key); the unique constraint is what lets exactly one of two concurrent requests
    with the same key run its turn. ``response`` is empty while the turn runs (``turn`` is the turn's result once it
    is stored); the row expires at ``expires_at``
    (the face's logic: ``chat/idempotency.py``).
    """

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="idempotent_requests")
    endpoint = models.CharField(max_length=100)
    key = models.CharField(max_length=255)
    body_sha256 = models.CharField(max_length=64, help_text="The request body's fingerprint: a retry must repeat it.")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Empty while the turn runs.")
    response = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    turn = models.JSONField(
        null=True,
        blank=True,
        encoder=DjangoJSONEncoder,
        help_text="The turn's result, recorded by the transaction that stored the turn: a request that died before "
        "it stored its answer is answered from it on its retry.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "endpoint", "key"], name="idempotent_request_unique_key")
        ]

    def __str__(self) -> str:
        return f"{self.endpoint} {self.key}"


class GoalRunStatus(models.TextChoices):
    SUCCESS = "success", "Success"
    FAILURE = "failure", "Failure"
    CLARIFICATION = "clarification", "Asked the user to clarify"
    GENERAL = "general", "General (no goal: answered by a specialist)"


class GoalStepStatus(models.TextChoices):
    SUCCESS = "success", "Success"
    FAILURE = "failure", "Failure"
    CLARIFICATION = "clarification", "Asked the user to clarify"
    SKIPPED = "skipped", "Skipped"


# What the goal analytics read from each row, after the window's columns in their indexes (covering, see
# Conversation): PostgreSQL answers from the index alone.
GOAL_RUN_READ = [
    "status",
    "clarification_reason",
    "domain",
    "goal",
    "step_count",
    "failed_step_count",
    "plan_latency_ms",
]
GOAL_STEP_READ = ["domain", "capability", "status", "latency_ms"]


class GoalRun(models.Model):
    """One goal-mode answer, as :mod:`conversations.goals.records` reads it from the answer's ``metadata["goal"]``.

    The answer's metadata keeps the whole record (intent, plan, outputs); this row keeps what the analytics count.
    ``tenant``, ``profile`` and ``cohort`` repeat what the conversation and the message know (as ``Handoff``
    does), so that the analytics aggregate over this table alone; ``created_at`` is the answer's.
    """

    message = models.OneToOneField(Message, on_delete=models.CASCADE, related_name="goal_run")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="goal_runs")
    # No index of its own: goal_run_tenant_window leads with it (and the planner preferred the narrower one).
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="+")
    cohort = models.CharField(max_length=16, blank=True, help_text=COHORT_HELP)
    domain = models.CharField(max_length=64, blank=True, help_text="The intent's primary domain.")
    goal = models.CharField(max_length=100, blank=True)
    status = models.CharField(max_length=16, choices=GoalRunStatus.choices)
    clarification_reason = models.CharField(
        max_length=32, blank=True, help_text="A clarification's reason: low_confidence, missing_entity, ambiguous."
    )
    confidence = models.FloatField(default=0.0, help_text="The intent's confidence.")
    # Counts, not the rows: ``steps`` is the step rows' related name.
    step_count = models.PositiveSmallIntegerField(default=0, help_text="Steps in the plan (0: no plan).")
    failed_step_count = models.PositiveSmallIntegerField(default=0, help_text="Steps whose output was a failure.")
    plan_latency_ms = models.FloatField(
        null=True, blank=True, help_text="The plan's execution time; empty: no plan ran."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "conversations_goalrun"
        ordering = ["created_at", "id"]
        indexes = [
            # The goal analytics (analytics/selectors.py): a window for one tenant, or for every tenant.
            models.Index(fields=["tenant", "created_at", "profile", *GOAL_RUN_READ], name="goal_run_tenant_window"),
            models.Index(fields=["created_at", "tenant", "profile", *GOAL_RUN_READ], name="goal_run_window"),
        ]

    def __str__(self) -> str:
        return f"{self.domain}/{self.goal} ({self.status})"


class GoalStepRun(models.Model):
    """One step of a goal-mode answer's plan and what it did (its ``DomainOutput``'s status and metadata).

    ``tenant`` and ``profile`` repeat the run's, for the same reason as there.
    """

    run = models.ForeignKey(GoalRun, on_delete=models.CASCADE, related_name="steps")
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="+")
    step_id = models.PositiveSmallIntegerField(help_text="The step's id in the plan.")
    domain = models.CharField(max_length=64, blank=True)
    capability = models.CharField(max_length=100)
    status = models.CharField(max_length=16, choices=GoalStepStatus.choices)
    required = models.BooleanField(default=True)
    latency_ms = models.FloatField(null=True, blank=True, help_text="Empty: the step never ran.")
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "conversations_goalsteprun"
        ordering = ["run_id", "step_id"]
        indexes = [
            models.Index(fields=["tenant", "created_at", "profile", *GOAL_STEP_READ], name="goal_step_tenant_window"),
            models.Index(fields=["created_at", "tenant", "profile", *GOAL_STEP_READ], name="goal_step_window"),
        ]

    def __str__(self) -> str:
        return f"{self.step_id}. {self.capability} ({self.status})"


def turn_columns_fill(row: RouteDecisionRecord | ToolCall) -> None:
    """Derived columns, not business logic: a decision's or tool call's profile, tenant, language (a decision's),
    cohort and routing version from its conversation and message, when the writer did not say them (the turn's rows
    always do, in bulk)."""
    if row.conversation_id is None or (row.profile_id is not None and row.tenant_id is not None):
        return  # the writer said them (a blank cohort and no version are values too: a draft's turn)
    found = (
        Conversation.objects.filter(pk=row.conversation_id).values_list("profile_id", "tenant_id", "language").first()
    )
    if found is None:
        return
    said, (profile, tenant, language) = row.profile_id is not None, found
    if row.tenant_id is None:
        row.tenant_id = tenant
        if isinstance(row, RouteDecisionRecord):
            row.language = row.language or language
    if said:
        return
    row.profile_id = profile
    if row.message_id is not None and not row.cohort and row.routing_version is None:
        turn = Message.objects.filter(pk=row.message_id).values_list("cohort", "routing_version").first()
        if turn is not None:
            row.cohort, row.routing_version = turn


class BackendCallStatus(models.TextChoices):
    OK = "ok", "Answered"
    TIMEOUT = "timeout", "Timed out"
    UNREACHABLE = "unreachable", "Unreachable"
    SERVER_ERROR = "server_error", "Answered 5xx"
    REFUSED = "refused", "Refused the call (4xx)"
    BAD_ANSWER = "bad_answer", "Answered something else than the gateway API"
    CIRCUIT_OPEN = "circuit_open", "Not called: circuit open"
    LOOP = "loop", "Not called: too many gateway hops"


class BackendCall(models.Model):
    """One call (or skipped call) of a gateway turn to a remote backend: what the operator reads when one fails."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="backend_calls")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="+")
    backend = models.CharField(max_length=64)
    remote_agent = models.CharField(max_length=64, blank=True, help_text="The remote specialist that answered.")
    status = models.CharField(max_length=16, choices=BackendCallStatus.choices)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    latency_ms = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="backend_call_conv_time"),
            models.Index(fields=["backend", "status", "created_at"], name="backend_call_status_time"),
        ]

    def __str__(self) -> str:
        return f"{self.backend}: {self.status}"


# -- people in the loop ----------------------------------------------------------------------------------------


class EscalationStatus(models.TextChoices):
    QUEUED = "queued", "Waiting for a person"
    ASSIGNED = "assigned", "With a person"
    RETURNED = "returned", "Handed back to the assistants"
    CLOSED = "closed", "Closed (the conversation ended)"


# A person holds the conversation: its messages go to the desk, not to the assistants.
ESCALATION_OPEN = (EscalationStatus.QUEUED, EscalationStatus.ASSIGNED)


class EscalationReason(models.TextChoices):
    CUSTOMER_REQUEST = "customer_request", "The customer asked for a person"
    INTENT = "intent", "An intent answered by people"
    SPECIALIST = "specialist", "A specialist handed the conversation over"
    FALLBACKS = "fallbacks", "Fallback answers in a row"
    LOOP_STOP = "loop_stop", "Loop safety stopped a move"
    GOAL_FAILURE = "goal_failure", "A goal that could not be handled"
    THUMBS_DOWN = "thumbs_down", "The customer rated an answer down"
    GUARDRAIL_BLOCK = "guardrail_block", "A guardrail blocked the message"


class EscalationPriority(models.IntegerChoices):
    URGENT = 1, "Urgent"
    HIGH = 2, "High"
    NORMAL = 3, "Normal"
    LOW = 4, "Low"


class Escalation(models.Model):
    """A conversation handed to a person: it waits in its team's queue (per tenant and profile; higher priority
    first, then first come), is taken on a desk, answered, transferred, and handed back to the assistants.

    ``tenant`` and ``profile`` repeat the conversation's, as the handoffs do, so that a queue is one index range.
    ``summary`` is what the person who takes it reads first; ``desk`` names an external desk (a business's own
    contact-center tool, reached by a signed webhook), blank for the platform's own.
    """

    # A UUID, made before the row is stored: the turn that hands a conversation over names it in its answer, and
    # an external desk's API addresses it, without the platform's row numbers.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(  # indexed by escalation_conversation
        Conversation, on_delete=models.CASCADE, related_name="escalations", db_index=False
    )
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    profile = models.ForeignKey("agents.AgentProfile", on_delete=models.CASCADE, related_name="+")
    team = models.CharField(max_length=40, help_text="The queue it waits in.")
    priority = models.PositiveSmallIntegerField(choices=EscalationPriority.choices, default=EscalationPriority.NORMAL)
    status = models.CharField(max_length=16, choices=EscalationStatus.choices, default=EscalationStatus.QUEUED)
    reason = models.CharField(max_length=32, choices=EscalationReason.choices)
    reason_text = models.TextField(blank=True, help_text="Why, in words.")
    summary = models.TextField(blank=True, help_text="What the person who takes it needs to know first.")
    language = models.CharField(max_length=8, blank=True, help_text="The customer's language (pt, en, es).")
    from_agent = models.CharField(max_length=64, blank=True, help_text="The assistant that answered before.")
    intent = models.CharField(
        max_length=100, blank=True, help_text="The conversation's intent when it was handed over."
    )
    desk = models.CharField(max_length=40, blank=True, help_text="An external desk's name; blank: the platform's own.")
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    person = models.CharField(
        max_length=150,
        blank=True,
        help_text="Who answers, as the customer reads it (a staff user's or an external desk's person).",
    )
    person_ref = models.CharField(max_length=200, blank=True, help_text="An external desk's id for that person.")
    created_at = models.DateTimeField(default=timezone.now, help_text="When it was queued.")
    assigned_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True, help_text="Handed back, or closed.")

    class Meta:
        ordering = ["priority", "created_at", "id"]
        indexes = [
            # A queue: one tenant's waiting conversations by team, in serving order (the position counts them).
            models.Index(
                fields=["tenant", "profile", "team", "priority", "created_at"],
                condition=models.Q(status="queued"),
                name="escalation_queue",
            ),
            models.Index(fields=["tenant", "status", "created_at"], name="escalation_tenant_status"),
            models.Index(fields=["conversation", "created_at"], name="escalation_conversation"),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} → {self.team} ({self.status})"


# What the outcome analytics read after the window's columns (covering, see Conversation).
OUTCOME_READ = ["cohort", "routing_version", "outcome", "intent", "goal", "agent", "rated_up", "rated_down"]


class ConversationOutcome(models.Model):
    """How one conversation ended (docs/analytics.md, "Outcomes"), with what the outcome analytics and the rollout
    guards count it by: written when a person is asked for (``escalated``, final), or when the conversation closes
    (``resolved`` or ``abandoned``).

    ``tenant``, ``profile``, ``cohort`` and ``routing_version`` repeat the conversation's last turn, ``intent``,
    ``goal`` and ``agent`` where it stood, so that the analytics read this table alone; ``rated_up`` and
    ``rated_down`` count its rated answers (the CSAT).
    """

    conversation = models.OneToOneField(Conversation, on_delete=models.CASCADE, related_name="ended")
    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+", db_index=False)
    profile = models.ForeignKey(  # indexed by outcome_version
        "agents.AgentProfile", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    reason = models.CharField(
        max_length=32,
        blank=True,
        help_text="Why: closing_words, rated_up, a person's reason (customer_request, …), timeout, session_ended.",
    )
    cohort = models.CharField(max_length=16, blank=True, help_text=COHORT_HELP)
    routing_version = models.PositiveIntegerField(null=True, blank=True)
    intent = models.CharField(max_length=100, blank=True)
    goal = models.CharField(max_length=100, blank=True, help_text="Goal mode: the last goal served.")
    agent = models.CharField(max_length=64, blank=True, help_text="The assistant that answered last.")
    rated_up = models.PositiveIntegerField(default=0)
    rated_down = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(help_text="When the conversation started.")
    decided_at = models.DateTimeField(default=timezone.now, help_text="When the outcome was decided.")

    class Meta:
        ordering = ["decided_at", "id"]
        indexes = [
            models.Index(fields=["tenant", "decided_at", "profile", *OUTCOME_READ], name="outcome_tenant_window"),
            models.Index(fields=["decided_at", "tenant", "profile", *OUTCOME_READ], name="outcome_window"),
            # A rollout plan's cohorts (releases.rollout.guard).
            models.Index(
                fields=["profile", "routing_version", "decided_at"],
                include=["outcome", "cohort"],
                name="outcome_version",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}: {self.outcome}"


class ExternalDeskEvent(models.Model):
    """An escalation's change on its way to an external desk (conversations.desk.webhook): the outbox its webhook
    posts from, in order per escalation (by ``id``), each event signed at every attempt. A delivered event leaves the
    table; one given up after its retries is logged and leaves it too.

    ``due_at`` is when it may be tried (later after each failure); ``leased_until`` marks the one a process is posting
    now, so that no other posts the escalation's events meanwhile (a lease outlives the post's timeout).
    """

    event_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False, help_text="The event's id.")
    escalation = models.ForeignKey(Escalation, on_delete=models.CASCADE, related_name="+")
    desk = models.CharField(max_length=40, help_text="The external desk's name.")
    type = models.CharField(max_length=40, help_text="escalation.opened, escalation.message, …")
    # The exact JSON posted, kept as text: each attempt posts the same bytes (a JSON column would reorder the keys).
    body = models.TextField(help_text="The event as posted: its JSON text.")
    attempts = models.PositiveSmallIntegerField(default=0)
    due_at = models.DateTimeField(default=timezone.now)
    leased_until = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=200, blank=True, help_text="The last failure: HTTP 503, failed: …")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["escalation", "id"], name="desk_event_escalation"),
            models.Index(fields=["due_at"], name="desk_event_due"),
        ]

    def __str__(self) -> str:
        return f"{self.type} → {self.desk}"
