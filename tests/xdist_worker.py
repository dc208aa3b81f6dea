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

The files marked ``slow`` (they start processes or servers) are handed out first, each among the units of its
kind: a long file that starts last keeps one worker busy while the other has nothing left to do.

A file's transactional tests are a unit of their own, handed out after every file's other database tests. A
transactional test empties the worker's database when it ends (Django's flush), and with it the rows the data
migrations wrote (the groups, the ``multi_agent`` flag); pytest-django runs them after the others for that reason,
and on one process the collection order is enough. Here each worker runs the units in the order it receives them,
so the scheduler keeps that order across units: they are handed out in the collection's order, which is
pytest-django's. The controller sees node ids only, so each worker writes its tests' units to a file the controller
names (xdist's own ``@<group>`` suffix on node ids no longer reaches the scheduler with pytest 9).

Before the workers start, the controller rewrites the assertions of the test modules they will collect, once, into
pytest's own cache of rewritten modules (:func:`assertions_rewritten_ahead`): started together, each worker found the
cache empty and rewrote every module itself (about 18 s of CPU a worker for the whole suite), then read the cache.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import sys
import tempfile
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
    # The settings put numba's cache under VAR_DIR unless the environment names one: not the controller's.
    os.environ.pop("NUMBA_CACHE_DIR", None)


if WORKER:
    _share()


def flushes_the_database(item: pytest.Item) -> bool:
    """Whether pytest-django runs ``item`` as a transactional test (its database emptied when it ends)."""
    marker = item.get_closest_marker("django_db")
    if marker is not None and (marker.kwargs.get("transaction") or marker.kwargs.get("reset_sequences")):
        return True
    fixtures = getattr(item, "fixturenames", ())
    if "transactional_db" in fixtures or "live_server" in fixtures:
        return True
    test_case = getattr(item, "cls", None)
    if test_case is None:
        return False
    # Late: this plugin loads before pytest-django has configured Django (see the module's docstring).
    from django.test import TestCase, TransactionTestCase

    return issubclass(test_case, TransactionTestCase) and not issubclass(test_case, TestCase)


def unit_of_work(item: pytest.Item) -> str:
    """The unit ``item`` is handed out in: its group, its file's transactional tests, or its file."""
    for mark in item.iter_markers("xdist_group"):
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    path = item.nodeid.split("::", 1)[0]
    return f"{path} (transactional)" if flushes_the_database(item) else path


UNITS_FILE = "test_units_file"  # the key of the worker's input naming the file it writes its units to


def pytest_configure_node(node) -> None:
    """The controller tells each worker where to write its tests' units (a folder of the run's own)."""
    global _units_folder
    if _units_folder is None:
        _units_folder = Path(tempfile.mkdtemp(prefix="test-units-"))
    node.workerinput[UNITS_FILE] = str(_units_folder / f"{node.gateway.id}.json")


_units_folder: Path | None = None


def pytest_unconfigure(config: pytest.Config) -> None:
    if _units_folder is not None:
        shutil.rmtree(_units_folder, ignore_errors=True)


def slow_first(items: list[pytest.Item]) -> None:
    """Reorders ``items`` in place: the tests that keep the database's rows (pytest-django's ordinary database tests
    and the tests without a database), then the transactional ones; the ``slow`` tests first within each. The
    order is otherwise kept (a stable sort), so a file's tests stay together."""

    def key(item: pytest.Item) -> tuple[bool, bool]:
        return flushes_the_database(item), item.get_closest_marker("slow") is None

    items.sort(key=key)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every process orders the tests alike (:func:`slow_first`, after pytest-django's order); a worker writes each
    test's unit for the controller's scheduler, which sees node ids only."""
    slow_first(items)
    target = getattr(config, "workerinput", {}).get(UNITS_FILE)
    if target:
        units = {item.nodeid: unit_of_work(item) for item in items}
        Path(target).write_text(json.dumps(units), encoding="utf-8")


def pytest_xdist_make_scheduler(config, log):
    """Units of work in pytest-django's order (see the module's docstring)."""
    from xdist.scheduler import LoadScopeScheduling

    # The units keep the collection's order: reordering them by size would put a transactional unit before
    # another file's tests on the same worker.
    config.option.loadscopereorder = False

    class UnitScheduling(LoadScopeScheduling):
        units: dict[str, str] = {}

        def _split_scope(self, nodeid: str) -> str:
            if not self.units and _units_folder is not None:
                for written in sorted(_units_folder.glob("*.json")):
                    self.units.update(json.loads(written.read_text(encoding="utf-8")))
            return self.units.get(nodeid) or nodeid.split("::", 1)[0]

    return UnitScheduling(config, log)


def modules_collected(config: pytest.Config) -> list[Path]:
    """The files under the run's paths (its arguments, or ``testpaths``) named as test modules (``python_files``),
    outside the folders pytest does not collect (``norecursedirs``)."""
    patterns, skipped = config.getini("python_files"), config.getini("norecursedirs")
    root = config.invocation_params.dir
    found: set[Path] = set()
    for argument in config.args:
        path = (root / argument.split("::", 1)[0]).resolve()
        if path.is_file():
            found.add(path)
            continue
        for folder, folders, files in os.walk(path):
            folders[:] = [name for name in folders if not any(fnmatch.fnmatch(name, skip) for skip in skipped)]
            found.update(Path(folder) / name for name in files if any(fnmatch.fnmatch(name, p) for p in patterns))
    return sorted(found)


def assertions_rewritten_ahead(config: pytest.Config, modules: list[Path]) -> int:
    """Writes pytest's cached rewrite of each of ``modules`` that has none up to date, as importing it under pytest
    would (the same code, the same file); how many it wrote. Nothing when bytecode is not written or assertions not
    rewritten."""
    from _pytest.assertion import rewrite

    state = config.stash.get(rewrite.assertstate_key, None)
    if sys.dont_write_bytecode or state is None or state.mode != "rewrite":
        return 0
    written = 0
    for module in modules:
        pyc = rewrite.get_cache_dir(module) / (module.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(module, pyc) is not None or not rewrite.try_makedirs(pyc.parent):
            continue
        source_hash, code = rewrite._rewrite_test(module, config)
        written += rewrite._write_pyc(state, code, source_hash, pyc)
    return written


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """In the controller of a run on workers, before it starts them (xdist's own hook runs last)."""
    config = session.config
    if not WORKER and config.pluginmanager.has_plugin("dsession"):
        assertions_rewritten_ahead(config, modules_collected(config))
