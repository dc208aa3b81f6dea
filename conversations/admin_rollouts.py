"""Rollout plans in the admin (W2 5/8): create a plan, start, pause, resume, advance or abort it, and read every
decision the guard took with its figures.

The models are routing's (configuration); the commands run the guard (:mod:`conversations.rollout_guard`), which
reads the stored turns — so the admin lives here, in the engine, which may import both. Registered by
``conversations/admin.py``'s last import. A plan can be edited while it is ready; once started, only its webhook
and name (what it rolls out, and how, are what its decisions were taken on).

A plan of the ``multi_agent`` flag moves the flag, which belongs to operators: only who may change the flag
(``routing.change_rolloutflag``) makes, changes or commands one; routing editors roll out versions.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from common.adminkit import EndpointSecretsAdminMixin, ReadOnlyAdminMixin
from conversations.rollout_guard import RolloutStateError, plan_command, plan_start
from routing.models import RolloutDecision, RolloutDecisionAction, RolloutPlan, RolloutPlanStatus, RolloutPlanTarget

COMMANDS = {
    "start": "Start",
    RolloutDecisionAction.PAUSE: "Pause",
    RolloutDecisionAction.RESUME: "Resume",
    RolloutDecisionAction.ADVANCE: "Advance now",
    RolloutDecisionAction.ABORT: "Abort",
}
# Which commands each status offers.
OFFERED = {
    RolloutPlanStatus.READY: ("start", RolloutDecisionAction.ABORT),
    RolloutPlanStatus.RUNNING: (
        RolloutDecisionAction.PAUSE,
        RolloutDecisionAction.ADVANCE,
        RolloutDecisionAction.ABORT,
    ),
    RolloutPlanStatus.PAUSED: (RolloutDecisionAction.RESUME, RolloutDecisionAction.ABORT),
}
SETTINGS = (
    "target",
    "profile",
    "candidate",
    "stages",
    "hold_minutes",
    "min_conversations",
    "guards",
    "max_errors",
    "alpha",
)
FLAG_PERMISSION = "routing.change_rolloutflag"  # a multi_agent plan moves the flag


class RolloutDecisionInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = RolloutDecision
    fields = ("created_at", "action", "stage", "percentage", "reason", "actor", "webhook")
    readonly_fields = fields
    ordering = ["-created_at", "-id"]
    extra = 0
    show_change_link = True


@admin.register(RolloutPlan)
class RolloutPlanAdmin(EndpointSecretsAdminMixin, admin.ModelAdmin):
    endpoint_fields = ["webhook_url"]  # its query may hold the receiver's secret
    list_display = ["name", "target", "profile", "candidate_number", "status", "stage_shown", "started_at"]
    list_filter = ["status", "target", "profile"]
    search_fields = ["name", "profile__agent_id"]
    inlines = [RolloutDecisionInline]
    readonly_fields = ["status", "stage", "stage_started_at", "control", "history", "started_at", "finished_at"]
    change_form_template = "admin/routing/rolloutplan/change_form.html"

    @admin.display(description="candidate")
    def candidate_number(self, plan: RolloutPlan) -> str:
        return f"v{plan.candidate.number}" if plan.candidate else "—"

    @admin.display(description="stage")
    def stage_shown(self, plan: RolloutPlan) -> str:
        return f"{plan.stage + 1} of {len(plan.stages)} ({plan.percentage} %)" if plan.stages else "—"

    def get_readonly_fields(self, request: HttpRequest, obj: RolloutPlan | None = None) -> list[str]:
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None and obj.status != RolloutPlanStatus.READY:
            fields += [name for name in SETTINGS if name not in fields]
        return fields

    def has_change_permission(self, request: HttpRequest, obj: RolloutPlan | None = None) -> bool:
        if (
            obj is not None
            and obj.target == RolloutPlanTarget.MULTI_AGENT
            and not request.user.has_perm(FLAG_PERMISSION)
        ):
            return False
        return super().has_change_permission(request, obj)

    def formfield_for_choice_field(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "target" and not request.user.has_perm(FLAG_PERMISSION):
            kwargs["choices"] = [(RolloutPlanTarget.VERSION.value, RolloutPlanTarget.VERSION.label)]
        return super().formfield_for_choice_field(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: RolloutPlan, form: Any, change: bool) -> None:
        if not change and request.user.is_authenticated:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    def get_urls(self) -> list[Any]:
        return [
            path(
                "<int:object_id>/command/<str:command>/",
                self.admin_site.admin_view(self.command_view),
                name="routing_rolloutplan_command",
            ),
            *super().get_urls(),
        ]

    def command_view(self, request: HttpRequest, object_id: int, command: str) -> HttpResponse:
        plan = get_object_or_404(RolloutPlan, pk=object_id)
        if request.method != "POST" or not self.has_change_permission(request, plan):
            raise PermissionDenied
        actor = f"admin: {request.user.get_username()}"
        try:
            if command == "start":
                decision = plan_start(plan, actor=actor, user=request.user)
            elif command in COMMANDS:
                decision = plan_command(plan, command, actor=actor)
            else:
                raise RolloutStateError(f"Unknown command {command!r}.")
        except RolloutStateError as exc:
            self.message_user(request, str(exc), messages.ERROR)
        else:
            self.message_user(request, decision.reason, messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:routing_rolloutplan_change", args=[plan.pk]))

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        plan = context.get("original")
        if plan is not None and self.has_change_permission(request, plan):
            context["rollout_commands"] = [
                (COMMANDS[command], reverse("admin:routing_rolloutplan_command", args=[plan.pk, command]))
                for command in OFFERED.get(plan.status, ())
            ]
        return super().render_change_form(request, context, *args, **kwargs)


@admin.register(RolloutDecision)
class RolloutDecisionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["created_at", "plan", "action", "stage", "percentage", "short_reason", "actor", "webhook"]
    list_filter = ["action", "plan"]
    search_fields = ["reason", "plan__name"]
    fields = ("plan", "created_at", "action", "stage", "percentage", "reason", "actor", "webhook", "figures_shown")
    readonly_fields = fields

    @admin.display(description="reason")
    def short_reason(self, decision: RolloutDecision) -> str:
        return decision.reason if len(decision.reason) < 120 else decision.reason[:117] + "…"

    @admin.display(description="figures")
    def figures_shown(self, decision: RolloutDecision) -> str:
        import json

        return format_html("<pre>{}</pre>", json.dumps(decision.figures, indent=2, ensure_ascii=False))
