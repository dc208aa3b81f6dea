"""OTLP/HTTP span export with a faster encoder: the spans of a batch written straight into the protobuf wire format.

The SDK's exporter builds a protobuf object per span, attribute and value before serialising them: about 40 µs a
span, which at ten spans a message was most of what tracing cost (README, "Traces"). :func:`encode_request` writes
the same ``ExportTraceServiceRequest`` bytes directly (the fields a span of ours has: ids, name, kind, times,
attributes, events, status), several times faster; the tests decode its output with the official messages.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

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


# Encoded KeyValues by (key, value): a turn's spans repeat its conversation key, tenant, profile, agents and node
# names. Cleared when it fills (a few thousand conversations' worth).
_pairs: dict[tuple[str, Any], bytes] = {}
PAIRS_KEPT = 4096


def _attributes(number: int, attributes: Any) -> bytes:
    """Repeated ``KeyValue`` fields ``number``."""
    if not attributes:
        return b""
    parts = []
    for pair in attributes.items():
        encoded = _pairs.get(pair) if isinstance(pair[1], str) else None
        if encoded is None:
            key, value = pair
            encoded = _field(1, key.encode()) + _field(2, _any_value(value))
            if isinstance(value, str):
                if len(_pairs) >= PAIRS_KEPT:
                    _pairs.clear()
                _pairs[pair] = encoded
        parts.append(_field(number, encoded))
    return b"".join(parts)


def _span(span: ReadableSpan) -> bytes:
    context = span.context
    parent = span.parent
    status = span.status
    parts = [
        b"\x0a\x10" + context.trace_id.to_bytes(16, "big"),  # trace_id = 1
        b"\x12\x08" + context.span_id.to_bytes(8, "big"),  # span_id = 2
    ]
    if parent is not None:
        parts.append(b"\x22\x08" + parent.span_id.to_bytes(8, "big"))  # parent_span_id = 4
    parts.append(_field(5, span.name.encode()))
    parts.append(b"\x30" + _varint(span.kind.value + 1))  # kind = 6: the SDK's INTERNAL (0) is OTLP's 1
    parts.append(b"\x39" + _fixed64(span.start_time or 0) + b"\x41" + _fixed64(span.end_time or 0))  # 7, 8
    parts.append(_attributes(9, span.attributes))
    for event in span.events:  # events = 11: {time_unix_nano = 1, name = 2, attributes = 3}
        event_name = _field(2, event.name.encode())
        parts.append(_field(11, b"\x09" + _fixed64(event.timestamp) + event_name + _attributes(3, event.attributes)))
    if status.status_code.value:  # status = 15: {message = 2, code = 3}
        message = _field(2, status.description.encode()) if status.description else b""
        parts.append(_field(15, message + b"\x18" + _varint(status.status_code.value)))
    else:
        parts.append(b"\x7a\x00")  # an empty status, as the SDK writes it
    # flags = 16: HAS_IS_REMOTE, and IS_REMOTE for a parent from another process
    parts.append(
        b"\x85\x01\x00\x03\x00\x00" if parent is not None and parent.is_remote else b"\x85\x01\x00\x01\x00\x00"
    )
    return b"".join(parts)


def encode_request(spans: Iterable[ReadableSpan]) -> bytes:
    """``ExportTraceServiceRequest`` bytes for ``spans``, grouped by resource and instrumentation scope."""
    grouped: dict[Any, dict[Any, list[bytes]]] = {}
    for span in spans:
        scopes = grouped.setdefault(span.resource, {})
        scopes.setdefault(span.instrumentation_scope, []).append(_field(2, _span(span)))
    out = []
    for resource, scopes in grouped.items():
        body = [_field(1, _attributes(1, resource.attributes))] if resource is not None else []
        for scope, encoded in scopes.items():
            head = b""
            if scope is not None:
                version = _field(2, scope.version.encode()) if scope.version else b""
                head = _field(1, _field(1, scope.name.encode()) + version)
            body.append(_field(2, head + b"".join(encoded)))
        out.append(_field(1, b"".join(body)))
    return b"".join(out)


class SpanExporter(OTLPSpanExporter):
    """The SDK's OTLP/HTTP exporter (endpoint, headers, timeout, compression, retries from the ``OTEL_*``
    variables) with :func:`encode_request` in place of its encoder."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        result = self._client.export(encode_request(spans))
        return SpanExportResult.SUCCESS if result.success else SpanExportResult.FAILURE
