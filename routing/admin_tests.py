"""Saved routing tests in the admin (W2 4/8): routing editors write cases per profile and run them against the
profile's draft or its live version — each case's pass or fail with the actual decision and its reason, the
confusion matrix of intents, and precision and recall per intent — before they publish."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path

from agents.models import AgentProfile
from common.errors import DomainError
from common.history_admin import FieldHistoryAdminMixin
from routing.calibration import CalibrationError, calibrate, calibration_save
from routing.models import RoutingTestCase
from routing.routing_tests import DRAFT, LIVE, routing_tests_run, routing_tests_saved, routing_tests_spec


class CalibrateForm(forms.Form):
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.order_by("agent_id"), to_field_name="agent_id")


class RunForm(forms.Form):
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.order_by("agent_id"), to_field_name="agent_id")
    version = forms.ChoiceField(
        choices=[(DRAFT, "the draft (what you are changing)"), (LIVE, "the live version (what customers get)")],
        initial=DRAFT,
    )


@admin.register(RoutingTestCase)
class RoutingTestCaseAdmin(FieldHistoryAdminMixin, admin.ModelAdmin):
    list_display = ["name", "profile", "message", "expected", "enabled", "updated_at"]
    list_filter = ["profile", "enabled"]
    search_fields = ["name", "message"]
    list_select_related = ["profile"]
    fields = ["profile", "name", "message", "state", "active_specialist", "expect", "enabled"]
    change_list_template = "admin/routing/routingtestcase/change_list.html"

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        """A link's ``expect`` arrives as JSON text ("Add as routing test case"): the form starts from the object."""
        initial: dict[str, Any] = dict(super().get_changeform_initial_data(request))
        expect = initial.get("expect")
        if isinstance(expect, str):
            try:
                initial["expect"] = json.loads(expect)
            except ValueError:
                del initial["expect"]
        return initial

    @admin.display(description="expects")
    def expected(self, obj: RoutingTestCase) -> str:
        return ", ".join(f"{key}={value}" for key, value in sorted((obj.expect or {}).items()))

    def get_urls(self):
        run = self.admin_site.admin_view(self.run_view)
        calibrate_view = self.admin_site.admin_view(self.calibrate_view)
        return [
            path("run/", run, name="routing_routingtestcase_run"),
            path("calibrate/", calibrate_view, name="routing_routingtestcase_calibrate"),
            *super().get_urls(),
        ]

    def calibrate_view(self, request: HttpRequest) -> HttpResponse:
        """Choose a profile's examples-tier threshold and margin from its saved tests and examples (GET: shown, not
        written); POST ``save`` writes them to the profile's draft (``routing.calibrate_routingtestcase``)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        data = request.POST if request.method == "POST" else request.GET
        form = CalibrateForm(data or None)
        may_save = request.user.has_perm("routing.calibrate_routingtestcase")
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
                    messages.success(
                        request,
                        f"{profile.agent_id}: threshold {result.chosen.threshold:.2f} and margin "
                        f"{result.chosen.margin:.2f} saved to the draft — publish to serve them.",
                    )
                    return redirect(f"{request.path}?profile={profile.agent_id}")
                context.update(result=result, profile=profile, last=profile.examples_calibration or None)
        return TemplateResponse(request, "admin/routing/routingtestcase/calibrate.html", context)

    def run_view(self, request: HttpRequest) -> HttpResponse:
        """Run a profile's saved tests against its draft or live version (GET: nothing is written)."""
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
                context.update(run=run, profile=profile, intents=sorted(run.confusion), columns=_columns(run))
        return TemplateResponse(request, "admin/routing/routingtestcase/run.html", context)


def _columns(run: Any) -> list[str]:
    """The confusion matrix's actual intents, in a stable order."""
    return sorted({actual for row in run.confusion.values() for actual in row})
