"""A user override's customer id that migration 0032 kept as written — an id without personal data in it (``cust-42``,
a number, a UUID) — is rewritten as the histories record every id now (``common.history.registry.user_id_pseudonym``:
``user:<hex>``, the same for the same id): the field history's ``user_id`` change and entry name, and the flag's change
history (``user_override:<id>``). A value that already reads as a pseudonym (``email:3f9a…``, which 0032 wrote) is
kept, so no id is hashed twice."""

import importlib

from django.db import migrations

from common.history.registry import user_id_pseudonym
from common.personal_data import pseudonym_shaped

first = importlib.import_module("routing.migrations.0032_history_user_ids_pseudonymised")


def _id(value):
    return value if not isinstance(value, str) or pseudonym_shaped(value) else user_id_pseudonym(value)


def _name(name: str) -> str:
    state = next((state for state in first.STATES if name.endswith(state)), None)
    return name if state is None else _id(name[: -len(state)]) + state


def pseudonymise(apps, schema_editor):
    LogEntry = apps.get_model("auditlog", "LogEntry")
    ContentType = apps.get_model("contenttypes", "ContentType")
    RolloutFlagChange = apps.get_model("routing", "RolloutFlagChange")
    content_type = ContentType.objects.filter(app_label="routing", model="rolloutuseroverride").first()
    entries = LogEntry.objects.filter(content_type=content_type).only("pk", "changes", "object_repr")
    changed = []
    for entry in entries.iterator(first.BATCH) if content_type is not None else ():
        changes = entry.changes if isinstance(entry.changes, dict) else {}
        if isinstance(changes.get("user_id"), list):
            changes = {**changes, "user_id": [_id(value) for value in changes["user_id"]]}
        name = _name(entry.object_repr)
        if changes != entry.changes or name != entry.object_repr:
            entry.changes, entry.object_repr = changes, name
            changed.append(entry)
    LogEntry.objects.bulk_update(changed, ["changes", "object_repr"], batch_size=first.BATCH)
    rows = []
    for row in RolloutFlagChange.objects.filter(what__startswith=first.PREFIX).only("pk", "what").iterator(first.BATCH):
        what = first.PREFIX + _id(row.what[len(first.PREFIX) :])
        if what != row.what:
            row.what = what
            rows.append(row)
    RolloutFlagChange.objects.bulk_update(rows, ["what"], batch_size=first.BATCH)


class Migration(migrations.Migration):
    dependencies = [("routing", "0034_plan_started_as")]

    operations = [migrations.RunPython(pseudonymise, migrations.RunPython.noop)]
