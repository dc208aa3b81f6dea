"""Traces (OpenTelemetry): spans of a turn, exported over OTLP/HTTP when an endpoint is configured, else off.

:func:`tracing_setup` runs once per serving process (``platform/asgi.py``, ``platform/wsgi.py``, the Celery
worker): with ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set and
``OTEL_SDK_DISABLED`` not true it installs a ``TracerProvider`` (``service.name`` from ``OTEL_SERVICE_NAME``), a
``BatchSpanProcessor`` and the OTLP/HTTP protobuf exporter; the SDK reads the other standard variables itself
(``OTEL_EXPORTER_OTLP_HEADERS`` for Langfuse and the like, ``OTEL_BSP_*``). Off, :func:`span` hands out one shared
do-nothing context manager: the message path pays a function call and a test, no span, no context switch.

Every span carries the attributes the turn put in :func:`turn_attributes` (``conversation_key``, ``tenant``,
``profile``) next to its own; what the customer wrote never goes into one (names, ids and figures only). A span
that leaves with an exception records it and has status ERROR. The README's "Traces" lists every span.
"""

from __future__ import annotations

import atexit
import contextvars
import json
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

SERVICE_NAME = "agent-platform"
TRACER_NAME = "agent-platform"
ATTRIBUTES_HEADER = "trace_attributes"  # the turn's attributes, carried to a Celery worker beside ``traceparent``

_tracer: trace.Tracer | None = None  # None: tracing is off
_provider: Any = None  # the SDK provider tracing_setup installed in this process
_finished: tuple[Any, Any] = (None, None)  # the span processor and resource of the provider in use
_attributes: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "trace_attributes", default=MappingProxyType({})
)


def tracing_configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint, and the SDK not disabled."""
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return bool(endpoint) and environ.get("OTEL_SDK_DISABLED", "").strip().lower() != "true"


def tracing_provider() -> Any:
    """A new SDK provider exporting over OTLP/HTTP as the environment says (not installed anywhere)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from common.otlp import SpanExporter

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME})
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(SpanExporter()))
    return provider


def tracing_setup() -> bool:
    """Switch traces on for this process when configured (idempotent); returns whether they are on. The spans
    left in the batch are exported at exit (``atexit``; a Celery pool child calls :func:`tracing_flush`)."""
    global _provider
    if _provider is None and tracing_configured():
        _provider = tracing_provider()
        trace.set_tracer_provider(_provider)
        tracing_use(_provider)
        atexit.register(tracing_flush)
    return _tracer is not None


def tracing_use(provider: Any) -> None:
    """Send this process's spans to ``provider`` (``None``: off); tests install one with an in-memory exporter."""
    global _tracer, _finished
    _tracer = provider.get_tracer(TRACER_NAME) if provider is not None else None
    # Where finished_span hands its spans: the provider's own processor (the SDK keeps it in this attribute).
    _finished = getattr(provider, "_active_span_processor", None), getattr(provider, "resource", None)


def _finished_span_parts() -> tuple[Any, Any, Any]:
    """The SDK's span record, id generator and scope, imported when tracing is on (off, the SDK stays unloaded)."""
    global _parts
    if _parts is None:
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        _parts = ReadableSpan, RandomIdGenerator(), InstrumentationScope(TRACER_NAME)
    return _parts


_parts: tuple[Any, Any, Any] | None = None


def tracing_flush() -> None:
    """Export the spans still waiting in the batch (shutdown: the last turns' spans are not lost)."""
    if _provider is not None:
        _provider.force_flush()


def tracing_on() -> bool:
    return _tracer is not None


class _Off:
    """The context manager :func:`span` gives when tracing is off: enters to ``None``, does nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *_exc: object) -> None:
        return None


_OFF = _Off()


def span(name: str, **attributes: Any) -> Any:
    """``with span("llm.call", agent=...) as s:`` — a child of the current span, with the turn's attributes and
    these (``None`` values left out); ``s`` is the span (``None`` when tracing is off: see :func:`annotate`)."""
    if _tracer is None:
        return _OFF
    return _tracer.start_as_current_span(name, attributes=_merged(attributes))


def _merged(attributes: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in {**_attributes.get(), **attributes}.items() if value is not None}


def annotate(current: Any, **attributes: Any) -> None:
    """Set attributes on a span :func:`span` gave (``None`` values and a ``None`` span ignored)."""
    if current is not None:
        current.set_attributes({key: value for key, value in attributes.items() if value is not None})


def failed(current: Any, error: str | None) -> None:
    """Mark a span that ended without an exception as failed (status ERROR; ``error``: its type, not its text)."""
    if current is not None and error:
        current.set_status(trace.Status(trace.StatusCode.ERROR, error.split(":", 1)[0]))


def finished_span(name: str, start_ns: int, end_ns: int, attributes: dict[str, Any]) -> None:
    """A span for something already over (a graph node, a handoff), a child of the current span, built as the
    finished record it is and handed straight to the span processor: none of a live span's machinery (sampler,
    locks, attribute checks, context switch), a quarter of its cost. ``attributes`` must hold valid values."""
    processor, resource = _finished
    parent = trace.get_current_span().get_span_context()
    if _tracer is None or processor is None or not parent.trace_flags.sampled:
        return
    readable_span, ids, scope = _finished_span_parts()
    context = trace.SpanContext(parent.trace_id, ids.generate_span_id(), False, parent.trace_flags)
    processor.on_end(
        readable_span(
            name,
            context=context,
            parent=parent,
            resource=resource,
            attributes=attributes,
            start_time=start_ns,
            end_time=end_ns,
            instrumentation_scope=scope,
        )
    )


def record(name: str, **attributes: Any) -> None:
    """A span for something that happens at one moment (a handoff recorded), with the turn's attributes."""
    if _tracer is not None:
        now = time.time_ns()
        finished_span(name, now, now, _merged(attributes))


@contextmanager
def turn_attributes(**attributes: Any) -> Iterator[None]:
    """Every span opened inside carries ``attributes`` too (a turn's ``conversation_key``, ``tenant``, ``profile``)."""
    if _tracer is None:
        yield
        return
    token = _attributes.set({**_attributes.get(), **attributes})
    try:
        yield
    finally:
        _attributes.reset(token)


def headers_out() -> dict[str, str] | None:
    """Headers that continue this trace elsewhere (a Celery task's): W3C ``traceparent`` and the turn's
    attributes; ``None`` when tracing is off."""
    if _tracer is None:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    carrier[ATTRIBUTES_HEADER] = json.dumps(dict(_attributes.get()))
    return carrier


@contextmanager
def continued(headers: Mapping[str, Any] | None) -> Iterator[None]:
    """Run the block inside the trace :func:`headers_out` sent (a worker's spans join the request's trace)."""
    if _tracer is None or not headers:
        yield
        return
    token = otel_context.attach(propagate.extract(headers))
    kept = _attributes.set(json.loads(headers.get(ATTRIBUTES_HEADER) or "{}"))
    try:
        yield
    finally:
        _attributes.reset(kept)
        otel_context.detach(token)


def usage_record(current: Any, reply: Any) -> None:
    """The model's token usage (LangChain's ``usage_metadata`` of an AIMessage, or of a structured output's
    ``raw``) on an ``llm.call`` span, as the GenAI conventions name it."""
    if current is None:
        return
    if isinstance(reply, dict):
        reply = reply.get("raw")
    usage = getattr(reply, "usage_metadata", None)
    if usage:
        current.set_attributes(
            {
                "gen_ai.usage.input_tokens": usage.get("input_tokens", 0),
                "gen_ai.usage.output_tokens": usage.get("output_tokens", 0),
            }
        )
    model = (getattr(reply, "response_metadata", None) or {}).get("model_name")
    if model:
        current.set_attribute("gen_ai.response.model", model)


def llm_span(model: str, *, operation: str = "chat", purpose: str, **attributes: Any) -> Any:
    """``with llm_span(model, purpose="classifier") as s:`` around one model call (then :func:`usage_record`)."""
    if _tracer is None:
        return _OFF
    names = {"gen_ai.operation.name": operation, "gen_ai.request.model": model, "purpose": purpose}
    return span("llm.call", **names, **attributes)
