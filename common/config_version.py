"""Configuration versioning: how every process learns that the admin changed something.

The message path must not query routing configuration. Instead each process
keeps a compiled snapshot (:mod:`routing.snapshot`) tagged with a version and,
per message, compares it with the current version — one cache read.

* Writers call :func:`config_version_bump`. Every app that owns configuration
  hands its models to :func:`config_models_watch` in its ``AppConfig.ready``, so
  every save and delete of them bumps the version (admin forms and inlines, the
  YAML importer, a shell session: none has to remember). It increments the
  database row inside the writer's transaction, marks this process's snapshot
  stale at once, and publishes the new number to the shared cache on commit.
* Readers call :func:`config_version`. A cache miss falls back to the database
  row and repopulates the cache with ``add`` (never ``set``), so a reader can
  never overwrite a newer number a writer published. The short timeout bounds
  how long any cache mishap can hide a change.
* Inside :func:`config_version_pinned` the version is read once (for half a
  second at most, so a request that streams for long reads it again). The ASGI
  handler pins every call of one request on its thread to one reading: a
  message's key check, its routing snapshot and its knowledge search, each a
  step of its own, see the same version, and the later steps read no cache.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from time import monotonic
from typing import Any

from django.core.cache import cache
from django.db import models, transaction
from django.db.models import F
from django.db.models.signals import m2m_changed, post_delete, post_save

from common.models import ConfigVersion

CACHE_KEY = "routing:config-version"
CACHE_TIMEOUT_SECONDS = 15
# How long a pinned reading holds: a request's steps within it see one version, and a request that lasts (a stream)
# reads again after it, so a publish reaches it within the second that every process is held to.
PIN_SECONDS = 0.5

# A pinned reading: the version and when it was read (time.monotonic).
Pin = list[tuple[int, float]]

_state = threading.local()
_local_generation = 0
_generation_lock = threading.Lock()


def local_generation() -> int:
    """A counter bumped whenever this process itself changed routing data."""
    return _local_generation


def _bump_local() -> None:
    global _local_generation
    with _generation_lock:
        _local_generation += 1


def config_version() -> int:
    """The current configuration version, normally from the shared cache; read once within
    :func:`config_version_pinned`."""

    pinned = getattr(_state, "pin", None)
    if pinned:
        version, read_at = pinned[0]
        if monotonic() - read_at <= PIN_SECONDS:
            return version
        pinned.clear()  # held long enough: read again
    version = cache.get(CACHE_KEY)
    if version is None:
        version = ConfigVersion.objects.filter(pk=1).values_list("version", flat=True).first() or 0
        cache.add(CACHE_KEY, version, CACHE_TIMEOUT_SECONDS)
    if pinned is not None:
        pinned.append((version, monotonic()))
    return version


@contextmanager
def config_version_pinned(pin: Pin | None = None) -> Iterator[None]:
    """Read the version at most once in this thread until the block ends, or :data:`PIN_SECONDS` have passed since
    the reading; a change this thread makes meanwhile lets the next read go to the cache again. ``pin``, a list the
    caller keeps from one block to the next, carries the reading across them: the steps of one request
    (:class:`platform.middleware.RequestThread`), each in a block of its own, read it once."""
    outer = getattr(_state, "pin", None)
    _state.pin = ([] if pin is None else pin) if outer is None else outer
    try:
        yield
    finally:
        _state.pin = outer


def config_version_bump() -> None:
    """Record that configuration changed; batched inside :func:`config_batch`."""
    if getattr(_state, "pin", None):
        _state.pin.clear()  # read again, after this change
    if getattr(_state, "batch_depth", 0):
        _state.batch_dirty = True
        return

    with transaction.atomic():
        updated = ConfigVersion.objects.filter(pk=1).update(version=F("version") + 1)
        if not updated:
            # A (re)created row starts from the clock, so it can never repeat a number that another
            # process's snapshot was built at before the row went away (a flushed database).
            ConfigVersion.objects.create(pk=1, version=time.time_ns())
        version = ConfigVersion.objects.values_list("version", flat=True).get(pk=1)
    _bump_local()
    transaction.on_commit(lambda: cache.set(CACHE_KEY, version, CACHE_TIMEOUT_SECONDS))


@contextmanager
def config_batch() -> Iterator[None]:
    """Collapse the bumps of many writes (an import, a bulk action) into one."""
    _state.batch_depth = getattr(_state, "batch_depth", 0) + 1
    try:
        yield
    finally:
        _state.batch_depth -= 1
        if _state.batch_depth == 0 and getattr(_state, "batch_dirty", False):
            _state.batch_dirty = False
            config_version_bump()


def _changed(sender: type[models.Model], **kwargs: object) -> None:
    if kwargs.get("raw"):  # loaddata: fixtures bump once at the end of their transaction anyway
        return
    config_version_bump()


class _ChangedUnless:
    """A save receiver that ignores the saves of only ``ignored`` fields (a login's ``last_login``)."""

    def __init__(self, ignored: frozenset[str]) -> None:
        self.ignored = ignored

    def __call__(self, sender: type[models.Model], **kwargs: object) -> None:
        fields = kwargs.get("update_fields")  # a frozenset of names, or None
        if isinstance(fields, frozenset) and fields and fields <= self.ignored:
            return
        _changed(sender, **kwargs)


def _m2m_changed(sender: type[models.Model], action: str, **kwargs: object) -> None:
    if action in {"post_add", "post_remove", "post_clear"}:
        config_version_bump()


def config_models_watch(
    *watched: type[models.Model],
    relations: tuple[type[models.Model], ...] = (),
    ignored_fields: frozenset[str] = frozenset(),
) -> None:
    """Bump the version on every save and delete of ``watched``, and every change of the many-to-many
    ``relations`` (their ``through`` models). Call from ``AppConfig.ready``. A save of only ``ignored_fields``
    (``save(update_fields=...)``) does not bump it.

    Signals are used here (and only here) because every write path must be covered. This is cache
    invalidation, not business logic. Bulk ``QuerySet.update`` bypasses signals; the few places that use
    it call :func:`config_version_bump` themselves, and a model whose manager is :class:`VersionedQuerySet`'s
    bumps on its bulk writes too.
    """
    saved = _ChangedUnless(ignored_fields) if ignored_fields else _changed
    for model in watched:
        label = model._meta.label
        post_save.connect(saved, sender=model, weak=False, dispatch_uid=f"config-version-save-{label}")
        post_delete.connect(_changed, sender=model, dispatch_uid=f"config-version-delete-{label}")
    for through in relations:
        m2m_changed.connect(_m2m_changed, sender=through, dispatch_uid=f"config-version-m2m-{through._meta.label}")


class VersionedQuerySet(models.QuerySet):
    """The queryset of a watched model whose rows are written in bulk too (a shell's ``update``, a script's
    ``bulk_create``): those writes send no signal, so they bump the version themselves. For models whose changes
    must reach every process at once (the rights a desk socket checks on every event); not for rows written on
    every request."""

    def update(self, **kwargs: Any) -> int:
        count = super().update(**kwargs)
        if count:
            config_version_bump()
        return count

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> Any:
        created = super().bulk_create(objs, *args, **kwargs)
        if created:
            config_version_bump()
        return created

    def bulk_update(self, objs: Any, fields: Any, *args: Any, **kwargs: Any) -> int:
        count = super().bulk_update(objs, fields, *args, **kwargs)
        if count:
            config_version_bump()
        return count
