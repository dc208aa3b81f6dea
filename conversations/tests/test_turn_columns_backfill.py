"""Migration 0030 fills the turn's tenant and language into the messages, route decisions and tool calls stored before
it, from their conversation, in batches of ids; a row that has them already keeps its own."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from conversations.models import Message, RouteDecisionRecord, ToolCall
from tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db

migration = importlib.import_module("conversations.migrations.0030_turn_tenant_language")


def test_the_rows_stored_before_the_columns_get_their_conversations_tenant_and_language_batch_by_batch(
    monkeypatch, tenant, outsider
):
    monkeypatch.setattr(migration, "BATCH", 2)  # several batches, one left partly empty
    spanish = ConversationFactory(tenant=tenant, language="es")
    english = ConversationFactory(tenant=outsider, language="en")
    for conversation in (spanish, english, spanish):
        asked = Message.objects.create(conversation=conversation, role="user", content="x")
        RouteDecisionRecord.objects.create(
            conversation=conversation, message=asked, mode="router", route="a", agent="a", intent="i", method="state"
        )
        ToolCall.objects.create(conversation=conversation, message=asked, agent="a", tool="t", status="ok")
    kept = Message.objects.create(conversation=english, role="user", content="y", tenant=outsider, language="pt")
    for model in (Message, RouteDecisionRecord):  # as the rows were before the migration
        model.objects.exclude(pk=kept.pk).update(tenant=None, language="")
    ToolCall.objects.update(tenant=None)

    migration.turn_columns_backfill(apps, None)

    for model in (Message, RouteDecisionRecord):
        rows = model.objects.exclude(pk=kept.pk)
        assert sorted(rows.values_list("conversation_id", "tenant_id", "language")) == sorted(
            [(spanish.pk, tenant.pk, "es")] * 2 + [(english.pk, outsider.pk, "en")]
        )
    assert sorted(ToolCall.objects.values_list("tenant_id", flat=True)) == sorted([tenant.pk] * 2 + [outsider.pk])
    kept.refresh_from_db()
    assert (kept.tenant_id, kept.language) == (outsider.pk, "pt")
