"""The conversation store in the admin: read-only, nobody writes it there."""

from __future__ import annotations

from django.contrib import admin
from django.template.defaultfilters import truncatechars

from common.adminkit import ReadOnlyAdminMixin, ReadOnlyInlineMixin
from conversations.models import Conversation, GoalRun, Message, RouteDecisionRecord, ToolCall
from handoffs.models import Handoff


class MessageInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = Message
    fields = ["created_at", "role", "agent", "content", "step"]


class RouteDecisionInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = RouteDecisionRecord
    fields = ["created_at", "method", "agent", "intent", "confidence", "handoff", "reason"]
    verbose_name_plural = "route decisions"


class ToolCallInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = ToolCall
    fields = ["created_at", "agent", "tool", "status", "latency_ms", "error"]


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


class HandoffInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = Handoff
    fields = ["created_at", "from_agent", "to_agent", "kind", "status", "reason"]


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
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
    list_filter = ["tenant", "profile", "channel", "updated_at"]
    list_select_related = ["tenant", "profile"]
    search_fields = ["conversation_key", "session_id", "user_id", "state", "active_specialist"]
    date_hierarchy = "created_at"
    inlines = [MessageInline, RouteDecisionInline, ToolCallInline, GoalRunInline, HandoffInline]
    fieldsets = [
        (None, {"fields": ["conversation_key", "tenant", "profile", "session_id", "user_id", "channel"]}),
        ("State", {"fields": ["state", "active_specialist", "pending_result", "granted_permissions"]}),
        ("Activity", {"fields": ["message_count", "created_at", "updated_at"]}),
    ]


@admin.register(Message)
class MessageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "conversation", "role", "agent", "excerpt"]
    list_filter = ["role", "created_at"]
    list_select_related = ["conversation"]
    search_fields = ["content", "agent", "conversation__conversation_key"]
    date_hierarchy = "created_at"

    @admin.display(description="content")
    def excerpt(self, obj: Message) -> str:
        return truncatechars(obj.content, 100)


@admin.register(RouteDecisionRecord)
class RouteDecisionRecordAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "conversation", "mode", "method", "agent", "intent", "confidence", "handoff"]
    list_filter = ["method", "mode", "handoff", "agent", "created_at"]
    list_select_related = ["conversation"]
    search_fields = ["intent", "agent", "reason", "conversation__conversation_key"]
    date_hierarchy = "created_at"


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "tool", "server", "status", "agent", "latency_ms", "conversation"]
    list_filter = ["status", "tool", "server", "created_at"]
    list_select_related = ["conversation"]
    search_fields = ["tool", "agent", "error", "conversation__conversation_key"]
    date_hierarchy = "created_at"
