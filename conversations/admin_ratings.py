"""Customers' ratings in the admin: the inbox of what customers said about the answers they got.

Answers rated down come first (the rating filter starts on "Rated down"), newest first, each with its comment, the
customer's message and the answer, the profile, routing version and rollout cohort that served it, and how the
message was routed (the turn's decision: intent, agent, method, :func:`conversations.feedback.feedback_with_turn`).
Each row opens its conversation at the rated answer and, for users who may add conversation tests, turns it into one
("Add as conversation test": the conversation up to the answer, :mod:`routing.conversation_tests.drafts`).
Read-only; users see the tenants they may read (:mod:`tenants.admin_scope`). Registered by
``conversations/admin.py``'s last import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias, get_args

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import truncatechars
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from common.adminkit import ReadOnlyAdminMixin
from conversations.feedback import feedback_with_turn
from conversations.models import FeedbackRating, MessageFeedback
from routing.public import Method, conversation_test_may_add
from tenants.public import ReadableTenantFilter, TenantScopedAdminMixin

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    from conversations.feedback import FeedbackTurn

    Rated: TypeAlias = WithAnnotations[MessageFeedback, FeedbackTurn]  # a row of the list, with its turn

EXCERPT = 140
ALL_RATINGS = "all"
DRAFT = "draft"
NO_COHORT = "none"
COHORT_LABELS = {"multi_agent": "Multi-agent", "single_agent": "Single-agent", NO_COHORT: "Not decided by the flag"}
RATING_LABELS = {FeedbackRating.DOWN: "Rated down", FeedbackRating.UP: "Rated up"}
RATING_SHOWN: dict[str, str] = {FeedbackRating.DOWN.value: "down", FeedbackRating.UP.value: "up"}
METHOD_LABELS: dict[str, str] = {
    "small_talk": "Small talk",
    "state": "Conversation state",
    "followup": "Follow-up",
    "keyword": "Keyword",
    "examples": "Examples",
    "llm": "LLM classifier",
    "llm_plan": "Supervisor plan",
    "fallback": "Fallback",
    "coordinator": "Coordinator",
    "sub_conversation": "Sub-conversation",
    "permission": "Permission reply",
    "goal": "Goal",
    "repair": "Repair (cancel, correct, repeat…)",
    "memory": "Customer memory",
}


def breakable(name: str) -> SafeString:
    """An identifier that may wrap after its underscores (``billing_invoice_explanation`` in a narrow column); the
    conversation store's lists use it too."""
    return mark_safe(escape(name).replace("_", "_<wbr>"))  # noqa: S308  # escaped first


class RatingFilter(admin.SimpleListFilter):
    """Rated down (the default: the inbox opens on what went wrong), rated up, or every rating."""

    title = "rating"
    parameter_name = "rating"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*RATING_LABELS.items(), (ALL_RATINGS, "All ratings")]

    def value(self) -> str:
        return super().value() or FeedbackRating.DOWN

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset if value == ALL_RATINGS else queryset.filter(rating=value)

    def choices(self, changelist: Any) -> Any:
        # No "All" entry of the admin's: without the parameter the list shows the answers rated down.
        for choice in super().choices(changelist):
            if choice["query_string"] != changelist.get_query_string(remove=[self.parameter_name]):
                yield choice


class MethodFilter(admin.SimpleListFilter):
    """How the customer's message was routed (the turn's route decision)."""

    title = "routing method"
    parameter_name = "method"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(method, METHOD_LABELS.get(method, method)) for method in get_args(Method)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(decision_method=self.value()) if self.value() else queryset


class VersionFilter(admin.SimpleListFilter):
    """The routing version that served the answer (numbers are per profile), or a draft: no published version."""

    title = "routing version"
    parameter_name = "version"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        numbers = (
            model_admin.get_queryset(request)
            .order_by("-routing_version")
            .values_list("routing_version", flat=True)
            .distinct()
        )
        return [(str(number), f"v{number}") if number else (DRAFT, "Draft or unpublished") for number in numbers]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        if value == DRAFT:
            return queryset.filter(routing_version__isnull=True)
        return queryset.filter(routing_version=int(value)) if value.isdigit() else queryset.none()


class CohortFilter(admin.SimpleListFilter):
    """Which side of the multi_agent rollout flag answered."""

    title = "rollout cohort"
    parameter_name = "cohort"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*COHORT_LABELS.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value not in COHORT_LABELS:
            return queryset
        return queryset.filter(cohort="" if value == NO_COHORT else value)


@admin.register(MessageFeedback)
class MessageFeedbackAdmin(TenantScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "answered",
        "rating_shown",
        "comment_excerpt",
        "question_excerpt",
        "answer_excerpt",
        "route",
        "served_by",
    ]
    list_display_links = None  # each row opens its conversation (the "when" column)
    list_filter = [
        RatingFilter,
        "profile",
        ("tenant", ReadableTenantFilter),
        VersionFilter,
        MethodFilter,
        CohortFilter,
    ]
    list_select_related = ["message", "profile", "tenant"]
    search_fields = ["comment", "message__content", "conversation__conversation_key"]
    date_hierarchy = "answered_at"
    ordering = ["-answered_at", "-id"]
    list_per_page = 50
    fields = readonly_fields = (
        "conversation_link",
        "rating",
        "comment",
        "customer_message",
        "answer",
        "route",
        "tenant",
        "profile",
        "routing_version",
        "cohort",
        "answered_at",
        "created_at",
        "updated_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[MessageFeedback]:
        return feedback_with_turn(super().get_queryset(request))

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = list(super().get_list_display(request))
        return [*shown, "add_as_test"] if conversation_test_may_add(request) else shown

    @admin.display(description="test")
    def add_as_test(self, obj: MessageFeedback) -> str:
        url = reverse(
            "admin:conversations_conversation_add_conversation_test", args=[obj.conversation_id, obj.message_id]
        )
        return format_html('<a href="{}" class="addlink rating-add-test">Add as conversation test</a>', url)

    @staticmethod
    def conversation_url(obj: MessageFeedback) -> str:
        page = reverse("admin:conversations_conversation_change", args=[obj.conversation_id])
        return f"{page}#answer-{obj.message_id}"

    @admin.display(description="answered", ordering="answered_at")
    def answered(self, obj: MessageFeedback) -> str:
        return format_html(
            '<a href="{}" class="rating-conversation" title="Open the conversation at this answer">{}</a>',
            self.conversation_url(obj),
            obj.answered_at.strftime("%Y-%m-%d %H:%M"),
        )

    @admin.display(description="rating", ordering="rating")
    def rating_shown(self, obj: MessageFeedback) -> str:
        return format_html(
            '<span class="rating-badge rating-badge-{}">{}</span>', obj.rating, RATING_SHOWN.get(obj.rating, obj.rating)
        )

    @admin.display(description="comment")
    def comment_excerpt(self, obj: MessageFeedback) -> str:
        return truncatechars(obj.comment, EXCERPT) if obj.comment else "–"

    @admin.display(description="customer's message")
    def question_excerpt(self, obj: Rated) -> str:
        return truncatechars(obj.question_text or "", EXCERPT) or "–"

    @admin.display(description="answer")
    def answer_excerpt(self, obj: MessageFeedback) -> str:
        return truncatechars(obj.message.content, EXCERPT)

    @admin.display(description="routed to")
    def route(self, obj: Rated) -> str:
        intent = obj.decision_intent
        if not intent:
            return "–"
        method = obj.decision_method or ""
        return format_html(
            '{}<span class="quiet">→ {} · {}</span>',
            breakable(intent),
            breakable(obj.decision_agent or "–"),
            METHOD_LABELS.get(method, method),
        )

    @admin.display(description="served by")
    def served_by(self, obj: MessageFeedback) -> str:
        version = f"v{obj.routing_version}" if obj.routing_version else "draft"
        return format_html(
            '{}<span class="quiet">{} · {}</span>',
            breakable(obj.profile.agent_id),
            version,
            breakable(obj.cohort) if obj.cohort else "no cohort",
        )

    @admin.display(description="conversation")
    def conversation_link(self, obj: MessageFeedback) -> str:
        return format_html('<a href="{}">Open the conversation at this answer</a>', self.conversation_url(obj))

    @admin.display(description="customer's message")
    def customer_message(self, obj: Rated) -> str:
        return obj.question_text or "–"

    @admin.display(description="answer")
    def answer(self, obj: MessageFeedback) -> str:
        return obj.message.content
