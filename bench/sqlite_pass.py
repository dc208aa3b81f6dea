"""The CPU of the suite's SQLite pass (tests/test_sqlite_too.py): the run's one ``migrate`` of a SQLite file, then
each shard's ``pytest -m sqlite_too`` on a copy of it, as the suite runs them.

    PYTHONPATH=. .venv/bin/python bench/sqlite_pass.py [--shards 3] [--durations 20]

The pass is the suite's largest single cost, and what it costs is CPU: on two shared cores, the wall time of a shard
says how busy the machine was more than what the shard did. So the figure is the user and system CPU of the processes
the pass starts (``migrate``, the shards, and what they start: the MCP servers, the browser), read from the kernel's
account of this process's children; the shards run one after another, each with the files and the command the suite
gives it (:func:`tests.test_sqlite_too.shard_files`, :func:`~tests.test_sqlite_too.shard_command`), without Redis,
on a database and folders of their own. A shard whose tests fail stops the benchmark with their names: a cut that
breaks a test is no cut. Compare two commits with ``bench/compare.py --bench-from-head sqlite_pass.py --figure
'SQLite pass CPU: ([0-9.]+)'``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")

from tests import test_sqlite_too as sqlite_too  # noqa: E402
from tests.platform_instance import MIGRATED_SQLITE  # noqa: E402


def children_cpu() -> float:
    """User and system CPU seconds of every child this process has waited for so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def migrate(env: dict[str, str], path: Path) -> None:
    """A migrated SQLite database at ``path``, one file (its WAL written back), as the suite's run makes it."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input"],
        cwd=ROOT,
        env={**env, "DATABASE_URL": f"sqlite:///{path}"},
        check=True,
        capture_output=True,
        timeout=600,
    )
    with contextlib.closing(sqlite3.connect(path)) as migrated:
        migrated.execute("PRAGMA journal_mode=DELETE")


def shard_run(env: dict[str, str], files: list[Path], folder: Path, durations: int) -> str:
    """One shard's tests, run to their end; its last lines of output (fails with the names of the tests that failed)."""
    report = folder / "junit.xml"
    command = sqlite_too.shard_command(files, report)
    if durations:
        command.append(f"--durations={durations}")
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    failed = sqlite_too.failures(report) if report.exists() else [f"no report (exit {run.returncode})"]
    if failed or run.returncode != 0:
        raise SystemExit("failed on SQLite:\n" + "\n".join(failed) + "\n" + (run.stdout + run.stderr)[-4000:])
    return run.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=sqlite_too.SHARDS, help="shards to deal the files to")
    parser.add_argument("--durations", type=int, default=0, help="print each shard's slowest N tests")
    args = parser.parse_args()

    files = sqlite_too.marked_test_files()
    with tempfile.TemporaryDirectory(prefix="sqlite-pass-") as scratch:
        folder = Path(scratch)
        env = sqlite_too.sqlite_environment(folder / "migrate")
        env.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8")  # the tests' MCP servers listen on loopback
        migrated = folder / "migrated.sqlite3"
        start = children_cpu()
        migrate(env, migrated)
        spent = [children_cpu() - start]
        print(f"migrate: {spent[0]:.1f} s of CPU", flush=True)
        for shard in range(args.shards):
            shard_folder = folder / f"shard-{shard}"
            shard_folder.mkdir()
            shard_env = {**sqlite_too.sqlite_environment(shard_folder), MIGRATED_SQLITE: str(migrated)}
            shard_env.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8")
            chosen = sqlite_too.shard_files(files, shard, args.shards)
            start = children_cpu()
            output = shard_run(shard_env, chosen, shard_folder, args.durations)
            spent.append(children_cpu() - start)
            summary = output.strip().splitlines()[-1] if output.strip() else ""
            print(f"shard {shard} ({len(chosen)} files): {spent[-1]:.1f} s of CPU — {summary}", flush=True)
            slowest = output.find("slowest")
            if args.durations and slowest >= 0:
                print(output[slowest:], flush=True)
    print(f"SQLite pass CPU: {sum(spent):.1f} s ({args.shards} shards)")


if __name__ == "__main__":
    main()
