"""A saved conversation test in the admin, as forms: the test's own fields (:class:`ConversationTestForm`), and each
turn a row of a formset (:class:`TurnForm`) — the customer's text, the turn's own channel and context, and what its
answer must show as fields a business user fills: phrases it must and must not contain, its language, the specialist
and intent the message is routed to, the tools called, a judge's rubric and lowest score. The other ``expect`` keys
(:data:`routing.conversation_tests.cases.EXPECT_KEYS`) sit in one JSON box per turn.

Every problem the contract finds (:func:`routing.conversation_tests.cases.conversation_test_problems`) is put on the
field it is about — a turn's on that turn's field, a key of the box on the box, naming the key — so the admin refuses
what a YAML file refuses, where the user looks. A specialist or intent must be one the profile's draft offers
(:func:`routing.forms.expect_choices`) or one the test already held.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.forms.formsets import DELETION_FIELD_NAME

from agents.models import AgentProfile
from common.forms import LinesField, PhrasesField
from common.language import LANGUAGES
from common.parsers import JsonTooDeep, NulCharacter, json_loads_limited
from common.text import whole_number
from releases.models import ConversationTest
from routing.public import (
    CHANNEL_MAX_CHARS,
    CONVERSATION_TEST_EXPECT_KEYS,
    CONVERSATION_TEST_MAX_TURNS,
    EXPECT_WHAT,
    JUDGE_KEY,
    JUDGE_MAX_RUNS,
    LANGUAGE_NAMES,
    RUBRIC_MAX_CHARS,
    Where,
    conversation_test_problems,
    expect_choices,
    routing_test_input_limit,
)

TURN_PREFIX = "turn"
# The expect keys with a field of their own in a turn's row (the field has the key's name), in the row's order.
FIELD_KEYS = ("agent", "intent", "answer_language", "answer_contains", "answer_not_contains", "tools_called")
CHOSEN_KEYS = ("agent", "intent")  # values the profile's draft must offer
JUDGE_FIELDS = {"rubric": "judge_rubric", "min_score": "judge_min_score", "runs": "judge_runs"}
MORE_FIELD = "more_expect"
TURN_OWN_FIELDS = ("user", "channel", "context", "tool_answers")
DEFAULT_MIN_SCORE = 0.7

ERROR_TURNS = "A turn has errors: they are shown on its row below."
ERROR_NO_TURN = "Write at least one turn: the customer's message."
ERROR_BOTH = "{key} is given in its own field too: keep one."
ERROR_JSON = "Not JSON: {problem}"
ERROR_NOT_MAPPING = 'Must be a JSON object, e.g. {{"state": "WAITING_PAYMENT_CONFIRMATION"}}.'
ERROR_CHOICE = "“{value}” is not {what}."
MORE_HELP = (
    "Any other expectation of the answer, as a JSON object: {keys}. E.g. "
    '{{"answer_matches": "R\\\\$ ?\\\\d+", "escalated": false, "state": "WAITING_PAYMENT_CONFIRMATION"}}.'
)


class BoundedJSONField(forms.JSONField):
    """A JSON box that reads what it is sent within the API's bounds (:func:`common.parsers.json_loads_limited`):
    text nested too deep is an error on the field, not a server error; empty is ``{}``, shown empty."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 2, "cols": 60, "class": "vLargeTextField"}))
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> Any:
        if self.disabled or not isinstance(value, str):
            return value
        if not value.strip():
            return {}
        try:
            return json_loads_limited(value)
        except (JsonTooDeep, NulCharacter) as exc:
            raise ValidationError(ERROR_JSON.format(problem=exc)) from None
        except ValueError as exc:
            raise ValidationError(ERROR_JSON.format(problem=exc)) from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        # Django's decodes the text again, unbounded; what cannot be read is shown back as typed
        try:
            return self.to_python(data)
        except ValidationError:
            return data

    def prepare_value(self, value: Any) -> str:
        if value in (None, "", {}):
            return ""
        if isinstance(value, str):  # sent back as typed
            return value
        return json.dumps(value, ensure_ascii=False)

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return bool(self.to_python(data) != (initial or {}))
        except ValidationError:
            return True


def _more_field() -> BoundedJSONField:
    others = [key for key in CONVERSATION_TEST_EXPECT_KEYS if key not in FIELD_KEYS and key != JUDGE_KEY]
    return BoundedJSONField(
        label="Other expectations",
        help_text=MORE_HELP.format(keys=", ".join(others)),
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80, "class": "vLargeTextField"}),
    )


class TurnForm(forms.Form):
    """One turn: the customer's message and what must come of it. ``offered``: the values of ``agent`` and
    ``intent`` the profile offers (none known: not checked here)."""

    user = forms.CharField(
        label="Customer says",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80, "class": "vLargeTextField"}),
    )
    answer_given = forms.CharField(required=False, widget=forms.HiddenInput)  # shown, never saved
    agent = forms.CharField(
        label="Specialist", required=False, help_text="The specialist the message must be routed to."
    )
    intent = forms.CharField(label="Intent", required=False, help_text="The intent the message must be read as.")
    answer_language = forms.ChoiceField(
        label="Answer's language",
        required=False,
        choices=[("", "— the test's —"), *((code, f"{code}: {LANGUAGE_NAMES.get(code, code)}") for code in LANGUAGES)],
        help_text="Blank: the test's language, if it has one.",
    )
    answer_contains = LinesField(
        label="The answer contains",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 40}),
        help_text="One phrase per line; case and accents do not matter.",
    )
    answer_not_contains = LinesField(
        label="The answer does not contain",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 40}),
        help_text="One phrase per line: what was wrong in an answer, e.g. “Subject:”.",
    )
    tools_called = PhrasesField(
        label="Tools called", required=False, help_text="Tools' names, one per line or separated by commas."
    )
    judge_rubric = forms.CharField(
        label="Judge's rubric",
        required=False,
        max_length=RUBRIC_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 80, "class": "vLargeTextField"}),
        help_text="What a good answer does, in words: the profile's judge scores the answer against it.",
    )
    judge_min_score = forms.FloatField(
        label="Lowest score that passes",
        required=False,
        min_value=0,
        max_value=1,
        help_text=f"From 0 to 1, e.g. {DEFAULT_MIN_SCORE}.",
    )
    judge_runs = forms.IntegerField(
        label="Judged runs",
        required=False,
        min_value=1,
        max_value=JUDGE_MAX_RUNS,
        help_text=f"How many times the test runs for the judge (blank: once; at most {JUDGE_MAX_RUNS}).",
    )
    more_expect = _more_field()
    channel = forms.CharField(
        label="Channel", required=False, max_length=CHANNEL_MAX_CHARS, help_text="Blank: the test's."
    )
    context = BoundedJSONField(label="Context", help_text='Added to the test\'s, e.g. {"msisdn": "5511…"}.')
    tool_answers = BoundedJSONField(
        label="Recorded tool answers", help_text='Over the test\'s, e.g. {"consultar_fatura": {"total": 120}}.'
    )

    def __init__(
        self, *args: Any, offered: Mapping[str, set[str]] | None = None, profile: str = "", **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.offered = offered
        self.profile = profile or "the profile"
        for key in CHOSEN_KEYS:
            self.fields[key].widget.attrs["list"] = f"conversation-test-{key}s"

    def clean_more_expect(self) -> dict[str, Any]:
        value = self.cleaned_data.get(MORE_FIELD) or {}
        if not isinstance(value, dict):
            raise ValidationError(ERROR_NOT_MAPPING)
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.offered is not None:
            for key in CHOSEN_KEYS:
                value = (cleaned.get(key) or "").strip()
                if value and value not in self.offered.get(key, set()):
                    what = EXPECT_WHAT[key].format(profile=self.profile)
                    self.add_error(key, ERROR_CHOICE.format(value=value, what=what))
        more = cleaned.get(MORE_FIELD) or {}
        judged = cleaned.get("judge_rubric") or cleaned.get("judge_min_score") is not None
        for key in more:
            if (key in FIELD_KEYS and cleaned.get(key)) or (key == JUDGE_KEY and judged):
                self.add_error(MORE_FIELD, ERROR_BOTH.format(key=key))
        return cleaned

    def turn(self) -> dict[str, Any]:
        """The turn in the YAML item's shape (:data:`routing.conversation_tests.cases.TURN_KEYS`)."""
        cleaned = self.cleaned_data
        out: dict[str, Any] = {"user": cleaned.get("user") or ""}
        for key in ("channel", "context", "tool_answers"):
            if cleaned.get(key):
                out[key] = cleaned[key]
        expect = expect_of(cleaned)
        if expect:
            out["expect"] = expect
        return out


def expect_of(cleaned: Mapping[str, Any]) -> dict[str, Any]:
    """A turn's ``expect`` from its row: each field's key where filled, the judge's, then the box's keys."""
    expect: dict[str, Any] = {}
    for key in FIELD_KEYS:
        value = cleaned.get(key)
        if isinstance(value, str):
            value = value.strip()
        if value:
            expect[key] = value
    rubric, score, runs = (cleaned.get(name) for name in JUDGE_FIELDS.values())
    if rubric or score is not None:
        judge: dict[str, Any] = {"rubric": (rubric or "").strip(), "min_score": score}
        expect[JUDGE_KEY] = judge | ({"runs": runs} if runs else {})
    for key, value in (cleaned.get(MORE_FIELD) or {}).items():
        expect.setdefault(key, value)
    return {key: expect[key] for key in (*CONVERSATION_TEST_EXPECT_KEYS, *expect) if key in expect}


def turn_initial(turn: Mapping[str, Any], *, answer_given: str = "") -> dict[str, Any]:
    """A stored turn as its row's initial values: the keys with a field in the fields (a list of tools with their
    arguments, which the field cannot hold, stays in the box), the rest of ``expect`` in the box."""
    expect = dict(turn.get("expect") or {})
    initial: dict[str, Any] = {name: turn.get(name) or "" for name in TURN_OWN_FIELDS}
    initial["context"] = turn.get("context") or {}
    initial["tool_answers"] = turn.get("tool_answers") or {}
    initial["answer_given"] = answer_given
    for key in FIELD_KEYS:
        value = expect.get(key)
        if value is None or (key == "tools_called" and not isinstance(value, list)):
            continue
        if isinstance(value, (list, str)):
            initial[key] = expect.pop(key)
    judge = expect.get(JUDGE_KEY)
    if isinstance(judge, Mapping) and set(judge) <= set(JUDGE_FIELDS):
        for key, name in JUDGE_FIELDS.items():
            initial[name] = judge.get(key, "")
        expect.pop(JUDGE_KEY)
    initial[MORE_FIELD] = expect
    return initial


class BaseTurnFormSet(forms.BaseFormSet):
    """The turns, oldest first; a row left blank is no turn, a row ticked "delete" is dropped."""

    def turns(self) -> list[tuple[TurnForm, dict[str, Any]]]:
        """Each kept row with its turn, of what its fields hold (those in error left out: validated first)."""
        kept = []
        for index, form in enumerate(self.forms):
            cleaned = getattr(form, "cleaned_data", None)
            if not cleaned or cleaned.get(DELETION_FIELD_NAME):
                continue
            if index >= self.initial_form_count() and not form.has_changed():
                continue
            kept.append((form, form.turn()))
        return kept


TurnFormSet = cast(
    "type[BaseTurnFormSet]",
    forms.formset_factory(
        TurnForm,
        formset=BaseTurnFormSet,
        extra=1,
        can_delete=True,
        max_num=CONVERSATION_TEST_MAX_TURNS,
        validate_max=True,
        absolute_max=CONVERSATION_TEST_MAX_TURNS + 1,
    ),
)


def turn_field(where: Where) -> tuple[str, str]:
    """The row's field a problem of a turn is about (``where`` inside the turn: ``("expect", "judge", "rubric")``),
    and the path the message names in it (for the box: the key)."""
    if not where:
        return NON_FIELD_ERRORS, ""
    if where[0] in TURN_OWN_FIELDS:
        return str(where[0]), ""
    if where[0] != "expect" or len(where) == 1:
        return MORE_FIELD, ""
    key = str(where[1])
    if key in FIELD_KEYS:
        return key, ".".join(map(str, where[2:]))
    if key == JUDGE_KEY:
        return JUDGE_FIELDS.get(str(where[2]) if len(where) > 2 else "", "judge_rubric"), ""
    return MORE_FIELD, ".".join(map(str, where[1:]))


class ConversationTestForm(forms.ModelForm):
    """A conversation test: its fields, and its turns as :attr:`turns` (a :class:`TurnFormSet`, prefix
    :data:`TURN_PREFIX`), which the page renders below them and which are validated with it. On an add page the
    turns' initial rows come from ``initial["turns"]`` (a draft made from a real conversation: each turn as stored,
    with ``answer_given``, the answer the customer got, shown beside its row)."""

    class Meta:
        model = ConversationTest
        fields = [
            "profile",
            "name",
            "required",
            "enabled",
            "language",
            "user_id",
            "channel",
            "context",
            "tool_answers",
            "source_message_id",
        ]
        field_classes = {"context": BoundedJSONField, "tool_answers": BoundedJSONField}
        widgets = {"source_message_id": forms.HiddenInput}  # carried from "Add as conversation test"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.profile = self._profile()
        stored = list(self.instance.turns or []) if self.instance.pk else []
        offered = self._offered(stored) if self.profile is not None else None
        rows = {"offered": offered, "profile": self.profile.agent_id if self.profile is not None else ""}
        self.turns: BaseTurnFormSet
        if self.is_bound:
            self.turns = TurnFormSet(self.data, prefix=TURN_PREFIX, form_kwargs=rows)
        else:
            drafted = self.initial.get("turns") or []
            initial = [turn_initial(turn) for turn in stored] or [
                turn_initial(turn, answer_given=str(turn.get("answer_given") or "")) for turn in drafted
            ]
            self.turns = TurnFormSet(initial=initial, prefix=TURN_PREFIX, form_kwargs=rows)
        self.choices = {key: sorted(values) for key, values in (offered or {}).items()}

    @property
    def formsets(self) -> list[forms.BaseFormSet]:
        """The formsets the page renders inside this form (its turns): sent and validated with it."""
        return [self.turns]

    def _profile(self) -> AgentProfile | None:
        """The profile the turns are checked against: the one posted, else the test's, else the add page's."""
        chosen: Any = self.data.get(self.add_prefix("profile")) if self.is_bound else None
        if not self.is_bound:
            chosen = self.instance.profile_id or self.initial.get("profile")
        if isinstance(chosen, AgentProfile):
            return chosen
        pk = whole_number(str(chosen or ""))
        return AgentProfile.objects.filter(pk=pk).first() if pk else None

    def _offered(self, stored: list[Any]) -> dict[str, set[str]]:
        """The specialists and intents the profile's draft offers, and those the test already expects."""
        assert self.profile is not None
        choices = expect_choices([self.profile])[self.profile.pk]
        offered = {key: {str(value) for value, _ in choices[key]} for key in CHOSEN_KEYS}
        for turn in stored:
            expect = turn.get("expect") if isinstance(turn, Mapping) else None
            for key in CHOSEN_KEYS:
                if isinstance(expect, Mapping) and isinstance(expect.get(key), str):
                    offered[key].add(expect[key])
        return offered

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        valid = self.turns.is_valid()
        rows = self.turns.turns()
        if not rows:
            raise ValidationError(ERROR_TURNS if not valid else ERROR_NO_TURN)
        turns = [turn for _, turn in rows]
        data = {
            "name": cleaned.get("name") or "",
            "language": cleaned.get("language") or "",
            "turns": turns,
        }
        limit = routing_test_input_limit(self.profile)
        said = {id(form): set(form.errors) for form, _ in rows}  # a field's own error (not JSON…) says it first
        for where, problem in conversation_test_problems(data, max_chars=limit):
            if len(where) < 2 or where[0] != "turns":
                continue  # the test's own fields: the model's validation puts them on its fields
            form = rows[int(where[1])][0]
            name, path = turn_field(where[2:])
            if name not in said[id(form)]:
                form.add_error(name, f"{path}: {problem}" if path else problem)
                valid = False
        if not valid:
            raise ValidationError(ERROR_TURNS)
        self.instance.turns = turns
        return cleaned
