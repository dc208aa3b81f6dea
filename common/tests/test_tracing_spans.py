"""common/infra/tracing.py's spans: the records they finish as are the SDK's own spans' records (so every processor,
exporter and back end reads them alike), the provider's sampler decides, and the trace crosses processes."""

from __future__ import annotations

import asyncio
import contextvars

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased, TraceIdRatioBased
from opentelemetry.trace import StatusCode

from common.infra import tracing
from common.infra.otlp import encode_request
from tests.stock_paths import fast_path_only


def installed(sampler=None):
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-platform"}), sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.tracing_use(provider)
    return provider, exporter


@pytest.fixture
def pipeline():
    yield installed
    tracing.tracing_use(None)


def a_turn(open_span):
    """The same few spans, opened with ``open_span(name, **attributes)``: a turn, a specialist under it whose
    model call fails with an exception, and a status set by hand."""
    with open_span("turn", conversation_key="t:p:s-1", tenant="t") as turn:
        turn.set_attributes({"agent": "billing_agent", "steps": 2})
        with open_span("specialist", agent="billing_agent") as specialist:
            with pytest.raises(ValueError), open_span("llm.call", **{"gen_ai.request.model": "offline"}):
                raise ValueError("boom")
            specialist.set_attribute("stopped", False)
            tracing.failed(specialist, "timeout: no answer in 5s")


def comparable(span):
    events = [(event.name, dict(event.attributes)) for event in span.events]
    for _, values in events:
        values["exception.stacktrace"] = values["exception.stacktrace"].splitlines()[-1]  # the lines differ
    return {
        "name": span.name,
        "kind": span.kind,
        "attributes": dict(span.attributes),
        "status": (span.status.status_code, span.status.description),
        "events": events,
        "parent": span.parent is not None and span.parent.is_remote,
        "sampled": span.context.trace_flags.sampled,
        "scope": span.instrumentation_scope.name,
        "resource": dict(span.resource.attributes),
        "timed": span.end_time >= span.start_time > 0,
    }


def tree(spans):
    by_id = {span.context.span_id: span.name for span in spans}
    return sorted((span.name, by_id.get(span.parent.span_id) if span.parent else None) for span in spans)


@fast_path_only
def test_a_span_of_ours_finishes_as_the_record_the_sdks_own_span_would(pipeline):
    provider, exporter = pipeline()
    a_turn(tracing.span)
    ours = exporter.get_finished_spans()
    exporter.clear()
    tracer = provider.get_tracer(tracing.TRACER_NAME)
    a_turn(lambda name, **attributes: tracer.start_as_current_span(name, attributes=attributes))
    theirs = exporter.get_finished_spans()

    assert [comparable(span) for span in ours] == [comparable(span) for span in theirs]
    assert tree(ours) == tree(theirs) == [("llm.call", "specialist"), ("specialist", "turn"), ("turn", None)]
    assert len({span.context.trace_id for span in ours}) == 1
    (call,) = [span for span in ours if span.name == "llm.call"]
    assert call.status.status_code == StatusCode.ERROR and call.status.description == "ValueError: boom"
    assert call.events[0].attributes["exception.type"] == "ValueError"
    # And the OTLP bytes: our encoder writes what the SDK's writes for them.
    assert encode_request(ours) == encode_spans(ours).SerializePartialToString()


@fast_path_only
def test_a_cancelled_block_ends_its_span_without_an_error_as_the_sdk_does(pipeline):
    _, exporter = pipeline()

    async def cancelled():
        with tracing.span("gateway.hop", backend="partner"):
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(cancelled())

    (hop,) = exporter.get_finished_spans()
    assert hop.status.status_code == StatusCode.UNSET and not hop.events


def test_spans_started_inside_another_librarys_span_are_its_children(pipeline):
    provider, exporter = pipeline()
    outer_span = provider.get_tracer("another-library").start_as_current_span("http.request")
    with outer_span as outer, tracing.span("turn"):
        tracing.record("handoff", kind="handoff")

    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert spans["turn"].parent.span_id == outer.get_span_context().span_id
    assert spans["handoff"].parent.span_id == spans["turn"].context.span_id
    assert {span.context.trace_id for span in spans.values()} == {outer.get_span_context().trace_id}


@fast_path_only
def test_the_providers_sampler_decides_for_a_trace_and_its_children_follow(pipeline):
    _, exporter = pipeline(sampler=ALWAYS_OFF)
    with tracing.span("turn") as turn, tracing.span("specialist"):
        tracing.finished_span("graph.persist", 1, 2, {"node": "persist"})
        headers = tracing.headers_out()

    assert exporter.get_finished_spans() == ()
    assert not turn.is_recording()
    # The trace still goes on, unsampled: a worker that samples by its parent records nothing either.
    assert headers["traceparent"].endswith("-00")
    _, exporter = pipeline(sampler=ParentBased(TraceIdRatioBased(1.0)))
    with tracing.continued(headers), tracing.span("specialist"):
        pass
    assert exporter.get_finished_spans() == ()


def test_a_worker_continues_the_trace_the_headers_carry_with_the_turns_attributes(pipeline):
    _, exporter = pipeline()
    with tracing.turn_attributes(conversation_key="t:p:s-2", tenant="t"), tracing.span("turn") as turn:
        headers = tracing.headers_out()
    exporter.clear()

    with tracing.continued(headers), tracing.span("specialist", agent="orders_agent"):
        pass

    (step,) = exporter.get_finished_spans()
    assert step.parent.is_remote and step.parent.span_id == turn.context.span_id
    assert step.context.trace_id == turn.context.trace_id
    assert dict(step.attributes) == {"conversation_key": "t:p:s-2", "tenant": "t", "agent": "orders_agent"}
    with tracing.span("turn") as fresh:
        assert fresh.parent is None


def test_a_span_closed_from_another_context_is_still_recorded_and_raises_nothing(pipeline):
    _, exporter = pipeline()
    hop = tracing.span("gateway.hop")
    # As an async generator's span, opened in its task's context and closed later from wherever the generator is
    # finalised. Opened in a context of its own: opened in this test's, it would stay the span in progress of every
    # later test of this process (the close from elsewhere cannot reset it here).
    contextvars.copy_context().run(hop.__enter__)

    contextvars.copy_context().run(hop.__exit__, None, None, None)

    assert [span.name for span in exporter.get_finished_spans()] == ["gateway.hop"]
    with tracing.span("turn") as fresh:
        assert fresh.parent is None
