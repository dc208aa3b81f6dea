"""platform.serve: workers on their own SO_REUSEPORT sockets share the connections and stop cleanly."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _workers(pid: int) -> list[int]:
    """The server's worker processes (not multiprocessing's resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            parent = int(stat[stat.rindex(")") + 2 :].split()[1])
            if parent == pid and b"spawn_main" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


def _sockets(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd).startswith("socket:")
    return count


def _get(sock: socket.socket) -> bytes:
    sock.sendall(b"GET /no-such-page HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    return sock.recv(65536)


def _serve(tmp_path, port: int, *, workers: int, **output: Any) -> subprocess.Popen:
    """``platform.serve`` on ``port`` with SQLite in ``tmp_path``, never migrated: a 404 needs no database."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VAR_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    command = [sys.executable, "-m", "platform.serve", "--host", "127.0.0.1", "--port", str(port)]
    return subprocess.Popen([*command, "--workers", str(workers)], cwd=ROOT, env=env, **output)


def test_the_workers_share_kept_alive_connections_and_stop_on_sigterm(tmp_path):
    port = _free_port()
    server = _serve(tmp_path, port, workers=2, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    connections: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            workers = _workers(server.pid)
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as probe:
                    answered = _get(probe).startswith(b"HTTP/1.1 404")
            except OSError:
                answered = False
            if answered and len(workers) == 2:
                break
            time.sleep(0.3)
        else:
            pytest.fail("platform.serve did not answer with two workers")
        time.sleep(2)  # both workers listening
        baseline = {pid: _sockets(pid) for pid in workers}

        for _ in range(40):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            assert _get(sock).startswith(b"HTTP/1.1 404")
            connections.append(sock)

        held = {pid: _sockets(pid) - baseline[pid] for pid in workers}
        assert sum(held.values()) >= 40
        assert min(held.values()) >= 5, held  # the kernel spread them; one shared socket piles them up
    finally:
        for sock in connections:
            sock.close()
        server.send_signal(signal.SIGTERM)
        status = server.wait(timeout=40)
    assert status == 0


def test_a_worker_compiles_the_routing_before_it_listens_and_starts_without_a_database(tmp_path):
    """Each worker's first message compiled the routing (half a second of CPU, every worker at once after a
    deploy) while the connections the kernel gave that worker waited: it compiles before its socket listens. A
    database that cannot be read yet (here: no tables) does not stop it; the first message compiles then. What the
    start loaded is frozen out of the collector's full passes before the socket listens too."""
    port = _free_port()
    server = _serve(tmp_path, port, workers=1, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        assert server.stdout is not None
        for line in server.stdout:
            lines.append(line)
            if "Started server process" in line:
                break
        # uvicorn says it started a moment before its socket listens (longer on a busy machine): ask until it does.
        deadline = time.monotonic() + 60  # a hang guard
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=30) as probe:
                    assert _get(probe).startswith(b"HTTP/1.1 404")
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=40)
    compiled = next(n for n, line in enumerate(lines) if "Routing not compiled at start" in line)
    frozen = next(n for n, line in enumerate(lines) if "Start-up heap frozen" in line)  # common/infra/heap.py
    started = next(n for n, line in enumerate(lines) if "Started server process" in line)
    assert compiled < frozen < started, lines
    assert "the first message compiles it" in lines[compiled]


def test_several_workers_without_redis_are_warned_about_at_start_and_know_how_many_they_are(tmp_path, monkeypatch):
    """Without REDIS_URL each worker's channel layer lives in its own memory: the desk's pushes miss the customers
    of the other workers. The server says so when it starts, and tells its workers how many they are (``--workers``
    given or not), so that their system check and /api/health say it too."""
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    server = _serve(tmp_path, _free_port(), workers=2, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        assert server.stdout is not None
        for line in server.stdout:
            lines.append(line)
            if "serving" in line:
                break
        deadline = time.monotonic() + 60
        while len(workers := _workers(server.pid)) < 2:
            assert time.monotonic() < deadline, "platform.serve did not start two workers"
            time.sleep(0.3)
        environments = [Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") for pid in workers]
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=40)
    (warning,) = [line for line in lines if line.startswith("WARNING")]
    assert "2 web workers share no channel layer" in warning and "REDIS_URL" in warning, lines
    assert all(b"WEB_CONCURRENCY=2" in environment for environment in environments)


def _scrape(port: int, token: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    response = httpx.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _metrics_directory(pid: int) -> Path:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    found = next(item for item in environ if item.startswith(b"PROMETHEUS_MULTIPROC_DIR="))
    return Path(found.split(b"=", 1)[1].decode())


def test_the_metrics_of_every_worker_add_up_in_a_directory_the_server_makes_and_removes(tmp_path, monkeypatch):
    """Without PROMETHEUS_MULTIPROC_DIR each worker would count alone and a scrape would see one worker's share."""
    token = "serve-metrics-token"
    monkeypatch.setenv("METRICS_TOKEN", token)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    port = _free_port()
    server = _serve(tmp_path, port, workers=2, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(workers := _workers(server.pid)) < 2 or not _answers(port):
            assert time.monotonic() < deadline, "platform.serve did not answer with two workers"
            time.sleep(0.3)
        time.sleep(2)  # both workers listening
        directory = _metrics_directory(workers[0])
        assert directory == _metrics_directory(workers[1]) and directory.is_dir()
        unmatched = ("platform_http_requests_total", (("method", "GET"), ("route", "unmatched"), ("status", "404")))
        before = _scrape(port, token).get(unmatched, 0.0)

        for _ in range(40):  # a connection each: the kernel spreads them over the workers' sockets
            with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
                assert _get(sock).startswith(b"HTTP/1.1 404")

        assert _scrape(port, token)[unmatched] == before + 40
        writers = {path.name.rsplit("-", 1)[-1].removesuffix(".db") for path in directory.glob("counter_*.db")}
        assert {str(pid) for pid in workers} <= writers  # both workers counted some of them
    finally:
        server.send_signal(signal.SIGTERM)
        status = server.wait(timeout=40)
    assert status == 0
    assert not directory.exists()


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as probe:
            return _get(probe).startswith(b"HTTP/1.1 404")
    except OSError:
        return False
