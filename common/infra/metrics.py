"""The platform's Prometheus metrics, defined once, and the cheap helpers that record them (docs/observability.md).

Each helper keeps the labelled children it has made (``.labels()`` is a lock and a dict lookup per call in
prometheus_client; here a repeated label set is one dict read), so a recording costs a few microseconds: the message
path records one request, one turn and its handoffs. Labels are bounded: routes are URL patterns, never paths;
profiles, models, tools and task names come from the configuration; no conversation key or user id is a label.

Two modes, chosen when this module is first imported, as prometheus_client chooses:

* ``PROMETHEUS_MULTIPROC_DIR`` set (``python -m platform.serve`` sets it for its workers when the operator did not):
  every process writes its figures to files there, named by host and process id so containers sharing the directory
  (web and Celery workers on one volume) never share a file; :func:`metrics_exposition` merges every file, so any
  process serves the figures of all.
* unset: a plain registry in this process (tests, ``runserver``).

Where they are scraped: docker-compose shares one directory between web and Celery containers, and any web worker's
``/metrics`` answers for the whole deployment. On Kubernetes, pods share nothing: ``METRICS_PORT`` makes the process
that supervises a pod's processes (``python -m platform.serve``, a Celery worker's main process) serve that pod's
figures on a port of its own (:func:`metrics_serve`), from a directory only that pod's processes write, and each pod
is scraped on its own (docs/operations.md, "Kubernetes").

The Celery queue's length is read from Redis when scraped (:class:`QueueDepth`), never stored.
"""

from __future__ import annotations

import hmac
import os
import socket
import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, values
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# A label value that stands for any value outside the bounded set (an unknown HTTP method, an unresolved path).
OTHER = "other"
UNMATCHED = "unmatched"
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def multiprocess_dir() -> str:
    """The directory of the processes' figures, or "" in single-process mode."""
    return os.environ.get(MULTIPROC_ENV, "")


_host = socket.gethostname().replace("_", "-")
_process = [f"{_host}-{os.getpid()}"]  # this process's identifier, made again in a forked child (_forked)


def _forked() -> None:
    _process[0] = f"{_host}-{os.getpid()}"


os.register_at_fork(after_in_child=_forked)


def process_identifier() -> str:
    """``<host>-<pid>``: distinct for every live process of every container that shares the directory (pids repeat
    across containers). prometheus_client asks on every write, to notice a fork (its default asks ``os.getpid``, a
    system call: about 0.6 µs on a sandboxed host, six a served message); the text is made when the process starts
    and again in a child forked from it (Celery's pool, ``multiprocessing``'s fork), so a write makes no call."""
    return _process[0]


def process_dead(pid: int) -> None:
    """Bookkeeping for a process of this host that ended (prometheus_client's ``mark_process_dead``)."""
    path = multiprocess_dir()
    if path:
        mark_process_dead(f"{_host}-{pid}", path)


if multiprocess_dir():
    # Before the first metric is made: prometheus_client picks the value class when a metric is created.
    values.ValueClass = values.MultiProcessValue(process_identifier)

# Where this process's metrics are registered; in multiprocess mode the scrape reads the files instead.
REGISTRY = CollectorRegistry(auto_describe=True)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0)

HTTP_REQUESTS = Counter(
    "platform_http_requests",
    "HTTP requests answered, by route (URL pattern), method and status.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    "platform_http_request_duration_seconds",
    "Seconds from the request reaching Django's middleware to its response (a stream's first byte).",
    ["route", "method"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
TURNS = Counter(
    "platform_turns",
    "Turns answered and stored, by profile, mode and routing method.",
    ["profile", "mode", "method"],
    registry=REGISTRY,
)
TURN_DURATION = Histogram(
    "platform_turn_duration_seconds",
    "A turn's stored latency (the graph's nodes and any wait for an earlier message), by profile and mode.",
    ["profile", "mode"],
    buckets=MODEL_BUCKETS,
    registry=REGISTRY,
)
MODEL_DURATION = Histogram(
    "platform_model_call_duration_seconds",
    "Seconds of one call to a model endpoint, by model and outcome (ok, error).",
    ["model", "outcome"],
    buckets=MODEL_BUCKETS,
    registry=REGISTRY,
)
MODEL_TOKENS = Counter(
    "platform_model_tokens",
    "Tokens the model reported (usage), by model and kind (prompt, completion).",
    ["model", "kind"],
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "platform_mcp_tool_calls",
    "MCP tool calls, by tool and status (ok, error, timeout, unavailable, invalid_arguments).",
    ["tool", "status"],
    registry=REGISTRY,
)
TOOL_DURATION = Histogram(
    "platform_mcp_tool_call_duration_seconds",
    "Seconds of one MCP tool call, by tool.",
    ["tool"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
HANDOFFS = Counter(
    "platform_handoffs",
    "Handoffs recorded in agent_handoffs, by kind and status.",
    ["kind", "status"],
    registry=REGISTRY,
)

# A metric without labels has its value from the start, and in multiprocess mode a file: every process that imports
# this module (a health check's ``celery inspect ping`` every 30 s) would leave one. So this one is made when first
# needed (:func:`ticket_wait_observe`); the others make files only for the label sets they record.
_ticket_wait: list[Histogram] = []
_ticket_wait_lock = threading.Lock()


def _ticket_wait_histogram() -> Histogram:
    with _ticket_wait_lock:
        if not _ticket_wait:
            _ticket_wait.append(
                Histogram(
                    "platform_ticket_wait_seconds",
                    "Seconds a turn waited for its ticket while an earlier message of its conversation was answered "
                    "(observed only for turns that waited).",
                    buckets=LATENCY_BUCKETS,
                    registry=REGISTRY,
                )
            )
    return _ticket_wait[0]


CELERY_TASKS = Counter(
    "platform_celery_tasks",
    "Celery task outcomes, by task name and state (success, failure, retry).",
    ["task", "state"],
    registry=REGISTRY,
)


class _Children:
    """A metric's labelled children, kept by label values."""

    __slots__ = ("children", "metric")

    def __init__(self, metric: Any) -> None:
        self.metric = metric
        self.children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *labels: str) -> Any:
        child = self.children.get(labels)
        if child is None:
            child = self.children[labels] = self.metric.labels(*labels)
        return child


_requests = _Children(HTTP_REQUESTS)
_request_durations = _Children(HTTP_DURATION)
_turns = _Children(TURNS)
_turn_durations = _Children(TURN_DURATION)
_model_durations = _Children(MODEL_DURATION)
_model_tokens = _Children(MODEL_TOKENS)
_tool_calls = _Children(TOOL_CALLS)
_tool_durations = _Children(TOOL_DURATION)
_handoffs = _Children(HANDOFFS)
_tasks = _Children(CELERY_TASKS)


def http_request_observe(route: str, method: str, status: int, seconds: float) -> None:
    """One answered request: ``route`` is the resolved URL pattern (:data:`UNMATCHED` when none matched)."""
    method = method if method in HTTP_METHODS else OTHER
    _requests(route, method, str(status)).inc()
    _request_durations(route, method).observe(seconds)


def turn_observe(profile: str, mode: str, method: str, seconds: float, handoffs: Iterable[tuple[str, str]]) -> None:
    """One stored turn and the handoffs it recorded (``(kind, status)`` each)."""
    _turns(profile, mode, method).inc()
    _turn_durations(profile, mode).observe(seconds)
    for kind, status in handoffs:
        _handoffs(kind, status).inc()


def model_call_observe(model: str, seconds: float, *, ok: bool = True, usage: dict[str, Any] | None = None) -> None:
    """One model call; ``usage``: the reply's ``usage_metadata`` (``input_tokens``, ``output_tokens``) if reported."""
    _model_durations(model, "ok" if ok else "error").observe(seconds)
    if usage:
        _model_tokens(model, "prompt").inc(usage.get("input_tokens") or 0)
        _model_tokens(model, "completion").inc(usage.get("output_tokens") or 0)


def tool_call_observe(tool: str, status: str, seconds: float) -> None:
    _tool_calls(tool, status).inc()
    _tool_durations(tool).observe(seconds)


def ticket_wait_observe(seconds: float) -> None:
    (_ticket_wait[0] if _ticket_wait else _ticket_wait_histogram()).observe(seconds)


def celery_task_observe(task: str, state: str) -> None:
    _tasks(task, state).inc()


class QueueDepth:
    """``platform_celery_queue_length{queue}``: the broker's list length, read when scraped. Nothing without a
    Redis broker; a broker that does not answer within a second leaves the figure out of that scrape."""

    def __init__(self) -> None:
        self._clients: dict[str, Any] = {}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from django.conf import settings

        url = getattr(settings, "CELERY_BROKER_URL", "") or ""
        if not url.startswith(("redis://", "rediss://", "unix://")):
            return
        queue = getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "") or "celery"
        family = GaugeMetricFamily(
            "platform_celery_queue_length", "Tasks waiting in the Celery queue (the broker's list).", labels=["queue"]
        )
        try:
            family.add_metric([queue], float(self._client(url).llen(queue)))
        except Exception:  # noqa: BLE001 — a scrape never fails for the broker: the figure is left out
            return
        yield family

    def _client(self, url: str) -> Any:
        client = self._clients.get(url)
        if client is None:
            import redis

            client = self._clients[url] = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
        return client


queue_depth = QueueDepth()


def metrics_exposition() -> bytes:
    """The text every process's figures make (multiprocess mode) or this process's, plus the queue's length."""
    registry = CollectorRegistry()
    path = multiprocess_dir()
    if path:
        MultiProcessCollector(registry, path=path)
    else:
        registry.register(_Local())
    registry.register(queue_depth)
    return generate_latest(registry)


class _Local:
    """This process's registry as one collector of the scrape's registry."""

    def collect(self) -> Iterator[Any]:
        return iter(REGISTRY.collect())


METRICS_PATH = "/metrics"


class _PodMetricsHandler(BaseHTTPRequestHandler):
    """``GET /metrics`` for the bearer of the server's token (401 without one, 403 for another, 404 elsewhere)."""

    server: _PodMetricsServer

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != METRICS_PATH:
            self._answer(404, b"not found\n", "text/plain; charset=utf-8")
            return
        header = self.headers.get("Authorization", "")
        if header[:7].lower() != "bearer ":
            self._answer(401, b"authentication required\n", "text/plain; charset=utf-8", challenge=True)
            return
        token, expected = header[7:].strip().encode(), self.server.token.encode()
        if not expected or not hmac.compare_digest(token, expected):
            self._answer(403, b"forbidden\n", "text/plain; charset=utf-8")
            return
        self._answer(200, metrics_exposition(), CONTENT_TYPE)

    def _answer(self, status: int, body: bytes, content_type: str, *, challenge: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if challenge:
            self.send_header("WWW-Authenticate", 'Bearer realm="metrics"')
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # a scrape every 30 s is not worth a log line
        return


class _PodMetricsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], token: str) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.token = token
        super().__init__(address, _PodMetricsHandler)


def metrics_serve(*, host: str, port: int, token: str) -> ThreadingHTTPServer:
    """Serve :func:`metrics_exposition` at ``http://host:port/metrics`` from a daemon thread of this process, for
    ``Authorization: Bearer <token>`` only (no token, nobody: 403). The figures are those of every process writing to
    this process's ``PROMETHEUS_MULTIPROC_DIR`` (a pod's), or this process's alone without one. Returns the server
    (``shutdown()`` stops it); raises ``OSError`` when the address is taken."""
    server = _PodMetricsServer((host, port), token)
    threading.Thread(target=server.serve_forever, name="pod-metrics", daemon=True).start()
    return server
