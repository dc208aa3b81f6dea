"""Saved conversation tests in the admin: routing editors write a profile's tests as forms — the test's fields, then
each turn a row of what the customer says and what the answer must show (:mod:`releases.evals.forms`).
The list is per profile (the profile's page links it, filtered): each test's name, whether it is required and
enabled, its turns and its language. A test made from a real conversation opens its add page filled in
(:mod:`routing.conversation_tests.drafts`). Filtered to one profile, the list says what of the profile's draft the
tests cover — from what they expect and what their last finished run showed (:mod:`releases.evals.coverage`) — and
"Run tests" starts a run (:mod:`releases.admin.conversation_test_runs`)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import path

from agents.models import AgentProfile
from common.history.admin import FieldHistoryAdminMixin
from common.text import whole_number
from releases.admin.conversation_test_runs import conversation_test_run_view
from releases.evals.coverage import suite_coverage
from releases.evals.files import conversation_tests_saved
from releases.evals.forms import ConversationTestForm
from releases.from_messages import saved_name_unique
from releases.models import ConversationTest, ConversationTestResult, ConversationTestRunStatus
from releases.routing_tests import DRAFT, routing_tests_spec
from routing.public import conversation_test_draft_initial

TEST_FIELDS = ("profile", "name", "required", "enabled", "language", "source_message_id")
EVERY_TURN_SECTION = "What every turn gets"
EVERY_TURN_HELP = (
    "As a face sends them: the customer's id, the channel, the context (each turn may add its own), and recorded "
    "answers used in place of calling the tools. Leave blank for the API's defaults."
)
EVERY_TURN_FIELDS = ("user_id", "channel", "context", "tool_answers")


@admin.register(ConversationTest)
class ConversationTestAdmin(FieldHistoryAdminMixin, admin.ModelAdmin):
    list_display = ["name", "profile", "required", "enabled", "turns_count", "language", "updated_at"]
    list_filter = ["profile", "required", "enabled", "language"]
    search_fields = ["name"]
    list_select_related = ["profile"]
    form = ConversationTestForm
    change_form_template = "admin/releases/conversationtest/change_form.html"
    change_list_template = "admin/releases/conversationtest/change_list.html"
    fieldsets = [
        (None, {"fields": TEST_FIELDS}),
        (EVERY_TURN_SECTION, {"fields": EVERY_TURN_FIELDS, "description": EVERY_TURN_HELP}),
    ]

    @admin.display(description="turns")
    def turns_count(self, obj: ConversationTest) -> int:
        return len(obj.turns or ())

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        initial: dict[str, Any] = dict(super().get_changeform_initial_data(request))
        initial.pop("turns", None)  # turns come from a draft, never from the address
        initial.update(conversation_test_draft_initial(request))  # "Add as conversation test" on a conversation
        profile_id = whole_number(str(initial.get("profile") or ""))
        if profile_id and isinstance(initial.get("name"), str):
            initial["name"] = saved_name_unique(ConversationTest, profile_id=profile_id, name=initial["name"])
        return initial

    def get_urls(self):
        run = self.admin_site.admin_view(lambda request: conversation_test_run_view(self, request))
        return [path("run/", run, name="releases_conversationtest_run"), *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        extra = dict(extra_context or {})
        chosen = whole_number(str(request.GET.get("profile__id__exact") or ""))
        profile = AgentProfile.objects.filter(pk=chosen).first() if chosen else None
        if profile is not None:
            extra.update(coverage_profile=profile, coverage_lines=profile_coverage_lines(profile))
        return super().changelist_view(request, extra)


def profile_coverage_lines(profile: AgentProfile) -> list[str]:
    """What of the profile's draft its enabled saved tests cover: what they expect, and what the turns of its last
    finished run showed."""
    last = (
        ConversationTestResult.objects.filter(run__profile=profile, run__status=ConversationTestRunStatus.FINISHED)
        .order_by("-run__created_at", "-run_id")
        .values_list("run_id", flat=True)
        .first()
    )
    shown = ConversationTestResult.objects.filter(run_id=last).values_list("result", flat=True) if last else []
    return suite_coverage(routing_tests_spec(profile, DRAFT), conversation_tests_saved(profile), shown).lines()
