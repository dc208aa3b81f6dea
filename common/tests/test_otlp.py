"""common/infra/otlp.py: its encoder writes the very bytes the SDK's OTLP encoder writes, and its processor keeps
bytes."""

from __future__ import annotations

import gc
import weakref

from opentelemetry import propagate
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from common.infra.otlp import EncodingSpanProcessor, encode_request


def test_a_batch_of_spans_is_encoded_byte_for_byte_as_the_sdk_encodes_it():
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-platform", "workers": 4}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent-platform")
    values = {"text": "tenant_a:telecom_contas:s-1", "count": 3, "big": 2**40, "negative": -2, "ratio": 0.5}
    with tracer.start_as_current_span("turn", attributes={**values, "yes": True, "names": ["a", "b"]}):
        for node in ("input_guardrails", "specialist", "persist"):
            with tracer.start_as_current_span(f"graph.{node}", attributes={"node": node}) as span:
                if node == "specialist":
                    span.record_exception(ValueError("boom"))
                    span.set_status(Status(StatusCode.ERROR, "ValueError"))
    spans = list(exporter.get_finished_spans()) * 3

    assert encode_request(spans) == encode_spans(spans).SerializePartialToString()


def test_a_callers_tracestate_is_encoded_as_the_sdk_encodes_it():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent-platform")
    caller = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "a=1,b=two"}
    with tracer.start_as_current_span("turn", context=propagate.extract(caller)), tracer.start_as_current_span("node"):
        pass
    spans = exporter.get_finished_spans()

    assert all(span.context.trace_state for span in spans)
    assert encode_request(spans) == encode_spans(spans).SerializePartialToString()


class Captured(SpanExporter):
    def __init__(self):
        self.batches = []

    def export(self, spans):
        self.batches.append(list(spans))
        return SpanExportResult.SUCCESS


class Watched(SpanProcessor):
    """Keeps a weak reference to each record handed to the processors (the same object each of them gets)."""

    def __init__(self):
        self.references = []

    def on_end(self, span):
        self.references.append(weakref.ref(span))


def test_spans_encoded_as_they_end_make_the_request_their_records_would_and_are_not_kept():
    records, watched, captured = InMemorySpanExporter(), Watched(), Captured()
    processor = EncodingSpanProcessor(captured, schedule_delay_millis=60_000)
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-platform"}))
    for each in (SimpleSpanProcessor(records), watched, processor):
        provider.add_span_processor(each)
    tracer = provider.get_tracer("agent-platform")
    with tracer.start_as_current_span("turn", attributes={"tenant": "tenant_a"}):
        with tracer.start_as_current_span("graph.persist", attributes={"node": "persist"}):
            pass
        with provider.get_tracer("another-library").start_as_current_span("http.request"):
            pass
    expected = encode_spans(records.get_finished_spans()).SerializePartialToString()
    records.clear()
    gc.collect()

    assert len(watched.references) == 3
    assert [reference() for reference in watched.references] == [None] * 3  # the processor holds bytes only
    processor.force_flush()
    (batch,) = captured.batches
    assert all(isinstance(number, int) and isinstance(data, bytes) for number, data in batch)
    assert encode_request(batch) == expected
    processor.shutdown()
