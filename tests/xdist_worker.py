"""The suite on several processes (pytest-xdist): each worker's own share of the services, and the files kept
together on one worker.

``scripts/test`` starts one PostgreSQL and one Redis for the whole run. pytest-django gives each worker a test
database of its own (``test_platform_gw0``, ``test_platform_gw1``, …); this plugin gives each worker its own Redis
database number (the cache, the channel layer, Celery's broker and the throttles live there) and its own
``VAR_DIR`` and ``CACHE_DIR``. It must run before Django reads its settings, which pytest-django does before the
conftest files load: it is loaded with ``-p tests.xdist_worker`` (``addopts`` in pyproject.toml), and it changes
``os.environ`` so that the processes a test starts (Celery workers, servers) inherit the worker's share.

The scheduler hands out whole test files, as ``--dist loadfile`` does, so that a file's module-scoped servers and
browser start once; files marked ``pytest.mark.xdist_group(name)`` go to one worker together, with the session
fixture they share (the production-like stack, which two files use, starts once).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", … in a worker; "" in the controller or without -n
REDIS_DATABASES = 16  # Redis's default number of databases: 0 stays the run's own, workers take 1, 2, …


def worker_redis_url(url: str, index: int) -> str:
    """``url`` with the worker's database number (``index`` + 1)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{index + 1}"))


def _share() -> None:
    index = int(WORKER.removeprefix("gw"))
    if index + 1 >= REDIS_DATABASES:
        raise pytest.UsageError(f"at most {REDIS_DATABASES - 1} workers: Redis has {REDIS_DATABASES} databases")
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = worker_redis_url(os.environ["REDIS_URL"], index)
    for name in ("VAR_DIR", "CACHE_DIR"):
        if os.environ.get(name):
            folder = Path(os.environ[name]) / WORKER
            folder.mkdir(parents=True, exist_ok=True)
            os.environ[name] = str(folder)


if WORKER:
    _share()


def pytest_xdist_make_scheduler(config, log):
    """Whole files to each worker, a group's files to one (see the module's docstring)."""
    from xdist.scheduler import LoadScopeScheduling

    class FileOrGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            # xdist appends "@<group>" to the node ids of tests marked xdist_group (after any parameters' "]").
            if nodeid.rfind("@") > nodeid.rfind("]"):
                return nodeid.rsplit("@", 1)[-1]
            return nodeid.split("::", 1)[0]

    return FileOrGroupScheduling(config, log)
