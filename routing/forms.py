"""Admin forms: the keyword rule, a saved routing test's expectation and earlier turns, and the route preview.

The rule "a keyword belongs to one enabled intent per profile" is enforced by
:func:`routing.services.keywords_validate_unique`; these forms only gather the
keywords a save would leave behind and put its errors where the user looks.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterable, Mapping
from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.forms.formsets import DELETION_FIELD_NAME

from agents.models import AgentProfile, RemoteBackend, RoutingMode, Specialist
from common.forms import LinesField, PhrasesField, label_choices
from common.language import LANGUAGES
from common.text import normalize, whole_number
from common.translation_forms import translations_form
from routing.decide import COORDINATION_INTENT
from routing.expectations import (
    ROUTING_TEST_EVENTS,
    ROUTING_TEST_EXPECT_KEYS,
    ROUTING_TEST_KEYS,
    ROUTING_TEST_LIST_KEYS,
)
from routing.goals.decide import GENERAL, PLAN
from routing.goals.planner import CLARIFICATION, FAILURE, GOAL_AGENT, GOAL_MODE
from routing.models import Goal, Intent, Keyword, StatePolicy, keyword_language_problems, keyword_languages_ordered
from routing.repairs import PATTERNS as REPAIR_PATTERNS
from routing.router import FALLBACK_INTENT, MULTI_INTENT, SUPERVISOR_ROUTE, Method
from routing.services import keywords_validate_unique
from routing.small_talk import KINDS as SMALL_TALK_KINDS
from routing.small_talk import SMALL_TALK_INTENT

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


INTENT_EXAMPLES_HELP = (
    "One example message per line, in the words customers use. The examples tier reads them first: when no keyword "
    "decides, a message like these goes to this intent. The LLM classifier reads them too, where the profile switches "
    "it on."
)


INTENT_LABELS = {"description": "Subject line"}


IntentTranslations = translations_form(INTENT_LABELS)


class IntentAdminForm(IntentTranslations, ProfileScopedChoicesForm):  # type: ignore[valid-type,misc]  # built by a call
    examples = LinesField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 15, "cols": 80, "class": "vLargeTextField"}),
        help_text=INTENT_EXAMPLES_HELP,
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
    "(conta: banco). Languages in brackets after a phrase limit it to messages in them: me conta [pt]."
)
# "me conta [pt]", "me conta [pt, es]": an exclusion and the languages it is limited to.
_LIMITED_EXCLUSION = re.compile(r"^(?P<phrase>.*?)\s*\[(?P<languages>[^\[\]]*)\]$")
_BETWEEN_EXCLUSIONS = re.compile(r",(?![^\[]*\])")  # a comma outside brackets


def exclusion_written(phrase: str, languages: Iterable[str]) -> str:
    """An exclusion as the admin shows it: the phrase, then the languages it is limited to in brackets, if any."""
    listed = ", ".join(languages)
    return f"{phrase} [{listed}]" if listed else phrase


class ExclusionsField(PhrasesField):
    """A keyword's exclusions as the admin edits them, each perhaps with its languages: ``me conta [pt]`` (split
    from the phrase by :class:`ExclusionsForm`; a comma inside the brackets is no separator)."""

    def to_python(self, value: Any) -> list[str]:
        if isinstance(value, (list, tuple)):
            return [str(item) for item in value]
        lines = LinesField.to_python(self, value)
        return [part.strip() for line in lines for part in _BETWEEN_EXCLUSIONS.split(line) if part.strip()]


def exclusions_field() -> ExclusionsField:
    """A keyword's exclusions as the admin edits them (checked by :meth:`routing.models.Keyword.clean`)."""
    return ExclusionsField(label=EXCLUSIONS_LABEL, required=False, help_text=EXCLUSIONS_HELP)


class ExclusionsForm(forms.ModelForm):
    """A keyword's form whose ``exclusions`` box also holds their languages (``me conta [pt]``): shown so, and split
    on save into ``exclusions`` and ``exclusion_languages``, which :meth:`routing.models.Keyword.clean` checks."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limits = self.instance.exclusion_languages or {}
        if limits and "exclusions" not in (kwargs.get("initial") or {}):
            self.initial["exclusions"] = [
                exclusion_written(phrase, limits.get(phrase, ())) for phrase in self.instance.exclusions or ()
            ]

    def clean_exclusions(self) -> list[str]:
        phrases: list[str] = []
        limits: dict[str, list[str]] = {}
        errors: list[str] = []
        for written in self.cleaned_data.get("exclusions") or ():
            limited = _LIMITED_EXCLUSION.match(written)
            if limited is None:
                phrases.append(written)
                continue
            phrase = limited["phrase"]
            codes = [code.lower() for code in re.split(r"[\s,]+", limited["languages"]) if code]
            problems = keyword_language_problems(codes)
            errors += [f"{phrase}: {message}" for _index, message in problems]
            phrases.append(phrase)
            if codes and not problems:
                limits[phrase] = keyword_languages_ordered(codes)
        if errors:
            raise ValidationError(errors)
        self.instance.exclusion_languages = limits
        return phrases


LANGUAGES_LABEL = "Only in"
LANGUAGES_HELP = (
    "The languages this keyword counts in: a message that reads as another language does not count it (pedido: pt, "
    "so a Spanish message about an order is not decided by it). None ticked: every language."
)
LANGUAGE_NAMES = {"pt": "Portuguese", "es": "Spanish", "en": "English"}


class KeywordLanguagesField(forms.MultipleChoiceField):
    """A keyword's languages as the admin edits them: a box per language, stored in the platform's order."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            choices=[(code, LANGUAGE_NAMES.get(code, code)) for code in LANGUAGES],
            widget=forms.CheckboxSelectMultiple,
            required=False,
            label=LANGUAGES_LABEL,
            help_text=LANGUAGES_HELP,
            **kwargs,
        )

    def clean(self, value: Any) -> list[str]:
        return keyword_languages_ordered(super().clean(value))


class KeywordAdminForm(ExclusionsForm):
    """A keyword edited on its own: the same rule as the inline, for one row."""

    exclusions = exclusions_field()
    languages = KeywordLanguagesField()

    class Meta:
        model = Keyword
        fields = ["intent", "text", "exclusions", "languages"]

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


class KeywordInlineForm(ExclusionsForm):
    exclusions = exclusions_field()
    languages = KeywordLanguagesField()

    class Meta:
        model = Keyword
        fields = ["text", "exclusions", "languages"]

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


# -- a saved routing test's expectation, one field per key ----------------------------------------------------------

EXPECT_LABELS = {
    "intent": "Intent",
    "agent": "Specialist",
    "method": "Decided by",
    "next_state": "Next state",
    "goal": "Goal",
    "status": "Goal status",
    "events": "Events",
    "repair": "Repair",
    "state_after": "State after",
    "topics": "Requests found",
    "language": "Language",
}
EXPECT_HELP = {
    "intent": "The intent the message must be routed to.",
    "agent": "The specialist that must answer it.",
    "method": "How the router must decide it.",
    "next_state": "The conversation state the decision must set.",
    "goal": "Goal mode: the goal the message must be read as.",
    "status": "Goal mode: what must come of the message.",
    "events": "What must happen to the conversation's open flows with this message (others may happen too).",
    "repair": "The repair the message must be read as.",
    "state_after": "The conversation's state after the message (“no state”: no flow waits).",
    "topics": "Intents that must be among the requests the message holds (a message with several).",
    "language": "The language the platform must answer the message in: the conversation's, as it reads and keeps it.",
}
GOAL_KEYS = ("goal", "status")
NOT_CHECKED = "— not checked —"
NOT_IN_DRAFT = "{value} (not in the draft)"
ERROR_EXPECT_NOTHING = (
    "Choose what the decision must be: at least one of intent, specialist, decided by, next state, goal or goal "
    "status, or what the conversation must show (a test that checks nothing always passes)."
)
ERROR_EXPECT_CHOICE = "{label}: “%(value)s” is not {what}."
EXPECT_WHAT = {
    "intent": "an intent of {profile}",
    "agent": "a specialist of {profile}",
    "method": "a way the router decides",
    "next_state": "a state of {profile}",
    "goal": "a goal of {profile}",
    "status": "a goal status",
    "events": "an event of the conversation",
    "repair": "a repair",
    "state_after": "a state of {profile}",
    "topics": "an intent of {profile}",
    "language": "a language the platform speaks",
}
# What happens to a conversation's open flows (routing.stack), in words.
EVENT_WORDS = {
    "opened": "a flow starts (it waits for the customer)",
    "pushed": "the waiting flow is put aside for a side question",
    "resumed": "the waiting flow is taken up again",
    "bound": "the message is the waiting flow's answer",
    "closed": "a flow ends",
    "cancelled": "the customer drops a flow",
    "expired": "a flow waited too long and is dropped",
    "queued": "another request is kept for next",
}
REPAIR_WORDS = {
    "cancel": "drop the current flow",
    "correct": "correct a value given earlier",
    "repeat": "say the last answer again",
    "skip": "skip the question",
    "already_told": "“I already told you”",
}
NO_STATE = "(none)"  # state_after's choice for "no flow waits": its expectation is ""
# Every way the router decides (routing.router.Method), in words; the value is what a test run shows.
METHOD_WORDS = {
    "keyword": "a keyword matched",
    "examples": "like an intent's example messages",
    "llm": "the LLM classifier",
    "state": "the conversation's state policy",
    "followup": "a short follow-up kept by the active specialist",
    "small_talk": "small talk: a greeting, thanks, asking for a person…",
    "fallback": "nothing matched: the fallback specialist",
    "llm_plan": "a supervisor plan by the model",
    "coordinator": "the coordinator answers or delegates",
    "sub_conversation": "a sub-conversation keeps the delegated specialist",
    "permission": "the reply to a permission question",
    "goal": "goal mode",
    "human": "a person holds the conversation: the message goes to the desk",
    "memory": "the customer asked the platform to remember, forget or tell what it knows of them",
    "repair": "a repair: cancel, correct, repeat, skip, already told",
}
STATUS_WORDS = {
    PLAN: "the goal's capabilities run",
    CLARIFICATION: "the customer is asked a question",
    GENERAL: "no goal: the specialists answer",
    FAILURE: "the goal cannot be served",
}
SUPERVISOR_MODES = (RoutingMode.SUPERVISOR, RoutingMode.HYBRID)

Choices = list[tuple[str, str]]
# The same for every profile: never grouped by profile on an add page that has none yet.
CONVERSATION_CHOICES: dict[str, Choices] = {
    "events": [(event, f"{event}: {EVENT_WORDS[event]}") for event in ROUTING_TEST_EVENTS],
    "repair": [(pattern, f"{pattern}: {REPAIR_WORDS[pattern]}") for pattern in REPAIR_PATTERNS],
    "language": [(code, f"{code}: {LANGUAGE_NAMES.get(code, code)}") for code in LANGUAGES],
}


def expect_field(key: str) -> str:
    """The form field of an ``expect`` key (``intent`` → ``expect_intent``), also the add page's query parameter."""
    return f"expect_{key}"


def _named(value: str, words: str) -> str:
    return f"{value}: {words}"


def expect_choices(profiles: Iterable[AgentProfile]) -> dict[int, dict[str, Choices]]:
    """What each profile's draft offers a saved routing test to expect, by profile pk and ``expect`` key: its
    intents and the other outcomes a decision names (fallback, small talk, a state policy's), its specialists, the
    router's methods, its states, and in goal mode its goals and the goal statuses. A few queries for all of them."""
    profiles = list(profiles)
    pks = [profile.pk for profile in profiles]
    intents: dict[int, Choices] = {pk: [] for pk in pks}
    states: dict[int, set[str]] = {pk: set() for pk in pks}
    agents: dict[int, Choices] = {pk: [] for pk in pks}
    for profile_id, name, enabled, next_state in (
        Intent.objects.filter(profile_id__in=pks)
        .order_by("name")
        .values_list("profile_id", "name", "enabled", "next_state")
    ):
        intents[profile_id].append((name, name if enabled else f"{name} (disabled)"))
        if next_state:
            states[profile_id].add(next_state)
    policies: dict[int, Choices] = {pk: [] for pk in pks}
    for profile_id, state, intent_id in (
        StatePolicy.objects.filter(profile_id__in=pks).order_by("state").values_list("profile_id", "state", "intent_id")
    ):
        states[profile_id].add(state)
        if intent_id is None:
            policies[profile_id].append((f"state:{state}", f"state:{state}: its state policy, with no intent"))
    for profile_id, name, enabled in (
        Specialist.objects.filter(profile_id__in=pks).order_by("name").values_list("profile_id", "name", "enabled")
    ):
        agents[profile_id].append((name, name if enabled else f"{name} (disabled)"))
    for profile_id, name in (
        RemoteBackend.objects.filter(profile_id__in=pks, enabled=True)
        .order_by("name")
        .values_list("profile_id", "name")
    ):
        agents[profile_id].append((name, _named(name, "remote backend")))
    goal_profiles = [profile for profile in profiles if profile.routing_mode == GOAL_MODE]
    goals = _goal_choices(goal_profiles)
    small_talk = [
        (SMALL_TALK_INTENT.format(kind=kind), f"small talk: {kind.replace('_', ' ')}") for kind in SMALL_TALK_KINDS
    ]
    methods = [(method, _named(method, METHOD_WORDS[method])) for method in typing.get_args(Method)]
    choices = {}
    for profile in profiles:
        goal_mode = profile.routing_mode == GOAL_MODE
        supervised = profile.routing_mode in SUPERVISOR_MODES
        others = [(FALLBACK_INTENT, _named(FALLBACK_INTENT, METHOD_WORDS["fallback"])), *small_talk]
        if supervised:
            others.append((MULTI_INTENT, _named(MULTI_INTENT, "several intents, a supervisor plan")))
        if profile.coordinator_id is not None:
            others.append((COORDINATION_INTENT, _named(COORDINATION_INTENT, METHOD_WORDS["coordinator"])))
        choices[profile.pk] = {
            "intent": [*intents[profile.pk], *goals.get(profile.pk, []), *others, *policies[profile.pk]],
            "agent": [
                *agents[profile.pk],
                *(
                    [(SUPERVISOR_ROUTE, _named(SUPERVISOR_ROUTE, "a plan of several specialists"))]
                    if supervised
                    else []
                ),
                *([(GOAL_AGENT, _named(GOAL_AGENT, "goal mode's plan"))] if goal_mode else []),
            ],
            "method": methods,
            "next_state": [(state, state) for state in sorted(states[profile.pk])],
            "goal": goals.get(profile.pk, []),
            "status": [(status, _named(status, words)) for status, words in STATUS_WORDS.items()] if goal_mode else [],
            **CONVERSATION_CHOICES,
            "state_after": [
                (NO_STATE, "no state: no flow waits"),
                *((state, state) for state in sorted(states[profile.pk])),
            ],
            "topics": intents[profile.pk],
        }
    return choices


def _goal_choices(profiles: list[AgentProfile]) -> dict[int, Choices]:
    """The goals of goal-mode ``profiles``: those of their goal domains, or every synced one where none is chosen."""
    if not profiles:
        return {}
    domains: dict[int, set[int]] = {profile.pk: set() for profile in profiles}
    for profile_id, server_id in AgentProfile.goal_domains.through.objects.filter(
        agentprofile_id__in=list(domains)
    ).values_list("agentprofile_id", "mcpserver_id"):
        domains[profile_id].add(server_id)
    goals = list(Goal.objects.order_by("domain", "name").values_list("server_id", "domain", "name", "enabled"))
    return {
        pk: [
            (f"{domain}.{name}", f"{domain}.{name}" + ("" if enabled else " (disabled)"))
            for server_id, domain, name, enabled in goals
            if not servers or server_id in servers
        ]
        for pk, servers in domains.items()
    }


def expect_keys_shown(profile: AgentProfile | None, expect: Mapping[str, Any]) -> tuple[str, ...]:
    """The ``expect`` keys a test's form shows: goal and goal status only where the profile is in goal mode (or,
    on an add page with no profile yet, where some profile is) or the test already expects them."""
    if profile is not None:
        goal_mode = profile.routing_mode == GOAL_MODE
    else:
        goal_mode = AgentProfile.objects.filter(routing_mode=GOAL_MODE).exists()
    if goal_mode or any(expect.get(key) for key in GOAL_KEYS):
        return ROUTING_TEST_EXPECT_KEYS
    return tuple(key for key in ROUTING_TEST_EXPECT_KEYS if key not in GOAL_KEYS)


# -- a conversation test's earlier turns, one per line ----------------------------------------------------------------

TURNS_LABEL = "Earlier turns"
TURNS_HELP = (
    "To test a short conversation: the customer's messages before the one above, one per line, oldest first (at "
    "most 10). After a message, “|” (its last one) and what must come of it, e.g. “Quero pagar pelo pix | intent: "
    "billing_payment_request; state after: WAITING_PAYMENT_CONFIRMATION” or “antes disso, cadê meu pedido? | events: "
    "pushed, resumed”. What may be checked: intent, specialist, decided by, next state, goal, goal status, events, "
    "repair, state after (“(none)”: no flow waits), requests found (intents, separated by commas), language (pt, "
    "en, es). Empty: a single "
    "message."
)
_KEY_WORDS = {
    **{normalize(label): key for key, label in EXPECT_LABELS.items()},
    **{normalize(key.replace("_", " ")): key for key in ROUTING_TEST_KEYS},
}


def turns_text(turns: Any) -> str:
    """A test's turns as the box shows them: ``message | key: value; key: a, b`` per line."""
    if not isinstance(turns, list):
        return str(turns or "")
    lines = []
    for turn in turns:
        if not isinstance(turn, dict):
            continue
        expect: dict[str, Any] = turn["expect"] if isinstance(turn.get("expect"), dict) else {}
        said = "; ".join(
            f"{key_word(key)}: {_value_word(key, expect[key])}" for key in ROUTING_TEST_KEYS if key in expect
        )
        lines.append(f"{turn.get('message', '')} | {said}" if said else str(turn.get("message", "")))
    return "\n".join(lines)


def key_word(key: str) -> str:
    return key.replace("_", " ") if key in ("next_state", "state_after") else EXPECT_LABELS[key].lower()


def _value_word(key: str, value: Any) -> str:
    if key in ROUTING_TEST_LIST_KEYS and isinstance(value, list):
        return ", ".join(str(item) for item in value)
    return NO_STATE if key == "state_after" and value == "" else str(value)


def turns_read(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The turns of the box's lines (blank lines left out), and what cannot be read in them, naming the turn."""
    turns: list[dict[str, Any]] = []
    problems: list[str] = []
    for line in (line for line in text.splitlines() if line.strip()):
        message, bar, said = line.rpartition("|")
        if not bar or not said.strip():
            turns.append({"message": (message if bar else line).strip()})
            continue
        expect: dict[str, Any] = {}
        where = turn_where(len(turns), message)
        for part in (part for part in said.split(";") if part.strip()):
            name, colon, value = part.partition(":")
            key = _KEY_WORDS.get(normalize(name))
            if not colon or key is None:
                problems.append(f"{where}: “{part.strip()}” is not one of “what: value” (what: {_key_list()}).")
            elif key in expect:
                problems.append(f"{where}: {key_word(key)} is given twice.")
            else:
                expect[key] = _value_read(key, value.strip())
        turns.append({"message": message.strip(), "expect": expect})
    return turns, problems


def _key_list() -> str:
    return ", ".join(key_word(key) for key in ROUTING_TEST_KEYS)


def _value_read(key: str, value: str) -> Any:
    if key in ROUTING_TEST_LIST_KEYS:
        return [item for item in re.split(r"[,\s]+", value) if item]
    return "" if key == "state_after" and value in ("", NO_STATE) else value


def turn_where(index: int, message: str) -> str:
    """``Turn 2 (“antes disso, cadê…”)``: a turn as the box's errors name it."""
    shown = message.strip()
    return f"Turn {index + 1} (“{shown[:40]}{'…' if len(shown) > 40 else ''}”)"


class TurnsField(forms.Field):
    """A conversation test's earlier turns, one per line (:func:`turns_text`, :func:`turns_read`); what a line says
    is checked by the form, which knows the profile."""

    # A line is a turn: long ones scroll rather than wrap into what would look like two turns.
    widget = forms.Textarea(attrs={"rows": 6, "cols": 100, "class": "vLargeTextField", "wrap": "off"})

    def prepare_value(self, value: Any) -> str:
        return turns_text(value) if isinstance(value, list) else str(value or "")

    def to_python(self, value: Any) -> list[dict[str, Any]]:
        if isinstance(value, list):
            return value
        turns, problems = turns_read(str(value or ""))
        if problems:
            raise ValidationError(problems)
        return turns

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(initial) != self.to_python(data)
        except ValidationError:
            return True


# Where a test made from a stored message came from (routing.routing_test_drafts): kept, never typed.
SOURCE_FIELDS = ["source_message_id", "source_intent", "source_agent"]


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
