"""The conversation store in the admin: read-only, nobody writes it there, and each user sees the tenants they may
read (:mod:`tenants.admin_scope`).

A conversation's page leads with its timeline (:mod:`conversations.timeline`): each turn's message, route decision
and why, what it did to the conversation's open flows (:mod:`routing.stack_explained`), the agents that answered,
tools, moves and the answer with its rating. A stored user message or route decision can become a saved routing
test ("Add as routing test case", the timeline's link on each message, and the decision list's action), for users
who may add them: a real misroute turned into a test of the right answer. An answer (and a customer message) can
become a saved conversation test ("Add as conversation test", on the timeline and in the ratings inbox): the
conversation's turns up to it, each expecting what happened, the answer shown for the editor to mark what was wrong.
Customers' ratings have their own list (:mod:`conversations.admin_ratings`).
"""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.defaultfilters import truncatechars
from django.urls import path, reverse

from common.adminkit import ExtensibleAdmin, ReadOnlyAdminMixin, ReadOnlyInlineMixin
from conversations import admin_memory  # noqa: F401  # registers the customers' facts
from conversations.admin_ratings import breakable
from conversations.models import (
    BackendCall,
    Conversation,
    GoalRun,
    Message,
    RouteDecisionRecord,
    ToolCall,
)
from conversations.saved_test_drafts import conversation_test_draft, decision_draft, message_draft
from conversations.timeline import conversation_timeline
from routing.public import (
    RoutingTestDraft,
    conversation_test_add_url,
    conversation_test_may_add,
    frames_told,
    test_case_add_url,
    test_case_may_add,
)
from tenants.public import ReadableTenantFilter, TenantScopedAdminMixin

ADD_TEST_CASE_LABEL = "Add as routing test case"
ADD_TEST_CASE_TEMPLATE = "admin/conversations/add_test_case_change_form.html"
EXCERPT = 100  # characters of a message shown in a list


def _add_url(request: HttpRequest, draft: RoutingTestDraft | None) -> str:
    return test_case_add_url(draft) if draft is not None and test_case_may_add(request) else ""


class AddTestCaseLinkMixin:
    """A stored record's page with the "Add as routing test case" link, for users who may add saved tests (the
    admin sets ``change_form_template = ADD_TEST_CASE_TEMPLATE``)."""

    def routing_test_draft(self, request: HttpRequest, object_id: str) -> RoutingTestDraft | None:
        raise NotImplementedError

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        try:
            url = _add_url(request, self.routing_test_draft(request, object_id)) if test_case_may_add(request) else ""
        except (ValueError, ValidationError):  # not an id: the admin answers it as it does
            url = ""
        context = {**(extra_context or {}), "add_test_case_url": url, "add_test_case_label": ADD_TEST_CASE_LABEL}
        return super().change_view(request, object_id, form_url, context)  # type: ignore[misc]


class BackendCallInline(ReadOnlyInlineMixin, admin.TabularInline):
    """The gateway's calls to remote backends (docs/gateway.md): which answered, which failed and why."""

    model = BackendCall
    fields = ["created_at", "backend", "remote_agent", "status", "http_status", "latency_ms", "error"]
    verbose_name_plural = "remote backend calls"


class GoalRunInline(ReadOnlyInlineMixin, admin.TabularInline):
    """Goal-mode answers as the analytics count them (each step is in the answer's metadata)."""

    model = GoalRun
    fields = [
        "created_at",
        "domain",
        "goal",
        "status",
        "clarification_reason",
        "step_count",
        "failed_step_count",
        "plan_latency_ms",
    ]
    verbose_name_plural = "goal-mode answers"


@admin.register(Conversation)
class ConversationAdmin(ExtensibleAdmin, TenantScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """A conversation's page: its timeline first (the turns, oldest first, each with its route, what it did to the
    open flows, agents, tools, moves, answer and rating), then its details (the flows open now among them); remote
    backend calls and goal-mode answers in full below."""

    change_form_template = "admin/conversations/conversation/change_form.html"
    list_display = [
        "conversation_key",
        "tenant",
        "profile",
        "user_id",
        "channel",
        "state",
        "active_specialist",
        "message_count",
        "updated_at",
    ]
    list_filter = [("tenant", ReadableTenantFilter), "profile", "channel", "updated_at"]
    list_select_related = ["tenant", "profile"]
    search_fields = ["conversation_key", "session_id", "user_id", "state", "active_specialist"]
    date_hierarchy = "created_at"
    inlines = [BackendCallInline, GoalRunInline]
    fieldsets = [
        (None, {"fields": ["conversation_key", "tenant", "profile", "session_id", "user_id", "channel", "language"]}),
        (
            "State",
            {
                "fields": [
                    "state",
                    "open_flows",
                    "active_specialist",
                    "active_backend",
                    "pending_result",
                    "granted_permissions",
                ]
            },
        ),
        ("Memory", {"fields": ["memory_summary", "memory_summary_through"]}),
        ("Activity", {"fields": ["message_count", "created_at", "updated_at"]}),
    ]
    readonly_fields = ["open_flows"]

    @admin.display(description="open flows")
    def open_flows(self, obj: Conversation) -> str:
        """The flows the conversation has open (its stored stack), the one the next reply goes to first."""
        return "; ".join(frames_told(obj.stack)) or "–"

    def get_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(self.add_routing_test_view)
        conversation_test = self.admin_site.admin_view(self.add_conversation_test_view)
        return [
            path(
                "<path:object_id>/routing-test/<int:message_id>/",
                view,
                name="conversations_conversation_add_routing_test",
            ),
            path(
                "<path:object_id>/conversation-test/<int:message_id>/",
                conversation_test,
                name="conversations_conversation_add_conversation_test",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        conversation = cast(Conversation, self.scoped_object(request, object_id))
        model_urls = {
            model: reverse(f"admin:conversations_{model}_changelist")
            for model in ("message", "routedecisionrecord", "toolcall")
            if request.user.has_perm(f"conversations.view_{model}")
        }
        context = {
            **(extra_context or {}),
            "timeline": conversation_timeline(conversation=conversation),
            "may_add_routing_tests": test_case_may_add(request),
            "may_add_conversation_tests": conversation_test_may_add(request),
            "messages_url": model_urls.get("message", ""),
            "decisions_url": model_urls.get("routedecisionrecord", ""),
            "tool_calls_url": model_urls.get("toolcall", ""),
        }
        return super().change_view(request, object_id, form_url, context)

    def add_routing_test_view(self, request: HttpRequest, object_id: str, message_id: int) -> HttpResponse:
        """The timeline's "Add as routing test" on a customer message: the saved test's add form, filled in with the
        message, the state and specialist it arrived in and what was decided (as a message's own page does)."""
        message = self._message_to_test(request, object_id, message_id, may_add=test_case_may_add(request))
        draft = message_draft(message) if message is not None else None
        if draft is None:
            raise Http404("No message of the customer's with this id in this conversation.")
        return HttpResponseRedirect(test_case_add_url(draft))

    def add_conversation_test_view(self, request: HttpRequest, object_id: str, message_id: int) -> HttpResponse:
        """ "Add as conversation test" on an answer (the timeline's, the ratings inbox's) or a customer message: the
        saved conversation test's add form, filled in with the conversation's turns up to it."""
        message = self._message_to_test(request, object_id, message_id, may_add=conversation_test_may_add(request))
        draft = conversation_test_draft(message) if message is not None else None
        if draft is None:
            raise Http404("No answer or customer message with this id in this conversation.")
        return HttpResponseRedirect(conversation_test_add_url(request, draft))

    def _message_to_test(
        self, request: HttpRequest, object_id: str, message_id: int, *, may_add: bool
    ) -> Message | None:
        """The conversation's message a test is made of (``None``: not one of its), for users who may read the
        conversation and add the test."""
        if not (self.has_view_permission(request) and may_add):
            raise PermissionDenied
        conversation = self.scoped_object(request, object_id)
        return (
            Message.objects.select_related("conversation")
            .filter(pk=message_id, conversation_id=conversation.pk)
            .first()
        )


@admin.register(Message)
class MessageAdmin(TenantScopedAdminMixin, AddTestCaseLinkMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    tenant_lookup = "conversation__tenant"
    change_form_template = ADD_TEST_CASE_TEMPLATE
    list_display = ["created_at", "conversation", "role", "agent", "excerpt"]
    list_filter = ["role", "profile", ("conversation__tenant", ReadableTenantFilter), "created_at"]
    list_select_related = ["conversation"]
    search_fields = ["content", "agent", "conversation__conversation_key"]
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-id"]

    @admin.display(description="content")
    def excerpt(self, obj: Message) -> str:
        return truncatechars(obj.content, EXCERPT)

    def routing_test_draft(self, request: HttpRequest, object_id: str) -> RoutingTestDraft | None:
        message = self.get_queryset(request).select_related("conversation").filter(pk=object_id).first()
        return message_draft(message) if message is not None else None


@admin.register(RouteDecisionRecord)
class RouteDecisionRecordAdmin(
    ExtensibleAdmin, TenantScopedAdminMixin, AddTestCaseLinkMixin, ReadOnlyAdminMixin, admin.ModelAdmin
):
    """The routing decisions stored; releases adds "Add as routing test cases" on the selected ones."""

    tenant_lookup = "conversation__tenant"
    change_form_template = ADD_TEST_CASE_TEMPLATE
    list_display = [
        "created_at",
        "message_excerpt",
        "method",
        "intent_shown",
        "agent_shown",
        "confidence",
        "conversation",
    ]
    list_filter = [
        "method",
        "profile",
        ("conversation__tenant", ReadableTenantFilter),
        "mode",
        "handoff",
        "agent",
        "created_at",
    ]
    list_select_related = ["conversation", "message"]
    search_fields = ["intent", "agent", "reason", "message__content", "conversation__conversation_key"]
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-id"]

    @admin.display(description="message")
    def message_excerpt(self, obj: RouteDecisionRecord) -> str:
        return truncatechars(obj.message.content, EXCERPT) if obj.message is not None else "–"

    @admin.display(description="intent", ordering="intent")
    def intent_shown(self, obj: RouteDecisionRecord) -> str:
        return breakable(obj.intent)

    @admin.display(description="agent", ordering="agent")
    def agent_shown(self, obj: RouteDecisionRecord) -> str:
        return breakable(obj.agent)

    def routing_test_draft(self, request: HttpRequest, object_id: str) -> RoutingTestDraft | None:
        record = self.get_queryset(request).select_related("conversation", "message").filter(pk=object_id).first()
        return decision_draft(record) if record is not None else None


@admin.register(ToolCall)
class ToolCallAdmin(TenantScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    tenant_lookup = "conversation__tenant"
    list_display = ["created_at", "tool", "server", "status", "agent", "latency_ms", "conversation"]
    list_filter = ["status", "tool", "server", ("conversation__tenant", ReadableTenantFilter), "created_at"]
    list_select_related = ["conversation"]
    search_fields = ["tool", "agent", "error", "conversation__conversation_key"]
    date_hierarchy = "created_at"
    ordering = ["-created_at", "-id"]


@admin.register(BackendCall)
class BackendCallAdmin(TenantScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    """Every call (or call not made: circuit open, too many hops) of a gateway turn to a remote backend, for the
    operator looking for which backend fails, how, since when and for whom."""

    list_display = [
        "created_at",
        "backend",
        "status",
        "http_status",
        "latency_ms",
        "remote_agent",
        "tenant",
        "profile",
        "conversation",
    ]
    list_filter = ["status", "backend", ("tenant", ReadableTenantFilter), "profile", "created_at"]
    list_select_related = ["conversation", "tenant", "profile"]
    search_fields = ["backend", "remote_agent", "error", "conversation__conversation_key"]
    date_hierarchy = "created_at"
