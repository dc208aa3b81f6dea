"""Traces of a turn (common/infra/tracing.py): the span tree through the API, a Celery worker's spans in the same trace,
the export over OTLP/HTTP to a receiver decoding the official protobuf messages, and tracing off."""

from __future__ import annotations

import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agents.models import McpServer
from bench.otlp_sink import OtlpSink, attributes
from common.config_version import config_version_bump
from common.infra import tracing
from tests.demo_snapshot import demo_seed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MSISDN = "5511999999999"
# A reply to the payment flow that goes on about an order: billing_agent takes the reply and hands the rest over.
HANDOFF_TEXT = "Não, na verdade meu pedido P100 atrasou"
NODES = ["input_guardrails", "routing_decision", "specialist", "output_guardrails", "judge", "supervisor_review"]
NODES += ["escalation"]
NODES += ["persist"]
TURN_ATTRIBUTES = {"conversation_key", "tenant", "profile"}


@pytest.fixture
def demo(transactional_db, mcp_servers):
    demo_seed()
    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    config_version_bump()


class _ToTheTestsExporter(SpanProcessor):
    """The processor of this process's global provider: hands the spans libraries make with the OpenTelemetry API
    to the running test's exporter (the global provider can be set only once a process)."""

    exporter: InMemorySpanExporter | None = None

    def on_end(self, span) -> None:
        if self.exporter is not None:
            self.exporter.export([span])


_LIBRARIES = _ToTheTestsExporter()
_GLOBAL: list[TracerProvider] = []  # the global provider, once this module has set it


@pytest.fixture
def library_spans(spans):
    """``spans``, with the spans other libraries make through OpenTelemetry's global provider (the MCP SDK's)."""
    if not _GLOBAL:
        provider = TracerProvider()
        provider.add_span_processor(_LIBRARIES)
        trace.set_tracer_provider(provider)
        _GLOBAL.append(provider)
    assert trace.get_tracer_provider() is _GLOBAL[0]  # no one else set it before
    _LIBRARIES.exporter = spans
    yield spans
    _LIBRARIES.exporter = None


@pytest.fixture
def receiver():
    sink = OtlpSink(keep=True).start()
    yield sink
    sink.stop()


def send(api, text, session_id, agent_id="telecom_contas", **context):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": agent_id, "payload": {"text": text, "session_id": session_id, "context": context}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def named(finished, name):
    return [span for span in finished if span.name == name]


def test_a_turn_with_a_handoff_and_tool_calls_is_one_tree_of_spans_under_its_turn(api, demo, spans):
    send(api, "Quero pagar com pix", "t-1", msisdn=MSISDN)
    spans.clear()
    body = send(api, HANDOFF_TEXT, "t-1", order_id="P100")
    assert body["agent"] == "orders_agent"

    finished = spans.get_finished_spans()
    (turn,) = named(finished, "turn")
    assert turn.parent is None
    assert turn.attributes["conversation_key"] == body["conversation_key"] == "tenant_a:telecom_contas:t-1"
    assert (turn.attributes["tenant"], turn.attributes["profile"]) == ("tenant_a", "telecom_contas")
    assert turn.attributes["agent"] == "orders_agent"
    assert turn.attributes["method"] == body["metadata"]["route_decision"]["method"]
    assert turn.attributes["mode"] == body["metadata"]["mode"]
    assert {span.context.trace_id for span in finished} == {turn.context.trace_id}
    nodes = [span for span in finished if span.name.startswith("graph.")]
    assert [span.name for span in sorted(nodes, key=lambda s: s.start_time)] == [f"graph.{n}" for n in NODES]
    assert {span.parent.span_id for span in nodes} == {turn.context.span_id}
    assert all(span.end_time >= span.start_time >= turn.start_time for span in nodes)
    assert [span.attributes["node"] for span in sorted(nodes, key=lambda s: s.start_time)] == NODES
    (node,) = named(finished, "graph.specialist")
    # The nodes' spans carry their node; every other span carries the conversation too.
    assert all(span.attributes.keys() >= TURN_ATTRIBUTES for span in finished if span not in nodes or span is node)

    specialists = sorted(named(finished, "specialist"), key=lambda s: s.start_time)
    assert [s.attributes["agent"] for s in specialists] == ["billing_agent", "orders_agent"]
    assert {s.parent.span_id for s in specialists} == {node.context.span_id}
    (handoff,) = named(finished, "handoff")
    assert handoff.parent.span_id == node.context.span_id
    assert (handoff.attributes["handoff.from"], handoff.attributes["handoff.to"]) == ("billing_agent", "orders_agent")
    assert (handoff.attributes["kind"], handoff.attributes["status"]) == ("handoff", "completed")

    by_id = {span.context.span_id: span for span in finished}
    calls = named(finished, "llm.call")
    assert calls and {by_id[call.parent.span_id].name for call in calls} == {"specialist"}
    assert all(call.attributes["gen_ai.operation.name"] == "chat" for call in calls)
    assert {call.attributes["gen_ai.request.model"] for call in calls} == {"offline"}
    tools = named(finished, "mcp.tool_call")
    stored = [(result["tool"], result["status"]) for result in body["metadata"]["mcp_results"]]
    assert sorted((t.attributes["tool"], t.attributes["status"]) for t in tools) == sorted(stored) and stored
    assert {by_id[t.parent.span_id].attributes["agent"] for t in tools} == {"orders_agent"}
    assert all(t.attributes["server"] and t.attributes["latency_ms"] >= 0 for t in tools)
    # Names, ids and figures only: the customer's words are in no attribute.
    assert not [s.name for s in finished if any("atrasou" in str(value) for value in s.attributes.values())]


def test_the_spans_of_nodes_quicker_than_the_threshold_are_left_out(api, telecom, spans, settings):
    settings.TRACING_NODE_MIN_MS = 60_000
    send(api, "Minha fatura veio alta", "t-threshold")

    names = {span.name for span in spans.get_finished_spans()}
    assert {name for name in names if name.startswith("graph.")} == {"graph.specialist"}  # the live one stays
    assert {"turn", "specialist", "llm.call"} <= names


def test_a_model_call_carries_the_token_usage_the_model_reported(api, telecom, scripted_llm, spans):
    scripted_llm.reply("Sua fatura chegou.", usage=(9, 2))
    body = send(api, "Minha fatura veio alta", "t-usage")

    (call,) = named(spans.get_finished_spans(), "llm.call")
    assert body["agent"] == "billing_agent"
    assert call.attributes["gen_ai.request.model"] == "scripted-model"
    assert (call.attributes["gen_ai.usage.input_tokens"], call.attributes["gen_ai.usage.output_tokens"]) == (9, 2)
    assert call.attributes["agent"] == "billing_agent" and call.attributes["purpose"] == "specialist"


def test_a_failed_model_call_leaves_spans_with_an_error_status(api, telecom, scripted_llm, spans):
    scripted_llm.reply_error(500)
    send(api, "Minha fatura veio alta", "t-error")

    finished = spans.get_finished_spans()
    (call,) = named(finished, "llm.call")
    (specialist,) = named(finished, "specialist")
    assert call.status.status_code == specialist.status.status_code == StatusCode.ERROR
    assert call.events and call.events[0].name == "exception"


def test_a_supervisor_plans_steps_on_a_celery_worker_join_the_requests_trace(
    api, telecom, celery_worker, receiver, spans, settings
):
    telecom.routing_mode = "supervisor"
    telecom.save()
    settings.SUPERVISOR_EXECUTOR = "celery"
    plain = dict(celery_worker.env)
    celery_worker.env.update(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_SERVICE_NAME": "w"}
    )
    celery_worker.restart()
    try:
        body = send(api, "Meu pedido atrasou e minha fatura veio duplicada", "t-celery")
        deadline = time.monotonic() + 60  # a hang guard
        while len([s for _, s in receiver.spans() if s.name == "specialist"]) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        celery_worker.env = plain
        celery_worker.restart()

    assert [p["status"] for p in body["metadata"]["supervisor"]] == ["ok", "ok"]
    finished = spans.get_finished_spans()
    (turn,) = named(finished, "turn")
    (node,) = named(finished, "graph.specialist")
    assert not named(finished, "specialist")  # the steps ran on the worker
    remote = [(resource, span) for resource, span in receiver.spans() if span.name == "specialist"]
    assert {resource["service.name"] for resource, _ in remote} == {"w"}
    assert {int.from_bytes(span.trace_id, "big") for _, span in remote} == {turn.context.trace_id}
    assert {int.from_bytes(span.parent_span_id, "big") for _, span in remote} == {node.context.span_id}
    remote_attributes = [attributes(span.attributes) for _, span in remote]
    assert sorted(a["agent"] for a in remote_attributes) == ["billing_agent", "orders_agent"]
    assert {a["conversation_key"] for a in remote_attributes} == {"tenant_a:telecom_contas:t-celery"}
    assert {a["tenant"] for a in remote_attributes} == {"tenant_a"}


def test_the_mcp_sdks_own_spans_are_children_of_the_mcp_tool_call_span(api, demo, library_spans):
    send(api, "Minha fatura veio alta", "t-mcp-sdk", msisdn=MSISDN)

    finished = library_spans.get_finished_spans()
    (turn,) = named(finished, "turn")
    calls = {span.context.span_id for span in named(finished, "mcp.tool_call")}
    sent = [span for span in finished if span.name.startswith("MCP send tools/call")]
    assert sent and {span.instrumentation_scope.name for span in sent} == {"mcp-python-sdk"}
    assert len(sent) == len(calls) and {span.parent.span_id for span in sent} == calls
    sdk = [span for span in finished if span.instrumentation_scope.name == "mcp-python-sdk"]
    assert {span.context.trace_id for span in sdk} == {turn.context.trace_id}  # no trace of their own


def test_the_spans_are_exported_over_otlp_http_to_the_configured_endpoint(api, demo, receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "platform-under-test")
    provider = tracing.tracing_provider()  # what tracing_setup installs, without making it this process's global
    tracing.tracing_use(provider)
    try:
        body = send(api, "Minha fatura veio alta", "t-otlp", msisdn=MSISDN)
        provider.force_flush()
    finally:
        tracing.tracing_use(None)
        provider.shutdown()

    exported = receiver.spans()
    assert {resource["service.name"] for resource, _ in exported} == {"platform-under-test"}
    names = [span.name for _, span in exported]
    assert {"turn", "graph.specialist", "specialist", "llm.call", "mcp.tool_call"} <= set(names)
    (turn,) = [span for _, span in exported if span.name == "turn"]
    assert attributes(turn.attributes)["conversation_key"] == body["conversation_key"]
    assert {span.trace_id for _, span in exported} == {turn.trace_id}
    tools = [attributes(span.attributes) for _, span in exported if span.name == "mcp.tool_call"]
    assert sorted(tool["tool"] for tool in tools) == ["consultar_fatura", "consultar_pagamentos"]


def test_without_an_endpoint_or_with_the_sdk_disabled_tracing_is_off_and_nothing_is_exported(
    api, demo, receiver, monkeypatch
):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert not tracing.tracing_configured()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.endpoint}/v1/traces")
    assert tracing.tracing_configured()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")

    assert tracing.tracing_setup() is False
    assert not tracing.tracing_on() and tracing.headers_out() is None
    with tracing.span("turn", agent="a") as current:
        assert current is None
    body = send(api, "Minha fatura veio alta", "t-off", msisdn=MSISDN)

    assert body["agent"] == "billing_agent"
    time.sleep(0.2)
    assert receiver.count == 0
