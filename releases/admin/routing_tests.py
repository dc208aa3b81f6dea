"""Saved routing tests in the admin: routing editors write cases per profile — what the decision must be as fields
(:class:`releases.forms.RoutingTestCaseForm`), and for a short conversation the earlier turns, a line each — and run
them against the profile's draft or its live version before they publish: failures first, each case's pass or fail
with the actual decision and its reason (a failing conversation turn by turn), the confusion matrix of intents, and
precision and recall per intent."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path

from agents.models import AgentProfile
from common.adminkit import AdminExtension, RenderedFormMixin, admin_extend
from common.errors import DomainError
from common.history.admin import FieldHistoryAdminMixin
from common.text import whole_number
from conversations.models import RouteDecisionRecord
from conversations.public import decision_draft
from releases.calibration import CalibrationError, calibrate, calibration_save
from releases.forms import RoutingTestCaseForm
from releases.from_messages import routing_tests_create, saved_name_unique
from releases.models import RoutingTestCase
from releases.routing_tests import (
    DRAFT,
    LIVE,
    CaseResult,
    TestRun,
    TurnResult,
    routing_tests_run,
    routing_tests_saved,
    routing_tests_spec,
    value_text,
)
from routing.public import (
    ROUTING_TEST_CONVERSATION_KEYS,
    ROUTING_TEST_EXPECT_KEYS,
    ROUTING_TEST_KEYS,
    SOURCE_FIELDS,
    expect_field,
    expect_keys_shown,
    test_case_may_add,
)

SHOW_ALL, SHOW_FAILED, SHOW_PASSED = "all", "failed", "passed"
SHOWN = {SHOW_ALL: "All", SHOW_FAILED: "Failed", SHOW_PASSED: "Passed"}
FAILURES_NAMED = 5  # failing tests the summary sentence names
TEST_FIELDS = ["profile", "name", "message", "state", "active_specialist", "enabled", *SOURCE_FIELDS]
EXPECT_SECTION = "What the decision must be"
EXPECT_SECTION_HELP = "Leave a field blank not to check it."
TURNS_SECTION = "A conversation (optional)"
TURNS_SECTION_HELP = (
    "The customer's messages before the test's message: they are played first, in order, as the chat plays them "
    "(flows opened, put aside and resumed), and each is checked where its line says what must come of it."
)
CONVERSATION_SECTION = "What the conversation must show"
CONVERSATION_SECTION_HELP = "For the test's message: what happens to the conversation's open flows and its requests."
# A turn that checks nothing shows what was decided, in these terms.
TURN_SHOWN = ("intent", "agent", "method", "state_after", "events")


class CalibrateForm(forms.Form):
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.order_by("agent_id"), to_field_name="agent_id")


class RunForm(forms.Form):
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.order_by("agent_id"), to_field_name="agent_id")
    version = forms.ChoiceField(
        choices=[(DRAFT, "the draft (what you are changing)"), (LIVE, "the live version (what customers get)")],
        initial=DRAFT,
    )


@admin.register(RoutingTestCase)
class RoutingTestCaseAdmin(RenderedFormMixin, FieldHistoryAdminMixin, admin.ModelAdmin):
    list_display = ["name", "profile", "message", "expected", "enabled", "updated_at"]
    list_filter = ["profile", "enabled"]
    search_fields = ["name", "message"]
    list_select_related = ["profile"]
    form = RoutingTestCaseForm
    change_list_template = "admin/releases/routingtestcase/change_list.html"
    change_form_template = "admin/releases/routingtestcase/change_form.html"

    def get_fieldsets(self, request: HttpRequest, obj: RoutingTestCase | None = None) -> list[tuple[Any, Any]]:
        """The test, then its expectation: goal and goal status only where the profile is in goal mode or the test
        already expects them (:func:`routing.forms.expect_keys_shown`); the form has only the fields shown
        (:class:`~common.adminkit.RenderedFormMixin`)."""
        chosen = whole_number(str(request.POST.get("profile") or request.GET.get("profile") or ""))
        profile = AgentProfile.objects.filter(pk=chosen).first() if chosen else None
        if profile is None and obj is not None:
            profile = obj.profile
        expect = dict(obj.expect or {}) if obj is not None else {}
        initial = self.get_changeform_initial_data(request)
        expect.update(
            {key: initial[expect_field(key)] for key in ROUTING_TEST_EXPECT_KEYS if initial.get(expect_field(key))}
        )
        keys = expect_keys_shown(profile, expect)
        conversation = [expect_field(key) for key in ROUTING_TEST_CONVERSATION_KEYS]
        return [
            (None, {"fields": TEST_FIELDS}),
            (TURNS_SECTION, {"fields": ["turns"], "description": TURNS_SECTION_HELP}),
            (EXPECT_SECTION, {"fields": [expect_field(key) for key in keys], "description": EXPECT_SECTION_HELP}),
            (CONVERSATION_SECTION, {"fields": conversation, "description": CONVERSATION_SECTION_HELP}),
        ]

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        """A link's expectation arrives as one query parameter per key (``expect_intent=…``); an older link's as
        JSON text (``expect={"intent": …}``), which fills the same fields. A name given (a link made from a message)
        is made unique among the profile's tests."""
        initial: dict[str, Any] = dict(super().get_changeform_initial_data(request))
        profile_id = whole_number(str(initial.get("profile") or ""))
        if profile_id and isinstance(initial.get("name"), str):
            initial["name"] = saved_name_unique(RoutingTestCase, profile_id=profile_id, name=initial["name"])
        expect = initial.pop("expect", None)
        try:
            stored = json.loads(expect) if isinstance(expect, str) else {}
        except ValueError:
            stored = {}
        if isinstance(stored, dict):
            for key in ROUTING_TEST_EXPECT_KEYS:
                if isinstance(stored.get(key), str) and stored[key]:
                    initial.setdefault(expect_field(key), stored[key])
        return initial

    @admin.display(description="expects")
    def expected(self, obj: RoutingTestCase) -> str:
        said = ", ".join(f"{key}={value_text(value)}" for key, value in sorted((obj.expect or {}).items()))
        turns = len(obj.turns or ())
        return f"after {turns} earlier turn{'s' if turns > 1 else ''}: {said}" if turns else said

    def get_urls(self):
        run = self.admin_site.admin_view(self.run_view)
        calibrate_view = self.admin_site.admin_view(self.calibrate_view)
        return [
            path("run/", run, name="releases_routingtestcase_run"),
            path("calibrate/", calibrate_view, name="releases_routingtestcase_calibrate"),
            *super().get_urls(),
        ]

    def calibrate_view(self, request: HttpRequest) -> HttpResponse:
        """Choose a profile's examples-tier threshold and margin from its saved tests and examples (GET: shown, not
        written); POST ``save`` writes them to the profile's draft (``releases.calibrate_routingtestcase``)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        data = request.POST if request.method == "POST" else request.GET
        form = CalibrateForm(data or None)
        may_save = request.user.has_perm("releases.calibrate_routingtestcase")
        context: dict[str, Any] = {**self.admin_site.each_context(request), "opts": self.model._meta, "form": form}
        context.update(title="Calibrate the examples tier", may_save=may_save)
        if form.is_valid():
            profile = form.cleaned_data["profile"]
            try:
                result = calibrate(routing_tests_spec(profile, DRAFT), routing_tests_saved(profile))
            except CalibrationError as exc:
                context["error"] = str(exc)
            else:
                if request.method == "POST":
                    if not may_save:
                        raise PermissionDenied
                    calibration_save(profile, result, user=request.user)
                    # The admin capitalises a message's first letter: it starts with a word, not the identifier.
                    messages.success(
                        request,
                        f"Saved to the draft of {profile.agent_id}: threshold {result.chosen.threshold:.2f} and margin "
                        f"{result.chosen.margin:.2f} — publish to serve them.",
                    )
                    return redirect(f"{request.path}?profile={profile.agent_id}")
                context.update(result=result, profile=profile, last=profile.examples_calibration or None)
        return TemplateResponse(request, "admin/releases/routingtestcase/calibrate.html", context)

    def run_view(self, request: HttpRequest) -> HttpResponse:
        """Run a profile's saved tests against its draft or live version (GET: nothing is written). The results
        lead with the failures; ``show`` (all, failed, passed) filters them, with no script needed."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = RunForm(request.GET or None)
        context: dict[str, Any] = {**self.admin_site.each_context(request), "opts": self.model._meta, "form": form}
        context["title"] = "Run routing tests"
        if form.is_valid():
            profile = form.cleaned_data["profile"]
            cases = routing_tests_saved(profile)
            try:
                run = routing_tests_run(routing_tests_spec(profile, form.cleaned_data["version"]), cases)
            except DomainError as exc:
                context["error"] = exc.message
            else:
                show = request.GET.get("show", SHOW_ALL)
                show = show if show in SHOWN else SHOW_ALL
                context.update(
                    run=run,
                    profile=profile,
                    summary=run_summary(run),
                    results=[(result, result_checks(result), turn_rows(result)) for result in results_shown(run, show)],
                    show=show,
                    filters=_filters(request, run, show),
                    intents=sorted(run.confusion),
                    columns=_columns(run),
                )
        return TemplateResponse(request, "admin/releases/routingtestcase/run.html", context)


def results_shown(run: TestRun, show: str = SHOW_ALL) -> list[CaseResult]:
    """The run's results, failures first (each part by name), those ``show`` asks for."""
    ordered = sorted(run.results, key=lambda result: (result.passed, result.case.name))
    if show == SHOW_FAILED:
        return [result for result in ordered if not result.passed]
    if show == SHOW_PASSED:
        return [result for result in ordered if result.passed]
    return ordered


@dataclass(frozen=True)
class Check:
    """One expectation of a case as the results table shows it, in the order of ``ROUTING_TEST_KEYS``."""

    key: str
    expected: str
    actual: str
    failed: bool


def result_checks(result: CaseResult | TurnResult) -> list[Check]:
    """A case's (or one of its turns') expectations against what it got."""
    expect = result.case.expect if isinstance(result, CaseResult) else result.turn.expect
    return [
        Check(key, value_text(expect[key]), value_text(result.actual.get(key)), key in result.failed)
        for key in (*ROUTING_TEST_KEYS, *sorted(set(expect) - set(ROUTING_TEST_KEYS)))
        if key in expect
    ]


@dataclass(frozen=True)
class TurnRow:
    """An earlier turn of a failing conversation test as the results table shows it: its checks, or what was
    decided when it checks nothing."""

    turn: TurnResult
    checks: list[Check]
    decided: str


def turn_rows(result: CaseResult) -> list[TurnRow]:
    """The earlier turns of a conversation test that failed (a passing one needs no more than its row)."""
    if result.passed:
        return []
    return [
        TurnRow(
            turn,
            result_checks(turn),
            ", ".join(f"{key}={value_text(turn.actual.get(key))}" for key in TURN_SHOWN),
        )
        for turn in result.turns
    ]


def run_summary(run: TestRun) -> str:
    """The run in one sentence, failures first: "1 of 40 failed: “horário de atendimento”. 39 passed."."""
    if not run.total:
        return "The profile has no enabled saved tests."
    if not run.failed:
        return f"All {run.total} passed." if run.total > 1 else "The one test passed."
    names = [f"“{result.case.name}”" for result in results_shown(run, SHOW_FAILED)[:FAILURES_NAMED]]
    more = run.failed - len(names)
    named = ", ".join(names) + (f" and {more} more" if more else "")
    passed = f" {run.passed} passed." if run.passed else ""
    return f"{run.failed} of {run.total} failed: {named}.{passed}"


def _filters(request: HttpRequest, run: TestRun, show: str) -> list[dict[str, Any]]:
    """The links that show all, the failed or the passed results: the page's query with ``show`` set."""
    counts = {SHOW_ALL: run.total, SHOW_FAILED: run.failed, SHOW_PASSED: run.passed}
    links = []
    for value, label in SHOWN.items():
        query = request.GET.copy()
        query["show"] = value
        links.append({"label": f"{label} ({counts[value]})", "url": f"?{query.urlencode()}", "current": value == show})
    return links


def _columns(run: Any) -> list[str]:
    """The confusion matrix's actual intents, in a stable order."""
    return sorted({actual for row in run.confusion.values() for actual in row})


# -- the stored decisions' "Add as routing test cases" -----------------------------------------------------------


@admin.action(description="Add as routing test cases")
def add_as_routing_test_cases(
    model_admin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[RouteDecisionRecord]
) -> None:
    """Each selected decision's message becomes an enabled routing test expecting what was decided
    (:func:`conversations.saved_test_drafts.decision_draft`): an editor then corrects the misroutes."""
    records = queryset.select_related("conversation", "message").order_by("created_at", "id")
    drafts = [draft for draft in map(decision_draft, records) if draft is not None]
    cases = routing_tests_create(drafts)
    skipped = len(records) - len(drafts)
    text = (
        f"{len(cases)} routing test case(s) added, each expecting what was decided: open each one in "
        "Routing tests and correct the expected intent and agent where the decision was wrong."
    )
    if skipped:
        text += f" {skipped} decision(s) without a stored message were skipped."
    model_admin.message_user(request, text, messages.SUCCESS)


class RoutingTestsFromDecisions(AdminExtension):
    """The stored decisions' list (the engine's admin) offers their messages as routing tests to those who may add
    them."""

    def actions(self, request: HttpRequest) -> list[Any]:
        return [add_as_routing_test_cases] if test_case_may_add(request) else []


admin_extend(RouteDecisionRecord, RoutingTestsFromDecisions())
