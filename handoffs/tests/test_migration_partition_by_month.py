"""Migration ``handoffs.0011_partition_by_month`` keeps every row: a PostgreSQL table of handoffs of several months,
written before it, comes out partitioned by month with the same rows under the same ids and values, each in its
month's partition, the id sequence carried on (a new row's id follows the old ones), the primary key
``(id, created_at)``, and the same indexes and enforced foreign keys under the same names; undone, the table is a
plain one again with the same rows. Had the migration recreated the table empty, lost a constraint, or restarted
the ids, this test would fail."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from conversations.tests.stored_turns import conversation_of, stored_turn
from handoffs.models import Handoff
from handoffs.partitions import DEFAULT_PARTITION, handoffs_partitioned, month_start, partition_name
from tests.factories import TenantFactory

BEFORE = ("handoffs", "0010_human_handoff_kind")
COLUMNS = ("id", "conversation_id", "tenant_id", "profile_id", "kind", "to_agent", "reason", "created_at")


def table_shape() -> tuple[set[str], set[tuple[str, ...]], list[str]]:
    """The table's index names, its foreign keys' (name, column, referenced table), and its primary key's columns."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "agent_handoffs")
    indexes = {name for name, c in constraints.items() if c["index"] and not c["primary_key"]}
    foreign = {(name, *c["columns"], c["foreign_key"][0]) for name, c in constraints.items() if c["foreign_key"]}
    (primary,) = [c["columns"] for c in constraints.values() if c["primary_key"]]
    return indexes, foreign, primary


def stored_rows() -> list[tuple]:
    return list(Handoff.objects.order_by("pk").values_list(*COLUMNS))


def partition_of(pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM agent_handoffs WHERE id = %s", [pk])
        return cursor.fetchone()[0]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_partitioning_by_month_keeps_every_row_id_index_and_foreign_key_and_undoes_cleanly(migrations):
    if connection.vendor != "postgresql":
        pytest.skip("the migration changes PostgreSQL's table only")
    indexes, foreign, _ = table_shape()
    migrations.back_to(BEFORE)
    assert not handoffs_partitioned()
    plain = table_shape()[0]  # with the foreign keys' own indexes, which a later migration drops
    now = timezone.now()
    acme = TenantFactory(slug="acme")
    dates = [now - dt.timedelta(days=days) for days in (200, 95, 40, 3, 0)]
    for n, when in enumerate(dates):
        conversation = conversation_of(acme, session=f"s{n}")
        stored_turn(conversation, f"fatura {n}", handoff_to="orders_agent", when=when)
    before = stored_rows()
    assert len(before) == len(dates)

    migrations.forward()

    assert handoffs_partitioned()
    assert stored_rows() == before
    for pk, *_, created_at in before:
        assert partition_of(pk) == partition_name(month_start(created_at)), pk
    assert table_shape() == (indexes, foreign, ["id", "created_at"])
    conversation = conversation_of(acme, session="after")
    newer = stored_turn(conversation, "nova fatura", handoff_to="orders_agent").handoff
    assert newer is not None and newer.pk > max(row[0] for row in before)
    with pytest.raises(IntegrityError), transaction.atomic():  # checked at commit: the constraint is deferred
        Handoff.objects.create(conversation_id=10**12, tenant=acme, profile_id=conversation.profile_id, kind="handoff")
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [DEFAULT_PARTITION])
        assert cursor.fetchone()[0]

    migrations.executor.loader.build_graph()  # what forward() applied, seen by the next plan
    migrations.back_to(BEFORE)

    assert not handoffs_partitioned()
    assert stored_rows() == [*before, stored_rows()[-1]] and stored_rows()[-1][0] == newer.pk
    assert table_shape() == (plain, foreign, ["id"])
