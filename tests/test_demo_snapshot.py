"""The demo seeded once per worker (tests/demo_snapshot.py): a restore is what a real seed makes, and only where the
database holds what the first seed started from; on SQLite as well (the embedded default's runs restore it too). In a
transactional test a restore commits, unless the real call left work for its commit besides the version's."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from auditlog.models import LogEntry
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.cache import cache
from django.core.management import call_command
from django.db import connections, models, transaction
from django.utils import timezone

from agents.models import AgentProfile
from common.config_version import CACHE_KEY
from common.models import ConfigVersion
from knowledge.search import knowledge_search
from routing.models import RolloutFlag
from tests.demo_snapshot import (
    APPENDED,
    ENV_SWITCH,
    counts,
    demo_seed,
    forget,
    replayed,
    sequences,
    sequences_set,
    served,
)
from tests.factories import AgentProfileFactory, SpecialistFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def snapshots_on(monkeypatch):
    """These tests are of the snapshots, whatever the run's ``TEST_DEMO_SNAPSHOT``."""
    monkeypatch.setenv(ENV_SWITCH, "1")


def records_kept_if_they_serve() -> None:
    """Keep this worker's records where one restores the demo on the present content, so the test's first seed is a
    restore; else drop them all, so its first seed, real, is recorded (a key holds at most MAX_SNAPSHOTS_PER_KEY)."""
    if not served():
        forget()


@contextmanager
def rolled_back() -> Iterator[None]:
    """A block whose writes are undone at its end, as a test's are (a savepoint of the test's transaction)."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def rows_by_table() -> dict[str, list[tuple]]:
    """Every table's rows by primary key, their timestamps aside (a real seed stamps its own time), and the
    configuration version's counter aside (it only ever moves on); the field history's ids aside too (a restore
    adds its entries under new ids: :data:`tests.demo_snapshot.APPENDED`)."""
    out: dict[str, list[tuple]] = {}
    for model in apps.get_models(include_auto_created=True):
        meta = model._meta
        if meta.proxy or not meta.managed or model is ConfigVersion:
            continue
        fields = [
            f.attname
            for f in meta.concrete_fields
            if not isinstance(f, models.DateTimeField) and not (f.primary_key and meta.db_table in APPENDED)
        ]
        out[meta.db_table] = list(model._base_manager.order_by("pk").values_list(*fields))
    return out


def searched() -> list[tuple[str, str]]:
    """What a help centre's search finds: on SQLite, through the full-text index that triggers on the passages keep."""
    profile = AgentProfile.objects.get(agent_id="retail_orders")
    hits = knowledge_search(profile=profile, query="quero trocar o tamanho do tênis", language="pt")
    return [(hit.file_name, hit.heading) for hit in hits]


@pytest.mark.sqlite_too  # the rows as SQLite stores them, its counters and its full-text index's triggers
def test_a_restored_demo_holds_the_rows_a_real_seed_makes_table_by_table(monkeypatch):
    forget()
    start = sequences()
    with rolled_back():
        first = demo_seed()  # for real, and recorded
    real, restored = counts()

    with rolled_back():
        again = demo_seed()
        from_snapshot = rows_by_table()
        found_restored = searched()
    assert counts() == (real, restored + 1)
    assert again == first

    monkeypatch.setenv(ENV_SWITCH, "0")
    with rolled_back():
        sequences_set(start)  # the same ids as the first seed's
        demo_seed()
        seeded = rows_by_table()
        found_seeded = searched()
    assert counts() == (real + 1, restored + 1)  # switched off, a seed is real though the record just served

    assert from_snapshot.keys() == seeded.keys()
    for table, rows in seeded.items():
        assert from_snapshot[table] == rows, table
    assert found_restored == found_seeded != []
    assert AgentProfile.objects.count() == 0  # each block was rolled back


def test_a_database_holding_something_the_demo_reads_is_seeded_for_real():
    records_kept_if_they_serve()
    with rolled_back():
        demo_seed()
    real, restored = counts()

    with rolled_back():
        AgentProfile.objects.create(agent_id="retail_orders", name="Our own retail profile")
        out = demo_seed().stdout
        assert "retail_orders: already there: left as it is" in out
        assert AgentProfile.objects.get(agent_id="retail_orders").name == "Our own retail profile"
    assert counts() == (real + 1, restored)


def test_rows_in_a_table_the_demo_never_reads_keep_the_snapshot_and_stay():
    records_kept_if_they_serve()
    with rolled_back():
        demo_seed()
    real, restored = counts()

    with rolled_back():
        # A staff account: the demo never reads them (it reads tenants: its saved tests play turns).
        get_user_model().objects.create(username="someone_else")
        demo_seed()
        assert get_user_model().objects.filter(username="someone_else").exists()
        assert AgentProfile.objects.filter(agent_id="telecom_contas").exists()
    assert counts() == (real, restored + 1)


def test_history_entries_written_before_keep_the_snapshot_and_the_demos_come_after_them():
    records_kept_if_they_serve()
    with rolled_back():
        demo_seed()
        made = LogEntry.objects.count()
    real, restored = counts()

    with rolled_back():
        # An entry a test's own fixtures left before the demo (a flag they switched on, say).
        written = LogEntry.objects.create(
            content_type=ContentType.objects.get_for_model(RolloutFlag),
            object_pk="1",
            object_id=1,
            object_repr="ours",
            action=LogEntry.Action.CREATE,
            changes={"key": ["None", "ours"]},
        )
        demo_seed()
        assert counts() == (real, restored + 1)
        assert LogEntry.objects.get(pk=written.pk) == written
        demos = LogEntry.objects.exclude(pk=written.pk)
        assert demos.count() == made
        assert min(demos.values_list("pk", flat=True)) > written.pk
        assert min(demos.values_list("timestamp", flat=True)) >= written.timestamp


def history_entry(name: str, **fields) -> LogEntry:
    return LogEntry.objects.create(
        content_type=ContentType.objects.get_for_model(RolloutFlag),
        object_pk=name,
        object_id=1,
        object_repr=name,
        action=LogEntry.Action.CREATE,
        changes={"key": ["None", name]},
        **fields,
    )


@pytest.mark.sqlite_too  # the times as SQLite stores them
def test_an_entry_written_after_a_restore_is_the_latest_however_long_the_recorded_call_took():
    def call() -> None:  # a call whose entries span ten seconds (a seed on a busy machine)
        history_entry("first", timestamp=timezone.now() - dt.timedelta(seconds=10))
        history_entry("last")

    with rolled_back():
        replayed(("entries spanning seconds",), call, keep=lambda result: None, revive=lambda kept: None)
    real, restored = counts()

    with rolled_back():
        history_entry("before")  # one of the test's own fixtures', written before the restore
        replayed(("entries spanning seconds",), call, keep=lambda result: None, revive=lambda kept: None)
        after = history_entry("after")

        assert counts() == (real, restored + 1)
        by_time = list(LogEntry.objects.order_by("timestamp", "pk").values_list("object_repr", flat=True))
        assert by_time == ["before", "first", "last", "after"]
        assert LogEntry.objects.latest("timestamp") == after


def profile_built() -> AgentProfile:
    """A small build of the ``telecom`` fixture's kind: a profile and its fallback specialist."""
    profile = AgentProfileFactory(agent_id="snapshot_committed", name="Committed")
    profile.fallback_specialist = SpecialistFactory(profile=profile, name="support_agent")
    profile.save(update_fields=["fallback_specialist"])
    return profile


def profile_replayed(build=profile_built) -> AgentProfile:
    def revive(pk: int) -> AgentProfile:
        return AgentProfile.objects.get(pk=pk)

    return replayed(("committed profile",), build, keep=lambda profile: profile.pk, revive=revive)


def flush() -> None:
    """As a transactional test's end does: the same content before each build."""
    call_command("flush", verbosity=0, interactive=False, reset_sequences=False)


def seen_from_another_connection(pk: int) -> bool:
    """Whether a thread's own connection reads the profile: only committed rows are there to read."""
    seen: list[bool] = []

    def read() -> None:
        try:
            seen.append(AgentProfile.objects.filter(pk=pk, fallback_specialist__isnull=False).exists())
        finally:
            connections.close_all()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    return seen == [True]


@pytest.mark.django_db(transaction=True)
def test_in_a_transactional_test_a_build_comes_back_committed_from_its_snapshot_with_its_version_published():
    forget()
    flush()
    first = profile_replayed()  # for real, and recorded
    built = rows_by_table()
    real, restored = counts()
    flush()
    cache.delete(CACHE_KEY)

    again = profile_replayed()

    assert counts() == (real, restored + 1)
    assert again.pk == first.pk and rows_by_table() == built
    assert not transaction.get_connection().in_atomic_block and seen_from_another_connection(again.pk)
    assert cache.get(CACHE_KEY) == ConfigVersion.objects.get(pk=1).version  # published on the restore's commit


@pytest.mark.django_db(transaction=True)
def test_a_build_that_left_other_work_for_its_commit_is_made_for_real_in_a_transactional_test_only():
    ran: list[int] = []

    def build() -> AgentProfile:
        profile = profile_built()
        transaction.on_commit(lambda: ran.append(profile.pk))  # a task sent, an event pushed
        return profile

    forget()
    flush()
    profile_replayed(build)
    real, restored = counts()
    flush()

    profile_replayed(build)
    assert counts() == (real + 1, restored) and len(ran) == 2  # its commit's work ran again
    flush()

    with transaction.atomic():  # a test's transaction, as a ``db`` test's: nothing commits, the snapshot serves
        profile_replayed(build)
        transaction.set_rollback(True)
    assert counts() == (real + 1, restored + 1) and len(ran) == 2


@pytest.mark.django_db(transaction=True)
def test_a_build_recorded_before_the_content_types_changed_is_made_for_real_though_it_read_them_from_the_cache():
    forget()
    flush()
    ContentType.objects.get_for_models(*apps.get_models())  # cached: the build's history entries read none
    profile_replayed()
    real, restored = counts()
    flush()
    ContentType.objects.exclude(app_label__in=["agents", "auditlog", "auth", "contenttypes"]).first().delete()

    profile_replayed()
    assert counts() == (real + 1, restored)
