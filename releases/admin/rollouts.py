"""Rollout plans in the admin: create a plan, start, pause, resume, advance or abort it, and read what happened to it
in words.

The models are routing's (configuration); the commands (:mod:`releases.rollout.commands`) and the decisions'
figures (:mod:`releases.rollout.guard`, which reads the stored turns) are the release lifecycle's, as is this admin.
Registered by ``releases/admin.py``.

* **Forms, not JSON.** The stages are a list of percentages ("10, 50, 100") and the guards a table with a row per
  metric (relative and absolute limit): :mod:`releases.rollout.forms`, as on the profile's publish page. The candidate
  is a version not live yet — made on the publish page ("Roll out in stages"), or here from the profile's draft
  ("Make the candidate from the draft", which the saved routing tests gate as a publish).
* **Words.** Stages are counted from 1 everywhere ("stage 2 of 3 (50 %)"), the plan's history is a list of
  sentences, who decided is "the guard" or a person's name (:mod:`routing.rollout_words`); the decisions listed on
  the plan are those that moved it (every evaluation is in the decisions' own list).
* **Confirmations.** Start, Advance now and Abort open a page that says what will happen ("10 % of new
  conversations will get version 5"); Pause and Resume act at once. A plan of a profile that needs a second person is
  not started by its editor: Start asks for approval (:func:`releases.approvals.rollout_request`); Advance now is
  offered only to who may advance it (:func:`releases.rollout.commands.advance_check`), and its page says why to
  anyone else, with no button.

A plan can be edited while it is ready; once started, only its webhook and name (what it rolls out, and how, are
what its decisions were taken on — and what a second person approved): its form then has only those two fields, the
rest being read-only text; what today's rules refuse in the stored settings is said on the page
(:class:`~common.adminkit.RenderedFormMixin`). A plan that started while its page was open keeps what it started as:
the save, under the plan's row lock, writes only those two fields then, and says so.

A plan of the ``multi_agent`` flag moves the flag, which belongs to operators: only who may change the flag
(``routing.change_rolloutflag``) makes, changes or commands one; routing editors roll out versions.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from common.adminkit import EndpointSecretsAdminMixin, ReadOnlyAdminMixin, ReadOnlyInlineMixin, RenderedFormMixin
from common.errors import DomainError
from common.forms import label_choices
from releases.approvals import release_requests_pending, rollout_request
from releases.models import RolloutDecision, RolloutDecisionAction, RolloutPlan, RolloutPlanStatus, RolloutPlanTarget
from releases.rollout.commands import FLAG_PERMISSION, RolloutStateError, advance_check, plan_command, plan_start
from releases.rollout.forms import GuardsField, StagesField
from releases.rollout.guard import CANDIDATE, CONTROL
from releases.versions import ApprovalRequired, needs_second_person, version_publish
from routing.models import ProfileRelease, RoutingVersion
from routing.public import (
    GUARD_METRICS,
    actor_words,
    default_rollout_guards,
    default_rollout_stages,
    guard_words,
    history_words,
    live_version,
    may_view_plans,
    plan_stage_words,
    stage_words,
    stages_words,
    value_words,
)

START = "start"
COMMANDS = {
    START: "Start",
    RolloutDecisionAction.PAUSE: "Pause",
    RolloutDecisionAction.RESUME: "Resume",
    RolloutDecisionAction.ADVANCE: "Advance now",
    RolloutDecisionAction.ABORT: "Abort",
}
# Which commands each status offers; those that change who gets what open a confirmation page first.
OFFERED: dict[str, tuple[str, ...]] = {
    RolloutPlanStatus.READY: (START, RolloutDecisionAction.ABORT),
    RolloutPlanStatus.RUNNING: (
        RolloutDecisionAction.PAUSE,
        RolloutDecisionAction.ADVANCE,
        RolloutDecisionAction.ABORT,
    ),
    RolloutPlanStatus.PAUSED: (RolloutDecisionAction.RESUME, RolloutDecisionAction.ABORT),
}
CONFIRMED = frozenset({START, RolloutDecisionAction.ADVANCE, RolloutDecisionAction.ABORT})
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
SHOWN_WHEN_STARTED = {"stages": "stages_shown", "guards": "guards_shown"}
EDITABLE_WHEN_STARTED = ("name", "webhook_url")
ERROR_STARTED_MEANWHILE = (
    "The plan {plan} is {status} since you opened its page: what it rolls out and how stay what it started as, so "
    "only its name and webhook were saved."
)
ERROR_FROM_DRAFT_PROFILE = "Make the candidate from the draft: choose the profile whose draft it is."
ERROR_FROM_DRAFT_TWICE = "Make the candidate from the draft, or choose a candidate: not both."


def _actor(request: HttpRequest) -> str:
    return f"admin: {request.user.get_username()}"


# -- the form ----------------------------------------------------------------------------------------------------


class RolloutPlanAdminForm(forms.ModelForm):
    """A plan's settings as fields (module docstring); ``from_draft`` makes the candidate when the form is clean."""

    stages = StagesField(
        label="Stages",
        initial=default_rollout_stages,  # a declared field: a new plan's defaults are given here, not by the model
        help_text="The share of new conversations that get the candidate at each stage, in percent: e.g. 10, 50, 100. "
        "Rising, ending at 100.",
    )
    guards = GuardsField(label="Guards", required=False, initial=default_rollout_guards)
    from_draft = forms.BooleanField(
        required=False,
        label="Make the candidate from the draft",
        help_text="Tick to make a new version from the profile's draft when you save (its saved routing tests must "
        "pass), instead of choosing a candidate above. Customers keep the live version until the plan starts.",
    )
    user: Any = None  # who saves the form (get_form sets it): the candidate made from the draft is theirs

    class Meta:
        model = RolloutPlan
        fields = [*SETTINGS, "name", "webhook_url"]  # the rest is the plan's state: read-only

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("from_draft") or self.errors:
            return data
        profile = data.get("profile")
        if profile is None:
            self.add_error("from_draft", ERROR_FROM_DRAFT_PROFILE)
        elif data.get("candidate") is not None:
            self.add_error("from_draft", ERROR_FROM_DRAFT_TWICE)
        elif data.get("target") == RolloutPlanTarget.VERSION:
            # Last, once every other field is right: the version is stored (not live) when this succeeds.
            try:
                data["candidate"] = version_publish(
                    profile=profile, user=self.user, note=data.get("name", "")[:300], release=False
                )
            except DomainError as exc:
                self.add_error("from_draft", exc.message)
        return data


class RolloutDecisionInline(ReadOnlyInlineMixin, admin.TabularInline):
    """The decisions that moved the plan, newest first (the holds are in the decisions' own list)."""

    model = RolloutDecision
    fields = ("created_at", "action", "stage_shown", "percentage", "reason", "actor_shown", "webhook")
    readonly_fields = fields
    ordering = ["-created_at", "-id"]
    verbose_name_plural = "decisions that moved the plan"

    def get_queryset(self, request: HttpRequest) -> QuerySet[RolloutDecision]:
        return super().get_queryset(request).exclude(action=RolloutDecisionAction.HOLD).select_related("plan")

    @admin.display(description="stage")
    def stage_shown(self, decision: RolloutDecision) -> str:
        return stage_words(decision.stage, decision.plan.stages)

    @admin.display(description="by")
    def actor_shown(self, decision: RolloutDecision) -> str:
        return actor_words(decision.actor)


# -- the plan's admin --------------------------------------------------------------------------------------------


@admin.register(RolloutPlan)
class RolloutPlanAdmin(RenderedFormMixin, EndpointSecretsAdminMixin, admin.ModelAdmin):
    form = RolloutPlanAdminForm
    endpoint_fields = ["webhook_url"]  # its query may hold the receiver's secret
    list_display = ["name", "target", "profile", "candidate_number", "status", "stage_shown", "started_at"]
    list_filter = ["status", "target", "profile"]
    search_fields = ["name", "profile__agent_id"]
    list_select_related = ["profile", "candidate"]
    inlines = [RolloutDecisionInline]
    readonly_fields = [
        "status",
        "stage_shown",
        "stage_started_at",
        "control",
        "history_shown",
        "started_at",
        "finished_at",
        "created_by",
        "stages_shown",
        "guards_shown",
    ]
    fieldsets = [
        (None, {"fields": ["name", "target", "profile", "candidate", "from_draft"]}),
        (
            "How it rolls out",
            {"fields": ["stages", "hold_minutes", "min_conversations", "guards", "max_errors", "alpha"]},
        ),
        (
            "Where it stands",
            {
                "fields": [
                    "status",
                    "stage_shown",
                    "stage_started_at",
                    "control",
                    "started_at",
                    "finished_at",
                    "history_shown",
                    "created_by",
                ]
            },
        ),
        ("Notifications", {"fields": ["webhook_url"]}),
    ]
    change_form_template = "admin/releases/rolloutplan/change_form.html"

    @admin.display(description="candidate")
    def candidate_number(self, plan: RolloutPlan) -> str:
        return f"version {plan.candidate.number}" if plan.candidate else "—"

    @admin.display(description="stage")
    def stage_shown(self, plan: RolloutPlan) -> str:
        return plan_stage_words(plan)

    @admin.display(description="stages")
    def stages_shown(self, plan: RolloutPlan) -> str:
        return f"{stages_words(plan.stages)} of new conversations" if plan.stages else "—"

    @admin.display(description="guards")
    def guards_shown(self, plan: RolloutPlan) -> str:
        if not plan.guards:
            return "No guard metric: only the error limit rolls it back."
        listed = format_html_join("", "<li>{}</li>", ((guard_words(guard),) for guard in plan.guards))
        return format_html('<ul class="rollout-guard-list">{}</ul>', listed)

    @admin.display(description="history")
    def history_shown(self, plan: RolloutPlan) -> str:
        if plan.pk is None:
            return "—"
        lines = history_words(plan.decisions.all(), plan.stages)
        if not lines:
            return "Not started yet."
        return format_html(
            "<ol class='rollout-history'>{}</ol>", format_html_join("", "<li>{}</li>", ((line,) for line in lines))
        )

    def get_form(
        self, request: HttpRequest, obj: RolloutPlan | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        form.user = request.user
        field = form.base_fields.get("candidate")
        if isinstance(field, forms.ModelChoiceField):
            live = set(ProfileRelease.objects.values_list("version_id", flat=True))

            def label(version: RoutingVersion) -> str:
                # Whether every customer was served it (released_at), not what its number suggests: a candidate whose
                # plan did not complete was never served to everyone, whatever was published after it.
                if version.pk in live:
                    state = "live now"
                elif version.released_at is not None:
                    state = "served before"
                else:
                    state = "never served to everyone"
                return f"{version.profile.agent_id} version {version.number} ({state})"

            field.queryset = RoutingVersion.objects.select_related("profile").order_by("profile__agent_id", "-number")
            label_choices(field, label)
        return form

    def get_fieldsets(self, request: HttpRequest, obj: RolloutPlan | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        started = obj is not None and obj.status != RolloutPlanStatus.READY
        shown = []
        for title, options in fieldsets:
            if obj is None and title == "Where it stands":
                continue
            names = [str(name) for name in options["fields"] if not (started and name == "from_draft")]
            if started:
                names = [SHOWN_WHEN_STARTED.get(name, name) for name in names]
            shown.append((title, {**options, "fields": names}))
        return shown

    def get_readonly_fields(self, request: HttpRequest, obj: RolloutPlan | None = None) -> list[str]:
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None and obj.status != RolloutPlanStatus.READY:
            # The form's own fields (stages, guards, from_draft) too: the admin leaves a read-only declared field out
            # of the form, where it would be required but never rendered (its text is SHOWN_WHEN_STARTED's).
            fields += [name for name in (*SETTINGS, "from_draft") if name not in fields]
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
        if not change:
            if request.user.is_authenticated:
                obj.created_by = request.user
            super().save_model(request, obj, form, change)
            return
        with transaction.atomic():
            stored = RolloutPlan.objects.select_for_update().get(pk=obj.pk)
            if stored.status == RolloutPlanStatus.READY:
                super().save_model(request, obj, form, change)
                return
            # Started (or ended) since its page was read: what it rolls out and how stay what it started as, and its
            # state is the commands'. Only what a started plan's page edits is saved.
            fields = [name for name in EDITABLE_WHEN_STARTED if name in form.cleaned_data]
            for name in fields:
                setattr(stored, name, getattr(obj, name))
            stored.save(update_fields=fields)
        if set(SETTINGS) & set(form.changed_data):
            self.message_user(
                request,
                ERROR_STARTED_MEANWHILE.format(plan=stored.name, status=stored.get_status_display().lower()),
                messages.WARNING,
            )

    def get_urls(self) -> list[Any]:
        return [
            path(
                "<int:object_id>/command/<str:command>/",
                self.admin_site.admin_view(self.command_view),
                name="releases_rolloutplan_command",
            ),
            *super().get_urls(),
        ]

    def _held(self, plan: RolloutPlan) -> bool:
        """Whether a start of ``plan`` by a person waits for a second person."""
        return (
            plan.target == RolloutPlanTarget.VERSION and plan.profile is not None and needs_second_person(plan.profile)
        )

    @staticmethod
    def _refusal(plan: RolloutPlan, command: str, user: Any) -> str:
        """Why ``user`` may not give ``command`` to ``plan`` whatever they confirm — an advance by hand held for a
        second person (:func:`releases.rollout.commands.advance_check`) — said before the click; "" when they may."""
        if command != RolloutDecisionAction.ADVANCE:
            return ""
        try:
            advance_check(plan, user)
        except ApprovalRequired as exc:
            return exc.message
        return ""

    def command_view(self, request: HttpRequest, object_id: int, command: str) -> HttpResponse:
        """GET: what the command will do, with a button to do it; POST: do it."""
        plan = RolloutPlan.objects.select_related("profile", "candidate", "control").filter(pk=object_id).first()
        if plan is None:
            raise Http404
        if not self.has_change_permission(request, plan) or command not in COMMANDS:
            raise PermissionDenied
        here = reverse("admin:releases_rolloutplan_change", args=[plan.pk])
        if request.method != "POST":
            return self._confirm(request, plan, command)
        try:
            if command == START and self._held(plan):
                rollout_request(plan=plan, user=request.user, note=request.POST.get("note", "")[:300])
                self.message_user(
                    request,
                    f"{plan.profile.agent_id if plan.profile else plan} needs a second person: your request to start "
                    "the plan is waiting for someone with the right to approve releases.",
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(here)
            if command == START:
                decision = plan_start(plan, actor=_actor(request), user=request.user)
            else:
                decision = plan_command(plan, command, actor=_actor(request), user=request.user)
        except RolloutStateError as exc:
            self.message_user(request, str(exc), messages.ERROR)
        except DomainError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        else:
            self.message_user(request, decision.reason, messages.SUCCESS)
        return HttpResponseRedirect(here)

    def _confirm(self, request: HttpRequest, plan: RolloutPlan, command: str) -> HttpResponse:
        if command not in OFFERED.get(plan.status, ()):
            self.message_user(
                request, f"Plan {plan} is {plan.get_status_display().lower()}: it cannot do that now.", messages.ERROR
            )
            return HttpResponseRedirect(reverse("admin:releases_rolloutplan_change", args=[plan.pk]))
        held = command == START and self._held(plan)
        waiting = list(release_requests_pending().filter(plan=plan)) if held else []
        refusal = self._refusal(plan, command, request.user)
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": f"{COMMANDS[command]} {plan.name}?",
            "subtitle": None,
            "original": plan,
            "command": command,
            "label": COMMANDS[command],
            "sentences": self._what_happens(plan, command),
            "held": held,
            "waiting": waiting,
            "refusal": refusal,
            "cancel_url": reverse("admin:releases_rolloutplan_change", args=[plan.pk]),
        }
        return TemplateResponse(request, "admin/releases/rolloutplan/command_confirm.html", context)

    def _what_happens(self, plan: RolloutPlan, command: str) -> list[str]:
        """What the command will do for customers, in sentences."""
        what = f"version {plan.candidate.number}" if plan.candidate else "the multi-agent mode"
        stages = list(plan.stages)
        if command == START:
            live = live_version(plan.profile) if plan.profile is not None else None
            control = (
                f" (the others keep version {live.number}, live now)" if live is not None and plan.candidate else ""
            )
            return [
                f"{stages[0]} % of new conversations will get {what}{control}: {stage_words(0, stages)}.",
                f"Then {stages_words(stages)}: the guard moves to the next stage after {plan.hold_minutes} minute(s) "
                f"and {plan.min_conversations} conversation(s) on each side, when every guard is clear — or rolls it "
                "back by itself.",
            ]
        if command == RolloutDecisionAction.ADVANCE:
            if plan.stage + 1 < len(stages):
                return [
                    f"{stages[plan.stage + 1]} % of new conversations will get {what} (now {plan.percentage} %): "
                    f"{stage_words(plan.stage + 1, stages)}, without waiting for the guard."
                ]
            return [f"This completes the plan: {what} goes live for every customer, without waiting for the guard."]
        if command == RolloutDecisionAction.ABORT:
            if plan.status == RolloutPlanStatus.READY:
                return ["The plan will never start; nothing changes for customers."]
            back = f"version {plan.control.number}" if plan.control else "the control"
            return [
                f"Every conversation goes back to {back} from its next message (now {plan.percentage} % get {what}).",
                "An aborted plan cannot be started again: make a new one.",
            ]
        if command == RolloutDecisionAction.PAUSE:
            return [f"The stage holds at {plan.percentage} %: nothing advances or rolls back by itself until resumed."]
        return [f"The guard watches the plan again at {plan.percentage} %."]

    def render_change_form(self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        plan = context.get("original")
        if plan is not None and plan.pk is not None:
            if self.has_change_permission(request, plan):
                context["rollout_commands"] = [
                    {
                        "label": "Ask to start" if command == START and self._held(plan) else COMMANDS[command],
                        "url": reverse("admin:releases_rolloutplan_command", args=[plan.pk, command]),
                        "confirmed": command in CONFIRMED,
                        "slug": command,
                    }
                    for command in OFFERED.get(plan.status, ())
                    if not self._refusal(plan, command, request.user)
                ]
            context["rollout_view"] = may_view_plans(request.user)
            context["decisions_url"] = (
                reverse("admin:releases_rolloutdecision_changelist") + f"?plan__id__exact={plan.pk}"
            )
        return super().render_change_form(request, context, *args, **kwargs)


# -- the decisions -----------------------------------------------------------------------------------------------


@admin.register(RolloutDecision)
class RolloutDecisionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "created_at",
        "plan",
        "action",
        "stage_shown",
        "percentage",
        "short_reason",
        "actor_shown",
        "webhook",
    ]
    list_filter = ["action", "plan"]
    list_select_related = ["plan"]
    search_fields = ["reason", "plan__name"]
    fields = (
        "plan",
        "created_at",
        "action",
        "stage_shown",
        "percentage",
        "reason",
        "actor_shown",
        "webhook",
        "figures_shown",
    )
    readonly_fields = fields

    @admin.display(description="stage")
    def stage_shown(self, decision: RolloutDecision) -> str:
        return stage_words(decision.stage, decision.plan.stages)

    @admin.display(description="by")
    def actor_shown(self, decision: RolloutDecision) -> str:
        return actor_words(decision.actor)

    @admin.display(description="reason")
    def short_reason(self, decision: RolloutDecision) -> str:
        return decision.reason if len(decision.reason) < 120 else decision.reason[:117] + "…"

    @admin.display(description="figures")
    def figures_shown(self, decision: RolloutDecision) -> str:
        """Both cohorts' figures side by side, and each guard's verdict, in words."""
        figures = decision.figures or {}
        found = [figures.get(CANDIDATE), figures.get(CONTROL)]
        cohorts = [cohort for cohort in found if isinstance(cohort, dict)]
        if len(cohorts) != len(found):
            return "No figures: a person's command."
        rows = [
            ("Conversations", *(str(cohort.get("conversations", "–")) for cohort in cohorts)),
            ("Turns", *(str(cohort.get("turns", "–")) for cohort in cohorts)),
            ("Errors", *(str(cohort.get("errors", "–")) for cohort in cohorts)),
        ]
        for name, metric in GUARD_METRICS.items():
            values = []
            for cohort in cohorts:
                figure = cohort.get(name)
                if isinstance(figure, dict):
                    figure = figure.get("rate") if metric.kind == "rate" else figure.get("mean")
                values.append(value_words(name, figure))
            rows.append((metric.label, *values))
        table = format_html(
            "<table><thead><tr><th></th><th>Candidate</th><th>Control</th></tr></thead><tbody>{}</tbody></table>",
            format_html_join("", "<tr><th scope='row'>{}</th><td>{}</td><td>{}</td></tr>", rows),
        )
        verdicts = figures.get("verdicts") or []
        if not verdicts:
            return table
        listed = format_html_join(
            "",
            "<li>{}{}</li>",
            (("Breached: " if verdict.get("breached") else "", verdict.get("reason", "")) for verdict in verdicts),
        )
        return format_html("{}<p>Guards:</p><ul>{}</ul>", table, listed)
