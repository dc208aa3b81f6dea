"""A transactional test's flush leaves the content types and permissions Django's ``post_migrate`` handlers make
(``content_types_put_back_after_a_flush`` in tests/fixtures.py puts back the rows the first flush made)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.sql import emit_post_migrate_signal


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
