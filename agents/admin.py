"""Agent profiles, specialists and their prompt versions, MCP servers and tools.

Prompt versions are never edited in place: a change to a specialist's prompt
becomes the next version (:func:`agents.services.prompt_version_create`) and
any older one can be made active again in one click
(:func:`agents.services.prompt_activate`).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict, cast
from urllib.parse import urlencode

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import flatten, unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.db.models import Count, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.defaultfilters import truncatechars
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import url_has_allowed_host_and_scheme

from agents.desks import secret_variable_refusal
from agents.escalation import MAX_ABANDON_MINUTES, MAX_FALLBACKS, EscalationSettings, escalation_problems
from agents.llm import key_held, key_variable
from agents.mcp import McpUnavailable
from agents.models import (
    MODEL_ENDPOINT_FIELDS,
    MODEL_ENDPOINT_PERMISSION,
    PROFILE_TRANSLATED,
    REPAIR_WORD_FIELDS,
    SPECIALIST_TRANSLATED,
    AgentProfile,
    ExternalDesk,
    McpServer,
    McpTool,
    ModelPrice,
    RemoteBackend,
    Specialist,
    SpecialistPrompt,
)
from agents.profile_settings import (
    ANSWERS,
    EXAMPLES,
    FLOWS,
    GOAL,
    GUARDRAILS,
    HANDOFFS,
    KNOWLEDGE,
    LOOP_SAFETY,
    MODEL,
    PEOPLE,
    PROFILE,
    PROFILE_SETTINGS,
    ROUTING,
    SUPERVISOR,
    WORDS,
)
from agents.schemas import (
    ERROR_ARGS_SCHEMA_STORED,
    endpoint_exported,
    expand_args_schema,
    model_key_variable_refusal,
    tool_args_schema_problem,
    validate_word_list,
)
from agents.selectors import (
    external_desk_names,
    external_desk_profiles,
    external_desk_refusal,
    specialist_translations_missing,
)
from agents.services import mcp_server_sync, prompt_activate, prompt_version_create
from common.adminkit import EndpointSecretsAdminMixin, ExtensibleAdmin, ReadOnlyInlineMixin
from common.config_version import config_batch
from common.endpoints import endpoint_mask
from common.forms import LinesField, PhrasesField, PrettyJSONField, label_choices
from common.history.admin import FieldHistoryAdminMixin
from common.language import LANGUAGES
from common.translation_forms import missing_warning, translation_boxes, translations_form

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldOpts, _FieldsetSpec
    from django_stubs_ext import WithAnnotations

    from common.adminkit import FieldGroups

    _ModelAdminBase = admin.ModelAdmin[Any]
else:
    _ModelAdminBase = object  # a mixin: the ModelAdmin comes later in the MRO

PRETTY_JSON: Mapping[type[models.Field[Any, Any]], Mapping[str, Any]] = {
    models.JSONField: {"form_class": PrettyJSONField}
}


# What the admins' get_queryset() annotate, read by their list columns.
class _ProfileTotals(TypedDict):
    specialist_total: int
    intent_total: int


class _SpecialistTotals(TypedDict):
    active_prompt_version: int | None
    tool_total: int
    intent_total: int


class _ServerTotals(TypedDict):
    tool_total: int


class _ToolTotals(TypedDict):
    intent_total: int
    specialist_total: int


class SpecialistListFilter(admin.RelatedFieldListFilter):
    """Specialists labelled ``profile/name`` without a query per choice."""

    def field_choices(self, field, request, model_admin):
        specialists = Specialist.objects.select_related("profile").order_by("profile__agent_id", "name")
        return [(specialist.pk, str(specialist)) for specialist in specialists]


def specialist_choices(db_field, formfield):
    """Select specialists with their profile in one query (their label names the profile)."""
    if formfield is not None and db_field.related_model is Specialist:
        formfield.queryset = formfield.queryset.select_related("profile")
    return formfield


def specialist_name(specialist: Specialist) -> str:
    return specialist.name


def active_version_subquery() -> Subquery:
    return Subquery(
        SpecialistPrompt.objects.filter(specialist=OuterRef("pk"), is_active=True).values("version")[:1],
        output_field=models.PositiveIntegerField(),
    )


# -- profiles ------------------------------------------------------------------------


class SpecialistInline(ReadOnlyInlineMixin, admin.TabularInline):
    """The profile's specialists as links; they are edited on their own page."""

    model = Specialist
    fk_name = "profile"
    fields = ["name", "display_name", "enabled", "step_limit", "active_version"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Specialist]:
        return super().get_queryset(request).annotate(active_prompt_version=active_version_subquery())

    @admin.display(description="active prompt")
    def active_version(self, obj: Specialist) -> str:
        version = getattr(obj, "active_prompt_version", None)
        return f"v{version}" if version else "—"


PLATFORM_DESK_LABEL = "The platform's desk"


def desk_choices(stored: str) -> list[tuple[str, str]]:
    """The desks a profile may choose: the platform's, then the enabled external desks; the stored one too when it is
    switched off or gone, so that the form shows it and saving other fields keeps it."""
    names = external_desk_names()
    choices = [("", PLATFORM_DESK_LABEL), *((name, f"{name} (external)") for name in names)]
    if stored and stored not in names:
        choices.append((stored, f"{stored} (switched off or removed: its escalations are not posted)"))
    return choices


ERROR_FALLBACK_OTHER_PROFILE = "The fallback specialist must be one of this profile's specialists."
ERROR_COORDINATOR_OTHER_PROFILE = "The coordinator must be one of this profile's specialists."


PROFILE_LABELS = {"name": "Name", "description": "Description"}
ProfileTranslationBoxes = translations_form(PROFILE_LABELS, limits={"name": 200}, long=["description"])


class AgentProfileAdminForm(ProfileTranslationBoxes, forms.ModelForm):  # type: ignore[valid-type,misc]  # built by a call
    """Word lists are JSON lists of words; an emptied box means no words, and errors name the list. (The model
    endpoint is shown masked and kept unless replaced: :class:`common.adminkit.EndpointSecretsAdminMixin`.) The name
    and description have a box per other language; the profile's own language is its ``language``."""

    def stored_language(self) -> str | None:
        return self.instance.language if self.instance.pk else None

    def translations_language(self) -> str | None:
        return self.cleaned_data.get("language") or self.instance.language

    out_of_scope_examples = LinesField(
        required=False,
        label="Out-of-scope examples",
        help_text="One message per line that belongs to no intent of this profile: the examples tier learns “none of "
        "these” from them, on top of the built-in small-talk and off-topic corpus.",
    )

    # A choice of the platform's languages (checked by the model, not its choices: a language added is no migration).
    language = forms.ChoiceField(
        choices=[(code, code) for code in LANGUAGES],
        initial="pt",
        help_text=AgentProfile._meta.get_field("language").help_text,
    )

    # People in the loop: the profile's escalation settings (one JSON field) as a form's fields.
    escalation_enabled = forms.BooleanField(
        required=False,
        label="Customers may ask for a person",
        help_text="“Quero falar com um atendente”, “a real person please”, “quiero hablar con una persona” hand the "
        "conversation to a person, and so do the rules below. Off: the assistants answer everything.",
    )
    escalation_teams = PhrasesField(
        label="Teams",
        help_text="The queues a conversation may wait in, one per line or separated by commas; the first is the "
        "default. Lowercase letters, digits, - and _.",
    )
    escalation_after_fallbacks = forms.IntegerField(
        min_value=0,
        max_value=MAX_FALLBACKS,
        label="After fallback answers in a row",
        help_text="Hand over after this many answers in a row by the fallback (0: never).",
    )
    escalation_on_loop_stop = forms.BooleanField(
        required=False, label="When loop safety stops a move", help_text="A ping-pong or a repeated path."
    )
    escalation_on_goal_failure = forms.BooleanField(
        required=False,
        label="When a goal cannot be handled",
        help_text="Goal mode: no plan could be made, or its plan failed.",
    )
    escalation_on_thumbs_down = forms.BooleanField(required=False, label="When the customer rates an answer down")
    escalation_on_guardrail_block = forms.BooleanField(required=False, label="When a guardrail blocks a message")
    escalation_specialist_tool = forms.BooleanField(
        required=False,
        label="Specialists may hand over",
        help_text="Offer the specialists the tool to hand the conversation to a person themselves.",
    )
    escalation_desk = forms.ChoiceField(
        required=False,
        label="Desk",
        help_text="Where its escalations are answered: the platform's own desk, or an external desk the operator set "
        "up (the business's contact-center tool, reached by a signed webhook).",
    )
    escalation_abandon_after_minutes = forms.IntegerField(
        min_value=1,
        max_value=MAX_ABANDON_MINUTES,
        label="Close after minutes without a message",
        help_text="A conversation the customer has not written to for this long is closed: resolved, escalated or "
        "abandoned.",
    )
    ESCALATION_FIELDS = {
        "escalation_enabled": "enabled",
        "escalation_teams": "teams",
        "escalation_after_fallbacks": "after_fallbacks",
        "escalation_on_loop_stop": "on_loop_stop",
        "escalation_on_goal_failure": "on_goal_failure",
        "escalation_on_thumbs_down": "on_thumbs_down",
        "escalation_on_guardrail_block": "on_guardrail_block",
        "escalation_specialist_tool": "specialist_tool",
        "escalation_desk": "desk",
        "escalation_abandon_after_minutes": "abandon_after_minutes",
    }

    class Meta:
        model = AgentProfile
        # the admin adds its fieldsets' fields
        fields = ["confirmation_words", "denial_words", "closing_words", *REPAIR_WORD_FIELDS]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = EscalationSettings.from_json(self.instance.escalation if self.instance.pk else None).as_json()
        for name, key in self.ESCALATION_FIELDS.items():
            if name in self.fields:
                self.fields[name].initial = stored[key]
        desk = self.fields.get("escalation_desk")
        if isinstance(desk, forms.ChoiceField):
            desk.choices = desk_choices(stored["desk"])

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        shown = [name for name in self.ESCALATION_FIELDS if name in self.fields]
        if shown and not any(name in self.errors for name in shown):
            stored = EscalationSettings.from_json(self.instance.escalation if self.instance.pk else None).as_json()
            value = {**stored, **{self.ESCALATION_FIELDS[name]: cleaned.get(name) for name in shown}}
            value["desk"] = (value["desk"] or "").strip()
            problems = escalation_problems(value)
            refusal = external_desk_refusal(desk=value["desk"], stored=stored["desk"])
            if refusal is not None:
                problems.append(("desk", refusal))
            for key, message in problems:
                field = next(name for name, known in self.ESCALATION_FIELDS.items() if known == key)
                self.add_error(field if field in self.fields else None, message)
            if not problems:
                self.instance.escalation = EscalationSettings.from_json(value).as_json()
        return cleaned

    def _clean_word_list(self, name: str) -> list[str]:
        value = self.cleaned_data.get(name)
        if value is None:  # the box was emptied
            return []
        try:
            validate_word_list(value)
        except ValidationError as exc:
            message = exc.messages[0]  # "[1]: ..." for an entry, a sentence for the whole value
            raise ValidationError(f"{name}{'' if message.startswith('[') else ': '}{message}") from exc
        return value

    def clean_confirmation_words(self) -> list[str]:
        return self._clean_word_list("confirmation_words")

    def clean_denial_words(self) -> list[str]:
        return self._clean_word_list("denial_words")

    def clean_closing_words(self) -> list[str]:
        return self._clean_word_list("closing_words")

    def clean_cancel_words(self) -> list[str]:
        return self._clean_word_list("cancel_words")

    def clean_correction_words(self) -> list[str]:
        return self._clean_word_list("correction_words")

    def clean_repeat_words(self) -> list[str]:
        return self._clean_word_list("repeat_words")

    def clean_skip_words(self) -> list[str]:
        return self._clean_word_list("skip_words")

    def clean_already_told_words(self) -> list[str]:
        return self._clean_word_list("already_told_words")


# The profile page's sections, in order, with their options; each shows the settings agents.profile_settings puts in
# it, in their order.
PROFILE_SECTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    (PROFILE, {}),
    (ROUTING, {}),
    (
        EXAMPLES,
        {
            "description": "When no keyword matches, the message is compared with every intent's examples and with "
            "“none of these” (small talk, off-topic, and the out-of-scope examples below); the likeliest intent "
            "wins when its score reaches the threshold and beats the runner-up and “none of these” by the margin "
            "(then the LLM classifier, then the fallback). Choose them with Routing tests → Calibrate the "
            "examples tier.",
        },
    ),
    (
        GOAL,
        {
            "description": "Routing mode goal: the model reads the message's goal and entities, and the "
            "goals and capabilities synced from the domains' manifests decide the rest. Small talk and what no "
            "goal covers (the domain general) go to the specialists above, fallback first.",
        },
    ),
    (
        SUPERVISOR,
        {
            "description": "Supervisor mode plans one or more specialists per message, runs them in parallel and "
            "merges their answers; the review step may send a request on when part of it is left open.",
        },
    ),
    (
        MODEL,
        {
            "description": "Which model answers for this profile, without a deploy. The key is never entered "
            "here: name the environment variable (or mounted secret) that holds it. Blank fields use the "
            "platform's OPENAI_BASE_URL, LLM_MODEL and OPENAI_API_KEY.",
        },
    ),
    (ANSWERS, {}),
    (HANDOFFS, {}),
    (LOOP_SAFETY, {"classes": ["collapse"]}),
    (
        FLOWS,
        {
            "description": "A flow waits for the customer's reply (a confirmation, a permission, a clarification). "
            "A side question is answered and the flow resumed; “never mind” drops it; a correction runs the last "
            "step again with the new value (the phrases are under Conversation words).",
            "classes": ["collapse"],
        },
    ),
    (WORDS, {"classes": ["collapse"]}),
    (GUARDRAILS, {"classes": ["collapse"]}),
    (
        KNOWLEDGE,
        {
            "description": "Before a specialist answers, the profile's knowledge sources are searched (Knowledge → "
            "Knowledge sources); the answer cites the passages it is given. No passage at the relevance bar, and no "
            "tool to answer from: the specialist says it does not know.",
        },
    ),
    (
        PEOPLE,
        {
            "description": "When a conversation goes to a person: the customer asks for one, an intent that "
            "people answer wins, or one of the rules below holds. It waits in its team's queue until a person of "
            "the team takes it on the desk, and goes back to the assistants when that person hands it back.",
        },
    ),
)
# How the page shows a setting where not as its own field alone: with the relation or read-only figure that goes with
# it, or (people in the loop) as the form's fields.
PROFILE_SHOWN = {
    "translations": translation_boxes(PROFILE_TRANSLATED),
    "routing_mode": ["routing_mode", "fallback_specialist"],
    "examples_margin": ["examples_margin", "examples_calibrated"],
    "goal_threshold": ["goal_threshold", "goal_domains"],
    "llm_api_key_env": ["llm_api_key_env", "llm_api_key_set"],
    "handoffs_enabled": ["handoffs_enabled", "coordinator"],
    "escalation": list(AgentProfileAdminForm.ESCALATION_FIELDS),
}


def profile_fieldsets() -> _FieldsetSpec:
    """The profile page's fieldsets: each of :data:`PROFILE_SECTIONS` with its settings' fields (:data:`PROFILE_SHOWN`),
    the first untitled. A setting in no section of the page is not shown (``agents/tests/test_profile_settings.py``
    holds every declared section to the page's)."""
    return [
        (
            None if section == PROFILE else section,
            cast(
                "_FieldOpts",
                {
                    "fields": [
                        field
                        for setting in PROFILE_SETTINGS
                        if setting.section == section
                        for field in PROFILE_SHOWN.get(setting.name, [setting.name])
                    ],
                    **options,
                },
            ),
        )
        for section, options in PROFILE_SECTIONS
    ]


# The layers above add their columns and pages to it through common.adminkit.admin_extend (ExtensibleAdmin).
@admin.register(AgentProfile)
class AgentProfileAdmin(ExtensibleAdmin, EndpointSecretsAdminMixin, FieldHistoryAdminMixin, admin.ModelAdmin):
    form = AgentProfileAdminForm
    endpoint_fields = [setting.name for setting in PROFILE_SETTINGS if setting.kind == "endpoint"]
    list_display = [
        "agent_id",
        "name",
        "domain",
        "routing_mode",
        "fallback_specialist_name",
        "coordinator_name",
        "llm_router_enabled",
        "handoffs_enabled",
        "enabled",
        "specialist_count",
        "intent_count",
    ]
    list_filter = ["routing_mode", "enabled", "llm_router_enabled", "handoffs_enabled", "domain"]
    list_select_related = ["fallback_specialist", "coordinator"]
    search_fields = ["agent_id", "name", "domain", "description"]
    formfield_overrides = PRETTY_JSON
    inlines = [SpecialistInline]
    filter_horizontal = ["goal_domains"]
    save_on_top = True
    readonly_fields = ["examples_calibrated", "llm_api_key_set"]
    fieldsets = profile_fieldsets()

    @admin.display(description="last calibration")
    def examples_calibrated(self, obj: AgentProfile) -> str:
        last = obj.examples_calibration or {}
        chosen = last.get("chosen")
        if not chosen:
            return "never calibrated"
        return (
            f"{last.get('at', '')[:16].replace('T', ' ')} by {last.get('by') or '?'}: threshold {chosen['threshold']}, "
            f"margin {chosen['margin']} → accuracy {chosen['accuracy']:.0%}, wrong routes {chosen['wrong_rate']:.0%}, "
            f"fallbacks {chosen['fallback_rate']:.0%} on {last.get('samples')} samples"
        )

    @admin.display(description="key variable set here")
    def llm_api_key_set(self, obj: AgentProfile) -> str:
        """Whether the key's variable holds a value in this process: yes or no, never the value; or why it is never
        read (a variable stored before the allow-list)."""
        refusal = model_key_variable_refusal(obj.llm_api_key_env) if obj.llm_api_key_env else None
        if refusal is not None:
            return f"never read: {refusal}"
        return f"{'yes' if key_held(obj) else 'no'} ({key_variable(obj)}, in this web process)"

    @admin.display(description="LLM base URL")
    def llm_endpoint(self, obj: AgentProfile) -> str:
        return endpoint_mask(obj.llm_base_url) if obj.llm_base_url else "—"

    @staticmethod
    def may_change_model(request: HttpRequest) -> bool:
        """The model endpoint, model and key variable are the operator's (:data:`agents.models.MODEL_ENDPOINT_FIELDS`);
        others see them read-only, the endpoint masked."""
        return request.user.has_perm(MODEL_ENDPOINT_PERMISSION)

    def get_fieldsets(self, request: HttpRequest, obj: AgentProfile | None = None):
        fieldsets = super().get_fieldsets(request, obj)
        if self.may_change_model(request):
            return fieldsets
        return [
            (name, {**options, "fields": ["llm_endpoint" if f == "llm_base_url" else f for f in options["fields"]]})
            for name, options in fieldsets
        ]

    def get_readonly_fields(self, request: HttpRequest, obj: AgentProfile | None = None) -> list[str]:
        readonly = list(super().get_readonly_fields(request, obj))
        if self.may_change_model(request):
            return readonly
        return [*readonly, "llm_endpoint", *(name for name in MODEL_ENDPOINT_FIELDS if name != "llm_base_url")]

    def get_queryset(self, request: HttpRequest) -> QuerySet[AgentProfile]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                specialist_total=Count("specialists", distinct=True),
                intent_total=Count("intents", distinct=True),
            )
        )

    def get_form(
        self, request: HttpRequest, obj: AgentProfile | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[AgentProfile]]:
        form = super().get_form(request, obj, change, **kwargs)
        for name, message in (
            ("fallback_specialist", ERROR_FALLBACK_OTHER_PROFILE),
            ("coordinator", ERROR_COORDINATOR_OTHER_PROFILE),
        ):
            field = form.base_fields.get(name)
            if isinstance(field, forms.ModelChoiceField):
                # Only this profile's specialists; a new profile gets them once it has some.
                field.queryset = Specialist.objects.filter(profile=obj) if obj else Specialist.objects.none()
                label_choices(field, specialist_name)
                field.error_messages = {**field.error_messages, "invalid_choice": message}
        return form

    @admin.display(description="fallback", ordering="fallback_specialist__name")
    def fallback_specialist_name(self, obj: AgentProfile) -> str:
        return obj.fallback_specialist.name if obj.fallback_specialist else "—"

    @admin.display(description="coordinator", ordering="coordinator__name")
    def coordinator_name(self, obj: AgentProfile) -> str:
        return obj.coordinator.name if obj.coordinator else "—"

    @admin.display(description="specialists", ordering="specialist_total")
    def specialist_count(self, obj: WithAnnotations[AgentProfile, _ProfileTotals]) -> int:
        return obj.specialist_total

    @admin.display(description="intents", ordering="intent_total")
    def intent_count(self, obj: WithAnnotations[AgentProfile, _ProfileTotals]) -> int:
        return obj.intent_total


# -- specialists and prompts -----------------------------------------------------------


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


# -- MCP servers and tools ---------------------------------------------------------


class McpToolInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = McpTool
    fields = ["name", "remote_name", "enabled", "needs_permission", "description"]


class EnableDisableActions(_ModelAdminBase):
    """Bulk switches: one save per object (each switch lands in the field history, common/history/registry.py), their
    configuration bumps collapsed into one."""

    actions = ["enable_selected", "disable_selected"]

    def _switch(self, request: HttpRequest, queryset: QuerySet, *, enabled: bool) -> None:
        count = 0
        with config_batch():
            for obj in queryset.exclude(enabled=enabled):
                obj.enabled = enabled
                obj.save(update_fields=["enabled", "updated_at"])
                count += 1
        verb = "Enabled" if enabled else "Disabled"
        self.message_user(request, f"{verb} {count} {self.opts.verbose_name_plural}.", messages.SUCCESS)

    @admin.action(description="Enable selected %(verbose_name_plural)s", permissions=["change"])
    def enable_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, enabled=True)

    @admin.action(description="Disable selected %(verbose_name_plural)s", permissions=["change"])
    def disable_selected(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._switch(request, queryset, enabled=False)


def servers_sync_messages(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, servers: Iterable[McpServer]
) -> None:
    """Synchronise ``servers`` (:func:`agents.services.mcp_server_sync`) and say everything the reports hold."""
    for server in servers:
        try:
            report = mcp_server_sync(server=server)
        except (McpUnavailable, ValidationError) as exc:
            model_admin.message_user(request, f"{server.name}: {exc}", messages.ERROR)
            continue
        ok = report.ok and not report.refused
        model_admin.message_user(request, str(report), messages.SUCCESS if ok else messages.WARNING)
        for line in report.lines:
            model_admin.message_user(request, line, messages.INFO)
        for error in report.errors:
            model_admin.message_user(request, error, messages.ERROR)


@admin.register(McpServer)
class McpServerAdmin(EndpointSecretsAdminMixin, FieldHistoryAdminMixin, EnableDisableActions, admin.ModelAdmin):
    endpoint_fields = ["endpoint"]
    list_display = ["name", "transport", "endpoint", "enabled", "timeout", "tool_count", "updated_at"]
    list_filter = ["enabled", "transport"]
    search_fields = ["name", "endpoint", "description"]
    inlines = [McpToolInline]
    fields = ["name", "description", "transport", "endpoint", "exported_as", "timeout", "enabled"]
    readonly_fields = ["exported_as"]
    actions = [*EnableDisableActions.actions, "sync_tools"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[McpServer]:
        return super().get_queryset(request).annotate(tool_total=Count("tools"))

    @admin.display(description="exported as")
    def exported_as(self, obj: McpServer) -> str:
        """What the configuration export writes for the endpoint: the template it was imported as, or the endpoint
        masked (docs/configuration.md)."""
        return endpoint_exported(obj.endpoint, obj.endpoint_template) if obj.endpoint else "—"

    def save_model(self, request: HttpRequest, obj: McpServer, form: Any, change: bool) -> None:
        if "endpoint" in form.changed_data:
            obj.endpoint_template = ""  # an address typed here is no longer what the imported file wrote
        super().save_model(request, obj, form, change)

    @admin.action(description="Sync tools and domain manifests from the server", permissions=["change"])
    def sync_tools(self, request: HttpRequest, queryset: QuerySet[McpServer]) -> None:
        """Create or update each selected server's tools, goals and capabilities from what the server lists and
        serves; what was edited here is kept."""
        servers_sync_messages(self, request, queryset)

    @admin.display(description="tools", ordering="tool_total")
    def tool_count(self, obj: WithAnnotations[McpServer, _ServerTotals]) -> int:
        return obj.tool_total


class McpToolAdminForm(forms.ModelForm):
    args_schema = PrettyJSONField(
        required=False,
        label="Argument schema",
        help_text='A JSON Schema of an object, e.g. {"type": "object", "properties": {"msisdn": {"type": "string"}}, '
        '"required": ["msisdn"]}. The short form {"msisdn": "string"} is expanded on save.',
    )

    class Meta:
        model = McpTool
        fields = ["name", "server", "description", "args_schema", "enabled", "needs_permission"]
        help_texts = {
            "description": "What the model reads about the tool. Once edited here, a sync keeps it (the server's "
            "own description is shown below); make it equal to the server's again to let syncs update it.",
        }

    def clean_args_schema(self) -> dict[str, Any]:
        value = self.cleaned_data.get("args_schema")
        if value in (None, "", {}):
            return {}
        # Shorthand errors are raised here; JSON Schema errors by the model field's validator,
        # which the form reports on this same field.
        return expand_args_schema(value)


@admin.register(McpTool)
class McpToolAdmin(FieldHistoryAdminMixin, EnableDisableActions, admin.ModelAdmin):
    form = McpToolAdminForm
    list_display = [
        "name",
        "remote_name",
        "server",
        "enabled",
        "needs_permission",
        "read_only",
        "intent_count",
        "specialist_count",
        "updated_at",
    ]
    list_filter = ["server", "enabled", "needs_permission", "read_only"]
    list_select_related = ["server"]
    search_fields = ["name", "remote_name", "description", "server__name"]
    fields = [
        "name",
        "remote_name",
        "server",
        "description",
        "synced_description",
        "args_schema",
        "args_schema_check",
        "enabled",
        "needs_permission",
        "read_only",
    ]
    readonly_fields = ["remote_name", "synced_description", "args_schema_check", "read_only"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[McpTool]:
        return (
            super()
            .get_queryset(request)
            .annotate(
                intent_total=Count("intents", distinct=True), specialist_total=Count("specialists", distinct=True)
            )
        )

    @admin.display(description="intents", ordering="intent_total")
    def intent_count(self, obj: WithAnnotations[McpTool, _ToolTotals]) -> int:
        return obj.intent_total

    @admin.display(description="argument schema check")
    def args_schema_check(self, obj: McpTool | None) -> str:
        """Why every call of the tool is refused, when its stored schema predates the platform's bounds (the system
        check ``agents.W005`` lists these tools)."""
        problem = tool_args_schema_problem(obj.args_schema) if obj is not None and obj.pk else None
        return "—" if problem is None else ERROR_ARGS_SCHEMA_STORED.format(tool="This tool", problem=problem)

    @admin.display(description="coordinator", ordering="coordinator__name")
    def coordinator_name(self, obj: AgentProfile) -> str:
        return obj.coordinator.name if obj.coordinator else "—"

    @admin.display(description="specialists", ordering="specialist_total")
    def specialist_count(self, obj: WithAnnotations[McpTool, _ToolTotals]) -> int:
        return obj.specialist_total


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


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """What a model's tokens cost, read by the usage figures when they are shown (a price edited re-prices the
    past). Like MCP servers and flags, not for "Routing editors": the group holds no permission on it."""

    list_display = ["model", "prompt_per_million", "completion_per_million", "currency", "note", "updated_at"]
    list_filter = ["currency"]
    search_fields = ["model", "note"]
    fields = ["model", "prompt_per_million", "completion_per_million", "currency", "note"]
