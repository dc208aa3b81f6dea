"""External desks: where a profile's escalations are posted."""

from __future__ import annotations

import os
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from agents.admin.parts import EnableDisableActions
from agents.desks import secret_variable_refusal
from agents.models import ExternalDesk
from agents.selectors import external_desk_profiles
from common.adminkit import EndpointSecretsAdminMixin
from common.history.admin import FieldHistoryAdminMixin


class ExternalDeskAdminForm(forms.ModelForm):
    """The signing secret is write-only: never rendered back; left blank on a change, the stored secret is kept; a
    named variable replaces it."""

    secret = forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="The secret shared with the desk, which checks each post's signature with it (at least 16 "
        "characters). Never shown again: leave blank to keep the stored one.",
    )

    class Meta:
        model = ExternalDesk
        fields = ["name", "description", "url", "secret", "secret_env", "timeout", "enabled"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initial["secret"] = ""  # not even the form object holds it for a page to render

    def clean_secret(self) -> str:
        entered = self.cleaned_data.get("secret") or ""
        return entered or (self.instance.secret if self.instance.pk else "")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or self.cleaned_data
        typed = bool(self.data.get(self.add_prefix("secret")))
        if cleaned.get("secret_env") and not typed:
            cleaned["secret"] = ""  # the variable now signs: the stored secret is dropped, not kept unused
        return cleaned


@admin.register(ExternalDesk)
class ExternalDeskAdmin(EndpointSecretsAdminMixin, FieldHistoryAdminMixin, EnableDisableActions, admin.ModelAdmin):
    """An external desk (docs/external-desk.md): the operator's, as MCP servers are. Routing editors may read the
    desks (a profile's form lists their names), never add or change one; nobody reads its secret back. A desk that
    a profile names cannot be deleted: point the profiles elsewhere first."""

    form = ExternalDeskAdminForm
    endpoint_fields = ["url"]
    list_display = ["name", "url", "enabled", "timeout", "secret_source", "updated_at"]
    list_filter = ["enabled"]
    search_fields = ["name", "description", "url"]
    readonly_fields = ["secret_source", "named_by"]
    fieldsets = [
        (None, {"fields": ["name", "description", "enabled", "named_by"]}),
        (
            "Webhook",
            {
                "fields": ["url", "secret", "secret_env", "secret_source", "timeout"],
                "description": "Every change of its profiles' escalations is posted here as JSON, signed with the "
                'secret (X-Platform-Signature: sha256=HMAC of "<timestamp>.<body>"). Type the secret, or name the '
                "environment variable that holds it.",
            },
        ),
    ]

    def get_fieldsets(self, request: HttpRequest, obj: ExternalDesk | None = None):
        fieldsets = super().get_fieldsets(request, obj)
        if self.has_change_permission(request, obj) if obj is not None else self.has_add_permission(request):
            return fieldsets
        # A read-only page would show a model field's value: the secret is left out, its source said instead.
        return [
            (name, {**options, "fields": [f for f in options["fields"] if f != "secret"]})
            for name, options in fieldsets
        ]

    @admin.display(description="secret")
    def secret_source(self, obj: ExternalDesk) -> str:
        """Where the secret comes from, never the secret: typed here, or a variable and whether this process has it."""
        if obj.secret_env:
            refusal = secret_variable_refusal(obj.secret_env)
            if refusal is not None:
                return f"never read: {refusal}"
            held = "set" if os.environ.get(obj.secret_env) else "not set"
            return f"from {obj.secret_env} ({held} in this web process)"
        return "typed here (never shown)" if obj.secret else "none: nothing is posted"

    @admin.display(description="profiles that name it")
    def named_by(self, obj: ExternalDesk) -> str:
        names = external_desk_profiles(name=obj.name) if obj.pk else []
        return ", ".join(names) or "none"

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """A desk that profiles name is protected (deleting it would leave their escalations nowhere to go): Django's
        delete page and bulk action then refuse, listing the profiles."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        for desk in objs:
            for agent_id in external_desk_profiles(name=desk.name):
                protected.append(f"Profile {agent_id} sends its escalations to {desk.name}")
        return deleted, counts, perms_needed, protected
