"""Runs of conversation tests in the admin: "Run tests" on the conversation tests' list starts one (a profile, a
version, optionally the version to compare with) — played in the request, or by a Celery worker when the suite is
large and a broker is configured (:func:`releases.evals.runs.conversation_test_run_start`) — and the runs' list, per
profile, shows every run kept (the command's and the API's too) with its progress while it runs; a run's page shows
its counts, each test's result failures first (the failed checks, each turn's answer, the answers that changed
against the compared version), what of the profile the suite covered and the model usage it cost.

Starting a run takes ``releases.add_conversationtestrun``; seeing them, ``releases.view_conversationtestrun``. Runs are
written only by playing: the pages are read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from agents.models import AgentProfile
from common.errors import DomainError
from releases.evals.coverage import AREA_WORDS, AREAS
from releases.evals.runs import conversation_test_run_start
from releases.models import (
    ConversationTestResult,
    ConversationTestRun,
    ConversationTestRunSource,
    ConversationTestRunStatus,
)
from releases.routing_tests import DRAFT

RUNNING = (ConversationTestRunStatus.QUEUED, ConversationTestRunStatus.RUNNING)
REFRESH_SECONDS = 3  # a running run's page reloads itself


class ConversationTestRunForm(forms.Form):
    profile = forms.ModelChoiceField(queryset=AgentProfile.objects.order_by("agent_id"), to_field_name="agent_id")
    version = forms.CharField(
        initial=DRAFT, max_length=16, help_text="draft (what you are changing), live (what customers get) or a number."
    )
    compare = forms.CharField(
        required=False,
        max_length=16,
        help_text="Optional: a version to play the tests against too (e.g. live), to see what changed per test.",
    )


def conversation_test_run_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """GET: the form (the profile filled in from ``?profile=``); POST: start the run and open its page."""
    if not request.user.has_perm("releases.add_conversationtestrun"):
        raise PermissionDenied
    form = ConversationTestRunForm(request.POST if request.method == "POST" else None, initial=request.GET.dict())
    if request.method == "POST" and form.is_valid():
        try:
            run = conversation_test_run_start(
                profile=form.cleaned_data["profile"],
                source=ConversationTestRunSource.ADMIN,
                version=form.cleaned_data["version"].strip(),
                compare=form.cleaned_data["compare"].strip(),
                started_by=request.user,
            )
        except DomainError as exc:
            for field, problems in (exc.fields or {}).items():
                form.add_error(field if field in form.fields else None, problems)
            if not exc.fields:
                form.add_error(None, exc.message)
        else:
            if run.status == ConversationTestRunStatus.QUEUED:
                messages.info(request, f"{run.total} tests queued: a worker plays them; this page follows it.")
            return redirect(reverse("admin:releases_conversationtestrun_change", args=[run.pk]))
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": ConversationTestRun._meta,
        "form": form,
        "title": "Run conversation tests",
    }
    return TemplateResponse(request, "admin/releases/conversationtestrun/run.html", context)


@admin.register(ConversationTestRun)
class ConversationTestRunAdmin(admin.ModelAdmin):
    list_display = ["__str__", "profile", "version", "compared_with", "status", "progress", "passed", "failed",
                    "required_failed", "source", "started_by", "created_at"]  # fmt: skip
    list_filter = ["profile", "status", "source"]
    search_fields = ["profile__agent_id", "version"]
    list_select_related = ["profile", "started_by"]
    date_hierarchy = "created_at"
    fields = ("profile", "version", "version_number", "compared_with", "names", "source", "started_by", "status",
              "progress", "passed", "failed", "required_failed", "changed", "created_at", "started_at", "finished_at",
              "error")  # fmt: skip
    readonly_fields = fields
    change_form_template = "admin/releases/conversationtestrun/change_form.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a run is started by "Run tests", the command or the API, and written by playing

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a record, as the rollout guard's decisions are; they go with their profile

    @admin.display(description="progress")
    def progress(self, obj: ConversationTestRun) -> str:
        if obj.status == ConversationTestRunStatus.QUEUED:
            return f"queued: {obj.total} tests"
        return f"{obj.done} of {obj.total}"

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        run = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if run is not None:
            extra.update(run_page_context(run))
        return super().change_view(request, object_id, form_url, extra)


def run_page_context(run: ConversationTestRun) -> dict[str, Any]:
    """What a run's page shows beside its fields: whether it reloads, its results failures first, its coverage."""
    results: list[ConversationTestResult] = list(run.results.order_by("passed", "pk")) if run.pk else []
    coverage = [{"area": AREA_WORDS[area], **run.coverage[area]} for area in AREAS if area in (run.coverage or {})]
    return {
        "refresh_seconds": REFRESH_SECONDS if run.status in RUNNING else 0,
        "results": results,
        "coverage": coverage,
        "usage": run.usage or {},
    }
