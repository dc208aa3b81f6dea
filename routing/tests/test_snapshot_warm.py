"""A served process compiles its routing at start (routing.snapshot.snapshot_warm; platform/serve.py calls it)."""

from __future__ import annotations

import logging

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
