"""The method of the tests that prove a move of models between apps keeps every row (``test_migrations_keep_*``): a
PostgreSQL database filled at the migrations of before the move is migrated to the latest ones, and what it held is
read again through today's models."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.contrib.contenttypes.models import ContentType
from django.db import connection, models
from django.db.migrations.executor import MigrationExecutor

Rows = Mapping[str, tuple[type[models.Model], Sequence[str]]]  # historical label -> (today's model, compared columns)


def migrate_to_latest(executor: MigrationExecutor) -> None:
    """Apply every migration (the state every other test expects)."""
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    executor.loader.build_graph()
    ContentType.objects.clear_cache()


def row_maker(apps: Any) -> tuple[Callable[..., Any], dict[str, list[int]]]:
    """``add(label, **fields)``, which creates a row of the historical model ``label`` and notes its id under it, and
    those ids by label."""
    made: dict[str, list[int]] = defaultdict(list)

    def add(label: str, **fields: Any) -> Any:
        row = apps.get_model(label).objects.create(**fields)
        made[label].append(row.pk)
        return row

    return add, made


def contents(rows: Rows, model_of: Callable[[str], Any]) -> dict[str, list[tuple]]:
    """Every row of every table of ``rows``: its id and compared columns, read through ``model_of(label)``."""
    return {
        label: list(model_of(label).objects.order_by("pk").values_list("pk", *columns))
        for label, (_, columns) in rows.items()
    }


def assert_foreign_keys_declared(rows: Rows) -> None:
    """Each foreign key of the current models of ``rows`` is a PostgreSQL constraint on the right column and table."""
    with connection.cursor() as cursor:
        for model, _ in rows.values():
            constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
            declared = {(tuple(c["columns"]), c["foreign_key"]) for c in constraints.values() if c["foreign_key"]}
            for field in model._meta.concrete_fields:
                if field.many_to_one:
                    target = (field.related_model._meta.db_table, field.target_field.column)
                    assert ((field.column,), target) in declared, f"{model.__name__}.{field.name} lost its constraint"
