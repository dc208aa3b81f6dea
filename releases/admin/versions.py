"""What a business user sees of a profile's versions in the admin.

The profile's page says what is live and what the draft changes ("Draft differs from live: 3 changes", each in
words, prompts as text diffs), lists the profile's rollout plans (with their live view) and the requests waiting for
a second person, and offers "Publish draft": one review page with two choices —

* **publish to everyone now** (:func:`releases.versions.version_publish`), or
* **roll out in stages**: a plan form with the defaults filled in (stages, hold, minimum conversations, guards —
  :class:`releases.rollout.forms.PlanSettingsForm`); the candidate version is made from the draft, the plan is made
  and started (:func:`releases.approvals.draft_rollout`), and the editor lands on the plan's live view.

Failing saved routing tests refuse both alike. When the profile needs a second person
(``AgentProfile.release_needs_approval``) either choice becomes a request that another person with
``releases.approve_release`` approves (:mod:`releases.admin.approvals`); only such a person (or a superuser) switches
the setting, with the button on the profile's page.

The version history lists every published version, compares any two (or one with the live version or the draft)
and reverts to one. Publishing and reverting need ``routing.add_routingversion`` (the "Routing editors" group has
it), a staged rollout ``releases.add_rolloutplan`` too, and a change of the model settings the operator's permission;
refusals (a conflict with a publish made meanwhile, nothing to publish, failing routing tests, a rollout already
running) are shown as the admin's error messages, the editor's note kept.

The profile admin is the agents app's, which may not import the layers above (docs/architecture.md): this module
adds the profile's columns, fieldset and pages to it through its extension point (:class:`ProfileReleases`,
:func:`common.adminkit.admin_extend`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import ModelAdmin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import F, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.formats import localize
from django.utils.html import format_html, format_html_join
from django.utils.timezone import localtime

from agents.models import AgentProfile
from common.adminkit import AdminExtension, ReadOnlyAdminMixin, admin_extend
from common.errors import DomainError
from common.text import whole_number
from releases.approvals import draft_rollout, publish_request, release_requests_pending, second_person_switch
from releases.evals import conversation_tests_saved
from releases.evals.compare import conversation_tests_compare
from releases.evals.gate import SUMMARY_KEY, gate_warnings
from releases.models import ConversationTest, ReleaseRequest, RolloutPlan, RolloutPlanStatus
from releases.rollout.commands import PLAN_ADD_PERMISSION
from releases.rollout.forms import PlanSettingsForm
from releases.routing_tests import routing_tests_spec
from releases.versions import (
    Change,
    document_diff,
    document_summary,
    may_approve,
    model_settings_check,
    release_check,
    version_publish,
    version_revert,
)
from routing.models import PublishedFrom, RoutingVersion
from routing.public import (
    live_version,
    may_publish,
    may_view_plans,
    plan_stage_words,
    profile_documents,
    stages_words,
    when_words,
)

FORCE_PERMISSION = "routing.publish_failing_version"
DRAFT, LIVE = "draft", "live"
NOW, STAGES = "now", "stages"
ANSWERS = "answers"  # the publish page's query parameter: play the conversation tests against live and the draft
CONFIRMED = "_confirmed"  # posted by the confirmation page's button: a staged rollout starts only then
RECENT_PLANS = 3  # finished plans listed on the profile's page, besides those ready or running


def may_roll_out(request: HttpRequest) -> bool:
    """Rolling the draft out in stages: publishing, and making rollout plans (``releases.add_rolloutplan``)."""
    return may_publish(request) and bool(request.user.has_perm(PLAN_ADD_PERMISSION))


def draft_document(profile: AgentProfile) -> dict[str, Any]:
    return profile_documents([profile.agent_id])[profile.agent_id]


NEVER_PUBLISHED = "Never published: edits go live on save"
NEVER_PUBLISHED_HELD = (
    "Never published: it needs a second person, so its customers are served nothing until its first publish, which "
    "someone else with the right to approve releases approves"
)


def version_line(version: RoutingVersion | None) -> str:
    """ "version 3 (published by ana on 22 Nov 2026, 17:40, "Fix invoice keywords")", or that it never was."""
    if version is None:
        return NEVER_PUBLISHED
    approved = f", approved by {version.approved_by.get_username()}" if version.approved_by else ""
    when = localize(localtime(version.created_at))
    note = f", “{version.note}”" if version.note else ""
    reverted = f", a revert to version {version.reverted_from}" if version.reverted_from else ""
    return f"version {version.number} (published {published_by(version)}{approved} on {when}{note}{reverted})"


def published_by(version: RoutingVersion) -> str:
    """Who published it ("by ana"), or where when nobody signed it ("by an import", "from the command line")."""
    if version.created_by is not None:
        return f"by {version.created_by.get_username()}"
    if version.published_from == PublishedFrom.COMMAND:
        return f"from {PublishedFrom.COMMAND.label}"
    if version.published_from in PublishedFrom.values:
        return f"by {PublishedFrom(version.published_from).label}"
    return "with no user recorded"


@dataclass
class ProfileState:
    """A profile's live version and how its draft differs from it."""

    profile: AgentProfile
    live: RoutingVersion | None
    draft: dict[str, Any]
    changes: list[Change] = field(default_factory=list)

    @property
    def live_number(self) -> int | None:
        return self.live.number if self.live else None

    @property
    def summary(self) -> str:
        if self.live is None:
            return (NEVER_PUBLISHED_HELD if self.profile.release_needs_approval else NEVER_PUBLISHED) + "."
        if not self.changes:
            return f"Live: {version_line(self.live)}. The draft is the live version."
        return f"Live: {version_line(self.live)}. Draft differs from live: {len(self.changes)} change(s)."


def publish_refusal(state: ProfileState, user: Any) -> str:
    """Why ``user`` may not publish the draft whatever they write (its model settings, :func:`model_settings_check`),
    said before they try; "" when they may."""
    served = state.live.document if state.live is not None else state.draft
    try:
        model_settings_check(profile=state.profile, document=state.draft, served=served, user=user)
    except DomainError as exc:
        return exc.message
    return ""


def revert_refusal(version: RoutingVersion, user: Any) -> str:
    """Why ``user`` may not revert to ``version`` alone (the two-person rule: it was never served to every customer),
    said before they try; "" when they may."""
    try:
        release_check(
            profile=version.profile,
            document=version.document,
            user=user,
            approved_by=None,
            reverted_from=version.number,
        )
    except DomainError as exc:
        return exc.message
    return ""


def profile_state(profile: AgentProfile) -> ProfileState:
    live = live_version(profile)
    draft = draft_document(profile)
    changes = document_diff(live.document, draft) if live is not None else []
    return ProfileState(profile=profile, live=live, draft=draft, changes=changes)


def changes_html(changes: list[Change], *, empty: str = "No changes.") -> str:
    """The changes as a list of sentences, each long text's diff under it."""
    return render_to_string("admin/routing/changes.html", {"changes": changes, "empty": empty})


# -- the profile's page ----------------------------------------------------------------------------------------


class PublishForm(forms.Form):
    note = forms.CharField(
        max_length=300,
        required=False,
        widget=forms.TextInput(attrs={"class": "vTextField", "size": 80}),
        help_text="What changed and why: the history shows it.",
    )
    based_on = forms.IntegerField(required=False, widget=forms.HiddenInput)
    forced_reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80}),
        label="Publish although saved tests fail, because",
        help_text="Only when saved routing tests or required conversation tests fail and you may publish anyway; "
        "leave empty otherwise.",
    )
    how = forms.ChoiceField(
        choices=[(NOW, "Publish to everyone now"), (STAGES, "Roll out in stages")],
        required=False,  # given by the page's buttons (publish_view); without it, to everyone now as before
        widget=forms.HiddenInput,
    )


def plan_rows(request: HttpRequest, profile: AgentProfile) -> list[dict[str, Any]]:
    """The profile's rollout plans for its page: those ready or running, then the last finished ones; each with its
    status, stage in words and the links this user may follow."""
    plans = RolloutPlan.objects.filter(profile=profile).select_related("candidate", "control")
    active = [RolloutPlanStatus.READY, RolloutPlanStatus.RUNNING, RolloutPlanStatus.PAUSED]
    shown = list(plans.filter(status__in=active)) + list(plans.exclude(status__in=active)[:RECENT_PLANS])
    live_view, admin_view = may_view_plans(request.user), request.user.has_perm("releases.view_rolloutplan")
    return [
        {
            "plan": plan,
            "status": plan.get_status_display(),
            "stage": plan_stage_words(plan),
            "what": f"version {plan.candidate.number} against version {plan.control.number}"
            if plan.candidate and plan.control
            else (f"version {plan.candidate.number}" if plan.candidate else "the multi-agent mode"),
            "started": when_words(plan.started_at) if plan.started_at else "",
            "live_url": reverse("analytics-rollout-page", args=[plan.pk]) if live_view else "",
            "admin_url": reverse("admin:releases_rolloutplan_change", args=[plan.pk]) if admin_view else "",
        }
        for plan in shown
    ]


def request_rows(request: HttpRequest, profile: AgentProfile) -> list[dict[str, Any]]:
    """The profile's requests waiting for a second person, each with who may do what about it."""
    approver = may_approve(request.user)
    readable = request.user.has_perm("releases.view_releaserequest")
    rows = []
    for pending in release_requests_pending(profile=profile):
        mine = pending.requested_by_id == request.user.pk
        rows.append(
            {
                "request": pending,
                "kind": pending.get_kind_display(),
                "who": pending.requested_by.get_username() if pending.requested_by else "someone who has left",
                "when": when_words(pending.requested_at),
                "mine": mine,
                "to_review": approver and not mine,
                "url": reverse("admin:releases_releaserequest_review", args=[pending.pk]) if readable else "",
            }
        )
    return rows


class ProfileReleases(AdminExtension):
    """What the profile's admin (the agents app's) shows of its versions: the "live version" and "draft" columns, the
    "Version" fieldset (its state and the two-person rule), its rollout plans and requests, and the "Publish draft"
    and two-person switch pages (``admin:agents_agentprofile_publish``, ``…_second_person``)."""

    change_form_template = "admin/agents/agentprofile/change_form_versions.html"

    def list_display(self, request: HttpRequest) -> list[Any]:
        return [self.live_version, self._draft_column()]

    def readonly_fields(self, request: HttpRequest, obj: AgentProfile | None) -> list[Any]:
        # The two-person rule is switched with its own button, by an approver (second_person_view): never in the form.
        return [self.version_state, "release_needs_approval"]

    def fieldsets(self, request: HttpRequest, obj: AgentProfile | None) -> list[tuple[str | None, dict[str, Any]]]:
        if obj is None:
            return []
        return [("Version", {"fields": [self.version_state, "release_needs_approval"]})]

    def queryset(self, request: HttpRequest, queryset: QuerySet[AgentProfile]) -> QuerySet[AgentProfile]:
        return queryset.annotate(live_number=F("release__version__number"))

    @staticmethod
    def _draft_column():
        """The list's "draft" column: the changes of every listed profile's draft, read once per page."""
        counts: dict[str, int | None] = {}

        def draft(obj: AgentProfile) -> str:
            if not counts:
                drafts = profile_documents()
                live = dict(
                    RoutingVersion.objects.filter(profile__release__version_id=F("pk")).values_list(
                        "profile__agent_id", "document"
                    )
                )
                for agent_id, document in drafts.items():
                    counts[agent_id] = len(document_diff(live[agent_id], document)) if agent_id in live else None
            count = counts.get(obj.agent_id)
            if count is None:
                return "served nothing until approved" if obj.release_needs_approval else "edits go live on save"
            return f"{count} change(s) to publish" if count else "same as live"

        draft.short_description = "draft"  # type: ignore[attr-defined]
        return draft

    @admin.display(description="live version", ordering="live_number")
    def live_version(self, obj: AgentProfile) -> str:
        number = getattr(obj, "live_number", None)
        return f"v{number}" if number else "never published"

    @admin.display(description="state")
    def version_state(self, obj: AgentProfile | None) -> str:
        if obj is None or obj.pk is None:
            return "—"
        state = profile_state(obj)
        history = reverse("admin:routing_routingversion_changelist") + f"?profile__id__exact={obj.pk}"
        changes = reverse("admin:auditlog_logentry_changelist")  # every edit, field by field (common.history.admin)
        return format_html(
            '<p id="version-summary">{}</p>{}'
            '<p><a href="{}">Version history</a> · <a href="{}">Routing changes</a></p>',
            state.summary,
            changes_html(state.changes, empty="") if state.live is not None else "",
            history,
            changes,
        )

    def urls(self, model_admin: ModelAdmin[Any]) -> list[Any]:
        wrap = model_admin.admin_site.admin_view
        return [
            path(
                "<path:object_id>/publish/",
                wrap(partial(self.publish_view, model_admin)),
                name="agents_agentprofile_publish",
            ),
            path(
                "<path:object_id>/second-person/",
                wrap(partial(self.second_person_view, model_admin)),
                name="agents_agentprofile_second_person",
            ),
        ]

    def change_context(
        self, model_admin: ModelAdmin[Any], request: HttpRequest, obj: AgentProfile | None
    ) -> dict[str, Any]:
        extra: dict[str, Any] = {"may_publish": may_publish(request)}
        if obj is not None:
            extra.update(
                {
                    "plan_rows": plan_rows(request, obj),
                    "plans_url": reverse("admin:releases_rolloutplan_changelist") + f"?profile__id__exact={obj.pk}"
                    if request.user.has_perm("releases.view_rolloutplan")
                    else "",
                    "request_rows": request_rows(request, obj),
                    "may_switch_second_person": may_approve(request.user),
                }
            )
        return extra

    def second_person_view(self, model_admin: ModelAdmin[Any], request: HttpRequest, object_id: str) -> HttpResponse:
        """Switch the two-person rule of a profile: a POST by a user who may approve releases (a superuser too)."""
        profile = model_admin.get_object(request, unquote(object_id))
        if profile is None:
            raise Http404
        if request.method != "POST" or not (
            model_admin.has_view_permission(request, profile) and may_approve(request.user)
        ):
            raise PermissionDenied
        needed = request.POST.get("needed") == "on"
        try:
            first = second_person_switch(
                profile=profile, user=request.user, needed=needed, published_from=PublishedFrom.ADMIN
            )
        except DomainError as exc:
            model_admin.message_user(request, exc.message, messages.ERROR)
            return self._profile_page(profile)
        published = (
            f" What its customers were served, its draft, is published as version {first.number}: from now on they "
            "are served only a version, never the draft."
            if first is not None
            else ""
        )
        model_admin.message_user(
            request,
            f"Publishing {profile.agent_id} now needs a second person: a publish or a rollout start becomes a request "
            f"that someone else with the right to approve releases approves.{published}"
            if needed
            else f"Publishing {profile.agent_id} no longer needs a second person.",
            messages.SUCCESS,
        )
        return self._profile_page(profile)

    def publish_view(self, model_admin: ModelAdmin[Any], request: HttpRequest, object_id: str) -> HttpResponse:
        """One review page, two choices: publish to everyone now, or roll out in stages (module docstring)."""
        profile = model_admin.get_object(request, unquote(object_id))
        if profile is None:
            raise Http404
        if not (model_admin.has_view_or_change_permission(request, profile) and may_publish(request)):
            raise PermissionDenied
        state = profile_state(profile)
        posted = request.POST if request.method == "POST" else None
        form = PublishForm(posted, initial={"based_on": state.live_number})
        # The page's two buttons say which ("_stages" or "_now"); a post without either publishes to everyone now.
        how = (posted.get("how") or (STAGES if "_stages" in posted else NOW)) if posted else NOW
        if how == STAGES and not may_roll_out(request):
            raise PermissionDenied
        plan_form = PlanSettingsForm(posted if how == STAGES else None, prefix="plan")
        if posted is not None and form.is_valid() and (how == NOW or plan_form.is_valid()):
            data = form.cleaned_data
            forced = data["forced_reason"].strip()
            if forced and not request.user.has_perm(FORCE_PERMISSION):
                form.add_error("forced_reason", "You may not publish a version whose routing tests fail.")
            else:
                try:
                    if how == STAGES and CONFIRMED not in posted and not profile.release_needs_approval:
                        return self._confirm_roll_out(model_admin, request, profile, state, plan_form)
                    if how == STAGES:
                        return self._roll_out(model_admin, request, profile, data, forced, plan_form)
                    return self._publish(model_admin, request, profile, data, forced)
                except ValidationError as exc:  # the plan's settings, checked by the plan's own rules
                    for name, errors in exc.message_dict.items():
                        plan_form.add_error(name if name in plan_form.fields else None, errors)
                except DomainError as exc:
                    model_admin.message_user(request, exc.message, messages.ERROR)
                    # The page shows what differs from the version live now: publishing again is based on it.
                    state = profile_state(profile)
                    form = PublishForm(
                        initial={"based_on": state.live_number, "note": data["note"], "forced_reason": forced}
                    )
        opts = model_admin.model._meta
        context = {
            **model_admin.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": f"Publish the draft of {profile.agent_id}",
            "subtitle": None,
            "original": profile,
            "state": state,
            "changes": changes_html(
                state.changes, empty="Nothing differs from the live version: there is nothing to publish."
            ),
            "form": form,
            "plan_form": plan_form,
            "may_force": request.user.has_perm(FORCE_PERMISSION),
            "may_roll_out": may_roll_out(request),
            "second_person": profile.release_needs_approval,
            "request_rows": request_rows(request, profile),
            "busy_plan": RolloutPlan.objects.filter(
                profile=profile, status__in=[RolloutPlanStatus.RUNNING, RolloutPlanStatus.PAUSED]
            ).first(),
            "refusal": publish_refusal(state, request.user),
            "answer_tests": ConversationTest.objects.filter(profile=profile, enabled=True).count(),
            "answers": answers_compared(profile) if state.live is not None and request.GET.get(ANSWERS) else None,
            "answers_param": ANSWERS,
        }
        return TemplateResponse(request, "admin/agents/agentprofile/publish.html", context)

    @staticmethod
    def _profile_page(profile: AgentProfile) -> HttpResponse:
        return HttpResponseRedirect(reverse("admin:agents_agentprofile_change", args=[profile.pk]))

    def _asked(
        self, model_admin: ModelAdmin[Any], request: HttpRequest, profile: AgentProfile, asked: ReleaseRequest
    ) -> HttpResponse:
        model_admin.message_user(
            request,
            f"{profile.agent_id} needs a second person: your request ({asked.get_kind_display().lower()}) is waiting "
            "for someone with the right to approve releases. Nothing changed for customers yet.",
            messages.SUCCESS,
        )
        return self._profile_page(profile)

    def _publish(
        self,
        model_admin: ModelAdmin[Any],
        request: HttpRequest,
        profile: AgentProfile,
        data: dict[str, Any],
        forced: str,
    ) -> HttpResponse:
        if profile.release_needs_approval:
            asked = publish_request(
                profile=profile, user=request.user, note=data["note"], based_on=data["based_on"], forced_reason=forced
            )
            return self._asked(model_admin, request, profile, asked)
        version = version_publish(
            profile=profile,
            user=request.user,
            note=data["note"],
            based_on=data["based_on"],
            forced_reason=forced,
            published_from=PublishedFrom.ADMIN,
        )
        model_admin.message_user(
            request,
            f"Published {profile.agent_id} version {version.number}: customers get it from their next message.",
            messages.SUCCESS,
        )
        _warn(model_admin, request, version)
        return self._profile_page(profile)

    def _confirm_roll_out(
        self,
        model_admin: ModelAdmin[Any],
        request: HttpRequest,
        profile: AgentProfile,
        state: Any,
        plan_form: PlanSettingsForm,
    ) -> HttpResponse:
        """ "Are you sure?" before a staged rollout starts, as Django asks before a deletion: what customers will get,
        and the page's fields carried unchanged to a button that starts it (it posts ``CONFIRMED``)."""
        plan = plan_form.cleaned_data
        stages = list(plan["stages"])
        control = f" (the others keep version {state.live_number}, live now)" if state.live_number else ""
        sentences = [
            f"The draft becomes a new version: {stages[0]} % of new conversations will get it first{control}.",
            f"Then {stages_words(stages)}: the guard moves to the next stage after {plan['hold_minutes']} minute(s) "
            f"and {plan['min_conversations']} conversation(s) on each side, when every guard is clear — or rolls it "
            "back by itself.",
        ]
        carried = [
            (name, value)
            for name in request.POST
            if name not in ("csrfmiddlewaretoken", CONFIRMED)
            for value in request.POST.getlist(name)
        ]
        opts = model_admin.model._meta
        context = {
            **model_admin.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": f"Start the staged rollout of {profile.agent_id}?",
            "subtitle": None,
            "original": profile,
            "sentences": sentences,
            "carried": carried,
            "confirmed": CONFIRMED,
            "cancel_url": reverse("admin:agents_agentprofile_publish", args=[profile.pk]),
        }
        return TemplateResponse(request, "admin/agents/agentprofile/rollout_confirm.html", context)

    def _roll_out(
        self,
        model_admin: ModelAdmin[Any],
        request: HttpRequest,
        profile: AgentProfile,
        data: dict[str, Any],
        forced: str,
        plan_form: PlanSettingsForm,
    ) -> HttpResponse:
        outcome = draft_rollout(
            profile=profile,
            user=request.user,
            settings=plan_form.cleaned_data,
            note=data["note"],
            based_on=data["based_on"],
            forced_reason=forced,
            name=data["note"],
        )
        if outcome.request is not None:
            return self._asked(model_admin, request, profile, outcome.request)
        assert outcome.decision is not None  # started: draft_rollout's contract
        model_admin.message_user(
            request,
            f"Rolling {profile.agent_id} version {outcome.candidate.number} out in stages. {outcome.decision.reason} "
            "The guard advances it, or rolls it back, by itself.",
            messages.SUCCESS,
        )
        _warn(model_admin, request, outcome.candidate)
        if may_view_plans(request.user):
            return HttpResponseRedirect(reverse("analytics-rollout-page", args=[outcome.plan.pk]))
        return HttpResponseRedirect(reverse("admin:releases_rolloutplan_change", args=[outcome.plan.pk]))


def answers_compared(profile: AgentProfile) -> dict[str, Any] | None:
    """The profile's enabled conversation tests played against its live version and its draft, for the publish page:
    the counts and each test whose result or answers changed (``None``: no tests). Played when the editor asks
    (:data:`ANSWERS`): each test is a conversation, its turns possibly a model's calls."""
    cases = conversation_tests_saved(profile)
    if not cases:
        return None
    compared = conversation_tests_compare(
        routing_tests_spec(profile, LIVE), routing_tests_spec(profile, DRAFT), cases, labels=("live", "draft")
    )
    return {**compared.as_dict(), "shown": [test.as_dict() for test in compared.changed]}


def _warn(model_admin: ModelAdmin[Any], request: HttpRequest, version: RoutingVersion) -> None:
    """The failing conversation tests that are not required, of a version just made: said, never refused."""
    for line in gate_warnings(version.test_summary):
        model_admin.message_user(request, f"Not required, and failing: {line}", messages.WARNING)


admin_extend(AgentProfile, ProfileReleases())


# -- the versions ----------------------------------------------------------------------------------------------


def _run_html(what: str, summary: dict[str, Any], *, warnings: bool = False) -> str:
    """A gate's run kept with a version: ``Routing tests: 3 passed, 1 failed (published anyway).`` and the failures
    (the conversation tests' warnings too)."""
    lines = list(summary.get("failures") or []) + (
        [f"{line} (not required)" for line in summary.get("warnings") or []] if warnings else []
    )
    return format_html(
        "<p>{}: {} passed, {} failed{}.</p>{}",
        what,
        summary.get("passed", "?"),
        summary.get("failed", "?"),
        " (published anyway)" if summary.get("forced") else "",
        format_html("<ul>{}</ul>", format_html_join("", "<li>{}</li>", ((line,) for line in lines))) if lines else "",
    )


@admin.register(RoutingVersion)
class RoutingVersionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Every published version, read-only (a version is immutable); compare any two, revert to one."""

    list_display = ["profile", "number", "is_live", "note", "publisher", "created_at", "reverted_from", "forced"]
    list_display_links = ["number"]
    list_filter = ["profile"]
    list_select_related = ["profile", "created_by"]
    search_fields = ["note", "profile__agent_id"]
    fields = [
        "profile",
        "number",
        "note",
        "publisher",
        "created_at",
        "released",
        "reverted_from",
        "forced_reason",
        "tests",
    ]
    change_form_template = "admin/routing/routingversion/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[RoutingVersion]:
        return super().get_queryset(request).annotate(live_number=F("profile__release__version__number"))

    @admin.display(description="published", ordering="created_by__username")
    def publisher(self, obj: RoutingVersion) -> str:
        return published_by(obj)

    @admin.display(description="served to everyone")
    def released(self, obj: RoutingVersion) -> str:
        if obj.released_at is None:
            return (
                "Never: a candidate whose rollout did not complete (a revert to it needs a second person's approval "
                "where the profile asks for one)."
            )
        return f"Since {localize(localtime(obj.released_at))}."

    @admin.display(description="live", boolean=True)
    def is_live(self, obj: RoutingVersion) -> bool:
        return getattr(obj, "live_number", None) == obj.number

    @admin.display(description="saved tests when published")
    def tests(self, obj: RoutingVersion) -> str:
        summary = getattr(obj, "test_summary", None) or {}
        answered = summary.get(SUMMARY_KEY) or {}
        if "total" not in summary and not answered:
            return "No saved routing tests ran."
        routed = _run_html("Routing tests", summary) if "total" in summary else ""
        return format_html("{}{}", routed, _run_html("Conversation tests", answered, warnings=True) if answered else "")

    @admin.display(description="forced", boolean=True)
    def forced(self, obj: RoutingVersion) -> bool:
        return bool(obj.forced_reason)

    def get_urls(self):
        urls = [
            path(
                "<path:object_id>/revert/",
                self.admin_site.admin_view(self.revert_view),
                name="routing_routingversion_revert",
            )
        ]
        return urls + super().get_urls()

    def _documents(self, version: RoutingVersion, other: str) -> tuple[str, dict[str, Any] | None, str]:
        """What ``other`` names ("draft", "live", "previous" or a number): its label and its document."""
        if other == DRAFT:
            return "the draft", draft_document(version.profile), ""
        if other == LIVE:
            live = live_version(version.profile)
            return ("the live version", live.document, "") if live else ("the live version", None, "not published")
        number = whole_number(other)
        if number is not None:
            found = RoutingVersion.objects.filter(profile=version.profile, number=number).first()
            if found is not None:
                return f"version {found.number}", found.document, ""
        previous = RoutingVersion.objects.filter(profile=version.profile, number__lt=version.number).first()
        if previous is None:
            return "no earlier version", None, ""
        return f"version {previous.number} (the one before)", previous.document, ""

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None):
        version = self.get_object(request, unquote(object_id))
        extra: dict[str, Any] = {}
        if version is not None:
            other = request.GET.get("with", "previous")
            label, document, _ = self._documents(version, other)
            # Older → newer: an earlier version is compared to this one, this one to the draft or the live one.
            if document is None and other == LIVE:
                heading, compared = "No version is live: there is nothing to compare with.", ""
            elif document is None:  # the first version: what it holds, not what changed
                heading = f"Version {version.number} is the first version. It holds:"
                compared = format_html(
                    '<ul class="version-changes" id="version-holds">{}</ul>',
                    format_html_join("", "<li>{}</li>", ((line,) for line in document_summary(version.document))),
                )
            elif other in (DRAFT, LIVE) or (whole_number(other) or 0) > version.number:
                heading = f"From version {version.number} to {label}"
                compared = changes_html(document_diff(version.document, document), empty="No differences.")
            else:
                heading = f"From {label} to version {version.number}"
                compared = changes_html(document_diff(document, version.document), empty="No differences.")
            live = live_version(version.profile)
            extra = {
                "compare_with": other,
                "compare_heading": heading,
                "compare_changes": compared,
                "other_numbers": list(
                    RoutingVersion.objects.filter(profile=version.profile)
                    .exclude(pk=version.pk)
                    .values_list("number", flat=True)
                ),
                "live_number": live.number if live else None,
                "may_revert": may_publish(request) and (live is None or live.number != version.number),
                "revert_refusal": revert_refusal(version, request.user),
            }
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), **extra})

    def revert_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        version = self.get_object(request, unquote(object_id))
        if version is None:
            raise Http404
        if not (self.has_view_permission(request, version) and may_publish(request)):
            raise PermissionDenied
        here = reverse("admin:routing_routingversion_change", args=[version.pk])
        if request.method == "POST":
            try:
                new = version_revert(
                    profile=version.profile, to=version.number, user=request.user, published_from=PublishedFrom.ADMIN
                )
            except DomainError as exc:
                self.message_user(request, exc.message, messages.ERROR)
                return HttpResponseRedirect(here)
            self.message_user(
                request,
                f"{version.profile.agent_id} reverted to version {version.number}: published as version {new.number}. "
                "The draft is unchanged.",
                messages.SUCCESS,
            )
            return HttpResponseRedirect(reverse("admin:routing_routingversion_change", args=[new.pk]))
        live = live_version(version.profile)
        changes = document_diff(live.document, version.document) if live is not None else []
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "app_label": opts.app_label,
            "title": f"Revert {version.profile.agent_id} to version {version.number}?",
            "subtitle": None,
            "original": version,
            "live": version_line(live),
            "changes": changes_html(changes, empty="Nothing differs from the live version."),
            "refusal": revert_refusal(version, request.user),
            "cancel_url": here,
        }
        return TemplateResponse(request, "admin/routing/routingversion/revert_confirm.html", context)
