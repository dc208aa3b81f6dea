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
    parts = [
        b"\x0a\x10" + context.trace_id.to_bytes(16, "big") + b"\x12\x08" + context.span_id.to_bytes(8, "big"),
        # trace_id = 1, span_id = 2, parent_span_id = 4
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


def encode_request(spans: Iterable[ReadableSpan]) -> bytes:
    """``ExportTraceServiceRequest`` bytes for ``spans``, grouped by resource and instrumentation scope (by
    identity: a process has one of each, and the SDK's ``Resource`` hashes itself through JSON each time)."""
    resources: dict[int, Any] = {}
    scopes: dict[int, Any] = {}
    grouped: dict[int, dict[int, list[bytes]]] = {}
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope
        resources.setdefault(id(resource), resource)
        scopes.setdefault(id(scope), scope)
        grouped.setdefault(id(resource), {}).setdefault(id(scope), []).append(_span(span))
    out = []
    for resource_id, by_scope in grouped.items():
        resource = resources[resource_id]
        body = [_field(1, _attributes(1, resource.attributes))] if resource is not None else []
        for scope_id, encoded in by_scope.items():
            scope = scopes[scope_id]
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
