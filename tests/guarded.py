"""Child processes of the tests that die with the test process, however it ends (Linux).

A test run interrupted before its teardown (a SIGTERM to the test command, an xdist worker killed) must leave no
server behind: every server a test starts is :func:`guarded_popen`'s, and the kernel ends it with the process that
started it.
"""

from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

PROJECT_ROOT = Path(__file__).resolve().parent.parent

# Runs the command in place of itself once the kernel will SIGKILL it when this process dies (Linux's
# PR_SET_PDEATHSIG, kept across exec): a test run killed before its teardown leaves no child behind.
ORPHAN_GUARD = """
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
if os.getppid() != int(sys.argv[1]):
    sys.exit("the test process died before its child started")
os.execvp(sys.argv[2], sys.argv[2:])
"""
# The kernel sends that signal when the *thread* that started the child ends, not the process: a child started from
# a passing thread (asyncio.to_thread, a thread pool's) would be killed with it, silently. Every guarded child is
# started from this one thread, which lives as long as the test process.
_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="guarded-spawn")


def guarded_popen(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    log: Path | IO[bytes],
    cwd: Path | str = PROJECT_ROOT,
    new_session: bool = True,
) -> subprocess.Popen[bytes]:
    """``command``, its output in ``log`` (a path or an open file, not a pipe: nobody drains a pipe while it runs,
    and a full one would block it), killed with this process (:data:`ORPHAN_GUARD`) and never with the thread that
    asked for it (:data:`_SPAWNER`); in a session of its own unless ``new_session`` is false."""
    command = list(command)
    if sys.platform == "linux":
        command = [sys.executable, "-c", ORPHAN_GUARD, str(os.getpid()), *command]

    def popen(out: IO[bytes]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=new_session,
        )

    def spawn() -> subprocess.Popen[bytes]:
        if not isinstance(log, Path):
            return popen(log)
        with log.open("wb") as out:
            return popen(out)

    return _SPAWNER.submit(spawn).result()


def guarded_spawn(
    arguments: Sequence[str], *, env: Mapping[str, str], log_path: Path | IO[bytes], cwd: Path = PROJECT_ROOT
) -> subprocess.Popen[bytes]:
    """``python <arguments>``, guarded (:func:`guarded_popen`)."""
    return guarded_popen([sys.executable, *arguments], env=env, log=log_path, cwd=cwd)
