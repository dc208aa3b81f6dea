"""OTLP/HTTP span export with a faster encoder: spans written straight into the protobuf wire format.

The SDK's exporter builds a protobuf object per span, attribute and value before serialising them: about 18 µs a
span of ours (``bench/span_cost.py``). :func:`encode_request` writes the same ``ExportTraceServiceRequest`` bytes
directly (the fields a span has: ids, trace state, name, kind, times, attributes, events, status, flags) in about
4 µs, with the names and repeated attributes kept encoded; ``common/tests/test_otlp.py`` holds its bytes to the
SDK's.
:class:`EncodingSpanProcessor` encodes each span as it ends, so what waits for the batch is bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

_fixed64 = struct.Struct("<Q").pack
_double = struct.Struct("<d").pack


_SMALL = [bytes([number]) for number in range(128)]


def _varint(value: int) -> bytes:
    if 0 <= value < 128:
        return _SMALL[value]
    value &= 0xFFFFFFFFFFFFFFFF  # negative int64 as ten bytes, as protobuf writes it
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (strings, bytes, messages)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _any_value(value: Any) -> bytes:
    if isinstance(value, str):
        return _field(1, value.encode())
    if isinstance(value, bool):
        return b"\x10" + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return b"\x18" + _varint(value)
    if isinstance(value, float):
        return b"\x21" + _double(value)
    if isinstance(value, (tuple, list)):  # ArrayValue {values = 1}
        return _field(5, b"".join(_field(1, _any_value(item)) for item in value))
    return _field(1, str(value).encode())


# Encoded KeyValue fields by (field number, key, value): a turn's spans repeat its conversation key, tenant,
# profile, agents and node names, and the spans' names. Cleared when it fills (a few thousand conversations' worth).
_pairs: dict[tuple[int, str, Any], bytes] = {}
PAIRS_KEPT = 4096


def _attributes(number: int, attributes: Any) -> bytes:
    """Repeated ``KeyValue`` fields ``number``."""
    if not attributes:
        return b""
    parts = []
    for key, value in attributes.items():
        kept = isinstance(value, str)
        encoded = _pairs.get((number, key, value)) if kept else None
        if encoded is None:
            encoded = _field(number, _field(1, key.encode()) + _field(2, _any_value(value)))
            if kept:
                if len(_pairs) >= PAIRS_KEPT:
                    _pairs.clear()
                _pairs[number, key, value] = encoded
        parts.append(encoded)
    return b"".join(parts)


_names: dict[str, bytes] = {}  # span names (field 5) and kind (field 6), encoded


def _name_and_kind(name: str, kind: int) -> bytes:
    encoded = _names.get(name) if kind == 0 else None
    if encoded is None:
        encoded = _field(5, name.encode()) + b"\x30" + _varint(kind + 1)  # the SDK's INTERNAL (0) is OTLP's 1
        if kind == 0 and len(_names) < PAIRS_KEPT:
            _names[name] = encoded
    return encoded


_NO_STATUS = b"\x7a\x00"  # an empty status, as the SDK writes it
_LOCAL = b"\x85\x01\x00\x01\x00\x00"  # flags = 16: HAS_IS_REMOTE
_REMOTE = b"\x85\x01\x00\x03\x00\x00"  # and IS_REMOTE, for a parent in another process


def _span(span: ReadableSpan) -> bytes:
    context = span.context
    parent = span.parent
    status = span.status
    state = context.trace_state  # a caller's W3C tracestate, as the header says it
    parts = [
        b"\x0a\x10" + context.trace_id.to_bytes(16, "big") + b"\x12\x08" + context.span_id.to_bytes(8, "big"),
        # trace_id = 1, span_id = 2, trace_state = 3, parent_span_id = 4
        _field(3, ",".join(f"{key}={value}" for key, value in state.items()).encode()) if state else b"",
        b"\x22\x08" + parent.span_id.to_bytes(8, "big") if parent is not None else b"",
        _name_and_kind(span.name, span.kind.value),  # name = 5, kind = 6
        b"\x39" + _fixed64(span.start_time or 0) + b"\x41" + _fixed64(span.end_time or 0),  # 7, 8
        _attributes(9, span._attributes),  # the record's own mapping: the property copies it into a proxy
    ]
    for event in span.events:  # events = 11: {time_unix_nano = 1, name = 2, attributes = 3}
        event_name = _field(2, event.name.encode())
        parts.append(_field(11, b"\x09" + _fixed64(event.timestamp) + event_name + _attributes(3, event.attributes)))
    if status.status_code.value:  # status = 15: {message = 2, code = 3}
        message = _field(2, status.description.encode()) if status.description else b""
        parts.append(_field(15, message + b"\x18" + _varint(status.status_code.value)))
    else:
        parts.append(_NO_STATUS)
    parts.append(_REMOTE if parent is not None and parent.is_remote else _LOCAL)
    return _field(2, b"".join(parts))


# The (resource, instrumentation scope) pairs spans were encoded under, numbered: an encoded span is the pair
# (number, bytes), atomic values the garbage collector does not follow. A process has a pair or two.
_groups: dict[tuple[int, int], int] = {}
_group_parts: list[tuple[Any, Any]] = []  # kept alive: the ids above stay theirs


def encoded_span(span: ReadableSpan) -> tuple[int, bytes]:
    """``span`` as the ``Span`` field of a ``ScopeSpans``, with the number of its resource and scope."""
    resource, scope = span.resource, span.instrumentation_scope
    number = _groups.get((id(resource), id(scope)))
    if number is None:
        _group_parts.append((resource, scope))
        number = _groups[id(resource), id(scope)] = len(_group_parts) - 1
    return number, _span(span)


def encode_request(spans: Iterable[ReadableSpan | tuple[int, bytes]]) -> bytes:
    """``ExportTraceServiceRequest`` bytes for ``spans`` (records, or already :func:`encoded_span`), grouped by
    resource and instrumentation scope in the order they first come, as the SDK's encoder groups them."""
    grouped: dict[int, list[bytes]] = {}
    for span in spans:
        number, encoded = span if isinstance(span, tuple) else encoded_span(span)
        grouped.setdefault(number, []).append(encoded)
    by_resource: dict[int, tuple[Any, list[bytes]]] = {}
    for number, encoded_spans in grouped.items():
        resource, scope = _group_parts[number]
        head = b""
        if scope is not None:
            version = _field(2, scope.version.encode()) if scope.version else b""
            head = _field(1, _field(1, scope.name.encode()) + version)
        by_resource.setdefault(id(resource), (resource, []))[1].append(_field(2, head + b"".join(encoded_spans)))
    out = []
    for resource, scope_spans in by_resource.values():
        body = [_field(1, _attributes(1, resource.attributes))] if resource is not None else []
        out.append(_field(1, b"".join(body + scope_spans)))
    return b"".join(out)


class SpanExporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP exporter (endpoint, headers, timeout, compression, retries from the ``OTEL_*``
    variables) with :func:`encode_request` in place of its encoder; it takes records, or spans already encoded
    (:class:`EncodingSpanProcessor`)."""

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        result = self._client.export(encode_request(spans))
        return SpanExportResult.SUCCESS if result.success else SpanExportResult.FAILURE


class EncodingSpanProcessor(BatchSpanProcessor):
    """The SDK's batch span processor (its queue and thread, the ``OTEL_BSP_*`` settings, fork and shutdown
    handling) holding each span encoded as it ends (:func:`encoded_span`, for :class:`SpanExporter`).

    The records would wait in the queue for up to a batch's time, long enough for the garbage collector to move
    their five or six objects each into its oldest generation and to walk them in full passes, which then come
    more often: at ten spans a message that was a larger share of tracing's cost than making and encoding the
    spans (docs/benchmarks.md, "Tracing's cost"). Encoded, a span is two atomic values, and the record is freed
    at once."""

    def on_end(self, span: ReadableSpan) -> None:
        if span.context is not None and span.context.trace_flags.sampled:
            self._batch_processor.emit(encoded_span(span))  # type: ignore[arg-type]
