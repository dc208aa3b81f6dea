"""common/otlp.py: its encoder writes the very bytes the SDK's OTLP encoder writes."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from common.otlp import encode_request


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
