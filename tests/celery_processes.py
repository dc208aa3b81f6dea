"""Start a real Celery worker process, for tests.

    worker = CeleryWorkerProcess(env=env, log_dir=tmp_dir).start()
    worker.pid, worker.log_path, worker.hostname
    worker.kill()      # SIGKILL, main process and pool children at once: a worker lost mid-task
    worker.restart()   # a new worker with the same settings, back once it answers a ping
    worker.stop()

The worker is ``python -m celery -A platform worker`` with a prefork pool,
started in a session of its own so that :meth:`CeleryWorkerProcess.kill` can
take the pool children down with it. It is ready when it answers
``app.control.ping`` addressed to its own node name (unique per start, so a
reply can only come from this process). If it dies or stays silent,
:class:`CeleryWorkerStartError` says so with the worker's log.

It talks to the broker and reads the database named in ``env``, not in this
process's settings: the caller points ``DATABASE_URL`` at the test database.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.guarded import PROJECT_ROOT, guarded_spawn

# Start-up flags. Mingle (asking the other workers for revoked ids at start) costs a broker round trip
# and a wait for replies that never come; gossip and heartbeats are events only a monitor would read.
FAST_START = ("--without-gossip", "--without-mingle", "--without-heartbeat")


def celery_spawn(arguments: Sequence[str], *, env: Mapping[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    """``python -m celery -A platform <arguments>``, guarded (:func:`guarded_spawn`)."""
    env = dict(env)
    # The project root first: its platform/ package stands in for the stdlib module.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")
    return guarded_spawn(["-m", "celery", "-A", "platform", *arguments], env=env, log_path=log_path)


class CeleryWorkerStartError(RuntimeError):
    """The worker did not come up; the message carries its log."""


class CeleryWorkerProcess:
    """One ``celery worker`` in a subprocess. ``start()`` returns once it answers; ``stop()`` always cleans up."""

    def __init__(
        self,
        *,
        env: Mapping[str, str],
        log_dir: Path,
        queues: Sequence[str] = ("celery",),
        concurrency: int = 4,
        startup_timeout: float = 60.0,
        grace_period: float = 10.0,
    ) -> None:
        self.env = dict(env)
        self.log_dir = Path(log_dir)
        self.queues = tuple(queues)
        self.concurrency = concurrency
        self.startup_timeout = startup_timeout
        self.grace_period = grace_period
        self.hostname = ""
        self.log_path: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.startup_seconds: float | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def output(self) -> str:
        """The current worker's log so far."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def start(self) -> CeleryWorkerProcess:
        if self.alive():
            raise RuntimeError(f"Celery worker {self.hostname} is already running (pid {self.pid})")
        self.starts += 1
        self.hostname = f"pytest-{os.getpid()}-{secrets.token_hex(3)}@{socket.gethostname()}"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"celery-worker-{self.starts}.log"
        arguments = [
            "worker",
            "--loglevel=INFO",
            "--pool=prefork",
            f"--concurrency={self.concurrency}",
            "-Q",
            ",".join(self.queues),
            "-n",
            self.hostname,
            *FAST_START,
        ]
        began = time.monotonic()
        self.process = celery_spawn(arguments, env=self.env, log_path=self.log_path)
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait_until_ready(self) -> None:
        from platform.celery import app

        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise CeleryWorkerStartError(
                    f"Celery worker {self.hostname} exited with status {code} while starting.\n"
                    f"--- its log ({self.log_path}) ---\n{self.output()}"
                )
            # With a destination, ping returns as soon as that one worker replies.
            if app.control.ping(destination=[self.hostname], timeout=0.25):
                return
            if time.monotonic() > deadline:
                raise CeleryWorkerStartError(
                    f"Celery worker {self.hostname} did not answer a ping within {self.startup_timeout:g}s.\n"
                    f"--- its log ({self.log_path}) ---\n{self.output()}"
                )

    def kill(self) -> None:
        """SIGKILL the worker and its pool children: running tasks die unacknowledged, as on a lost machine."""
        process = self.process
        if process is None:
            return
        self._signal_group(signal.SIGKILL)
        process.wait()

    def restart(self) -> CeleryWorkerProcess:
        """Stop the worker if it still runs (warm), then start a new one under a new node name."""
        self.stop()
        return self.start()

    def stop(self) -> None:
        """Warm shutdown (running tasks finish) within the grace period, then SIGKILL whatever is left."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=self.grace_period)
        self._signal_group(signal.SIGKILL)  # pool children outlive a main process that did not shut down cleanly
        process.wait()
        self.process = None

    def _signal_group(self, signum: int) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)  # the worker leads its own session (start_new_session)


class CeleryBeatProcess:
    """``celery -A platform beat`` in a subprocess (the schedule of platform/settings.py, its file in ``log_dir``).

    ``start()`` returns once beat logs that it is starting; ``stop()`` always cleans up. It reads its settings
    (``ROLLOUT_EVALUATE_SECONDS``: how often it sends the rollout guard's task) from ``env``.
    """

    def __init__(self, *, env: Mapping[str, str], log_dir: Path, startup_timeout: float = 60.0) -> None:
        self.env = dict(env)
        self.log_dir = Path(log_dir)
        self.startup_timeout = startup_timeout
        self.log_path = self.log_dir / "celery-beat.log"
        self.process: subprocess.Popen[bytes] | None = None

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def start(self) -> CeleryBeatProcess:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        schedule = str(self.log_dir / "celerybeat-schedule")
        self.process = celery_spawn(
            ["beat", "--loglevel=INFO", "--schedule", schedule], env=self.env, log_path=self.log_path
        )
        deadline = time.monotonic() + self.startup_timeout
        while "beat: Starting" not in self.output():
            if self.process.poll() is not None or time.monotonic() > deadline:
                output = self.output()
                self.stop()
                raise CeleryWorkerStartError(f"Celery beat did not start.\n--- its log ---\n{output}")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        self.process = None
