"""The agent profile's admin and its form: the page's sections drawn from :mod:`agents.profile_settings`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict, cast

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from agents.admin.parts import active_version_subquery
from agents.escalation import MAX_ABANDON_MINUTES, MAX_FALLBACKS, EscalationSettings, escalation_problems
from agents.llm import key_held, key_variable
from agents.models import (
    MODEL_ENDPOINT_FIELDS,
    MODEL_ENDPOINT_PERMISSION,
    PROFILE_TRANSLATED,
    REPAIR_WORD_FIELDS,
    AgentProfile,
    Specialist,
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
from agents.schemas import model_key_variable_refusal, validate_word_list
from agents.selectors import external_desk_names, external_desk_refusal
from common.adminkit import EndpointSecretsAdminMixin, ExtensibleAdmin, ReadOnlyInlineMixin
from common.endpoints import endpoint_mask
from common.forms import LinesField, PhrasesField, PrettyJSONField, label_choices
from common.history.admin import FieldHistoryAdminMixin
from common.language import LANGUAGES
from common.translation_forms import translation_boxes, translations_form

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldOpts, _FieldsetSpec
    from django_stubs_ext import WithAnnotations


PRETTY_JSON: Mapping[type[models.Field[Any, Any]], Mapping[str, Any]] = {
    models.JSONField: {"form_class": PrettyJSONField}
}


# What the admins' get_queryset() annotate, read by their list columns.
class _ProfileTotals(TypedDict):
    specialist_total: int
    intent_total: int


def specialist_name(specialist: Specialist) -> str:
    return specialist.name


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
            "tool to answer from: the specialist says it does not know. With vectors on, the operator's embeddings "
            "endpoint ranks the passages by meaning too.",
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
