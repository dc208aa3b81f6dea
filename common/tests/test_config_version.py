"""The routing configuration's version (common/config_version.py): read from the shared cache, once per pinned step."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from common import config_version as versions
from common.config_version import CACHE_KEY, Pin, config_version, config_version_bump, config_version_pinned

pytestmark = pytest.mark.django_db


def django_capture_on_commit():
    """The bump publishes its number when its transaction commits; in a test's transaction, run it at once."""
    from django.test import TestCase

    return TestCase.captureOnCommitCallbacks(execute=True)


def test_each_read_outside_a_pinned_step_sees_what_another_process_published():
    before = config_version()
    cache.set(CACHE_KEY, before + 100)  # another process's change, published

    assert config_version() == before + 100


def test_a_pinned_step_reads_the_version_once_and_the_next_step_reads_it_again():
    before = config_version()

    with config_version_pinned():
        assert config_version() == before
        cache.set(CACHE_KEY, before + 100)
        assert config_version() == before  # the key check and the routing of one message agree
    with config_version_pinned():
        assert config_version() == before + 100


def test_a_pin_kept_from_one_step_to_the_next_reads_the_version_once_for_them_all_until_a_change_is_made():
    before = config_version()
    pin: Pin = []

    with config_version_pinned(pin):
        assert config_version() == before
    cache.set(CACHE_KEY, before + 100)  # another process's change, published between two steps of one request
    with config_version_pinned(pin):
        assert config_version() == before  # the request's later step: no cache read, the version its first read
    with config_version_pinned():
        assert config_version() == before + 100  # another request's step reads it
    with config_version_pinned(pin):
        with django_capture_on_commit():
            config_version_bump()  # a change the request makes itself
        assert config_version() > before + 100


def test_a_pin_held_longer_than_its_bound_reads_the_version_again(monkeypatch):
    # A request that streams for long: its later steps see a publish within the bound, not at the request's end.
    now = [1000.0]
    monkeypatch.setattr(versions, "monotonic", lambda: now[0])
    before = config_version()
    pin: Pin = []

    with config_version_pinned(pin):
        assert config_version() == before
    cache.set(CACHE_KEY, before + 100)
    now[0] += versions.PIN_SECONDS  # at the bound: still the request's reading
    with config_version_pinned(pin):
        assert config_version() == before
    now[0] += 0.001  # past it
    with config_version_pinned(pin):
        assert config_version() == before + 100
        cache.set(CACHE_KEY, before + 200)
        assert config_version() == before + 100  # read anew, and held again from then


def test_a_change_made_inside_a_pinned_step_is_read_after_it():
    with config_version_pinned():
        before = config_version()
        with django_capture_on_commit():
            config_version_bump()

        assert config_version() > before


def test_a_bulk_write_of_a_versioned_model_bumps_the_version_as_a_save_does(tenant):
    from tenants.models import Tenant

    before = config_version()
    with django_capture_on_commit():
        Tenant.objects.filter(pk=tenant.pk).update(name="Renamed in bulk")
    after_update = config_version()
    with django_capture_on_commit():
        Tenant.objects.filter(pk=-1).update(name="nobody")  # no row written: nothing to tell

    assert after_update > before
    assert config_version() == after_update


def test_a_login_does_not_bump_the_version_and_a_change_of_the_user_does(django_user_model):
    from django.contrib.auth.models import update_last_login

    user = django_user_model.objects.create_user("watched", "watched@example.com", "watched-password")
    before = config_version()
    with django_capture_on_commit():
        update_last_login(None, user)
    after_login = config_version()
    with django_capture_on_commit():
        user.is_staff = True
        user.save()

    assert after_login == before
    assert config_version() > after_login
