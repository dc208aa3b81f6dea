"""Prompt versions: never edited in place; a change to a specialist's prompt becomes the next version
(:func:`agents.services.prompt_version_create`) and any older one can be made active again in one click
(:func:`agents.services.prompt_activate`).
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.defaultfilters import truncatechars
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import url_has_allowed_host_and_scheme

from agents.admin.parts import SpecialistListFilter
from agents.models import SpecialistPrompt
from agents.services import prompt_activate, prompt_version_create
from common.history.admin import FieldHistoryAdminMixin

if TYPE_CHECKING:
    from common.adminkit import FieldGroups


class SpecialistPromptAddForm(forms.ModelForm):
    activate = forms.BooleanField(
        required=False,
        initial=True,
        label="Make it the active version",
        help_text="Untick to store a draft that can be activated later.",
    )

    class Meta:
        model = SpecialistPrompt
        fields = ["specialist", "text", "note"]


@admin.register(SpecialistPrompt)
class SpecialistPromptAdmin(FieldHistoryAdminMixin, admin.ModelAdmin):
    """Versions are added, compared and activated — never edited."""

    list_display = ["specialist", "version", "is_active", "note", "excerpt", "created_at", "created_by"]
    list_display_links = ["specialist", "version"]
    list_filter = [("specialist", SpecialistListFilter), "specialist__profile", "is_active"]
    list_select_related = ["specialist__profile", "created_by"]
    search_fields = ["text", "note", "specialist__name", "specialist__profile__agent_id"]
    date_hierarchy = "created_at"
    actions = ["make_active"]
    change_form_template = "admin/agents/specialistprompt/change_form.html"
    readonly_fields = [
        "specialist",
        "version",
        "status",
        "note",
        "text_block",
        "diff_vs_active",
        "created_at",
        "created_by",
    ]

    def get_form(
        self, request: HttpRequest, obj: SpecialistPrompt | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[SpecialistPrompt]]:
        if obj is None:
            kwargs["form"] = SpecialistPromptAddForm
        return super().get_form(request, obj, change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: SpecialistPrompt | None = None) -> FieldGroups:
        if obj is None:
            return ["specialist", "text", "note", "activate"]
        return list(self.readonly_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: SpecialistPrompt | None = None) -> list[str]:
        return list(self.readonly_fields) if obj is not None else []

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        formfield = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.name == "specialist" and formfield is not None and formfield.queryset is not None:
            formfield.queryset = formfield.queryset.select_related("profile")
        return formfield

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        initial = super().get_changeform_initial_data(request)
        specialist_id = initial.get("specialist")  # a foreign key's initial value is one string
        if isinstance(specialist_id, str) and specialist_id and "text" not in initial:
            # Start the new version from the active one: most changes are edits.
            active = SpecialistPrompt.objects.filter(specialist_id=specialist_id, is_active=True).first()
            if active is not None:
                initial["text"] = active.text
        return initial

    def has_delete_permission(self, request: HttpRequest, obj: SpecialistPrompt | None = None) -> bool:
        if obj is not None and obj.is_active:
            return False  # the specialist would be left without a prompt
        return super().has_delete_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: SpecialistPrompt, form, change: bool) -> None:
        if change:
            return  # every field of a stored version is read-only
        created = prompt_version_create(
            specialist=obj.specialist,
            text=obj.text,
            note=obj.note,
            user=request.user,
            activate=form.cleaned_data.get("activate", True),
        )
        # The admin goes on with ``obj`` (log entry, redirect): make it the stored version.
        for field in SpecialistPrompt._meta.concrete_fields:
            setattr(obj, field.attname, getattr(created, field.attname))
        obj._state.adding = False
        obj._state.db = created._state.db

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "show_save": False,
            "show_save_and_continue": False,
            "show_save_and_add_another": False,
        }
        return super().change_view(request, object_id, form_url, extra_context)

    def get_urls(self):
        return [
            path(
                "<path:object_id>/activate/",
                self.admin_site.admin_view(self.activate_view),
                name="agents_specialistprompt_activate",
            ),
            *super().get_urls(),
        ]

    def activate_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: make this version the active one (a revert when it is older)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        prompt = self.get_object(request, unquote(object_id))
        if prompt is None:
            # The redirect Django's own change view makes; a private method, so django-stubs leave it out.
            redirect = self._get_obj_does_not_exist_redirect  # type: ignore[attr-defined]  # private Django method
            return redirect(request, self.opts, object_id)
        if not self.has_change_permission(request, prompt):
            raise PermissionDenied
        self._activate(request, prompt)
        next_url = request.GET.get("next", "")
        if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
            next_url = reverse("admin:agents_specialistprompt_change", args=[prompt.pk])
        return HttpResponseRedirect(next_url)

    def _activate(self, request: HttpRequest, prompt: SpecialistPrompt) -> None:
        prompt_activate(prompt=prompt)
        self.log_change(request, prompt, [{"changed": {"fields": ["is_active"]}}])
        self.message_user(request, f"Version {prompt.version} of {prompt.specialist} is now active.", messages.SUCCESS)

    @admin.action(description="Make this version active", permissions=["change"])
    def make_active(self, request: HttpRequest, queryset: QuerySet[SpecialistPrompt]) -> None:
        prompts = list(queryset.select_related("specialist__profile"))
        by_specialist: dict[int, list[SpecialistPrompt]] = {}
        for prompt in prompts:
            by_specialist.setdefault(prompt.specialist_id, []).append(prompt)
        for choices in by_specialist.values():
            if len(choices) > 1:
                self.message_user(
                    request,
                    f"Choose one version of {choices[0].specialist}; "
                    f"versions {', '.join(str(p.version) for p in choices)} were selected.",
                    messages.ERROR,
                )
                continue
            self._activate(request, choices[0])

    # -- read-only display ----------------------------------------------------------

    @admin.display(description="text")
    def excerpt(self, obj: SpecialistPrompt) -> str:
        return truncatechars(obj.text, 80)

    @admin.display(description="text")
    def text_block(self, obj: SpecialistPrompt) -> str:
        return format_html('<pre style="white-space: pre-wrap; margin: 0">{}</pre>', obj.text)

    @admin.display(description="status")
    def status(self, obj: SpecialistPrompt) -> str:
        return "Active — this is the version specialists answer with." if obj.is_active else "Not active."

    @admin.display(description="changes from the active version")
    def diff_vs_active(self, obj: SpecialistPrompt) -> str:
        if obj.is_active:
            return "This is the active version."
        active = SpecialistPrompt.objects.filter(specialist_id=obj.specialist_id, is_active=True).first()
        if active is None:
            return "The specialist has no active version."
        lines = list(
            difflib.unified_diff(
                active.text.splitlines(),
                obj.text.splitlines(),
                fromfile=f"v{active.version} (active)",
                tofile=f"v{obj.version} (this version)",
                lineterm="",
            )
        )
        if not lines:
            return f"Same text as the active version v{active.version}."
        colours = {"+": "#1b7f3b", "-": "#b3261e", "@": "#6b6b6b"}
        rows = format_html_join(
            "\n",
            '<span style="color: {}">{}</span>',
            ((colours.get(line[:1], "inherit"), line) for line in lines),
        )
        return format_html('<pre class="prompt-diff" style="white-space: pre-wrap; margin: 0">{}</pre>', rows)
