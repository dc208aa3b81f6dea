"""The run's migrated database, which the test databases and the served instances are copied from."""

import os

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from tests.platform_instance import MIGRATED_DATABASE, migrated_database, postgres_server, scratch_database

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
    assert [row[0] for row in found] == [name]  # no half-made copy left beside it


@pytest.mark.django_db
def test_the_test_database_was_copied_from_it_with_the_rows_the_data_migrations_wrote():
    from django.contrib.auth.models import Group

    assert settings.DATABASES["default"]["TEST"]["TEMPLATE"] == os.environ[MIGRATED_DATABASE]
    assert Group.objects.exists()
