"""A foreign key without an index of its own (``db_index=False``) is the leading column of another index or unique
constraint of its table: the lookups by it and the cascade of a delete of the row it points to read that one, never
the whole table."""

from __future__ import annotations

from django.apps import apps
from django.db import models

from conversations.models import Message


def leading_columns(model: type[models.Model]) -> set[str]:
    """The fields the model's indexes, unique constraints and unique-togethers begin with."""
    leading = {index.fields[0].lstrip("-") for index in model._meta.indexes if index.fields}
    leading |= {constraint.fields[0] for constraint in model._meta.constraints if getattr(constraint, "fields", ())}
    leading |= {together[0] for together in model._meta.unique_together}
    return leading


def unindexed_foreign_keys() -> list[str]:
    found = []
    for model in apps.get_models():
        if not model._meta.managed or model._meta.proxy:
            continue
        leading = leading_columns(model)
        for field in model._meta.fields:
            if isinstance(field, models.ForeignKey) and not field.db_index and field.name not in leading:
                found.append(f"{model._meta.label}.{field.name}")
    return found


def test_every_foreign_key_without_an_index_of_its_own_leads_another_index_of_its_table():
    assert unindexed_foreign_keys() == []


def test_a_foreign_key_whose_leading_index_is_gone_is_found(monkeypatch):
    kept = [index for index in Message._meta.indexes if index.name != "message_conversation_time"]
    monkeypatch.setattr(Message._meta, "indexes", kept)

    assert unindexed_foreign_keys() == ["conversations.Message.conversation"]
