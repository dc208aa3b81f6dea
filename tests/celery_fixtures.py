"""A real Celery worker for the tests (see ``tests/celery_processes.py``).

* ``celery_worker`` — one worker process for the whole session, 4 prefork
  children on the default queue, against the Redis of ``REDIS_URL`` and the
  test database. Yields the :class:`~tests.celery_processes.CeleryWorkerProcess`
  (``pid``, ``log_path``, ``kill()``, ``restart()``). Skipped without
  ``REDIS_URL``: there is no broker then (``scripts/test`` always starts one).

The worker is another process with its own database connections, so it sees
only committed rows: a test that uses it must use ``transactional_db`` (or
``@pytest.mark.django_db(transaction=True)``), never the default
transaction-wrapped ``db``. A test that kills the worker restarts it before it
ends (``finally: celery_worker.restart()``), as the next test expects one.
"""

from __future__ import annotations

import os
from urllib.parse import quote

import pytest

WORKER_CONCURRENCY = 4


def worker_database_url() -> str:
    """A ``DATABASE_URL`` for the database this test run uses (``test_<name>`` once pytest-django made it)."""
    from django.db import connection

    db = connection.settings_dict
    credentials = quote(db["USER"] or "", safe="")
    if db.get("PASSWORD"):
        credentials += ":" + quote(db["PASSWORD"], safe="")
    host = f"{credentials}@" if credentials else ""
    return f"postgres://{host}{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{quote(db['NAME'], safe='')}"


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, tmp_path_factory):
    # Depending on django_db_setup makes the test database exist first, and outlive the worker's connections.
    from django.conf import settings
    from django.db import connection

    from tests.celery_processes import CeleryWorkerProcess

    if not settings.REDIS_URL:
        pytest.skip("needs a broker: set REDIS_URL, or run scripts/test, which starts a throwaway Redis")
    if connection.vendor != "postgresql":
        pytest.skip("the worker must share the test database; the suite runs on PostgreSQL (scripts/test)")

    from platform.celery import app

    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "VAR_DIR": str(settings.VAR_DIR),
        # Django's system checks cost ~0.5 s of the worker's ~1.5 s start, at every (re)start; they guard
        # deployments, and this worker runs on the test run's own settings.
        "CELERY_SKIP_CHECKS": "1",
    }
    worker = CeleryWorkerProcess(
        env=env,
        log_dir=tmp_path_factory.mktemp("celery-worker"),
        queues=(app.conf.task_default_queue,),
        concurrency=WORKER_CONCURRENCY,
    )
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()
