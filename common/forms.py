"""Form fields the apps' admins share: readable JSON, and lists edited one item per line."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from django import forms
from django.db import models

_M = TypeVar("_M", bound=models.Model)


class PrettyJSONField(forms.JSONField):
    """A JSON field shown indented, so a schema is readable and editable in a textarea."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 12, "cols": 80, "class": "vLargeTextField"}))
        super().__init__(**kwargs)

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False, cls=self.encoder)


class LinesField(forms.Field):
    """A list of strings edited as one item per line (intent examples)."""

    widget = forms.Textarea(attrs={"rows": 5, "cols": 80, "class": "vLargeTextField"})

    def prepare_value(self, value: Any) -> str:
        if isinstance(value, (list, tuple)):
            return "\n".join(str(item) for item in value)
        return value or ""

    def to_python(self, value: Any) -> list[str]:
        if isinstance(value, (list, tuple)):
            return [str(item) for item in value]
        return [line.strip() for line in str(value or "").splitlines() if line.strip()]


def label_choices(field: forms.ModelChoiceField[_M], label: Callable[[_M], str]) -> None:
    """Label this one field's choices with ``label(obj)`` instead of ``str(obj)``.

    Django's docs subclass the field for this; setting the method on the instance does it for a field that
    the admin or the form already made.
    """
    # mypy types the attribute as the unbound method (with self), so the callable looks incompatible.
    field.label_from_instance = label  # type: ignore[method-assign, assignment]  # shadows the method on purpose
