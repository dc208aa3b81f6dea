"""Celery task outcomes reach the metrics from a real worker's pool processes, through PROMETHEUS_MULTIPROC_DIR."""

from __future__ import annotations

import os
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from platform.celery import app

pytestmark = pytest.mark.slow

QUEUE = "metrics-outcomes"
ROUND_TRIP_TIMEOUT = 20


@pytest.fixture
def metrics_worker(django_db_setup, tmp_path, settings):
    """A worker of its own on a queue of its own, counting into ``tmp_path / "metrics"``."""
    from tests.celery_fixtures import worker_database_url
    from tests.celery_processes import CeleryWorkerProcess

    if not settings.REDIS_URL:
        pytest.skip("needs a broker: set REDIS_URL, or run scripts/test, which starts a throwaway Redis")
    directory = tmp_path / "metrics"
    directory.mkdir()
    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "VAR_DIR": str(settings.VAR_DIR),
        "CELERY_SKIP_CHECKS": "1",
        "PROMETHEUS_MULTIPROC_DIR": str(directory),
    }
    worker = CeleryWorkerProcess(env=env, log_dir=tmp_path / "worker", queues=(QUEUE,), concurrency=2)
    worker.start()
    try:
        yield directory
    finally:
        worker.stop()


def outcomes(directory, monkeypatch) -> dict[tuple[str, str], float]:
    """``platform_celery_tasks_total`` as ``/metrics`` shows it when it reads ``directory``."""
    from common.infra.metrics import metrics_exposition

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(directory))
    text = metrics_exposition().decode()
    return {
        (sample.labels["task"], sample.labels["state"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "platform_celery_tasks_total"
    }


def test_successes_and_failures_are_counted_per_task_across_the_pool(metrics_worker, monkeypatch):
    succeeded = [app.send_task("celery.accumulate", args=(n,), queue=QUEUE) for n in range(3)]
    failed = app.send_task("conversations.goal_step", args=({},), queue=QUEUE)  # no endpoint: a KeyError

    assert [result.get(timeout=ROUND_TRIP_TIMEOUT) for result in succeeded] == [[0], [1], [2]]
    with pytest.raises(KeyError):
        failed.get(timeout=ROUND_TRIP_TIMEOUT)

    # Celery stores a result before it sends the outcome's signal: the count may follow the result by a moment.
    expected = {("celery.accumulate", "success"): 3, ("conversations.goal_step", "failure"): 1}
    deadline = time.monotonic() + 60  # a hang guard
    while (counted := outcomes(metrics_worker, monkeypatch)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    assert counted[("celery.accumulate", "success")] == 3
    assert counted[("conversations.goal_step", "failure")] == 1
    assert ("conversations.goal_step", "success") not in counted
