"""Where the platform keeps what it knows about one end user of a tenant, and what erasing them does to each table.

A *holder* is a model whose rows may hold a customer's data: their user or session id, their words (messages, a
rating's comment, an escalation's summary), or what was done for them (a tool call's arguments and result). Each is
reached from the customer — a tenant and the user id as the store keeps it — either directly (the conversation;
later, a memory of facts keyed by the customer) or through one of the customer's conversations, and erasure either
deletes its rows or anonymises named fields and keeps the row.

Rows the analytics count (messages, route decisions, tool calls, handoffs, ratings, outcomes, goal runs) are
anonymised, never deleted: the dashboard reads today and every day not yet rolled up from these rows themselves
(:mod:`analytics.rollups`), so a deleted row would change yesterday's totals. Their counted columns (role, agent,
cohort, version, tool, status, latency, tokens) name nobody and stay.

:func:`holds_customer_data` is the rule a model is held to (``conversations/tests/test_customer_data_registry.py``
walks every installed model): a model with a relation to a holder, a field that names an end user or a conversation
(:data:`IDENTIFYING_FIELDS`, or ending in ``_message_id`` / ``_conversation_id``), or any free text or JSON field
must be a holder, or listed in :data:`NO_CUSTOMER_DATA` with the reason it holds none, or in :data:`NOT_PER_TENANT`
with the reason it is no single tenant's to export or erase.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.apps import apps
from django.contrib.contenttypes.models import ContentType
from django.db import models
from django.db.models import Q
from django.db.models.functions import Cast, Concat

from conversations.models import Conversation, Message


class Erase(enum.StrEnum):
    DELETE = "delete"  # the rows go
    ANONYMISE = "anonymise"  # the rows stay (they are counted), their fields in ``blank`` and ``kept_keys`` emptied


@dataclass(frozen=True)
class Customer:
    """One end user of one tenant: ``user_ids`` are the spellings the store may keep (the id as sent, and its keyed
    pseudonym when it is personal data, :func:`conversations.guardrails.identifier_pseudonym`)."""

    tenant_id: int
    user_ids: tuple[str, ...]


@dataclass(frozen=True)
class Holder:
    """A model holding customer data, how its rows are reached, and what erasure does to them.

    Exactly one of ``of_customer`` and ``of_conversations`` says which rows: those of the customer, or those of some
    of their conversations (read with their profiles), reached in one filter however many there are (a retention
    purge's batch, an erasure's one conversation). ``blank``: fields set to their empty value (``""``, ``None``, or the
    field's default ``{}``/``[]``); ``kept_keys``: JSON fields of which only these keys stay (figures the analytics
    or the usage read); ``values``: fields given a value or an expression of the row's own columns.
    """

    label: str
    name: str  # the export's key
    erase: Erase
    of_customer: Callable[[Customer], Q] | None = None
    of_conversations: Callable[[Sequence[Conversation]], Q] | None = None
    blank: tuple[str, ...] = ()
    kept_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    values: Mapping[str, Callable[[], Any]] = field(default_factory=dict)

    @property
    def model(self) -> type[models.Model]:
        return apps.get_model(self.label)

    def rows(self, reach: Q) -> models.QuerySet[Any]:
        return self.model._default_manager.filter(reach).order_by("pk")


def _erased_name() -> Any:
    # Unique, as the conversation key must be, and naming nobody: the row's own number.
    return Concat(models.Value("erased:"), Cast("pk", models.CharField()))


def _pks(conversations: Sequence[Conversation]) -> list[int]:
    return [conversation.pk for conversation in conversations]


def _tests_made_from(conversations: Sequence[Conversation]) -> Q:
    return Q(source_message_id__in=Message.objects.filter(conversation_id__in=_pks(conversations)).values("pk"))


TESTS_MADE_FROM_MESSAGES = ("releases.RoutingTestCase", "releases.ConversationTest")


def _history_of_tests_made_from(conversations: Sequence[Conversation]) -> Q:
    # The field history (django-auditlog) of a saved test records its messages as written.
    reach = Q(pk__in=[])
    for label in TESTS_MADE_FROM_MESSAGES:
        made = apps.get_model(label).objects.filter(_tests_made_from(conversations))
        reach |= Q(
            content_type=ContentType.objects.get_for_model(made.model),
            object_pk__in=[str(pk) for pk in made.values_list("pk", flat=True)],
        )
    return reach


def _by_tenant(conversations: Sequence[Conversation]) -> dict[int, list[Conversation]]:
    grouped: dict[int, list[Conversation]] = defaultdict(list)
    for conversation in conversations:
        grouped[conversation.tenant_id].append(conversation)
    return grouped


def _a2a_tasks_of(conversations: Sequence[Conversation]) -> Q:
    # An A2A task names its conversation by the protocol's contextId: the conversation's session id.
    sessions: dict[tuple[int, str], list[str]] = defaultdict(list)
    for conversation in conversations:
        sessions[conversation.tenant_id, conversation.profile.agent_id].append(conversation.session_id)
    reach = Q(pk__in=[])
    for (tenant_id, agent_id), session_ids in sessions.items():
        reach |= Q(tenant_id=tenant_id, agent_id=agent_id, context_id__in=session_ids)
    return reach


def _idempotent_requests_of(conversations: Sequence[Conversation]) -> Q:
    reach = Q(pk__in=[])
    for tenant_id, mine in _by_tenant(conversations).items():
        reach |= Q(tenant_id=tenant_id, turn__conversation_pk__in=_pks(mine))
    return reach


def _of_customer(customer: Customer) -> Q:
    return Q(tenant_id=customer.tenant_id, user_id__in=customer.user_ids)


def conversations_of(customer: Customer) -> models.QuerySet[Conversation]:
    """The customer's conversations, with their profiles, oldest first."""
    return Conversation.objects.filter(_of_customer(customer)).select_related("profile").order_by("pk")


def _in_conversations(conversations: Sequence[Conversation]) -> Q:
    return Q(conversation_id__in=_pks(conversations))


# The conversation first (the export nests the others under it), then what hangs off it, parents before children;
# erasure runs the list backwards, so a row is still reachable through its parent when it is erased.
HOLDERS: tuple[Holder, ...] = (
    Holder(
        "conversations.Conversation",
        "conversations",
        Erase.ANONYMISE,
        of_customer=_of_customer,
        # The live state goes with the ids (what DELETE /api/sessions/{key} forgets, and more).
        blank=(
            "user_id",
            "state",
            "active_specialist",
            "active_intent",
            "backend_task",
            "sub_conversation",
            "pending_result",
            "pending_permission",
            "granted_permissions",
            "goal_state",
            "stack",
            "memory_summary",
        ),
        values={"session_id": _erased_name, "conversation_key": _erased_name},
    ),
    Holder(
        "conversations.Message",
        "messages",
        Erase.ANONYMISE,
        of_conversations=_in_conversations,
        blank=("content",),
        # Kept: the turn's number (answers are found by it), a part's status (a rollout guard counts failed parts),
        # a note's kind, and the turn's usage per model (the usage figures split tokens by model from it).
        kept_keys={"metadata": ("turn", "status", "kind", "usage")},
    ),
    Holder(
        "conversations.RouteDecisionRecord",
        "route_decisions",
        Erase.ANONYMISE,
        of_conversations=_in_conversations,
        blank=("reason", "metadata"),
    ),
    Holder(
        "conversations.ToolCall",
        "tool_calls",
        Erase.ANONYMISE,
        of_conversations=_in_conversations,
        blank=("arguments", "result", "error"),
    ),
    Holder(
        "handoffs.Handoff",
        "handoffs",
        Erase.ANONYMISE,
        of_conversations=_in_conversations,
        blank=("reason", "context_summary"),
    ),
    Holder(
        "conversations.MessageFeedback",
        "ratings",
        Erase.ANONYMISE,
        of_conversations=_in_conversations,
        blank=("comment", "user_id"),
    ),
    Holder(
        "conversations.Escalation",
        "escalations",
        Erase.ANONYMISE,
        of_conversations=_in_conversations,
        blank=("reason_text", "summary"),
    ),
    Holder(
        "conversations.ExternalDeskEvent",
        "external_desk_events",
        Erase.DELETE,  # an outbox: what is still to be posted, quoting the conversation
        of_conversations=lambda conversations: Q(escalation__conversation_id__in=_pks(conversations)),
    ),
    Holder("conversations.ConversationOutcome", "outcome", Erase.ANONYMISE, of_conversations=_in_conversations),
    Holder("conversations.GoalRun", "goal_runs", Erase.ANONYMISE, of_conversations=_in_conversations),
    Holder(
        "conversations.GoalStepRun",
        "goal_steps",
        Erase.ANONYMISE,
        of_conversations=lambda conversations: Q(run__conversation_id__in=_pks(conversations)),
        blank=("error",),
    ),
    Holder(
        "conversations.BackendCall",
        "backend_calls",
        Erase.ANONYMISE,
        of_conversations=_in_conversations,
        blank=("error",),
    ),
    Holder("conversations.A2ATask", "a2a_tasks", Erase.DELETE, of_conversations=_a2a_tasks_of),
    Holder(
        "conversations.IdempotentRequest",
        "idempotent_requests",
        Erase.DELETE,  # a retry's stored answer; it expires anyway
        of_conversations=_idempotent_requests_of,
    ),
    Holder("releases.RoutingTestCase", "routing_tests", Erase.DELETE, of_conversations=_tests_made_from),
    Holder("releases.ConversationTest", "conversation_tests", Erase.DELETE, of_conversations=_tests_made_from),
    # A run's result of such a test repeats its turns and the answers they got.
    Holder(
        "releases.ConversationTestResult", "conversation_test_results", Erase.DELETE, of_conversations=_tests_made_from
    ),
    Holder("auditlog.LogEntry", "routing_test_history", Erase.DELETE, of_conversations=_history_of_tests_made_from),
    # What the platform remembers of them across conversations (conversations.memory), theirs alone.
    Holder("conversations.CustomerFact", "facts", Erase.DELETE, of_customer=_of_customer),
)

HOLDER_LABELS = frozenset(holder.label for holder in HOLDERS)
ROOT = HOLDERS[0]

CONFIGURATION = "the business's configuration, written by editors and operators in the admin, never by a turn"
# A customer's own documents (uploaded in a conversation) are not stored: when they are, they become a holder.
KNOWLEDGE = "the business's documents, uploaded or pasted by its knowledge editors in the admin, never by a turn"
NO_CUSTOMER_DATA: Mapping[str, str] = {
    "admin.LogEntry": "staff's changes in the admin; the conversation store's pages are read-only, so none is logged",
    "sessions.Session": "staff's logins (the chat page and the desk); customers reach the platform by API key",
    "agents.AgentProfile": CONFIGURATION,
    "agents.Specialist": CONFIGURATION,
    "agents.SpecialistPrompt": CONFIGURATION,
    "agents.McpServer": CONFIGURATION,
    "agents.McpTool": CONFIGURATION,
    "agents.RemoteBackend": CONFIGURATION,
    "agents.ExternalDesk": CONFIGURATION,
    "knowledge.KnowledgeSource": KNOWLEDGE,
    "knowledge.KnowledgeDocument": KNOWLEDGE,
    "knowledge.KnowledgePassage": KNOWLEDGE,
    "knowledge.KnowledgeUpload": KNOWLEDGE,
    "routing.Intent": CONFIGURATION,
    "routing.Keyword": CONFIGURATION,
    "routing.StatePolicy": CONFIGURATION,
    "routing.Goal": CONFIGURATION + " (or an MCP server's manifest)",
    "routing.Capability": CONFIGURATION + " (or an MCP server's manifest)",
    "routing.RolloutFlag": CONFIGURATION,
    "routing.RolloutFlagChange": "a flag's history; a user override's id is recorded as its keyed pseudonym",
    "routing.RoutingVersion": "a published copy of the configuration",
    "routing.LiveRollout": "a running rollout plan's candidate, stages and settings, as the plan holds them",
    "releases.RolloutPlan": CONFIGURATION + "; its history holds figures",
    "releases.RolloutDecision": "a rollout's decision and the cohorts' figures: counts, no conversation",
    "releases.ReleaseRequest": "an editor's request and an approver's note",
    "releases.ConversationTestRun": "a run of saved tests: counts, model usage, coverage; each test's words and "
    "answers are in its results (releases.ConversationTestResult)",
    "conversations.CustomerErasure": "the record of an erasure: the customer's keyed pseudonym, who asked, counts",
    "tenants.RetentionPurge": "the record of a tenant's retention purge: its cutoff and the rows purged, counts",
}
NOT_PER_TENANT: Mapping[str, str] = {
    "routing.RolloutUserOverride": (
        "an operator's rollout override keyed by a user id, for every tenant at once: no one tenant's to export or "
        "erase; the operator deletes it in the admin"
    ),
}

IDENTIFYING_FIELDS = frozenset({"user_id", "session_id", "context_id", "conversation_key"})


def holds_customer_data(model: type[models.Model]) -> bool:
    """Whether ``model`` may hold a customer's data, by its fields: a relation to a holder, a field that names an
    end user or a conversation, or free text or JSON (what a customer's words or a tool's arguments fit in)."""
    for model_field in model._meta.concrete_fields:
        related = model_field.related_model
        if isinstance(related, type) and related._meta.label in HOLDER_LABELS:
            return True
        name = model_field.name
        if name in IDENTIFYING_FIELDS or name.endswith(("_message_id", "_conversation_id")):
            return True
        if isinstance(model_field, models.TextField | models.JSONField):
            return True
    return False
