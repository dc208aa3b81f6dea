"""Form fields the apps' admins share: readable JSON, lists edited one item per line, addresses whose credentials
are write-only."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from django import forms
from django.contrib.admin.widgets import AdminTextInputWidget
from django.db import models

from common.endpoints import endpoint_mask, endpoint_unmask

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

    def has_changed(self, initial: Any, data: Any) -> bool:
        # An inline's extra row has no initial value (None), which an empty box leaves as it is: not a change.
        return self.to_python(initial) != self.to_python(data)


class PhrasesField(LinesField):
    """A list of short phrases edited one per line or separated by commas (a keyword's exclusions), shown one per
    line. A phrase matched on word boundaries never needs a comma: matching reads punctuation as a space."""

    widget = forms.Textarea(attrs={"rows": 2, "cols": 36})

    def to_python(self, value: Any) -> list[str]:
        if isinstance(value, (list, tuple)):
            return super().to_python(value)
        return [part.strip() for line in super().to_python(value) for part in line.split(",") if part.strip()]


def label_choices(field: forms.ModelChoiceField[_M], label: Callable[[_M], str]) -> None:
    """Label this one field's choices with ``label(obj)`` instead of ``str(obj)``.

    Django's docs subclass the field for this; setting the method on the instance does it for a field that
    the admin or the form already made.
    """
    # mypy types the attribute as the unbound method (with self), so the callable looks incompatible.
    field.label_from_instance = label  # type: ignore[method-assign, assignment]  # shadows the method on purpose


class _Typed(str):
    """What the user sent in this request, shown back as sent when the form has errors: it may hold credentials
    they have just typed, which a masked form would make them type again (or, sent back masked, silently lose)."""


class EndpointField(forms.CharField):
    """An address whose credentials are write-only (:mod:`common.endpoints`): the stored address is shown masked
    (``https://***@host/path?token=***``); :class:`EndpointSecretsForm` puts the stored credentials back into what
    comes back. A plain text box: Django's URL widget would link the whole address."""

    widget = AdminTextInputWidget

    def prepare_value(self, value: Any) -> Any:
        if not value or isinstance(value, _Typed):
            return value
        return endpoint_mask(str(value))

    def bound_data(self, data: Any, initial: Any) -> Any:
        return _Typed(data) if isinstance(data, str) else data

    def has_changed(self, initial: Any, data: Any) -> bool:
        return (data or "") != endpoint_mask(str(initial or "")) and super().has_changed(initial, data)


class EndpointSecretsForm(forms.ModelForm):  # a base for any model's form
    """A model form whose :class:`EndpointField` values are made whole against the stored address before the model
    sees them (:func:`common.endpoints.endpoint_unmask`): the masked address sent back keeps the stored credentials,
    a new one replaces them, masked credentials with another host are an error on the field."""

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or self.cleaned_data
        for name, field in self.fields.items():
            value = cleaned.get(name)
            if isinstance(field, EndpointField) and isinstance(value, str):
                stored = getattr(self.instance, name, "") if self.instance.pk else ""
                try:
                    cleaned[name] = endpoint_unmask(value, stored or "")
                except ValueError as exc:
                    self.add_error(name, str(exc))
        return cleaned
