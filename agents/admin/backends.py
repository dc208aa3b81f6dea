"""Remote backends: specialists answered by another service."""

from __future__ import annotations

from django import forms
from django.contrib import admin

from agents.admin.parts import EnableDisableActions
from agents.models import RemoteBackend
from agents.schemas import validate_word_list
from common.adminkit import EndpointSecretsAdminMixin
from common.forms import LinesField
from common.history.admin import FieldHistoryAdminMixin


class RemoteBackendAdminForm(forms.ModelForm):
    """The API key is write-only: never rendered back; left blank on a change, the stored key is kept."""

    api_key = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="The API key the remote deployment gave us, sent as Authorization: Bearer. Never shown again: "
        "leave blank to keep the stored key.",
    )
    keywords = LinesField(
        required=False,
        help_text="One word or phrase per line: a message that has one goes to this backend (as an intent's keywords).",
    )
    examples = LinesField(required=False, help_text="One example message per line, for the examples tier.")

    class Meta:
        model = RemoteBackend
        fields = [
            "profile",
            "name",
            "display_name",
            "description",
            "kind",
            "base_url",
            "api_key",
            "remote_agent_id",
            "keywords",
            "examples",
            "priority",
            "timeout",
            "failures_to_open",
            "open_seconds",
            "enabled",
        ]

    def clean_api_key(self) -> str:
        entered = self.cleaned_data.get("api_key") or ""
        return entered or (self.instance.api_key if self.instance.pk else "")

    def _clean_lines(self, name: str) -> list[str]:
        value = self.cleaned_data.get(name) or []
        validate_word_list(value)
        return value

    def clean_keywords(self) -> list[str]:
        return self._clean_lines("keywords")

    def clean_examples(self) -> list[str]:
        return self._clean_lines("examples")


@admin.register(RemoteBackend)
class RemoteBackendAdmin(EndpointSecretsAdminMixin, FieldHistoryAdminMixin, EnableDisableActions, admin.ModelAdmin):
    """Another deployment a gateway profile routes to like a specialist (docs/gateway.md); takes effect on save."""

    form = RemoteBackendAdminForm
    endpoint_fields = ["base_url"]
    list_display = [
        "name",
        "profile",
        "kind",
        "remote_agent_id",
        "base_url",
        "priority",
        "timeout",
        "enabled",
        "updated_at",
    ]
    list_filter = ["enabled", "kind", "profile"]
    list_select_related = ["profile"]
    search_fields = ["name", "display_name", "description", "base_url", "remote_agent_id", "profile__agent_id"]
    fieldsets = [
        (None, {"fields": ["profile", "name", "display_name", "description", "enabled"]}),
        (
            "Where",
            {
                "fields": ["kind", "base_url", "api_key", "remote_agent_id"],
                "description": "How it is called, the other deployment's address, the key it gave us and the profile "
                "to call there (an A2A agent's address names its agent).",
            },
        ),
        (
            "Routing",
            {
                "fields": ["keywords", "examples", "priority"],
                "description": "Messages reach this backend as they reach a specialist: by its keywords, its "
                "examples, or the LLM classifier reading its description; a short follow-up stays with it.",
            },
        ),
        (
            "Faults",
            {
                "fields": ["timeout", "failures_to_open", "open_seconds"],
                "description": "A call that fails or takes longer than the timeout gets the fallback answer; after "
                "this many failures in a row the backend is left alone for a while.",
            },
        ),
    ]
