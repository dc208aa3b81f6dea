"""One trace across two deployments, over each kind of gateway hop.

This test process is the gateway: ``platform.asgi.application`` under uvicorn, its spans caught by the SDK's in-memory
exporter. The second deployment is the platform served by ``platform.serve`` in a process of its own (its own
database and key), exporting its spans over OTLP/HTTP to a receiver in this process that decodes them. A caller
sends its W3C ``traceparent`` to the gateway's stream; the gateway's turn is the caller's child, its ``gateway.hop``
calls the remote — the gateway API's Server-Sent Events, or the platform's A2A face — and the remote's spans are
children of that hop: one trace, caller → gateway → remote."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from agents.models import BackendKind, RemoteBackend
from bench.otlp_sink import OtlpSink, attributes
from conversations.gateway import backend_circuits_reset
from tests.platform_instance import Instance, platform_served

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(600)]

CALLER_SPAN = "051581bf3cb55c13"


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpSink]:
    sink = OtlpSink(keep=True).start()
    yield sink
    sink.stop()


@pytest.fixture(scope="module")
def remote(tmp_path_factory, receiver) -> Iterator[Instance]:
    """The second deployment, tracing to ``receiver`` (its batch sent every 50 ms)."""
    with platform_served(
        tmp_path_factory.mktemp("traced"),
        prefix="traced_remote",
        REDIS_URL="",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="50",
        OTEL_SERVICE_NAME="remote",
    ) as instance:
        yield instance


@pytest.fixture(autouse=True)
def circuits_closed():
    backend_circuits_reset()
    yield
    backend_circuits_reset()


def hop_to(profile, remote: Instance, kind: str) -> None:
    """``profile``'s backend on the remote's telecom_contas, for the keyword "portabilidade"."""
    address = remote.base if kind == BackendKind.GATEWAY else f"{remote.base}/a2a/telecom_contas/"
    RemoteBackend.objects.create(
        profile=profile,
        name="contas_remote",
        kind=kind,
        base_url=address,
        api_key=remote.key,
        remote_agent_id="telecom_contas",
        keywords=["portabilidade"],
        description="Number porting (the other deployment)",
    )


def remote_spans(receiver: OtlpSink, trace_id: str, name: str, **having: str) -> list:
    """The remote's spans called ``name`` (with the attributes ``having``) in the trace ``trace_id``, once one arrived
    (its batch is sent every 50 ms; the deadline only keeps a broken export from hanging the test)."""
    deadline = time.monotonic() + 60
    while True:
        found = [
            span
            for resource, span in receiver.spans()
            if resource.get("service.name") == "remote"
            and span.name == name
            and span.trace_id.hex() == trace_id
            and having.items() <= attributes(span.attributes).items()
        ]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def ancestors(span: ReadableSpan, spans: list[ReadableSpan]) -> list[str]:
    """The names of ``span``'s parents among ``spans``, nearest first."""
    by_id = {each.context.span_id: each for each in spans}
    names = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        names.append(span.name)
    return names


@pytest.mark.parametrize("kind", [BackendKind.GATEWAY, BackendKind.A2A])
def test_a_conversation_across_two_deployments_is_one_trace_under_the_callers_span(
    asgi_server, tenant_key, telecom, remote, receiver, spans, kind
):
    hop_to(telecom, remote, kind)
    body = {
        "agent_id": "telecom_contas",
        "payload": {"text": "Quero a portabilidade do meu número", "session_id": kind},
    }
    caller_trace = secrets.token_hex(16)  # the remote's receiver keeps every test's spans
    headers = {
        "Authorization": f"Bearer {tenant_key.raw}",
        "traceparent": f"00-{caller_trace}-{CALLER_SPAN}-01",
        "tracestate": "caller=1",
    }

    with httpx.stream(
        "POST", f"{asgi_server}/api/gateway/message/stream", json=body, headers=headers, timeout=120
    ) as response:
        assert response.status_code == 200, response.read()
        assert '"agent": "contas_remote"' in response.read().decode()

    here = spans.get_finished_spans()
    (turn,) = [span for span in here if span.name == "turn"]
    (hop,) = [span for span in here if span.name == "gateway.hop"]
    assert format(turn.parent.span_id, "016x") == CALLER_SPAN and turn.parent.is_remote
    assert format(hop.context.trace_id, "032x") == caller_trace and hop.attributes["status"] == "ok"
    assert "turn" in ancestors(hop, here)
    (remote_turn,) = remote_spans(receiver, caller_trace, "turn")
    if kind == BackendKind.GATEWAY:  # the gateway API's stream: the remote's turn is the hop's child
        assert int.from_bytes(remote_turn.parent_span_id, "big") == hop.context.span_id
    else:  # the A2A face: its request is the hop's child, the turn the request's
        (request,) = remote_spans(receiver, caller_trace, "a2a.request", method="POST")  # the card is read with a GET
        assert int.from_bytes(request.parent_span_id, "big") == hop.context.span_id
        assert remote_turn.parent_span_id == request.span_id
    assert "caller=1" in remote_turn.trace_state
