"""The tests' own process starter (tests/guarded.py): a guarded child outlives the thread that started it
and dies with the test process."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from tests.guarded import PROJECT_ROOT, guarded_spawn

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the guard is Linux's PR_SET_PDEATHSIG")

SLEEPER = ["-c", "import time; time.sleep(600)"]  # far past the hang guard below


def gone(pid: int, within: float = 60.0) -> bool:  # a hang guard
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_child_started_from_a_thread_that_ends_lives_on(tmp_path):
    started: list[subprocess.Popen[bytes]] = []

    def start_and_linger() -> None:  # as asyncio.to_thread's pool thread does, until the loop shuts it down
        started.append(guarded_spawn(SLEEPER, env=os.environ, log_path=tmp_path / "log"))
        time.sleep(1.0)  # long enough for the guard to have set its death signal

    thread = threading.Thread(target=start_and_linger)
    thread.start()
    thread.join()
    (child,) = started
    try:
        time.sleep(0.3)
        assert child.poll() is None, f"the child died with its thread: {child.returncode}"
    finally:
        child.kill()
        child.wait()


def test_a_child_dies_with_the_process_that_started_it(tmp_path):
    starter = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from tests.guarded import guarded_spawn\n"
        f"child = guarded_spawn({SLEEPER!r}, env=os.environ, log_path=Path(sys.argv[1]))\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(0.5)\n"
        "os._exit(0)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", starter, str(tmp_path / "log")], env=env, capture_output=True, text=True, timeout=30
    )
    child_pid = int(result.stdout.split()[0])

    assert gone(child_pid), f"the child {child_pid} outlived the process that started it"
