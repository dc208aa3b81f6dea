"""The admin's form of a saved routing test: its expectation as fields, one per key, chosen from what the test's
profile's draft offers (the choices and the earlier turns' box are routing's, :mod:`routing.forms`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError

from agents.models import AgentProfile
from common.text import whole_number
from releases.models import RoutingTestCase
from routing.public import (
    CONVERSATION_CHOICES,
    ERROR_EXPECT_CHOICE,
    ERROR_EXPECT_NOTHING,
    EXPECT_HELP,
    EXPECT_LABELS,
    EXPECT_WHAT,
    NO_STATE,
    NOT_CHECKED,
    NOT_IN_DRAFT,
    ROUTING_TEST_KEYS,
    ROUTING_TEST_LIST_KEYS,
    SOURCE_FIELDS,
    TURNS_HELP,
    TURNS_LABEL,
    Choices,
    TurnsField,
    Where,
    expect_choices,
    expect_field,
    key_word,
    routing_test_input_limit,
    routing_test_turns_problems,
    turn_where,
)


class RoutingTestCaseForm(forms.ModelForm):
    """A saved routing test with its expectation as fields — ``expect_intent``, ``expect_agent`` … one per key of
    :data:`~routing.models.ROUTING_TEST_KEYS` — chosen from what the test's profile's draft offers
    (:func:`expect_choices`); blank is "not checked". On an add page with no profile yet the choices are grouped by
    profile, and the profile posted is the one they are checked against. A value the test already holds stays a
    choice ("… (not in the draft)"), so saving a test never drops part of it. A conversation test's earlier turns are
    one box, a line per turn (:class:`TurnsField`), whose expectations are checked against the same choices."""

    expect_intent = forms.ChoiceField(required=False)
    expect_agent = forms.ChoiceField(required=False)
    expect_method = forms.ChoiceField(required=False)
    expect_next_state = forms.ChoiceField(required=False)
    expect_goal = forms.ChoiceField(required=False)
    expect_status = forms.ChoiceField(required=False)
    expect_events = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    expect_repair = forms.ChoiceField(required=False)
    expect_state_after = forms.ChoiceField(required=False)
    expect_topics = forms.MultipleChoiceField(required=False)
    expect_language = forms.ChoiceField(required=False)
    turns = TurnsField(required=False, label=TURNS_LABEL, help_text=TURNS_HELP)

    class Meta:
        model = RoutingTestCase
        fields = ["profile", "name", "message", "state", "active_specialist", "turns", "enabled", *SOURCE_FIELDS]
        widgets = dict.fromkeys(SOURCE_FIELDS, forms.HiddenInput)  # carried from "Add as routing test case"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = dict(self.instance.expect or {}) if self.instance.pk else {}
        for key, value in stored.items():
            self.initial.setdefault(expect_field(key), NO_STATE if key == "state_after" and value == "" else value)
        self.profile = self._profile()
        self.offered: dict[str, Choices] = {}
        if self.profile is not None:
            self.offered = expect_choices([self.profile])[self.profile.pk]
        else:
            profiles = list(AgentProfile.objects.order_by("agent_id"))
            by_profile = expect_choices(profiles)
        self.held = _held_values(stored, self.instance.turns if self.instance.pk else [])
        for key in ROUTING_TEST_KEYS:
            if expect_field(key) not in self.fields:
                continue  # a key the page does not offer (goal and status outside goal mode): the admin drops it
            field = cast("forms.ChoiceField", self.fields[expect_field(key)])
            field.label = EXPECT_LABELS[key]
            field.help_text = EXPECT_HELP[key]
            initial = self.initial.get(expect_field(key))
            held = self.held[key] | {
                str(value) for value in (initial if isinstance(initial, list) else [initial]) if value
            }
            blank = [] if key in ROUTING_TEST_LIST_KEYS else [("", NOT_CHECKED)]
            if self.profile is not None or key in CONVERSATION_CHOICES:
                offered = self.offered[key] if self.profile is not None else CONVERSATION_CHOICES[key]
                field.choices = [*blank, *_keeping(offered, held)]
            else:
                grouped = [(profile.agent_id, by_profile[profile.pk][key]) for profile in profiles]
                field.choices = [
                    *blank,
                    *((name, options) for name, options in grouped if options),
                    *_keeping([], held - {value for _, options in grouped for value, _ in options}),
                ]
            what = EXPECT_WHAT[key].format(profile=self.profile.agent_id if self.profile else "the profile")
            field.error_messages["invalid_choice"] = ERROR_EXPECT_CHOICE.format(label=EXPECT_LABELS[key], what=what)

    def _profile(self) -> AgentProfile | None:
        """The profile the expectation is chosen in: the one posted, else the test's, else the add page's."""
        if self.is_bound:
            chosen: Any = self.data.get(self.add_prefix("profile"))
        else:
            chosen = self.instance.profile_id or self.initial.get("profile")
        if isinstance(chosen, AgentProfile):
            return chosen
        pk = whole_number(str(chosen or ""))
        return AgentProfile.objects.filter(pk=pk).first() if pk else None

    def clean_turns(self) -> list[dict[str, Any]]:
        """The turns as the model keeps them, or every problem of theirs naming the turn: at most ten, each message
        within the profile's input limit, each expectation one the profile's draft offers (or the test held)."""
        turns = self.cleaned_data.get("turns") or []
        limit = routing_test_input_limit(self.profile)
        problems = [
            _turn_problem(turns, where, problem)
            for where, problem in routing_test_turns_problems(turns, max_chars=limit)
        ]
        if not problems and self.profile is not None:
            problems = [
                f"{turn_where(n, turn['message'])}: {problem}"
                for n, turn in enumerate(turns)
                for problem in self._choice_problems(turn.get("expect") or {})
            ]
        if problems:
            raise ValidationError(problems)
        return turns

    def _choice_problems(self, expect: Mapping[str, Any]) -> list[str]:
        """What an earlier turn's expectation names that the profile's draft does not offer (nor the test held)."""
        problems = []
        for key, value in expect.items():
            offered = {str(choice) for choice, _ in self.offered.get(key, [])} | self.held[key]
            values = value if isinstance(value, list) else [NO_STATE if key == "state_after" and value == "" else value]
            what = EXPECT_WHAT[key].format(profile=self.profile.agent_id if self.profile else "the profile")
            problems += [f"{key_word(key)}: “{item}” is not {what}." for item in values if str(item) not in offered]
        return problems

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        fields = [expect_field(key) for key in ROUTING_TEST_KEYS]
        expect: dict[str, Any] = {}
        for key, name in zip(ROUTING_TEST_KEYS, fields, strict=True):
            value = cleaned.get(name)
            if value:
                expect[key] = list(value) if key in ROUTING_TEST_LIST_KEYS else "" if value == NO_STATE else value
        if not expect and not any(name in self.errors for name in fields):
            raise ValidationError(ERROR_EXPECT_NOTHING)
        self.instance.expect = expect
        return cleaned


def _held_values(expect: Mapping[str, Any], turns: Any) -> dict[str, set[str]]:
    """Every value a stored test already expects, by key (its own message's and its turns'): they stay choices."""
    held: dict[str, set[str]] = {key: set() for key in ROUTING_TEST_KEYS}
    expects = [expect, *(turn.get("expect") or {} for turn in turns if isinstance(turn, dict))]
    for said in expects:
        for key, value in said.items() if isinstance(said, dict) else ():
            if key in held:
                items = value if isinstance(value, list) else [value]
                held[key] |= {NO_STATE if key == "state_after" and item == "" else str(item) for item in items}
    return held


def _turn_problem(turns: list[dict[str, Any]], where: Where, problem: str) -> str:
    """A problem of the turns (:func:`routing.models.routing_test_turns_problems`) as the box's error says it."""
    if not where:
        return f"{TURNS_LABEL}: {problem}"
    index = int(where[0])
    turn = turns[index] if isinstance(turns[index], dict) else {}
    if where[1:] == ("message",):
        said = "the message is missing." if problem == "required text." else f"the message is {problem}"
    elif len(where) == 3:
        said = f"{key_word(str(where[2]))}: {problem}"
    else:
        said = f"{'.'.join(map(str, where[1:]))}: {problem}" if len(where) > 1 else problem
    return f"{turn_where(index, str(turn.get('message', '')))}: {said}"


def _keeping(choices: Choices, held: set[str]) -> Choices:
    """``choices`` and, after them, the ``held`` values they do not offer."""
    offered = {value for value, _ in choices}
    return [*choices, *((value, NOT_IN_DRAFT.format(value=value)) for value in sorted(held - offered))]
