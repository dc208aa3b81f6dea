"""Traces (OpenTelemetry): spans of a turn, exported over OTLP/HTTP when an endpoint is configured, else off.

:func:`tracing_setup` runs once per serving process (``platform/asgi.py``, ``platform/wsgi.py``, the Celery
worker): with ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set and
``OTEL_SDK_DISABLED`` not true it installs a ``TracerProvider`` (``service.name`` from ``OTEL_SERVICE_NAME``), the
SDK's batch span processor and OTLP/HTTP protobuf exporter, with our encoder (``common/infra/otlp.py``); the SDK reads
the other standard variables itself (``OTEL_EXPORTER_OTLP_HEADERS`` for Langfuse and the like, ``OTEL_BSP_*``).
Off, :func:`span` hands out one shared do-nothing context manager: the message path pays a function call and a
test, no span, no context switch.

The spans are the SDK's records, made the light way: :func:`span` keeps the span in progress in one contextvar of
its own and, when the block ends, hands the SDK's finished record (``ReadableSpan``) to the provider's span
processor, and :func:`finished_span` does the same for something already over; the provider's sampler decides for a
new trace (a local child follows its parent). Whatever reads spans (the batch processor, the exporters, the
in-memory exporter of the tests) gets what the SDK's own spans would give it, at a quarter of the cost
(``common/tests/test_tracing_spans.py`` holds them side by side).

Every span carries the attributes the turn put in :func:`turn_attributes` (``conversation_key``, ``tenant``,
``profile``) next to its own; what the customer wrote never goes into one (names, ids and figures only). A span
that leaves with an exception records it and has status ERROR. docs/observability.md, "Traces", lists every span.
"""

from __future__ import annotations

import atexit
import contextvars
import json
import os
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from common.infra import stock_paths

SERVICE_NAME = "agent-platform"
TRACER_NAME = "agent-platform"
ATTRIBUTES_HEADER = "trace_attributes"  # the turn's attributes, carried to a Celery worker beside ``traceparent``

_pipeline: _Pipeline | _SdkPipeline | None = None  # where this process's spans go; None: tracing is off
_provider: Any = None  # the SDK provider tracing_setup installed in this process
_attributes: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
    "trace_attributes", default=MappingProxyType({})
)
# The span in progress (its SpanContext), kept here rather than in OpenTelemetry's context: setting one
# contextvar is the cheapest way to be the parent of what starts inside. headers_out gives it to OpenTelemetry's
# propagator; continued sets it from a remote parent; a span with nothing here asks OpenTelemetry's context.
_current: contextvars.ContextVar[trace.SpanContext | None] = contextvars.ContextVar("trace_current", default=None)


def tracing_configured(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces: an OTLP endpoint, and the SDK not disabled."""
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return bool(endpoint) and environ.get("OTEL_SDK_DISABLED", "").strip().lower() != "true"


def tracing_provider() -> Any:
    """A new SDK provider exporting over OTLP/HTTP as the environment says (not installed anywhere)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    from common.infra.otlp import EncodingSpanProcessor, SpanExporter

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME})
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    if stock_paths():  # the SDK's own processor and exporter (docs/decisions/light-spans-and-otlp-encoder.md)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(EncodingSpanProcessor(SpanExporter()))
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
    return _pipeline is not None


def tracing_use(provider: Any) -> None:
    """Send this process's spans to ``provider`` (``None``: off); tests install one with an in-memory exporter.
    With ``STOCK_PATHS`` on, the spans are the SDK's own, made through the OpenTelemetry API (:class:`_SdkPipeline`)."""
    global _pipeline
    kind = _SdkPipeline if stock_paths() else _Pipeline
    _pipeline = kind(provider) if provider is not None else None


_UNSET = trace.Status(trace.StatusCode.UNSET)


class _Pipeline:
    """What a span needs from the SDK provider in use: its span processor (the SDK keeps it in
    ``_active_span_processor``), resource and sampler; the id generator, the scope and the class of the finished
    records."""

    __slots__ = ("ids", "processor", "record", "resource", "sampler", "scope")

    def __init__(self, provider: Any) -> None:
        # The SDK is imported once tracing is on: off, it stays unloaded.
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self.processor = provider._active_span_processor
        self.resource = provider.resource
        self.sampler = provider.sampler
        self.ids = RandomIdGenerator()
        self.scope = InstrumentationScope(TRACER_NAME)
        self.record = ReadableSpan

    def flags(self, parent: trace.SpanContext | None, trace_id: int, name: str, attributes: Any) -> trace.TraceFlags:
        """Whether a new span is sampled: a local parent's choice is kept (the SDK's default, ParentBased); a
        root or a remote parent asks the provider's sampler (``OTEL_TRACES_SAMPLER``)."""
        if parent is not None and not parent.is_remote:
            return parent.trace_flags
        context = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent is not None else None
        decision = self.sampler.should_sample(context, trace_id, name, attributes=attributes).decision
        return _SAMPLED if decision.is_sampled() else _NOT_SAMPLED

    def finish(
        self,
        name: str,
        context: trace.SpanContext,
        parent: trace.SpanContext | None,
        attributes: Mapping[str, Any],
        start_ns: int,
        end_ns: int,
        events: Sequence[Any] = (),
        status: trace.Status = _UNSET,
    ) -> None:
        """Hand the provider's span processor the finished record of a span, as the SDK's own span would."""
        self.processor.on_end(
            self.record(
                name,
                context=context,
                parent=parent,
                resource=self.resource,
                attributes=attributes,
                events=events,
                status=status,
                start_time=start_ns,
                end_time=end_ns,
                instrumentation_scope=self.scope,
            )
        )

    def open(self, name: str, attributes: dict[str, Any]) -> Any:
        return _Span(self, name, attributes)

    def finished(
        self, name: str, parent: trace.SpanContext, attributes: Mapping[str, Any], start_ns: int, end_ns: int
    ) -> None:
        context = trace.SpanContext(
            parent.trace_id, self.ids.generate_span_id(), False, parent.trace_flags, parent.trace_state
        )
        self.finish(name, context, parent, attributes, start_ns, end_ns)


def _parent_context(parent: trace.SpanContext | None) -> Any:
    return trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent is not None else None


class _SdkPipeline:
    """``STOCK_PATHS``: every span the SDK's own, started and ended through the OpenTelemetry API, a child of the
    span in progress as :func:`_parent` finds it; no private name of the SDK is used."""

    __slots__ = ("tracer",)

    def __init__(self, provider: Any) -> None:
        self.tracer = provider.get_tracer(TRACER_NAME)

    def open(self, name: str, attributes: dict[str, Any]) -> Any:
        return _SdkSpan(self.tracer, name, attributes)

    def finished(
        self, name: str, parent: trace.SpanContext, attributes: Mapping[str, Any], start_ns: int, end_ns: int
    ) -> None:
        opened = self.tracer.start_span(name, _parent_context(parent), attributes=attributes, start_time=start_ns)
        opened.end(end_time=end_ns)


class _SdkSpan:
    """The SDK's span, the current one while its block runs (``_current``), ended (and an exception recorded) by
    the SDK's own ``__exit__``."""

    __slots__ = ("_token", "attributes", "name", "span", "tracer")

    def __init__(self, tracer: Any, name: str, attributes: dict[str, Any]) -> None:
        self.tracer, self.name, self.attributes = tracer, name, attributes

    def __enter__(self) -> Any:
        self.span = self.tracer.start_span(self.name, _parent_context(_parent()), attributes=self.attributes)
        self._token = _current.set(self.span.get_span_context())
        return self.span

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> None:
        try:
            _current.reset(self._token)
        except ValueError:  # left in another context than it was entered in
            _current.set(None)
        if isinstance(error, Exception):  # as the SDK's use_span: a cancellation is not a failure
            self.span.__exit__(kind, error, traceback)
        else:
            self.span.end()


_SAMPLED = trace.TraceFlags(trace.TraceFlags.SAMPLED)
_NOT_SAMPLED = trace.TraceFlags(trace.TraceFlags.DEFAULT)


def _parent() -> trace.SpanContext | None:
    """The span in progress: ours, else whatever OpenTelemetry's context holds (another library's span)."""
    current = _current.get()
    if current is None:
        current = trace.get_current_span().get_span_context()
        if not current.is_valid:
            return None
    return current


def tracing_flush() -> None:
    """Export the spans still waiting in the batch (shutdown: the last turns' spans are not lost)."""
    if _provider is not None:
        _provider.force_flush()


def tracing_on() -> bool:
    return _pipeline is not None


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
    if _pipeline is None:
        return _OFF
    return _pipeline.open(name, _merged(attributes))


class _Span:
    """A span in progress, light: the current one while its block runs (``_current``), and when the block ends,
    the SDK's finished record (``ReadableSpan``) handed to the provider's span processor, as the SDK's own span
    would be. The SDK's live span costs about 20 µs (a sampler object per span, a lock on each attribute, the
    attribute checks and limits, OpenTelemetry's context copied in and out); this one about 4. It has what our
    spans use of the API: attributes, status, exceptions recorded as the SDK records them, and its context.

    An exception leaving the block (an ``Exception``, as the SDK's ``use_span``: a cancellation is not a failure)
    is recorded as an ``exception`` event and the status set to ERROR. Not sampled, it still passes its context
    on (children are not sampled either) and records nothing."""

    __slots__ = ("_pipeline", "_token", "attributes", "context", "events", "name", "parent", "start_time", "status")

    def __init__(self, pipeline: _Pipeline, name: str, attributes: dict[str, Any]) -> None:
        parent = _parent()
        trace_id = parent.trace_id if parent is not None else pipeline.ids.generate_trace_id()
        flags = pipeline.flags(parent, trace_id, name, attributes)
        self._pipeline = pipeline
        self.name = name
        self.attributes = attributes
        self.parent = parent
        state = parent.trace_state if parent is not None else None  # W3C: a child carries its parent's tracestate
        self.context = trace.SpanContext(trace_id, pipeline.ids.generate_span_id(), False, flags, state)
        self.status = _UNSET
        self.events: list[Any] = []

    def __enter__(self) -> _Span:
        self.start_time = time.time_ns()
        self._token = _current.set(self.context)
        return self

    def __exit__(self, _kind: object, error: BaseException | None, _traceback: object) -> None:
        end_time = time.time_ns()
        try:
            _current.reset(self._token)
        except ValueError:  # left in another context than it was entered in (a generator closed elsewhere)
            _current.set(self.parent)
        if not self.context.trace_flags.sampled:
            return
        if isinstance(error, Exception):
            self.record_exception(error)
            self.status = trace.Status(trace.StatusCode.ERROR, f"{type(error).__name__}: {error}")
        self._pipeline.finish(
            self.name, self.context, self.parent, self.attributes, self.start_time, end_time, self.events, self.status
        )

    def get_span_context(self) -> trace.SpanContext:
        return self.context

    def is_recording(self) -> bool:
        return bool(self.context.trace_flags.sampled)

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        self.attributes.update(attributes)

    def set_status(self, status: trace.Status) -> None:
        self.status = status

    def record_exception(self, exception: BaseException) -> None:
        """An ``exception`` event with the attributes the SDK gives it (type, message, stack trace, escaped)."""
        from opentelemetry.sdk.trace import Event

        kind = type(exception)
        module = kind.__module__
        self.events.append(
            Event(
                "exception",
                {
                    "exception.type": f"{module}.{kind.__qualname__}"
                    if module and module != "builtins"
                    else kind.__qualname__,
                    "exception.message": str(exception),
                    "exception.stacktrace": "".join(traceback.format_exception(exception)),
                    "exception.escaped": "False",
                },
            )
        )


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
    finished record it is and handed straight to the span processor. ``attributes`` must hold valid values."""
    pipeline = _pipeline
    parent = _parent()
    if pipeline is None or parent is None or not parent.trace_flags.sampled:
        return
    pipeline.finished(name, parent, attributes, start_ns, end_ns)


def record(name: str, **attributes: Any) -> None:
    """A span for something that happens at one moment (a handoff recorded), with the turn's attributes."""
    if _pipeline is not None:
        now = time.time_ns()
        finished_span(name, now, now, _merged(attributes))


@contextmanager
def turn_attributes(**attributes: Any) -> Iterator[None]:
    """Every span opened inside carries ``attributes`` too (a turn's ``conversation_key``, ``tenant``, ``profile``)."""
    if _pipeline is None:
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
    if _pipeline is None:
        return None
    carrier: dict[str, str] = {}
    current = _parent()
    propagate.inject(carrier, trace.set_span_in_context(trace.NonRecordingSpan(current)) if current else None)
    carrier[ATTRIBUTES_HEADER] = json.dumps(dict(_attributes.get()))
    return carrier


@contextmanager
def continued(headers: Mapping[str, Any] | None) -> Iterator[None]:
    """Run the block inside the trace :func:`headers_out` sent (a worker's spans join the request's trace)."""
    if _pipeline is None or not headers:
        yield
        return
    remote = trace.get_current_span(propagate.extract(headers)).get_span_context()
    token = _current.set(remote if remote.is_valid else None)
    kept = _attributes.set(json.loads(headers.get(ATTRIBUTES_HEADER) or "{}"))
    try:
        yield
    finally:
        _attributes.reset(kept)
        _current.reset(token)


# --- across deployments: W3C trace context in and out, and other libraries' spans ---------------------------

W3C_HEADERS = ("traceparent", "tracestate")


def trace_context_out() -> dict[str, str]:
    """The W3C trace context of the span in progress as HTTP headers (``traceparent``, and ``tracestate`` when it
    has one), written by OpenTelemetry's propagator: what a call to another deployment sends so that the spans it
    makes there join this trace. Empty when tracing is off or no span is in progress."""
    current = _parent() if _pipeline is not None else None
    if current is None:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier, trace.set_span_in_context(trace.NonRecordingSpan(current)))
    return {name: carrier[name] for name in W3C_HEADERS if name in carrier}


@contextmanager
def remote_parent(headers: Mapping[str, str]) -> Iterator[None]:
    """Run the block as a continuation of the trace a caller's W3C headers name (``traceparent``, ``tracestate``):
    a request from another deployment, or any client that traces. Only those two headers are read (through
    OpenTelemetry's propagator); a malformed or absent ``traceparent`` leaves the block's spans in a trace of their
    own. Nothing is done when tracing is off."""
    if _pipeline is None or "traceparent" not in headers:
        yield
        return
    carrier = {name: headers[name] for name in W3C_HEADERS if name in headers}
    remote = trace.get_current_span(propagate.extract(carrier)).get_span_context()
    if not remote.is_valid:
        yield
        return
    token = _current.set(remote)
    try:
        yield
    finally:
        _current.reset(token)


class RemoteParentApp:
    """An ASGI application ``app`` whose HTTP requests and WebSocket connections continue the trace their W3C headers
    name (:func:`remote_parent`; a socket's are its handshake's, so each of its turns joins the caller's trace):
    every face's turn, and the A2A SDK's spans, join the caller's trace. Tracing off, a request costs one test."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if _pipeline is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in (b"traceparent", b"tracestate")
        }
        with remote_parent(headers):
            await self.app(scope, receive, send)


def detached_context() -> contextvars.Context:
    """A new context, empty of the caller's context variables but for the span in progress, which stays the parent
    of what runs in it: for work that outlives its request (a streamed turn runs on when its client goes, away from
    the request's executor), in the request's trace — a caller's ``traceparent`` included."""
    context = contextvars.Context()
    current = _parent() if _pipeline is not None else None
    if current is not None:
        context.run(_current.set, current)
    return context


@contextmanager
def library_spans_nested() -> Iterator[None]:
    """Inside the block, OpenTelemetry's own context holds the span in progress, so that the spans a library makes
    with the OpenTelemetry API (the MCP SDK's ``MCP send tools/call``, the A2A SDK's) are its children rather than
    roots of traces of their own; the libraries also propagate it (the MCP SDK puts it in the request's ``_meta``).
    Our spans keep theirs apart from OpenTelemetry's context for speed (:class:`_Span`), so a library sees them
    only here."""
    current = _current.get() if _pipeline is not None else None
    if current is None:
        yield
        return
    token = otel_context.attach(trace.set_span_in_context(trace.NonRecordingSpan(current)))
    try:
        yield
    finally:
        otel_context.detach(token)


def tracing_settings(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """What tracing runs with in this process, as ``GET /api/debug/env`` shows it: on or off, the exporter and its
    endpoint (the caller masks credentials), the sampler and its argument, the service name and the propagators;
    read from the standard variables the SDK reads."""
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or ""
    return {
        "enabled": tracing_on(),
        "exporter": "otlp/http-protobuf" if tracing_configured(environ) else "none",
        "endpoint": endpoint,
        "sampler": environ.get("OTEL_TRACES_SAMPLER") or "parentbased_always_on",
        "sampler_arg": environ.get("OTEL_TRACES_SAMPLER_ARG") or None,
        "service_name": environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME,
        "propagators": environ.get("OTEL_PROPAGATORS") or "tracecontext,baggage",
    }


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
    if _pipeline is None:
        return _OFF
    names = {"gen_ai.operation.name": operation, "gen_ai.request.model": model, "purpose": purpose}
    return span("llm.call", **names, **attributes)
