"""The production web server: uvicorn workers, each listening on its own SO_REUSEPORT socket.

    python -m platform.serve [--host 0.0.0.0] [--port 8000] [--workers N] [--no-access-log]

``uvicorn --workers N`` lets its workers share one listening socket, and
whichever worker wakes first accepts a new connection. Chat clients keep
their connections alive, so connections pile onto one or two workers (200
connections opened over a second split 147/53 between two idle workers,
measured) and the busiest worker saturates its one core's worth of GIL while
the others idle. Here every worker binds its own socket with SO_REUSEPORT and
the kernel spreads new connections evenly over them (docs/benchmarks.md).

The workers are plain ``uvicorn.Server`` instances (uvloop, httptools when
installed), each listening once its application is loaded and its routing
compiled. This process only supervises: a worker that dies is replaced;
SIGTERM or SIGINT stops them all and waits for their graceful shutdown.
Defaults come from ``HOST``, ``PORT`` and ``WEB_CONCURRENCY`` (two workers per
core when unset: the chat path spends most of its time waiting, and a worker
with fewer requests in flight loses less time to its GIL). Without ``REDIS_URL``
(the embedded default) the default is one worker: the in-memory channel layer
reaches only the process it lives in, and a person's reply on the desk must
reach the customer's socket wherever it is (docs/desk.md).

The workers count their metrics in ``PROMETHEUS_MULTIPROC_DIR`` (common/infra/metrics.py), so any worker's ``/metrics``
answers for all of them. When the operator did not set it, this process makes a fresh directory for its workers
and removes it when they stop; a worker that ends is marked dead there. With ``METRICS_PORT`` (Kubernetes: each
pod scraped on its own) this process also serves its workers' figures on that port.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator

from platform import env

logger = logging.getLogger("platform.serve")

APP = "platform.asgi:application"
RESTART_PAUSE_SECONDS = 1.0
STARTUP_SECONDS = 10.0
# More than one worker over the in-memory channel layer (no REDIS_URL): said at start here, by the workers' system
# check (common.W002) and in /api/health.
PUSHES_SPLIT = (
    "{workers} web workers share no channel layer: the desk's replies, escalations and queue updates reach only the "
    "sockets of the worker that sends them"
)
PUSHES_SPLIT_HINT = "Set REDIS_URL (a channel layer every worker shares), or run one worker: WEB_CONCURRENCY=1."


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def worker(host: str, port: int, access_log: bool) -> None:
    """One uvicorn server on its own socket (runs in a spawned process)."""
    import uvicorn

    from platform.logs import uvicorn_log_config

    # uvicorn's own logging, with credentials and personal data filtered out of every line (platform/logs.py).
    config = uvicorn.Config(
        APP,
        host=host,
        port=port,
        access_log=access_log,
        lifespan="off",
        log_config=uvicorn_log_config(),
        # The client's address stays the peer's: X-Forwarded-For is read by the app alone, and only through
        # TRUSTED_PROXY_COUNT (tenants/throttles.py), never because the proxy happens to be on 127.0.0.1.
        proxy_headers=False,
    )
    # The application is loaded (Django and the language model: platform/asgi.py) and the routing compiled before
    # the socket listens: a worker that listened first would hold the connections the kernel gave it for the
    # seconds its start takes (each worker's first message compiled the routing: half a second of CPU, every
    # worker at once after a deploy), while the others answer.
    config.load()
    from common.infra.heap import heap_settle
    from routing.public import snapshot_warm

    snapshot_warm()
    heap_settle()  # what the start loaded stays out of the collector's full passes (common/infra/heap.py)
    uvicorn.Server(config).run(sockets=[_listen(host, port)])


@contextlib.contextmanager
def metrics_directory() -> Iterator[str]:
    """``PROMETHEUS_MULTIPROC_DIR`` for the workers: the operator's (shared, e.g. with Celery workers: left as it is),
    or a fresh one of this server's, set in the environment the workers inherit and removed afterwards."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        os.makedirs(given, exist_ok=True)
        yield given
        return
    path = tempfile.mkdtemp(prefix="platform-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = path
    try:
        yield path
    finally:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        shutil.rmtree(path, ignore_errors=True)


def _worker_ended(pid: int | None) -> None:
    if pid is not None:
        from common.infra.metrics import process_dead

        process_dead(pid)


def supervise(*, host: str, port: int, workers: int, access_log: bool) -> int:
    with metrics_directory(), pod_metrics():
        return _supervise(host=host, port=port, workers=workers, access_log=access_log)


@contextlib.contextmanager
def pod_metrics() -> Iterator[None]:
    """With ``METRICS_PORT`` (a pod's own metrics, Kubernetes), this process serves its workers' figures on that port
    while they run (common/infra/metrics.py, :func:`~common.infra.metrics.metrics_serve`)."""
    port = env.integer("METRICS_PORT", 0)
    if not port:
        yield
        return
    # Imported here, once metrics_directory() has set PROMETHEUS_MULTIPROC_DIR: prometheus_client picks its mode when
    # common.infra.metrics is first imported.
    from common.infra.metrics import metrics_serve

    host = env.string("METRICS_HOST", "0.0.0.0")  # noqa: S104 — a pod's port, reached by its scraper
    server = metrics_serve(host=host, port=port, token=env.string("METRICS_TOKEN"))
    logger.info("serving this host's metrics on %s:%s/metrics", host, port)
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def _supervise(*, host: str, port: int, workers: int, access_log: bool) -> int:
    """Run ``workers`` workers until SIGTERM/SIGINT; 1 if a worker died while starting, else 0."""
    _listen(host, port).close()  # fail here, once, if the address is taken or invalid
    context = multiprocessing.get_context("spawn")
    stopping = False

    def start() -> multiprocessing.process.BaseProcess:
        process = context.Process(target=worker, args=(host, port, access_log), daemon=False)
        process.start()
        return process

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # The workers' settings hold how many they are, however it was given (their check and /api/health read it).
    os.environ["WEB_CONCURRENCY"] = str(workers)
    if workers > 1 and not env.string("REDIS_URL"):
        logger.warning("%s. %s", PUSHES_SPLIT.format(workers=workers), PUSHES_SPLIT_HINT)
    processes = [start() for _ in range(workers)]
    started = time.monotonic()
    logger.info("serving %s on %s:%s with %d workers (SO_REUSEPORT)", APP, host, port, workers)
    status = 0
    while not stopping:
        time.sleep(0.2)
        for n, process in enumerate(processes):
            if stopping or process.is_alive():
                continue
            if time.monotonic() - started < STARTUP_SECONDS:
                # Dying at startup (bad settings, unreachable database) would only repeat itself.
                logger.error("worker %s exited with %s while starting; stopping", process.pid, process.exitcode)
                stopping, status = True, 1
                break
            logger.warning("worker %s exited with %s; starting another", process.pid, process.exitcode)
            _worker_ended(process.pid)
            time.sleep(RESTART_PAUSE_SECONDS)
            processes[n] = start()
    for process in processes:
        if process.is_alive():
            process.terminate()  # SIGTERM: uvicorn's graceful shutdown
    for process in processes:
        process.join(timeout=30)
        if process.is_alive():
            process.kill()
            process.join()
        _worker_ended(process.pid)
    return status


def default_workers() -> int:
    """Two workers per core with a shared channel layer (``REDIS_URL``); one without, so that pushes between the
    desk and the customers' sockets stay within the process that holds them all."""
    return 2 * (os.cpu_count() or 1) if env.string("REDIS_URL") else 1


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=env.string("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=env.integer("PORT", 8000))
    parser.add_argument("--workers", type=int, default=env.integer("WEB_CONCURRENCY", default_workers()))
    parser.add_argument("--no-access-log", dest="access_log", action="store_false", help="no line per request")
    args = parser.parse_args(argv)
    return supervise(host=args.host, port=args.port, workers=args.workers, access_log=args.access_log)


if __name__ == "__main__":
    sys.exit(main())
