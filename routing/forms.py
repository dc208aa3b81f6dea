"""Admin forms: the keyword rule and the route preview.

The rule "a keyword belongs to one enabled intent per profile" is enforced by
:func:`routing.services.keywords_validate_unique`; these forms only gather the
keywords a save would leave behind and put its errors where the user looks.
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.forms.formsets import DELETION_FIELD_NAME

from agents.models import AgentProfile, Specialist
from common.forms import LinesField, PhrasesField, label_choices
from common.text import normalize, whole_number
from routing.models import Intent, Keyword, StatePolicy
from routing.services import keywords_validate_unique

ERROR_KEYWORD_DUPLICATE = "Keyword {keyword!r} appears twice in this intent (as {other!r})."
ERROR_KEYWORD_EMPTY = "A keyword needs at least one letter or digit."
ERROR_SPECIALIST_OTHER_PROFILE = "Specialist {specialist} belongs to profile {profile}, not to {expected}."
ERROR_INTENT_OTHER_PROFILE = "Intent {intent} belongs to profile {profile}, not to {expected}."


def profile_label(profile: AgentProfile) -> str:
    return f"{profile.agent_id} — {profile.name}" if profile.name else profile.agent_id


def _check_same_profile(form: forms.BaseForm, profile: AgentProfile | None) -> None:
    """Add field errors when the chosen specialist or intent belongs to another profile."""
    if profile is None:
        return
    specialist = form.cleaned_data.get("specialist")
    if specialist is not None and specialist.profile_id != profile.pk:
        form.add_error(
            "specialist",
            ERROR_SPECIALIST_OTHER_PROFILE.format(
                specialist=specialist.name, profile=specialist.profile.agent_id, expected=profile.agent_id
            ),
        )
    intent = form.cleaned_data.get("intent")
    if intent is not None and intent.profile_id != profile.pk:
        form.add_error(
            "intent",
            ERROR_INTENT_OTHER_PROFILE.format(
                intent=intent.name, profile=intent.profile.agent_id, expected=profile.agent_id
            ),
        )


class ProfileScopedChoicesForm(forms.ModelForm):
    """Once the row's profile is known (a stored row, or an add page opened with ``?profile=``), its Specialist
    (and Intent) drop-downs offer that profile's choices only. A posted form keeps every choice, so a specialist
    of another profile is refused with :data:`ERROR_SPECIALIST_OTHER_PROFILE` rather than "not a valid choice";
    on an add page the drop-downs follow the chosen profile in the browser (admin/routing/profile_scoped.html)."""

    scoped_fields: tuple[str, ...] = ("specialist",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.is_bound:
            return
        profile_id = getattr(self.instance, "profile_id", None) or self.initial.get("profile")
        if isinstance(profile_id, AgentProfile):
            profile_id = profile_id.pk
        profile_pk = whole_number(str(profile_id or ""))
        if not profile_pk:
            return
        for name in self.scoped_fields:
            field = self.fields.get(name)
            if isinstance(field, forms.ModelChoiceField) and field.queryset is not None:
                field.queryset = field.queryset.filter(profile_id=profile_pk)


class IntentAdminForm(ProfileScopedChoicesForm):
    examples = LinesField(
        required=False,
        help_text="One example message per line; the LLM classifier reads them.",
    )

    class Meta:
        model = Intent
        fields = [
            "profile",
            "name",
            "specialist",
            "domain",
            "priority",
            "enabled",
            "description",
            "examples",
            "mcp_tools",
            "next_state",
        ]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        _check_same_profile(self, cleaned.get("profile"))
        return cleaned


class IntentChangelistForm(forms.ModelForm):
    """The changelist's editable columns; enabling an intent re-checks its stored keywords."""

    class Meta:
        model = Intent
        fields = ["priority", "enabled"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if cleaned.get("enabled") and "enabled" in self.changed_data:
            texts = list(self.instance.keywords.values_list("text", flat=True))
            intent = self.instance
            intent.enabled = True
            try:
                keywords_validate_unique(intent=intent, texts=texts)
            except ValidationError as exc:
                self.add_error("enabled", exc)
        return cleaned


class KeywordInlineFormSet(forms.BaseInlineFormSet):
    """Keywords of one intent: no duplicates among them, none taken by another enabled intent.

    Runs after the intent's own form was cleaned, so ``self.instance`` already
    carries the profile and ``enabled`` flag the save would store.
    """

    def clean(self) -> None:
        super().clean()
        if any(form.errors for form in self.forms):
            return
        kept: list[tuple[forms.ModelForm[Keyword], str]] = []
        seen: dict[str, str] = {}
        for form in self.forms:
            data = form.cleaned_data or {}
            text = data.get("text")
            if not text or data.get(DELETION_FIELD_NAME):  # a row ticked for deletion
                continue
            normalized = normalize(text)
            if normalized in seen:
                form.add_error("text", ERROR_KEYWORD_DUPLICATE.format(keyword=text, other=seen[normalized]))
                continue
            seen[normalized] = text
            kept.append((form, text))
        intent = self.instance
        if intent.profile_id is None or any(form.errors for form in self.forms):
            return
        # One check per row so each error sits on the keyword it is about.
        for form, text in kept:
            try:
                keywords_validate_unique(intent=intent, texts=[text])
            except ValidationError as exc:
                form.add_error("text", exc)


EXCLUSIONS_LABEL = "Not in"
EXCLUSIONS_HELP = (
    "Phrases in which this keyword does not count, one per line or separated by commas: one that contains the keyword "
    "cancels it inside the phrase (conta: me conta); any other cancels it in a message that holds the phrase "
    "(conta: banco)."
)


def exclusions_field() -> PhrasesField:
    """A keyword's exclusions as the admin edits them (checked by :meth:`routing.models.Keyword.clean`)."""
    return PhrasesField(label=EXCLUSIONS_LABEL, required=False, help_text=EXCLUSIONS_HELP)


class KeywordAdminForm(forms.ModelForm):
    """A keyword edited on its own: the same rule as the inline, for one row."""

    exclusions = exclusions_field()

    class Meta:
        model = Keyword
        fields = ["intent", "text", "exclusions"]

    def clean_text(self) -> str:
        text = self.cleaned_data["text"].strip()
        if not normalize(text):
            raise ValidationError(ERROR_KEYWORD_EMPTY)
        return text

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        intent, text = cleaned.get("intent"), cleaned.get("text")
        if intent is None or not text:
            return cleaned
        same = Keyword.objects.filter(intent=intent, normalized=normalize(text)).exclude(pk=self.instance.pk).first()
        if same is not None:
            self.add_error("text", ERROR_KEYWORD_DUPLICATE.format(keyword=text, other=same.text))
            return cleaned
        try:
            keywords_validate_unique(intent=intent, texts=[text])
        except ValidationError as exc:
            self.add_error("text", exc)
        return cleaned


class KeywordInlineForm(forms.ModelForm):
    exclusions = exclusions_field()

    class Meta:
        model = Keyword
        fields = ["text", "exclusions"]

    def clean_text(self) -> str:
        text = self.cleaned_data["text"].strip()
        if not normalize(text):
            raise ValidationError(ERROR_KEYWORD_EMPTY)
        return text


class StatePolicyAdminForm(ProfileScopedChoicesForm):
    scoped_fields = ("specialist", "intent")

    class Meta:
        model = StatePolicy
        fields = ["profile", "state", "specialist", "intent", "description", "enabled"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        _check_same_profile(self, cleaned.get("profile"))
        return cleaned


class RoutePreviewForm(forms.Form):
    """A message to route, as the chat API would see it, without running or storing anything."""

    profile = forms.ModelChoiceField(
        queryset=AgentProfile.objects.filter(enabled=True),
        empty_label=None,
        help_text="Only enabled profiles route messages.",
    )
    text = forms.CharField(
        label="Message",
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80, "class": "vLargeTextField", "autofocus": True}),
    )
    state = forms.CharField(
        label="Conversation state",
        required=False,
        max_length=100,
        widget=forms.TextInput(attrs={"list": "route-preview-states", "class": "vTextField"}),
        help_text="Optional, e.g. WAITING_PAYMENT_CONFIRMATION: the state the conversation is in.",
    )
    active_specialist = forms.ModelChoiceField(
        queryset=Specialist.objects.filter(enabled=True).select_related("profile"),
        required=False,
        empty_label="(none — a new conversation)",
        help_text="Optional: the specialist currently holding the conversation; a different route is a handoff.",
    )
    version = forms.ChoiceField(
        label="Which routing",
        choices=[("live", "Live: the version customers are served"), ("draft", "Draft: what editors changed")],
        initial="live",
        required=False,
        widget=forms.RadioSelect,
        help_text="The draft is what you changed since the live version was published.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        label_choices(cast("forms.ModelChoiceField[AgentProfile]", self.fields["profile"]), profile_label)

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        profile, specialist = cleaned.get("profile"), cleaned.get("active_specialist")
        if profile is not None and specialist is not None and specialist.profile_id != profile.pk:
            self.add_error(
                "active_specialist",
                ERROR_SPECIALIST_OTHER_PROFILE.format(
                    specialist=specialist.name, profile=specialist.profile.agent_id, expected=profile.agent_id
                ),
            )
        cleaned["state"] = (cleaned.get("state") or "").strip()
        return cleaned
