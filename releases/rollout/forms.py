"""A rollout plan's settings as a form, not JSON: the stages as a list of percentages, the guards as a table of rows.

Used by the profile's publish page ("Roll out in stages") and by the rollout plan's own admin page
(:mod:`releases.admin.rollouts`), so both say and check the same:

* :class:`StagesField` — "10, 50, 100": percentages separated by commas, spaces or one a line, a "%" allowed; whole
  numbers from 1 to 100, rising, ending at 100 (:func:`routing.rollout_plans.stages_errors`); every error names the
  field.
* :class:`GuardsField` — one row per guard metric (:data:`routing.rollout_plans.GUARD_METRICS`): its relative limit
  (how much worse than the control, in percent) and its absolute limit (a level it may never pass: a percentage for
  rates, a score for the judge, milliseconds for latency). A row left empty is not guarded. It stores the plan's
  ``guards`` list (``{"metric", "threshold", "absolute"}``, fractions) and every error names the row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from releases.models import RolloutPlan
from routing.public import GUARD_METRICS, RELATIVE_MAX, GuardMetric, absolute_range, percent_words, stages_errors

STAGE_SEPARATORS = re.compile(r"[,;\s]+")
ERROR_STAGE_NUMBER = "Stages: “{part}” is not a whole percentage (write e.g. 10, 50, 100)."
ERROR_STAGES_REQUIRED = "Stages: give at least one percentage, ending at 100 (e.g. 10, 50, 100)."


class StagesField(forms.Field):
    """A plan's stages edited as "10, 50, 100" (module docstring)."""

    widget = forms.TextInput(attrs={"class": "vTextField", "placeholder": "10, 50, 100", "size": 30})
    default_error_messages = {"required": ERROR_STAGES_REQUIRED}

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list | tuple):
            return ", ".join(str(item) for item in value)
        return value

    def to_python(self, value: Any) -> list[int]:
        if isinstance(value, list | tuple):
            return list(value)
        parts = [part.strip().rstrip("%").strip() for part in STAGE_SEPARATORS.split(str(value or ""))]
        stages = []
        for part in parts:
            if not part:
                continue
            if not part.isdigit():
                raise ValidationError(ERROR_STAGE_NUMBER.format(part=part), code="invalid")
            stages.append(int(part))
        return stages

    def validate(self, value: list[int]) -> None:
        if not value:
            raise ValidationError(self.error_messages["required"], code="required")
        errors = stages_errors(value)
        if errors:
            raise ValidationError(errors, code="invalid")

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(initial) != self.to_python(data)
        except ValidationError:
            return True


# -- guards ------------------------------------------------------------------------------------------------------


def _unit(metric: GuardMetric) -> tuple[str, str]:
    """How an absolute limit of ``metric`` is written: its unit, and the word before it."""
    bound = "at least" if metric.worse == "lower" else "at most"
    if metric.kind == "rate":
        return "%", bound
    if metric.kind == "latency":
        return "ms", bound
    return "(0 to 1)", bound


def _shown(number: float) -> str:
    return f"{number:.4f}".rstrip("0").rstrip(".")


class GuardsWidget(forms.MultiWidget):
    """A table: one row per guard metric, its relative and absolute limit side by side (two number inputs)."""

    template_name = "admin/releases/rolloutplan/guards_widget.html"

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        inputs = []
        for _metric in GUARD_METRICS.values():
            inputs += [
                forms.NumberInput(attrs={"step": "any", "min": "0", "class": "guard-relative", "size": 6}),
                forms.NumberInput(attrs={"step": "any", "min": "0", "class": "guard-absolute", "size": 6}),
            ]
        super().__init__(inputs, attrs)

    def decompress(self, value: Any) -> list[str | None]:
        """The plan's guards (fractions) as the table's values (percentages, a score, milliseconds)."""
        by_metric: dict[str, Mapping[str, Any]] = {}
        for guard in value or []:
            if isinstance(guard, Mapping) and guard.get("metric") in GUARD_METRICS:
                by_metric.setdefault(str(guard["metric"]), guard)
        shown: list[str | None] = []
        for name, metric in GUARD_METRICS.items():
            guard = by_metric.get(name, {})
            relative, absolute = guard.get("threshold"), guard.get("absolute")
            shown.append(_shown(float(relative) * 100) if relative is not None else None)
            if absolute is None:
                shown.append(None)
            else:
                shown.append(_shown(float(absolute) * 100 if metric.kind == "rate" else float(absolute)))
        return shown

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        if isinstance(value, list | tuple) and any(isinstance(item, Mapping) for item in value):
            value = self.decompress(value)  # the stored guards (MultiWidget decompresses only what is not a list)
        context = super().get_context(name, value, attrs)
        subwidgets = context["widget"]["subwidgets"]
        rows = []
        for index, metric in enumerate(GUARD_METRICS.values()):
            unit, bound = _unit(metric)
            rows.append(
                {
                    "label": metric.label,
                    "description": metric.description,
                    "worse": "lower" if metric.worse == "lower" else "worse",
                    "relative": subwidgets[2 * index],
                    "absolute": subwidgets[2 * index + 1],
                    "unit": unit,
                    "bound": bound,
                }
            )
        context["widget"]["rows"] = rows
        return context

    def render(self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None) -> SafeString:
        # The project's templates (not the form renderer's): the table lives with the plan's admin templates. A
        # template renders safe text (its values escaped): SafeString says so to the type checker.
        return SafeString(render_to_string(self.template_name, self.get_context(name, value, attrs)))


class GuardsField(forms.MultiValueField):
    """A plan's guards edited as a table (module docstring)."""

    widget = GuardsWidget

    def __init__(self, **kwargs: Any) -> None:
        fields: list[forms.Field] = []
        for metric in GUARD_METRICS.values():
            low, high = absolute_range(metric)
            shown_high = high * 100 if metric.kind == "rate" else high
            said = f"Guards, {metric.label.lower()}"
            relative_error = f"{said}: the relative limit is a percentage from 0 to {RELATIVE_MAX * 100}."
            # No "%" in a message Django formats with its limit: "percent" is said in words.
            said_unit = {"rate": " percent", "latency": " ms"}.get(metric.kind, "")
            bounds = f"from {_shown(low)} to {_shown(shown_high)}{said_unit}"
            absolute_error = f"{said}: the absolute limit is a number {bounds}."
            fields += [
                forms.FloatField(
                    required=False,
                    min_value=0,
                    max_value=RELATIVE_MAX * 100,
                    error_messages=dict.fromkeys(("invalid", "min_value", "max_value"), relative_error),
                ),
                forms.FloatField(
                    required=False,
                    min_value=low,
                    max_value=shown_high,
                    error_messages=dict.fromkeys(("invalid", "min_value", "max_value"), absolute_error),
                ),
            ]
        kwargs.setdefault(
            "help_text",
            "The plan rolls back when the candidate is worse than the control by more than the relative limit, or "
            "passes the absolute limit, and the difference is significant. Leave both empty: not guarded.",
        )
        super().__init__(fields, require_all_fields=False, **kwargs)

    def compress(self, data_list: Sequence[float | None]) -> list[dict[str, Any]]:
        guards: list[dict[str, Any]] = []
        values = list(data_list or [])
        for index, (name, metric) in enumerate(GUARD_METRICS.items()):
            relative = values[2 * index] if 2 * index < len(values) else None
            absolute = values[2 * index + 1] if 2 * index + 1 < len(values) else None
            if relative is None and absolute is None:
                continue
            guard: dict[str, Any] = {"metric": name}
            if relative is not None:
                guard["threshold"] = round(relative / 100, 6)
            if absolute is not None:
                guard["absolute"] = round(absolute / 100, 6) if metric.kind == "rate" else absolute
            guards.append(guard)
        return guards

    def has_changed(self, initial: Any, data: Any) -> bool:
        # The stored value is the guards list: compare it row by row as the table shows it.
        widget = self.widget
        assert isinstance(widget, GuardsWidget)  # the field's own widget (class attribute, instantiated by Field)
        return super().has_changed(widget.decompress(initial), data)


def guards_summary(guards: Sequence[Mapping[str, Any]]) -> str:
    """The guards in one line ("fallback rate 25 %, judge score 10 % …"), for lists."""
    return ", ".join(
        f"{GUARD_METRICS[guard['metric']].label.lower()} {percent_words(float(guard['threshold']))}"
        for guard in guards
        if guard.get("metric") in GUARD_METRICS and guard.get("threshold") is not None
    )


def _model_field(name: str) -> Any:
    return RolloutPlan._meta.get_field(name)


def _default(name: str) -> Any:
    return _model_field(name).get_default()


def _help(name: str) -> str:
    return str(_model_field(name).help_text)


class PlanSettingsForm(forms.Form):
    """The settings of a staged rollout from the draft (the publish page), with the plan's defaults filled in; the
    plan's own rules check them again when it is made (:func:`releases.approvals.draft_rollout`)."""

    stages = StagesField(
        label="Stages",
        initial=_default("stages"),
        help_text="The share of new conversations that get the new version at each stage, in percent: e.g. 10, 50, "
        "100. Rising, ending at 100.",
    )
    hold_minutes = forms.IntegerField(
        label="Hold each stage (minutes)",
        min_value=0,
        initial=_default("hold_minutes"),
        help_text=_help("hold_minutes"),
    )
    min_conversations = forms.IntegerField(
        label="Minimum conversations",
        min_value=0,
        initial=_default("min_conversations"),
        help_text=_help("min_conversations"),
    )
    guards = GuardsField(label="Guards", required=False, initial=_default("guards"))
    max_errors = forms.IntegerField(
        label="Most errors in a stage", min_value=0, initial=_default("max_errors"), help_text=_help("max_errors")
    )
