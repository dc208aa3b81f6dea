"""Saved conversation tests in the admin: routing editors write a profile's tests as forms — the test's fields, then
each turn a row of what the customer says and what the answer must show (:mod:`routing.conversation_test_forms`).
The list is per profile (the profile's page links it, filtered): each test's name, whether it is required and
enabled, its turns and its language. A test made from a real conversation opens its add page filled in
(:mod:`routing.conversation_test_drafts`)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from common.history_admin import FieldHistoryAdminMixin
from routing.conversation_test_drafts import conversation_test_draft_initial
from routing.conversation_test_forms import ConversationTestForm
from routing.models import ConversationTest

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
    change_form_template = "admin/routing/conversationtest/change_form.html"
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
        return initial
