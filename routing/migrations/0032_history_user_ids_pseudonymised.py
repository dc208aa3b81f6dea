"""A user override's customer id recorded before the histories pseudonymised it — in the field history (the
entry's ``user_id`` change and its name, ``<id>: on``) and in the flag's change history (``user_override:<id>``) —
is rewritten as they record it now (``common.history.registry.user_id_pseudonym``: an e-mail, phone or CPF as its keyed
pseudonym, the same for the same id). What is recorded now decides, so the migration calls the running function."""

from django.db import migrations

from common.history.registry import user_id_pseudonym

BATCH = 500
PREFIX = "user_override:"
STATES = (": on", ": off")


def _name(name: str) -> str:
    for state in STATES:
        if name.endswith(state):
            return user_id_pseudonym(name[: -len(state)]) + state
    return name


def pseudonymise(apps, schema_editor):
    LogEntry = apps.get_model("auditlog", "LogEntry")
    ContentType = apps.get_model("contenttypes", "ContentType")
    RolloutFlagChange = apps.get_model("routing", "RolloutFlagChange")
    content_type = ContentType.objects.filter(app_label="routing", model="rolloutuseroverride").first()
    if content_type is not None:
        changed = []
        entries = LogEntry.objects.filter(content_type=content_type).only("pk", "changes", "object_repr")
        for entry in entries.iterator(BATCH):
            changes = entry.changes if isinstance(entry.changes, dict) else {}
            pair = changes.get("user_id")
            if isinstance(pair, list):
                changes = {**changes, "user_id": [user_id_pseudonym(v) if isinstance(v, str) else v for v in pair]}
            name = _name(entry.object_repr)
            if changes != entry.changes or name != entry.object_repr:
                entry.changes, entry.object_repr = changes, name
                changed.append(entry)
        LogEntry.objects.bulk_update(changed, ["changes", "object_repr"], batch_size=BATCH)
    rows = []
    for row in RolloutFlagChange.objects.filter(what__startswith=PREFIX).only("pk", "what").iterator(BATCH):
        what = PREFIX + user_id_pseudonym(row.what[len(PREFIX) :])
        if what != row.what:
            row.what = what
            rows.append(row)
    RolloutFlagChange.objects.bulk_update(rows, ["what"], batch_size=BATCH)


class Migration(migrations.Migration):
    dependencies = [
        ("routing", "0031_multi_agent_flag_description_in_plain_words"),
        ("auditlog", "0017_add_actor_email"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(pseudonymise, migrations.RunPython.noop)]
