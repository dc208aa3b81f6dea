"""A small OTLP/HTTP trace receiver: accepts ``POST /v1/traces`` (protobuf), decodes it, counts the spans.

    PYTHONPATH=. .venv/bin/python bench/otlp_sink.py --port 4318 [--count-file PATH]

``bench/chat_load.py --tracing`` runs it as the platform's trace back end (a process of its own, so what it costs is
seen apart from the server); the tests start it in a thread and keep the decoded spans to look at
(:class:`OtlpSink` with ``keep=True``). It answers every export with an empty ``ExportTraceServiceResponse``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

TRACES_PATH = "/v1/traces"


class OtlpSink:
    """An OTLP/HTTP receiver on ``127.0.0.1:port`` (0: any free port) in a thread of this process.

    ``count``: spans received; ``requests``: the decoded export requests, kept when ``keep`` (tests)."""

    def __init__(self, port: int = 0, *, keep: bool = False) -> None:
        self.count = 0
        self.requests: list[ExportTraceServiceRequest] = []
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # the exporter keeps its connection

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != TRACES_PATH:
                    self._answer(404, b"")
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                sink.received(request)
                self._answer(200, ExportTraceServiceResponse().SerializeToString())

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: Any) -> None:
                pass

        self.keep = keep
        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        """What ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set to (the exporter adds ``/v1/traces``)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def received(self, request: ExportTraceServiceRequest) -> None:
        spans = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)
        with self._lock:
            self.count += spans
            if self.keep:
                self.requests.append(request)

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """Every span kept, with its resource's attributes: ``[(resource attributes, Span), ...]``."""
        with self._lock:
            requests = list(self.requests)
        return [
            (attributes(resource.resource.attributes), span)
            for request in requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def start(self) -> OtlpSink:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def attributes(values: Any) -> dict[str, Any]:
    """OTLP ``KeyValue``s as a dict of plain values."""
    return {item.key: getattr(item.value, item.value.WhichOneof("value")) for item in values}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=4318)
    parser.add_argument("--count-file", help="where the span count is written when the sink stops (SIGTERM)")
    args = parser.parse_args(argv)
    sink = OtlpSink(args.port)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    sink.start()
    print(f"listening on {sink.endpoint}", flush=True)
    stopping.wait()
    sink.stop()
    if args.count_file:
        Path(args.count_file).write_text(str(sink.count))
    print(f"spans received: {sink.count}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
