"""History entries recorded before every address was masked are masked by the data migration."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry
from django.contrib.contenttypes.models import ContentType

from agents.models import AgentProfile, RemoteBackend

BEFORE = ("common", "0001_initial")


@pytest.mark.django_db(transaction=True)
def test_a_model_endpoint_recorded_raw_before_the_migration_keeps_its_host_but_not_its_credentials(migrations):
    migrations.back_to(BEFORE)  # auditlog's table is as it was: its own migrations stay applied

    def record(model, changes):
        content_type = ContentType.objects.get_for_model(model)
        return LogEntry.objects.create(
            content_type=content_type, object_pk="1", object_id=1, action=LogEntry.Action.UPDATE, changes=changes
        ).pk

    profile = record(
        AgentProfile,
        {"llm_base_url": ["None", "https://llmuser:llm-pa55@llm.example/v1?api_key=llm-k3y"], "name": ["a", "b"]},
    )
    backend = record(RemoteBackend, {"api_key": ["sk-old-key", "sk-new-key"], "timeout": ["30.0", "4.5"]})

    migrations.forward_to(("common", "0002_history_addresses_masked"))

    assert LogEntry.objects.get(pk=profile).changes == {
        "llm_base_url": ["None", "https://***@llm.example/v1?api_key=***"],
        "name": ["a", "b"],
    }
    assert LogEntry.objects.get(pk=backend).changes == {"api_key": ["***", "***"], "timeout": ["30.0", "4.5"]}
