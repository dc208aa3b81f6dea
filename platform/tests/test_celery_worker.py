"""The test suite's Celery worker is a real process that runs tasks sent through Redis and hands results back.

The tasks are Celery's own (``celery.accumulate`` returns its arguments), so
these tests need no task of the project's.
"""

from __future__ import annotations

import pytest
from celery import group

from platform.celery import app

pytestmark = pytest.mark.slow

ROUND_TRIP_TIMEOUT = 10


def tasks_run_by(worker) -> dict[str, int]:
    stats = app.control.inspect([worker.hostname], timeout=2).stats() or {}
    return stats.get(worker.hostname, {}).get("total", {})


def test_the_worker_answers_a_ping(celery_worker):
    assert app.control.ping(destination=[celery_worker.hostname], timeout=2) == [
        {celery_worker.hostname: {"ok": "pong"}}
    ]


def test_a_task_sent_by_name_runs_on_the_worker_and_its_result_comes_back(celery_worker):
    before = tasks_run_by(celery_worker).get("celery.accumulate", 0)

    result = app.send_task("celery.accumulate", args=(1, 2))

    assert result.get(timeout=ROUND_TRIP_TIMEOUT) == [1, 2]
    assert result.state == "SUCCESS"
    assert tasks_run_by(celery_worker)["celery.accumulate"] == before + 1


def test_a_group_comes_back_in_order(celery_worker):
    signatures = [app.signature("celery.accumulate", args=(n,), kwargs={"index": 0}) for n in range(8)]

    results = group(signatures).apply_async()

    assert results.get(timeout=ROUND_TRIP_TIMEOUT, interval=0) == list(range(8))


def test_a_killed_worker_is_replaced_by_a_new_process(celery_worker):
    old_pid, old_name = celery_worker.pid, celery_worker.hostname
    try:
        celery_worker.kill()
        assert not celery_worker.alive()
    finally:
        celery_worker.restart()

    assert celery_worker.pid != old_pid
    assert app.control.ping(destination=[celery_worker.hostname], timeout=2)
    assert app.control.ping(destination=[old_name], timeout=0.5) == []
    assert app.send_task("celery.accumulate", args=(3,)).get(timeout=ROUND_TRIP_TIMEOUT) == [3]
