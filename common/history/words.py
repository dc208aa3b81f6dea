"""The field history in words: what an entry of auditlog recorded (``{field: [old, new]}``, each side a string), as
a business user reads it on an object's History page and in the "Routing changes" list.

auditlog shows each side as stored: a JSON field (a calibration saved to a profile, a tool's argument schema) as a
2 kB line of JSON, a foreign key as an id, a switch as ``True``. Here:

* a JSON value is read and shown key by key (``fallback rate: 0.24``), nested settings as nested lists, a list of
  records one record a line; when both sides are objects only the keys that changed are shown, each on its own row
  (``Guardrails › max input chars``); when both are lists of words or messages, what was removed and added;
* a foreign key is the object's name (or ``#12, since deleted``), a choice its label, a switch ``yes``/``no``, a
  time the local time, an absent side ``—``;
* a masked field (an address with credentials, a key: ``common.history.registry.history_register``) is shown exactly as
  it was stored — masked — and never read as JSON or looked up.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from auditlog.models import LogEntry
from auditlog.registry import auditlog
from auditlog.render import get_field_verbose_name
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django.utils.dateparse import parse_datetime
from django.utils.formats import localize
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import is_aware, localtime

ABSENT = "—"
ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
PATH = " › "
_MISSING = object()


def changes_html(entry: LogEntry) -> SafeString:
    """The entry's changes as a table of rows: what (the field, and the key within it), from, to; a relation's added
    and removed objects as their own rows. "" when it recorded none."""
    model = entry.content_type.model_class()
    masked = _masked_fields(model)
    rows: list[tuple[str, SafeString, SafeString]] = []
    for name, change in (entry.changes_dict or {}).items():
        label = str(get_field_verbose_name(entry, name))
        if isinstance(change, Mapping) and change.get("type") == "m2m":
            objects = _words(change.get("objects") or [])
            removed = change.get("operation") == "delete"
            rows.append((label, _text(objects if removed else ABSENT), _text(ABSENT if removed else objects)))
            continue
        old, new = [*change, None, None][:2] if isinstance(change, list | tuple) else (None, change)
        field = _field(model, name)
        if name in masked or name == "password":
            rows.append((label, _text(_stored(old)), _text(_stored(new))))
        elif isinstance(field, models.JSONField):
            rows.extend(_json_rows(label, _json(old), _json(new)))
        else:
            rows.append((label, _value_html(field, old), _value_html(field, new)))
    if not rows:
        return mark_safe("")
    return format_html(
        '<table class="history-changes"><thead><tr><th>What</th><th>From</th><th>To</th></tr></thead>'
        "<tbody>{}</tbody></table>",
        format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", rows),
    )


def changes_summary(entry: LogEntry) -> str:
    """ "2 changes: priority, description" — the fields by their names in the admin."""
    if entry.action in (LogEntry.Action.DELETE, LogEntry.Action.ACCESS):
        return ""
    names = [str(get_field_verbose_name(entry, name)).lower() for name in entry.changes_dict or {}]
    return f"{len(names)} change{'' if len(names) == 1 else 's'}: {', '.join(names)}" if names else ""


# -- one field ------------------------------------------------------------------------------------------------------


def _masked_fields(model: type[models.Model] | None) -> set[str]:
    if model is None or not auditlog.contains(model):
        return set()
    return set(auditlog.get_model_fields(model)["mask_fields"])


def _field(model: type[models.Model] | None, name: str) -> models.Field[Any, Any] | None:
    if model is None:
        return None
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        return None
    return field if isinstance(field, models.Field) else None


def _stored(value: Any) -> str:
    """A side as auditlog stored it: "None" (the old side of a creation) is absent."""
    if value in (None, "None"):
        return ABSENT
    return str(value) or "(empty)"


def _text(value: str) -> SafeString:
    return format_html('<span class="history-text">{}</span>', value)


def _value_html(field: models.Field[Any, Any] | None, value: Any) -> SafeString:
    if value in (None, "None"):
        return _text(ABSENT)
    value = str(value)
    if value == "":
        return _text("(empty)")
    if field is None:
        return _text(value)
    if field.choices:
        return _text(str(dict(field.flatchoices).get(field.to_python(value), value)))
    if isinstance(field, models.BooleanField):
        return _text({"True": "yes", "False": "no"}.get(value, value))
    if isinstance(field, models.ForeignKey | models.OneToOneField):
        return _text(_related(field, value))
    if isinstance(field, models.DateTimeField):
        return _text(_when(value) or value)
    return _text(value)


def _related(field: models.ForeignKey[Any, Any] | models.OneToOneField[Any, Any], value: str) -> str:
    related = field.related_model
    if not isinstance(related, type):
        return value
    try:
        found = related._default_manager.filter(pk=related._meta.pk.to_python(value)).first()
    except (ValidationError, ValueError):  # recorded under another key type
        return value
    return str(found) if found is not None else f"#{value}, since deleted"


def _when(value: str) -> str:
    """An ISO date and time (a JSON value's ``at``, a datetime field) in local time; "" for any other text."""
    if not ISO_TIME.match(value):
        return ""
    try:
        moment = parse_datetime(value)
    except ValueError:
        return ""
    if moment is None:
        return ""
    return str(localize(localtime(moment) if is_aware(moment) else moment))


# -- JSON values ----------------------------------------------------------------------------------------------------


def _json(value: Any) -> Any:
    """A side of a JSON field as its value; ``_MISSING`` when absent; the text itself when it is not JSON."""
    if value in (None, "None"):
        return _MISSING
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _json_rows(label: str, old: Any, new: Any) -> list[tuple[str, SafeString, SafeString]]:
    """Rows for one JSON field: key by key where both sides are objects, what was removed and added where both are
    lists of plain values, else the two values."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        rows = []
        for key in [*new, *(key for key in old if key not in new)]:
            before, after = old.get(key, _MISSING), new.get(key, _MISSING)
            if before != after:
                rows.extend(_json_rows(f"{label}{PATH}{_key(key)}", before, after))
        return rows
    if _plain_list(old) and _plain_list(new):
        removed = [item for item in old if item not in new]
        added = [item for item in new if item not in old]
        if not removed and not added:
            return [(label, _text("the same, in another order"), _json_html(new))]
        return [
            (
                label,
                _text(f"removed: {_words(removed)}") if removed else _text(ABSENT),
                _text(f"added: {_words(added)}") if added else _text(ABSENT),
            )
        ]
    return [(label, _json_html(old), _json_html(new))]


def _plain_list(value: Any) -> bool:
    return isinstance(value, list) and all(not isinstance(item, Mapping | list) for item in value)


def _json_html(value: Any) -> SafeString:
    """A side of a JSON field in a cell: a plain value as text, an object or a list of records in words."""
    if (isinstance(value, Mapping) and value) or (isinstance(value, list) and not _plain_list(value)):
        return _nested_html(value)
    return _text(_nested_html(value))


def _nested_html(value: Any) -> SafeString:
    """A JSON value in words: an object as a list of "key: value", a list of records one a line."""
    if value is _MISSING or value is None:
        return format_html("{}", ABSENT)
    if isinstance(value, Mapping):
        if not value:
            return format_html("{}", "(empty)")
        return format_html(
            '<ul class="history-value">{}</ul>',
            format_html_join("", "<li>{}: {}</li>", ((_key(key), _nested_html(item)) for key, item in value.items())),
        )
    if isinstance(value, list):
        if not value:
            return format_html("{}", "(none)")
        if _plain_list(value):
            return format_html("{}", _words(value))
        return format_html(
            '<ol class="history-value">{}</ol>',
            format_html_join("", "<li>{}</li>", ((_nested_html(item),) for item in value)),
        )
    return format_html("{}", _scalar(value))


def _key(key: Any) -> str:
    """A key in a sentence, as it is (``fallback_rate`` → ``fallback rate``)."""
    return str(key).replace("_", " ")


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return ABSENT
    if isinstance(value, str):
        return _when(value) or value
    return str(value)


def _words(values: Iterable[Any]) -> str:
    shown = [f"“{value}”" if isinstance(value, str) else _scalar(value) for value in values]
    return ", ".join(shown) if shown else ABSENT
