"""A served process compiles its routing at start (routing.snapshot.snapshot_warm; platform/serve.py calls it)."""

from __future__ import annotations

import logging
import pickle
from dataclasses import replace

import pytest
from django.db import OperationalError, connection

from routing import snapshot


@pytest.mark.django_db(transaction=True)
def test_the_warm_up_compiles_the_routing_and_leaves_no_connection_pool_behind(telecom):
    snapshot.invalidate()

    snapshot.snapshot_warm()

    assert "telecom_contas" in snapshot._current.profiles
    # A process that forks after it (Celery's prefork pool) must not hand its children a pool with its connections.
    assert connection.connection is None
    assert connection.alias not in getattr(connection, "_connection_pools", {})
    assert snapshot.current() is snapshot._current  # the next message finds it compiled, through a new pool


def test_a_database_that_does_not_answer_yet_is_no_error_at_start(monkeypatch, caplog):
    def unreachable() -> snapshot.Snapshot:
        raise OperationalError("connection refused")

    monkeypatch.setattr(snapshot, "current", unreachable)

    with caplog.at_level(logging.WARNING, logger="routing.snapshot"):
        snapshot.snapshot_warm()

    assert "Routing not compiled at start (OperationalError: connection refused)" in caplog.text


@pytest.mark.django_db
def test_a_snapshot_another_process_built_of_the_version_read_now_is_served_without_compiling_one_of_another_is_not(
    telecom, monkeypatch
):
    """A suite's new processes are sent their parent's snapshot (compiling it costs a new process about half a
    second of CPU): served as it is while the configuration version is the one it was built of."""
    sent = pickle.loads(pickle.dumps(snapshot.current()))  # noqa: S301 — as another process sends it
    snapshot.invalidate()
    built = []
    monkeypatch.setattr(snapshot, "build", lambda **kwargs: built.append(kwargs) or sent)

    assert snapshot.adopt(sent)
    assert snapshot.current().profiles["telecom_contas"] == sent.profiles["telecom_contas"] and not built

    snapshot.invalidate()
    assert not snapshot.adopt(replace(sent, version=sent.version - 1))
    snapshot.current()
    assert len(built) == 1


@pytest.fixture
def lists_counted(monkeypatch):
    """The process's word lists not read yet (its own are back after the test), each read of them counted."""
    from agents import word_frequency

    reads: list[int] = []
    read = word_frequency._lists_read
    monkeypatch.setattr(word_frequency, "_LISTS", word_frequency._Lists())
    monkeypatch.setattr(word_frequency, "_lists_read", lambda: reads.append(1) or read())
    return reads


@pytest.mark.django_db(transaction=True)
def test_the_warm_up_reads_the_word_lists_where_a_profile_holds_knowledge_and_the_first_search_reads_none(
    telecom, lists_counted
):
    """Read at the first word weighed, the lists' child process ran inside a customer's searched message, which
    waited for it, and every other search of the process on its lock, each holding a database connection."""
    from agents.public import zipf_frequency
    from knowledge.models import KnowledgeSource
    from knowledge.public import document_ingest

    source = KnowledgeSource.objects.create(profile=telecom, name="Ajuda", language="pt")
    document_ingest(source=source, file_name="roaming.md", data=b"# Roaming\n\nO roaming custa 10 reais por dia.\n")
    snapshot.invalidate()

    snapshot.snapshot_warm()

    assert snapshot._current.knowledge == frozenset({telecom.pk}) and len(lists_counted) == 1
    assert zipf_frequency("going") > 0 and zipf_frequency("roaming") == 0.0  # what a search's first words read
    assert len(lists_counted) == 1


@pytest.mark.django_db(transaction=True)
def test_a_process_whose_profiles_hold_no_knowledge_reads_no_word_lists_at_start(telecom, lists_counted):
    snapshot.invalidate()

    snapshot.snapshot_warm()

    assert "telecom_contas" in snapshot._current.profiles and not snapshot._current.knowledge
    assert lists_counted == []
