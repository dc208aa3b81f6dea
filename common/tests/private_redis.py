"""A redis-server of a test's own, to stop and start again on the same port (the suite's Redis stays up).

with PrivateRedis() as redis:
    redis.url        # redis://127.0.0.1:<port>/0
    redis.stop()     # SIGTERM, gone: connections are refused
    redis.start()    # back on the same port, empty (nothing is persisted)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.guarded import guarded_popen


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PrivateRedis:
    def __init__(self) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            pytest.skip("needs redis-server on PATH")
        self.port = _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._dir = tempfile.mkdtemp(prefix="private-redis-")
        self._process: subprocess.Popen | None = None

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"*1\r\n$4\r\nPING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def start(self) -> None:
        self._process = guarded_popen(  # killed with the test process, however it ends
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            env=os.environ,
            log=Path(self._dir) / "redis.log",
            cwd=self._dir,
        )
        deadline = time.monotonic() + 60  # a hang guard
        while not self.answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((Path(self._dir) / "redis.log").read_text(errors="replace"))
            time.sleep(0.02)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=20)
        self._process = None

    def __enter__(self) -> PrivateRedis:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
