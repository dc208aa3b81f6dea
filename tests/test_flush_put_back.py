"""A transactional test's flush leaves the content types and permissions Django's ``post_migrate`` handlers make
(``content_types_put_back_after_a_flush`` in tests/fixtures.py puts back the rows the first flush made), and every
other table empty, deleting the rows of the tables that hold some (``flush_empties_the_tables_written``); a put-back
table that holds the very rows the flush would put back is left as it is."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.sql import emit_post_migrate_signal
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import AgentProfile
from tests.fixtures import FLUSH_DELETES_UP_TO


def flush() -> None:
    """As a transactional test's end does (django.test.TransactionTestCase)."""
    call_command("flush", verbosity=0, interactive=False, reset_sequences=False)


def rows() -> tuple[set, set]:
    return (
        set(ContentType.objects.values_list("app_label", "model")),
        set(Permission.objects.values_list("content_type__app_label", "content_type__model", "codename", "name")),
    )


@pytest.mark.django_db(transaction=True)
def test_after_each_flush_the_content_types_and_permissions_are_those_the_handlers_make():
    flush()  # the first may be the one that records them
    flush()
    put_back = rows()
    ids = set(ContentType.objects.values_list("pk", flat=True))

    Permission.objects.all().delete()
    ContentType.objects.all().delete()
    ContentType.objects.clear_cache()
    emit_post_migrate_signal(0, False, "default")

    assert rows() == put_back
    assert len(put_back[0]) > 50 and len(put_back[1]) > 200
    flush()
    assert set(ContentType.objects.values_list("pk", flat=True)) == ids  # the same rows put back, ids included


def flushed() -> list[str]:
    """The SQL of a flush."""
    with CaptureQueriesContext(connection) as queries:
        flush()
    return [query["sql"] for query in queries.captured_queries]


def tables_holding_rows() -> set[str]:
    with connection.cursor() as cursor:
        return {
            table
            for table in connection.introspection.django_table_names(only_existing=True, include_views=False)
            if cursor.execute(f"SELECT 1 FROM {connection.ops.quote_name(table)} LIMIT 1").fetchone()  # noqa: S608
        }


PUT_BACK = {ContentType._meta.db_table, Permission._meta.db_table}


@pytest.mark.django_db(transaction=True)
def test_a_flush_deletes_the_rows_of_the_tables_holding_some_and_leaves_every_table_but_the_put_back_ones_empty():
    flush()
    Group.objects.create(name="written by the test")
    held = tables_holding_rows()

    sql = flushed()

    assert tables_holding_rows() == PUT_BACK
    if connection.vendor == "postgresql":
        assert not [statement for statement in sql if "TRUNCATE" in statement.upper()]
        deleted = [statement.removeprefix("DELETE FROM ") for statement in sql if statement.startswith("DELETE FROM")]
        assert sorted(deleted) == sorted(connection.ops.quote_name(table) for table in held - PUT_BACK)
        assert Group._meta.db_table in held and AgentProfile._meta.db_table not in held


@pytest.mark.django_db(transaction=True)
def test_a_table_holding_more_rows_than_the_flush_deletes_is_truncated_with_every_other():
    Group.objects.bulk_create(Group(name=f"group {n}") for n in range(FLUSH_DELETES_UP_TO + 1))

    sql = flushed()

    assert tables_holding_rows() == PUT_BACK
    if connection.vendor == "postgresql":
        assert [statement for statement in sql if statement.upper().startswith("TRUNCATE")]


def written_tables(sql: list[str]) -> set[str]:
    """The tables the statements ``sql`` delete from or insert into."""
    return {
        statement.split('"')[1] for statement in sql if statement.upper().startswith(("DELETE FROM", "INSERT INTO"))
    }


def put_back_rows() -> tuple[list, list]:
    return (
        list(ContentType.objects.order_by("pk").values_list()),
        list(Permission.objects.order_by("pk").values_list()),
    )


@pytest.mark.django_db(transaction=True)
def test_a_flush_leaves_the_content_types_and_permissions_as_they_are_when_they_hold_the_rows_it_would_put_back():
    flush()  # the first may be the one that records them
    flush()
    put_back = put_back_rows()
    Group.objects.create(name="written by the test").permissions.add(Permission.objects.first())

    sql = flushed()

    assert put_back_rows() == put_back
    assert tables_holding_rows() == PUT_BACK
    if connection.vendor == "postgresql":
        written = written_tables(sql)
        assert not written & PUT_BACK
        assert {Group._meta.db_table, Group.permissions.through._meta.db_table} <= written


@pytest.mark.django_db(transaction=True)
def test_a_flush_puts_back_a_permission_a_test_renamed_and_a_content_type_it_deleted():
    flush()
    flush()
    put_back = put_back_rows()
    renamed = Permission.objects.order_by("pk").last()
    renamed.name = "renamed by the test"  # the same count, the same ids: only the rows' digest tells
    renamed.save()
    ContentType.objects.get_for_model(Group).delete()  # its permissions too

    sql = flushed()

    assert put_back_rows() == put_back
    if connection.vendor == "postgresql":
        assert written_tables(sql) >= PUT_BACK
