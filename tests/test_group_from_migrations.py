"""``group_from_migrations`` (tests/fixtures.py) rebuilds a group a transactional test's flush emptied with the
permissions its data migrations gave it in the migrated database."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from tests.fixtures import group_from_migrations


def granted(group: Group) -> set[tuple[str, str, str]]:
    return set(group.permissions.values_list("content_type__app_label", "content_type__model", "codename"))


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["Routing editors", "Analysts", "Release approvers"])
def test_a_group_rebuilt_from_its_migrations_has_the_permissions_the_migrated_database_gave_it(name):
    migrated = granted(Group.objects.get(name=name))
    Group.objects.filter(name=name).delete()

    rebuilt = group_from_migrations(name)

    assert migrated and granted(rebuilt) == migrated
    assert group_from_migrations(name) == rebuilt  # found, not made again
