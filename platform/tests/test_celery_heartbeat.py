"""The worker's liveness is its own, not its broker's: a real worker keeps touching its heartbeat file while its Redis
is down (platform/celery.py, ``Heartbeat``), which the Kubernetes and compose probes read."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from common.tests.private_redis import PrivateRedis
from platform.celery import HEARTBEAT_FILE, HEARTBEAT_SECONDS
from tests.celery_processes import celery_spawn

pytestmark = pytest.mark.slow

# Generous: a start on a busy machine (the worker loads the language model first), and each wait for a touch.
START_TIMEOUT = 120.0
TOUCH_TIMEOUT = 20 * HEARTBEAT_SECONDS


def wait_for(condition, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(
                f"{what}: not within {timeout:g} s.\n--- the worker's log ---\n{log.read_text(errors='replace')}"
            )
        time.sleep(0.1)


def test_the_worker_keeps_its_heartbeat_through_a_redis_outage(tmp_path):
    heartbeat = tmp_path / HEARTBEAT_FILE.name  # the worker's temporary directory is tmp_path (TMPDIR)
    log = tmp_path / "worker.log"
    with PrivateRedis() as redis:
        env = {
            **os.environ,
            "REDIS_URL": redis.url,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",  # its routing is not compiled: it says so, runs on
            "VAR_DIR": str(tmp_path / "var"),
            "CACHE_DIR": str(tmp_path / "cache"),
            "CELERY_SKIP_CHECKS": "1",
            "TMPDIR": str(tmp_path),
        }
        worker = celery_spawn(
            ["worker", "--pool=solo", "--loglevel=INFO", "--without-gossip", "--without-mingle"],
            env=env,
            log_path=log,
        )
        try:
            wait_for(lambda: " ready." in log.read_text(errors="replace"), START_TIMEOUT, "the worker's start", log)
            assert heartbeat.exists()

            redis.stop()
            wait_for(
                lambda: "Cannot connect to redis" in log.read_text(errors="replace"),
                TOUCH_TIMEOUT,
                "the worker sees the outage",
                log,
            )
            for _touch in range(2):
                seen = heartbeat.stat().st_mtime_ns
                wait_for(
                    lambda seen=seen: heartbeat.stat().st_mtime_ns > seen, TOUCH_TIMEOUT, "a touch in the outage", log
                )

            assert worker.poll() is None
            assert "Cannot connect to redis" in log.read_text(errors="replace").rsplit(" ready.", 1)[1]
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
