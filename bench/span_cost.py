"""What one span costs, in this process: made (the SDK's live span against ours) and encoded (the SDK's OTLP encoder
against ``common/infra/otlp.py``), in µs a span, median of several rounds.

    PYTHONPATH=. .venv/bin/python bench/span_cost.py [--spans 20000] [--rounds 5]

The spans are a turn's: the turn's three attributes (conversation key, tenant, profile) and two or three of their
own, as ``common.infra.tracing.span`` and ``finished_span`` make them on the message path. ``bench/chat_load.py
--tracing side-by-side`` measures what they cost the served platform; this measures the span alone, steadily.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from common.infra import tracing
from common.infra.otlp import encode_request

TURN = {"conversation_key": "tenant_a:telecom_contas:bench-0001", "tenant": "tenant_a", "profile": "telecom_contas"}
BATCH = 512  # the batch processor's default export batch
OURS_LIVE = "live span, ours (common.infra.tracing.span)"
OURS_FINISHED = "finished span, ours (common.infra.tracing.finished_span)"


class Kept(SpanProcessor):
    """Keeps each finished span (what the span costs is measured apart from the batch processor's thread)."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


class Dropped(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def per_span(count: int, make: Callable[[], None]) -> float:
    started = time.perf_counter()
    for _ in range(count):
        make()
    return (time.perf_counter() - started) / count * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20000, help="spans made per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    kept = Kept()
    provider = TracerProvider(resource=Resource.create({"service.name": "span-cost"}))
    provider.add_span_processor(kept)
    tracing.tracing_use(provider)
    sdk_tracer = provider.get_tracer(tracing.TRACER_NAME)

    def sdk_live() -> None:
        with sdk_tracer.start_as_current_span("specialist", attributes={**TURN, "agent": "billing_agent"}) as span:
            span.set_attributes({"steps": 1, "stopped": False})

    def ours_live() -> None:
        with tracing.span("specialist", agent="billing_agent") as span:
            tracing.annotate(span, steps=1, stopped=False)

    def ours_finished() -> None:
        tracing.finished_span("graph.persist", 1, 2, {"node": "persist"})

    rows: dict[str, list[float]] = {}
    samples: dict[str, list[ReadableSpan]] = {}  # a batch of each row's spans
    with tracing.turn_attributes(**TURN), tracing.span("turn"):
        for _ in range(args.rounds):
            for name, make in (
                ("live span, the SDK's (start_as_current_span)", sdk_live),
                (OURS_LIVE, ours_live),
                (OURS_FINISHED, ours_finished),
            ):
                rows.setdefault(name, []).append(per_span(args.spans, make))
                samples[name] = kept.spans[:BATCH]
                kept.spans.clear()
    made = {"live": samples[OURS_LIVE], "finished": samples[OURS_FINISHED]}
    for _ in range(args.rounds):
        for kind, spans in made.items():
            for encoder, encode in (
                ("the SDK's", lambda spans: encode_spans(spans).SerializePartialToString()),
                ("ours (common/infra/otlp.py)", encode_request),
            ):
                started = time.perf_counter()
                encode(spans)
                elapsed = (time.perf_counter() - started) / len(spans) * 1e6
                rows.setdefault(f"encoded, {kind} spans, {encoder} encoder", []).append(elapsed)
    # What the processor a served platform uses adds when a span ends: the batch's queue (its thread exporting
    # to an exporter that drops them, so the thread's share is in the figure).
    batch = BatchSpanProcessor(Dropped(), max_queue_size=4 * args.spans)
    spans = made["live"] * (args.spans // BATCH)
    for _ in range(args.rounds):
        started = time.perf_counter()
        for span in spans:
            batch.on_end(span)
        batch.force_flush()
        elapsed = (time.perf_counter() - started) / len(spans) * 1e6
        rows.setdefault("queued and taken by the SDK's batch processor", []).append(elapsed)
    batch.shutdown()
    tracing.tracing_use(None)

    print(f"µs a span, median of {args.rounds} rounds ({args.spans} spans made, batches of {BATCH} encoded)")
    print("| what | µs a span |\n| --- | ---: |")
    for name, values in rows.items():
        print(f"| {name} | {statistics.median(values):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
