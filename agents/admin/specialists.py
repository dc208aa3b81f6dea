"""The specialist's admin: its form edits the active prompt (a change becomes the next version), its inline lists
the prompt versions with a button to make one active again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import flatten
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import truncatechars
from django.urls import reverse
from django.utils.html import format_html

from agents.admin.parts import active_version_subquery
from agents.models import SPECIALIST_TRANSLATED, Specialist, SpecialistPrompt
from agents.selectors import specialist_translations_missing
from agents.services import prompt_version_create
from common.adminkit import ReadOnlyInlineMixin
from common.history.admin import FieldHistoryAdminMixin
from common.translation_forms import missing_warning, translation_boxes, translations_form

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

    from common.adminkit import FieldGroups


class _SpecialistTotals(TypedDict):
    active_prompt_version: int | None
    tool_total: int
    intent_total: int


def activate_button(prompt: SpecialistPrompt, *, next_url: str = "") -> str:
    """A submit button that posts its surrounding admin form (and CSRF token) to the revert view."""
    url = reverse("admin:agents_specialistprompt_activate", args=[prompt.pk])
    if next_url:
        url = f"{url}?{urlencode({'next': next_url})}"
    return format_html(
        '<button type="submit" class="button" formaction="{}" formmethod="post" name="_activate">{}</button>',
        url,
        "Make this version active",
    )


class SpecialistPromptInline(ReadOnlyInlineMixin, admin.TabularInline):
    """The specialist's prompt history, newest first, with a revert button on each older version."""

    model = SpecialistPrompt
    fields = ["version", "is_active", "note", "excerpt", "created_at", "created_by"]
    ordering = ["-version"]
    verbose_name_plural = "prompt versions"

    def _can_activate(self, request: HttpRequest) -> bool:
        return request.user.has_perm("agents.change_specialistprompt")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> FieldGroups:
        fields = super().get_fields(request, obj)
        return [*fields, "make_active"] if self._can_activate(request) else list(fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return flatten(self.get_fields(request, obj))

    def get_queryset(self, request: HttpRequest) -> QuerySet[SpecialistPrompt]:
        return super().get_queryset(request).select_related("created_by")

    @admin.display(description="text")
    def excerpt(self, obj: SpecialistPrompt) -> str:
        return truncatechars(obj.text, 120)

    @admin.display(description="")
    def make_active(self, obj: SpecialistPrompt) -> str:
        if obj.pk is None or obj.is_active:
            return ""
        return activate_button(obj, next_url=reverse("admin:agents_specialist_change", args=[obj.specialist_id]))


SPECIALIST_LABELS = {"display_name": "Display name", "description": "Description"}


SpecialistTranslations = translations_form(SPECIALIST_LABELS, limits={"display_name": 200}, long=["description"])


class SpecialistAdminForm(SpecialistTranslations, forms.ModelForm):  # type: ignore[valid-type,misc]  # built by a call
    prompt_text = forms.CharField(
        label="Prompt",
        required=False,
        widget=forms.Textarea(attrs={"rows": 14, "cols": 90, "class": "vLargeTextField"}),
        help_text="The active version's text. Saving a different text creates the next version and makes it active; "
        "older versions stay below and can be made active again.",
    )
    prompt_note = forms.CharField(
        label="What changed",
        required=False,
        max_length=200,
        help_text="A note stored with the new version, e.g. 'Ask for the invoice month first'.",
    )

    class Meta:
        model = Specialist
        fields = [
            "profile",
            "name",
            "display_name",
            "description",
            "enabled",
            "step_limit",
            "knowledge",
            "remember_tool",
            "allowed_tools",
            "handoff_targets",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.active_prompt = None
        if self.instance.pk:
            self.active_prompt = self.instance.prompts.filter(is_active=True).first()
        if self.active_prompt is not None:
            self.fields["prompt_text"].initial = self.active_prompt.text
        targets = self.fields.get("handoff_targets")
        if isinstance(targets, forms.ModelMultipleChoiceField) and targets.queryset is not None:
            # Labels name the profile; an existing specialist hands off within its own profile only.
            targets.queryset = targets.queryset.select_related("profile")
            if self.instance.pk:
                targets.queryset = targets.queryset.filter(profile_id=self.instance.profile_id).exclude(
                    pk=self.instance.pk
                )

    def new_prompt_text(self) -> str | None:
        """The text to store as a new version, or ``None`` when the prompt did not change."""
        text = (self.cleaned_data.get("prompt_text") or "").strip()
        if not text:
            return None
        if self.active_prompt is not None and text == self.active_prompt.text.strip():
            return None
        return text

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        profile = cleaned.get("profile")
        strangers = [t.name for t in cleaned.get("handoff_targets") or [] if profile and t.profile_id != profile.pk]
        if strangers:
            self.add_error("handoff_targets", f"Not specialists of this profile: {', '.join(strangers)}.")
        return cleaned


@admin.register(Specialist)
class SpecialistAdmin(FieldHistoryAdminMixin, admin.ModelAdmin):
    form = SpecialistAdminForm
    inlines = [SpecialistPromptInline]
    list_display = [
        "name",
        "profile",
        "display_name",
        "enabled",
        "step_limit",
        "active_version",
        "tool_count",
        "intent_count",
        "updated_at",
    ]
    list_filter = ["profile", "enabled"]
    list_select_related = ["profile"]
    search_fields = ["name", "display_name", "description", "profile__agent_id"]
    filter_horizontal = ["allowed_tools", "handoff_targets"]
    save_on_top = True
    readonly_fields = ["missing_translations"]
    fieldsets = [
        (None, {"fields": ["profile", "name", "display_name", "description", "enabled", "step_limit"]}),
        ("In other languages", {"fields": ["missing_translations", *translation_boxes(SPECIALIST_TRANSLATED)]}),
        ("Prompt", {"fields": ["prompt_text", "prompt_note"]}),
        ("Tools and handoffs", {"fields": ["allowed_tools", "handoff_targets"]}),
        ("Knowledge", {"fields": ["knowledge"]}),
        ("Memory", {"fields": ["remember_tool"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Specialist]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                active_prompt_version=active_version_subquery(),
                tool_total=Count("allowed_tools", distinct=True),
                intent_total=Count("intents", distinct=True),
            )
        )

    def get_fieldsets(self, request: HttpRequest, obj: Specialist | None = None):
        if obj is not None and not self.has_change_permission(request, obj):
            # View only: the prompt is shown by :meth:`prompt_text`; there is nothing to note.
            return [
                (name, {**opts, "fields": [f for f in opts["fields"] if f != "prompt_note"]})
                for name, opts in self.fieldsets
            ]
        return super().get_fieldsets(request, obj)

    @admin.display(description="prompt (active version)")
    def prompt_text(self, obj: Specialist) -> str:
        """The read-only rendering of the prompt field, for users who may only view specialists."""
        active = obj.prompts.filter(is_active=True).first()
        if active is None:
            return "—"
        return format_html('<pre style="white-space: pre-wrap; margin: 0">v{}: {}</pre>', active.version, active.text)

    def save_related(self, request: HttpRequest, form: SpecialistAdminForm, formsets, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        text = form.new_prompt_text()
        if text is not None:
            prompt = prompt_version_create(
                specialist=form.instance, text=text, note=form.cleaned_data.get("prompt_note", ""), user=request.user
            )
            self.message_user(request, f"Saved the prompt as version {prompt.version}; it is now active.")

    @admin.display(description="missing translations")
    def missing_translations(self, obj: Specialist) -> str:
        if obj.pk is None:
            return "—"
        return missing_warning(
            specialist_translations_missing(specialists=[obj], language=obj.profile.language, named=False)
        )

    @admin.display(description="active prompt", ordering="active_prompt_version")
    def active_version(self, obj: WithAnnotations[Specialist, _SpecialistTotals]) -> str:
        return f"v{obj.active_prompt_version}" if obj.active_prompt_version else "—"

    @admin.display(description="tools", ordering="tool_total")
    def tool_count(self, obj: WithAnnotations[Specialist, _SpecialistTotals]) -> int:
        return obj.tool_total

    @admin.display(description="intents", ordering="intent_total")
    def intent_count(self, obj: WithAnnotations[Specialist, _SpecialistTotals]) -> int:
        return obj.intent_total
