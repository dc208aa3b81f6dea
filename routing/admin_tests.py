"""Saved routing tests in the admin (W2 4/8): routing editors write cases per profile and run them against the
profile's draft or its live version — each case's pass or fail with the actual decision and its reason, the
confusion matrix of intents, and precision and recall per intent — before they publish."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path

from agents.models import AgentProfile
from common.errors import DomainError
from common.history_admin import FieldHistoryAdminMixin
from routing.models import RoutingTestCase
from routing.routing_tests import DRAFT, LIVE, routing_tests_run, routing_tests_saved, routing_tests_spec


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
        return [path("run/", run, name="routing_routingtestcase_run"), *super().get_urls()]

    def run_view(self, request: HttpRequest) -> HttpResponse:
        """Run a profile's saved tests against its draft or live version (GET: nothing is written)."""
        if not self.has_view_permission(request):
            raise PermissionError("view_routingtestcase")
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
