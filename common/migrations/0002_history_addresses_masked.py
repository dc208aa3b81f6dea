"""Field history recorded before every address was masked — a profile's ``llm_base_url`` always, an MCP server's
endpoint and a remote backend's address and key before theirs were — is masked now, each model's fields with the
masking it registers (``common.history.registry.history_register``): the entries keep which server it was, not its
credentials. What is registered now decides, so the migration reads the running registry, not a historical state."""

from auditlog.diff import get_mask_function
from auditlog.registry import auditlog
from django.db import migrations

BATCH = 500


def mask_recorded_addresses(apps, schema_editor):
    LogEntry = apps.get_model("auditlog", "LogEntry")
    ContentType = apps.get_model("contenttypes", "ContentType")
    for model in auditlog.get_models():
        options = auditlog.get_model_fields(model)
        masked = set(options["mask_fields"])
        content_type = ContentType.objects.filter(
            app_label=model._meta.app_label, model=model._meta.model_name
        ).first()
        if not masked or content_type is None:
            continue
        mask = get_mask_function(options.get("mask_callable"))
        changed = []
        for entry in LogEntry.objects.filter(content_type=content_type).only("pk", "changes").iterator(BATCH):
            changes = entry.changes if isinstance(entry.changes, dict) else {}
            kept = {
                name: [mask(value) if isinstance(value, str) else value for value in pair]
                if name in masked and isinstance(pair, list)
                else pair
                for name, pair in changes.items()
            }
            if kept != changes:
                entry.changes = kept
                changed.append(entry)
        LogEntry.objects.bulk_update(changed, ["changes"], batch_size=BATCH)


class Migration(migrations.Migration):
    dependencies = [
        ("common", "0001_initial"),
        ("auditlog", "0017_add_actor_email"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(mask_recorded_addresses, migrations.RunPython.noop)]
