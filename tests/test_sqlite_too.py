"""The tests marked ``sqlite_too`` pass on SQLite as well: the suite runs on PostgreSQL, but ``scripts/start`` (and
every laptop) runs the platform on its embedded SQLite database, where some of Django's lookups do not exist (a
History page answered 500 there, and nothing caught it).

One test here runs ``pytest -m sqlite_too`` in a subprocess (one per shard of the marked files, :data:`SHARDS`) with
the same environment, except a throwaway SQLite database and no Redis (the file cache, as ``scripts/start`` has it),
and fails naming every test that failed there.
It only collects the test files that mention the marker, so the subprocess costs its start and the marked tests
themselves: the shards copy one SQLite file ``manage.py migrate`` made once a run (``migrated_sqlite`` in
tests/platform_instance.py) instead of migrating each, and seed the demo and build the cast's ``telecom`` profile
once each, restoring them after (tests/demo_snapshot.py), as the workers on PostgreSQL do. It is not marked itself,
and it skips when the suite already runs on SQLite (the marked tests run in the session then): the subprocess never
starts another.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from django.db import connection

from tests.platform_instance import MIGRATED_SQLITE, migrated_sqlite

ROOT = Path(__file__).resolve().parent.parent
MARKER = "sqlite_too"
# A hung run must not hold the suite for ever; a slow one on a busy machine is no failure (a shard took 280 s at a load
# of 10 on two cores, about 110 s quiet): the bound is far above any run's time, never a measure of speed.
RUN_TIMEOUT_SECONDS = 1800
# The marked files are run in this many subprocesses, each a test of its own that xdist gives to any worker. Each
# shard pays its own start (Django, the collection, the demo and ``telecom`` built for real once before they are
# restored), and on two cores the suite's time is its CPU: two shards, not three (docs/benchmarks.md has the figures).
# Files are dealt to the shards by their time (:func:`file_weight`), so no shard holds the heavy ones together: dealt
# by size, one shard held the crawl, the migration test and the browser day and ran 392 s while the others ran 150 s.
SHARDS = 2
# Each shard a unit of work of its own (tests/xdist_worker.py hands out whole files otherwise): the shards start
# first on workers of their own (they are ``slow``), instead of one after the other on one.
SHARD_PARAMS = [
    pytest.param(shard, marks=pytest.mark.xdist_group(f"sqlite_too shard {shard}"), id=str(shard))
    for shard in range(SHARDS)
]

pytestmark = pytest.mark.slow  # the marked tests again, in a process of its own

# The seconds the heaviest marked files took in one run of them all on SQLite (one process, at a load of 7 to 8 on two
# cores: 443 s in all): their weight when the shards are dealt. Only the balance of the shards rests on these, never
# an outcome; a file missing here weighs its size at BYTES_PER_SECOND (the rest of that run: 524 kB in 158 s).
MEASURED_SECONDS = {
    "tests/test_role_crawl.py": 46,  # the superuser's crawl alone here
    "releases/tests/test_rollout_webhook.py": 39,  # a data migration's test, run from an earlier state
    "tests/test_editor_day_browser.py": 33,
    "tests/test_demo_snapshot.py": 21,
    "conversations/tests/test_admin_timeline_stack.py": 21,
    "tests/test_admin_smoke.py": 20,
    "conversations/tests/test_knowledge_turn.py": 19,
    "conversations/tests/test_memory_tool.py": 18,
    "conversations/tests/test_admin_tenants.py": 18,
    "routing/tests/test_routing_test_form.py": 15,
    "knowledge/tests/test_vectors.py": 14,
    "conversations/tests/test_customer_data_retention.py": 11,
    "releases/tests/test_seed_demo_once.py": 11,
}
BYTES_PER_SECOND = 3300


def file_weight(path: Path, root: Path = ROOT) -> float:
    """What ``path`` is reckoned to take on SQLite: its measured seconds, or its size at :data:`BYTES_PER_SECOND`."""
    measured = MEASURED_SECONDS.get(path.relative_to(root).as_posix())
    return float(measured) if measured is not None else path.stat().st_size / BYTES_PER_SECOND


def shard_files(files: list[Path], shard: int, shards: int = SHARDS, root: Path = ROOT) -> list[Path]:
    """The files of ``shard``: each file, heaviest first (:func:`file_weight`), goes to the shard holding the least
    weight so far."""
    held = [0.0] * shards
    dealt: list[list[Path]] = [[] for _ in range(shards)]
    for path in sorted(files, key=lambda path: (-file_weight(path, root), str(path))):
        lightest = held.index(min(held))
        dealt[lightest].append(path)
        held[lightest] += file_weight(path, root)
    return sorted(dealt[shard])


def marked_test_files(root: Path = ROOT) -> list[Path]:
    """The test files under pyproject's ``testpaths`` that mention the marker (this one aside): only they are
    collected, so the subprocess does not import the whole suite to find a few tests."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    found = set()
    for folder in config["tool"]["pytest"]["ini_options"]["testpaths"]:
        for path in (root / folder).rglob("test_*.py"):
            if path.resolve() != Path(__file__).resolve() and MARKER in path.read_text(encoding="utf-8"):
                found.add(path)
    return sorted(found)


def sqlite_environment(folder: Path) -> dict[str, str]:
    """This run's environment, on a throwaway SQLite database with its own var and cache folders and no Redis."""
    env = {name: value for name, value in os.environ.items() if name not in ("REDIS_URL", "PYTEST_ADDOPTS")}
    env.update(
        DATABASE_URL=f"sqlite:///{folder / 'db.sqlite3'}",
        VAR_DIR=str(folder / "var"),
        CACHE_DIR=str(folder / "cache"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
    )
    return env


def shard_command(files: list[Path], report: Path) -> list[str]:
    """The command that runs the marked tests of ``files`` (under :data:`ROOT`) on the database of its environment
    (:func:`sqlite_environment`, with :data:`MIGRATED_SQLITE` to copy), writing a JUnit report to ``report``."""
    return [
        sys.executable,
        "-m",
        "pytest",
        "-m",
        MARKER,
        "-q",
        "-p",
        "no:cacheprovider",
        "--reuse-db",  # the migrated copy as it is
        # No marked test uses hypothesis or faker: their plugins' imports cost each shard 1.7 s of CPU.
        *("-p", "no:hypothesispytest", "-p", "no:faker"),
        f"--junitxml={report}",
        *(str(path.relative_to(ROOT)) for path in files),
    ]


def cases(report: Path) -> list[ET.Element]:
    """The test cases of a JUnit report the subprocess of this run wrote."""
    return list(ET.parse(report).getroot().iter("testcase"))  # noqa: S314 — our own pytest's file, not untrusted


def failures(report: Path) -> list[str]:
    """``file::test`` of every test the JUnit report says failed or errored."""
    failed = []
    for case in cases(report):
        for outcome in ("failure", "error"):
            found = case.find(outcome)
            if found is not None:
                message = (found.get("message") or "").splitlines()[0][:200] if found.get("message") else outcome
                failed.append(f"{case.get('classname')}::{case.get('name')} ({message})")
                break
    return failed


@pytest.mark.parametrize("shard", SHARD_PARAMS)
@pytest.mark.timeout(RUN_TIMEOUT_SECONDS + 60)  # the run's own bound governs, not the suite's 300 s per test
def test_the_tests_marked_sqlite_too_pass_on_sqlite_as_well(tmp_path, shard):
    if connection.vendor == "sqlite":
        pytest.skip("this run is on SQLite already: the marked tests run in it")
    files = shard_files(marked_test_files(), shard)
    assert files, f"no test file of shard {shard} mentions the {MARKER} marker"
    report = tmp_path / "junit.xml"
    env = sqlite_environment(tmp_path)
    env[MIGRATED_SQLITE] = str(migrated_sqlite(env))

    run = subprocess.run(
        shard_command(files, report), cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS
    )

    output = (run.stdout + run.stderr)[-4000:]
    assert report.exists(), f"pytest on SQLite wrote no report (exit {run.returncode}):\n{output}"
    failed = failures(report)
    assert not failed, "failed on SQLite:\n" + "\n".join(failed) + f"\n\n{output}"
    assert run.returncode == 0, f"pytest on SQLite exited {run.returncode}:\n{output}"
    ran = sum(1 for case in cases(report) if case.find("skipped") is None)
    assert ran > 0, f"no test marked {MARKER} ran on SQLite:\n{output}"


def test_each_shard_is_handed_to_a_worker_as_a_unit_of_its_own():
    groups = [mark.args[0] for param in SHARD_PARAMS for mark in param.marks if mark.name == "xdist_group"]

    assert [param.values for param in SHARD_PARAMS] == [(shard,) for shard in range(SHARDS)]
    assert len(set(groups)) == len(groups) == SHARDS


def test_the_shards_share_the_files_out_without_losing_or_repeating_one(tmp_path):
    files = []
    for index, size in enumerate([900, 500, 400, 300, 100, 100]):
        path = tmp_path / f"test_{index}.py"
        path.write_text("x" * size, encoding="utf-8")
        files.append(path)

    shards = [shard_files(files, shard, shards=3, root=tmp_path) for shard in range(3)]

    assert sorted(path for shard in shards for path in shard) == sorted(files)
    assert [sum(path.stat().st_size for path in shard) for shard in shards] == [900, 700, 700]


def test_a_file_measured_slow_weighs_its_seconds_not_its_size(tmp_path):
    crawl = tmp_path / "tests" / "test_role_crawl.py"
    crawl.parent.mkdir()
    crawl.write_text("# small, yet the slowest\n", encoding="utf-8")
    measured = MEASURED_SECONDS["tests/test_role_crawl.py"]
    seconds = measured * 2 // 5  # by their size: each lighter than the crawl, the three together heavier
    others = []
    for index in range(3):
        path = tmp_path / f"test_{index}.py"
        path.write_text("x" * BYTES_PER_SECOND * seconds, encoding="utf-8")
        others.append(path)

    shards = [shard_files([crawl, *others], shard, shards=2, root=tmp_path) for shard in range(2)]

    assert file_weight(crawl, tmp_path) == measured
    assert file_weight(others[0], tmp_path) == seconds
    assert shards == [[crawl], sorted(others)]


def test_every_file_measured_is_a_marked_file_of_the_suite():
    marked = {path.relative_to(ROOT).as_posix() for path in marked_test_files()}

    assert set(MEASURED_SECONDS) <= marked, set(MEASURED_SECONDS) - marked


def test_only_files_that_mention_the_marker_are_collected(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["app"]\n', encoding="utf-8")
    (tmp_path / "app" / "tests").mkdir(parents=True)
    marked = tmp_path / "app" / "tests" / "test_pages.py"
    marked.write_text(f"import pytest\npytestmark = pytest.mark.{MARKER}\n", encoding="utf-8")
    (tmp_path / "app" / "tests" / "test_other.py").write_text("def test_x():\n    pass\n", encoding="utf-8")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "test_outside.py").write_text(f"# {MARKER}\n", encoding="utf-8")

    assert marked_test_files(tmp_path) == [marked]


def test_the_failures_of_a_report_are_named(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite><testcase classname="tests.test_admin_smoke" name="test_pages[a]"/>'
        '<testcase classname="tests.test_admin_smoke" name="test_pages[b]"><failure message="assert 500 == 200">'
        'trace</failure></testcase><testcase classname="routing.tests.test_x" name="test_y"><error message="boom"/>'
        "</testcase></testsuite></testsuites>",
        encoding="utf-8",
    )

    assert failures(report) == [
        "tests.test_admin_smoke::test_pages[b] (assert 500 == 200)",
        "routing.tests.test_x::test_y (boom)",
    ]


def test_no_marked_file_needs_a_plugin_the_shards_leave_out():
    needing = [path for path in marked_test_files() if re.search(r"\b(hypothesis|faker)\b", path.read_text())]

    assert not needing, f"a shard runs without the hypothesis and faker plugins: {needing}"


def test_a_shards_command_runs_only_the_marked_tests_of_its_files_on_the_copied_database(tmp_path):
    files = [ROOT / "tests" / "test_admin_smoke.py", ROOT / "knowledge" / "tests" / "test_search.py"]

    command = shard_command(files, tmp_path / "junit.xml")

    assert command[:3] == [sys.executable, "-m", "pytest"]
    assert command[command.index("-m", 3) + 1] == MARKER
    assert "--reuse-db" in command and f"--junitxml={tmp_path / 'junit.xml'}" in command
    assert command[-2:] == ["tests/test_admin_smoke.py", "knowledge/tests/test_search.py"]
