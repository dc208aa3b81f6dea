"""The run's migrated database, which the test databases and the served instances are copied from."""

import os

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from agents.models import AgentProfile
from tests.demo_snapshot import demo_seed
from tests.platform_instance import (
    MIGRATED_DATABASE,
    migrated_database,
    postgres_server,
    scratch_database,
    seeded_database,
)

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="templates are PostgreSQL's")


def applied(url: str) -> set[tuple[str, str]]:
    with psycopg.connect(url) as database:
        return set(database.execute("SELECT app, name FROM django_migrations").fetchall())


def test_a_scratch_database_has_every_migration_of_the_code_applied():
    on_disk = set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
    with scratch_database("copied") as url:
        assert applied(url) == on_disk


def test_the_migrated_database_is_named_once_for_the_run_and_made_once():
    name = os.environ[MIGRATED_DATABASE]
    assert migrated_database() == migrated_database() == name
    with postgres_server() as server:
        found = server.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", (f"{name}%",)).fetchall()
    made = {row[0] for row in found}
    assert name in made
    assert not [other for other in made if other.endswith("_building")]  # no half-made copy left beside it


def row_counts(execute) -> dict[str, int]:
    """Every table's number of rows, read by ``execute(sql)`` (rows back)."""
    tables = [row[0] for row in execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    return {table: execute(f'SELECT count(*) FROM "{table}"')[0][0] for table in tables}  # noqa: S608 — names from the catalogue


@pytest.mark.django_db
def test_the_seeded_database_holds_what_seed_demo_writes_on_the_migrated_one():
    name = os.environ[MIGRATED_DATABASE]
    assert seeded_database() == seeded_database() == f"{name}_seeded"
    demo_seed()  # on the test database, a copy of the migrated one (this test's transaction sees its rows)

    def here(sql: str) -> list[tuple]:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall()

    with scratch_database("seeded", seeded=True) as url, psycopg.connect(url) as copy:
        assert applied(url) == set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)
        copied = row_counts(lambda sql: copy.execute(sql).fetchall())
    assert copied == row_counts(here)
    assert copied[AgentProfile._meta.db_table] > 0


@pytest.mark.django_db
def test_the_test_database_was_copied_from_it_with_the_rows_the_data_migrations_wrote():
    from django.contrib.auth.models import Group

    assert settings.DATABASES["default"]["TEST"]["TEMPLATE"] == os.environ[MIGRATED_DATABASE]
    assert Group.objects.exists()
