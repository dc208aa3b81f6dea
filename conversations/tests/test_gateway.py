"""The Agent Gateway across two real deployments: this test process is the gateway (telecom_contas with its local
specialists and remote backends), and a second instance of the platform — its own database, key and server — is
the remote one (its telecom_contas and retail_orders). Faults use a tiny HTTP server of the test's own (slow, 503,
not the gateway API) or a port nothing listens on."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from django.test import AsyncClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agents.models import RemoteBackend
from common.i18n import say as say_in
from common.infra import tracing
from common.infra.bus import events_flush
from conversations.chain import BACKEND_UNAVAILABLE_ANSWER
from conversations.gateway import HOPS_HEADER, backend_circuits_reset, remote_session_id
from conversations.models import BackendCall, Conversation
from handoffs.models import Handoff, HandoffKind, HandoffStatus
from tests.factories import AgentProfileFactory
from tests.mcp_processes import free_port
from tests.platform_instance import Instance, platform_served
from tests.served import serve_in_thread
from tests.streaming import run, sse_events
from tests.webhook_receiver import Receiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(600)]

SELF_LOOP = (
    "from agents.models import AgentProfile, RemoteBackend; "
    "RemoteBackend.objects.create(profile=AgentProfile.objects.get(agent_id='retail_orders'), name='self_loop', "
    "base_url='{base}', api_key='{key}', remote_agent_id='retail_orders', keywords=['eco'], priority=1)"
)


@pytest.fixture(scope="module")
def remote(tmp_path_factory) -> Iterator[Instance]:
    """The second deployment. Its retail_orders has a backend pointing at itself (keyword "eco"): a loop the hop
    limit must stop. No Redis: its cache and supervisor runs stay its own."""

    def self_loop(instance: Instance) -> None:
        instance.manage("shell", "-c", SELF_LOOP.format(base=instance.base, key=instance.key))

    with platform_served(
        tmp_path_factory.mktemp("remote"), prefix="gateway_remote", before_serve=self_loop, REDIS_URL=""
    ) as instance:
        yield instance


@pytest.fixture(autouse=True)
def circuits_closed():
    backend_circuits_reset()
    yield
    backend_circuits_reset()


def backend(profile, name: str, base_url: str, key: str = "", **fields) -> RemoteBackend:
    return RemoteBackend.objects.create(
        profile=profile, name=name, base_url=base_url, api_key=key, description=f"{name} (remote)", **fields
    )


@pytest.fixture
def gateway(telecom, remote):
    """telecom_contas as a gateway: billing/orders/product/support here, contas_remote and retail_remote there."""
    backend(
        telecom, "contas_remote", remote.base, remote.key, remote_agent_id="telecom_contas", keywords=["portabilidade"]
    )
    backend(telecom, "retail_remote", remote.base, remote.key, remote_agent_id="retail_orders", keywords=["eco"])
    return telecom


def send(api, text: str, session: str, agent_id: str = "telecom_contas", **headers):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": agent_id, "payload": {"text": text, "session_id": session}},
        format="json",
        headers=headers,
    )
    assert response.status_code == 200, response.content
    return response.json()


def remote_messages(remote: Instance, conversation_key: str) -> dict:
    response = httpx.get(
        f"{remote.base}/api/sessions/{conversation_key}/messages",
        headers={"Authorization": f"Bearer {remote.key}"},
        timeout=10,
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_a_keyword_routes_to_the_remote_backend_and_back_to_a_local_specialist(api, gateway):
    first = send(api, "Minha fatura veio alta", "gw-1")
    assert first["agent"] == "billing_agent" and first["metadata"]["backend"] is None

    remote = send(api, "Quero fazer a portabilidade do meu número", "gw-1")
    assert remote["agent"] == "contas_remote"
    assert remote["metadata"]["route_decision"]["metadata"]["backend"] == "contas_remote"
    hop = remote["metadata"]["backend"]
    assert hop["name"] == "contas_remote" and hop["status"] == "ok" and hop["remote_agent"]
    assert remote["answer"].strip()
    conversation = Conversation.objects.get(conversation_key=remote["conversation_key"])
    assert (conversation.active_backend, conversation.active_specialist) == ("contas_remote", "contas_remote")

    back = send(api, "E a minha fatura, quando vence?", "gw-1")
    assert back["agent"] == "billing_agent" and back["metadata"]["backend"] is None
    conversation.refresh_from_db()
    assert (conversation.active_backend, conversation.active_specialist) == ("", "billing_agent")

    moves = list(Handoff.objects.filter(conversation=conversation).order_by("created_at", "id"))
    assert [(m.kind, m.from_agent, m.to_agent, m.status) for m in moves] == [
        (HandoffKind.BACKEND, "billing_agent", "contas_remote", HandoffStatus.COMPLETED),
        (HandoffKind.BACKEND, "contas_remote", "billing_agent", HandoffStatus.COMPLETED),
    ]
    assert "fatura" in moves[0].context_summary and "portabilidade" in moves[1].context_summary
    assert "portabilidade" in moves[0].reason
    calls = list(BackendCall.objects.filter(conversation=conversation))
    assert [(c.backend, c.status, c.http_status) for c in calls] == [("contas_remote", "ok", 200)]
    assert calls[0].message_id is not None and calls[0].latency_ms > 0


def test_backend_handoffs_count_in_the_default_handoff_analytics(api, gateway):
    send(api, "Minha fatura veio alta", "gw-counted")
    assert send(api, "Quero fazer a portabilidade do meu número", "gw-counted")["agent"] == "contas_remote"
    send(api, "E a minha fatura, quando vence?", "gw-counted")

    summary = api.get("/api/analytics/handoffs").json()
    assert summary["total_handoffs"] == 2
    assert {(path["from"], path["to"]) for path in summary["handoff_paths"]} == {
        ("billing_agent", "contas_remote"),
        ("contas_remote", "billing_agent"),
    }
    assert (summary["conversations_with_handoffs"], summary["total_conversations"]) == (1, 1)
    timeline = api.get("/api/analytics/handoffs/timeline", {"days": 1, "bucket": "hour"}).json()
    assert sum(period["by_kind"]["backend_handoff"] for period in timeline) == 2


def test_a_supervisor_profile_leaves_its_remote_backend_to_the_gateway(api, gateway):
    gateway.routing_mode = "supervisor"
    gateway.save(update_fields=["routing_mode"])
    contas = RemoteBackend.objects.get(name="contas_remote")
    contas.priority = 1  # ahead of billing_agent's invoice intent (10)
    contas.save(update_fields=["priority"])

    answer = send(api, "Quero a portabilidade do número e a minha fatura veio alta", "gw-supervisor")

    assert answer["agent"] == "contas_remote"
    assert answer["metadata"]["backend"]["status"] == "ok"
    assert answer["metadata"]["supervisor"] is None  # no plan: the hop carried the whole message
    assert answer["answer"].strip() and "[sem resposta" not in answer["answer"]
    assert list(BackendCall.objects.values_list("backend", "status")) == [("contas_remote", "ok")]


def test_a_short_follow_up_stays_on_the_active_backend_without_a_model_call(api, gateway, scripted_llm):
    gateway.routing_mode = "hybrid"
    gateway.llm_router_enabled = True
    gateway.save(update_fields=["routing_mode", "llm_router_enabled"])

    assert send(api, "Quero a portabilidade", "gw-2")["agent"] == "contas_remote"
    followup = send(api, "e quanto custa?", "gw-2")

    assert followup["agent"] == "contas_remote"
    assert followup["metadata"]["route_decision"]["method"] == "followup"
    assert followup["metadata"]["backend"]["status"] == "ok"
    assert scripted_llm.requests == []  # no classifier, no local specialist: the remote answered both
    assert BackendCall.objects.filter(status="ok").count() == 2
    assert not Handoff.objects.exists()  # the conversation started there and stayed


def test_the_handoff_summary_reaches_the_remote_specialist(api, gateway, remote):
    send(api, "Minha fatura veio alta", "gw-3")
    answer = send(api, "Quero fazer a portabilidade", "gw-3")

    remote_key = answer["metadata"]["backend"]["remote_conversation_key"]
    assert remote_key == f"tenant_a:telecom_contas:{remote_session_id(answer['conversation_key'])}"
    notes = [m["content"] for m in remote_messages(remote, remote_key)["messages"] if m["role"] == "system"]
    assert len(notes) == 1
    assert "[SYSTEM_NOTE: the gateway telecom_contas handed this conversation to you." in notes[0]
    assert "Minha fatura veio alta" in notes[0]


def test_the_stream_relays_the_remote_tokens_as_they_come(tenant_key, gateway):
    async def stream():
        response = await AsyncClient().post(
            "/api/gateway/message/stream",
            {"agent_id": "telecom_contas", "payload": {"text": "portabilidade", "session_id": "gw-4"}},
            content_type="application/json",
            headers={"Authorization": f"Bearer {tenant_key.raw}"},
        )
        return response, b"".join([chunk async for chunk in response.streaming_content])

    response, body = run(stream())

    assert response.status_code == 200
    events = sse_events(body)
    names = [name for name, _ in events]
    assert names[:2] == ["route", "agent"] and names[-1] == "done"
    assert events[1][1] == {"agent": "contas_remote", "display_name": "contas_remote", "via": "backend"}
    tokens = [data for name, data in events if name == "token"]
    assert len(tokens) > 1 and {data["agent"] for data in tokens} == {"contas_remote"}
    done = events[-1][1]
    assert done["agent"] == "contas_remote"
    assert "".join(data["text"] for data in tokens) == done["answer"]


def test_the_hop_limit_stops_a_backend_that_points_back_at_itself(api, gateway, remote):
    answer = send(api, "eco", "gw-5")

    # Here → retail_orders (hop 1) → its self_loop (hop 2) → again (hop 3) → at GATEWAY_MAX_HOPS (3): not called.
    assert answer["agent"] == "retail_remote" and answer["metadata"]["backend"]["status"] == "ok"
    key = answer["metadata"]["backend"]["remote_conversation_key"]
    statuses = []
    for _ in range(3):
        last = remote_messages(remote, key)["messages"][-1]["metadata"]["backend"]
        statuses.append(last["status"])
        key = last["remote_conversation_key"] or ""
    assert statuses == ["ok", "ok", "loop"]


def test_a_message_that_arrived_at_the_hop_limit_calls_no_backend(api, gateway, settings):
    settings.GATEWAY_MAX_HOPS = 2
    answer = send(api, "portabilidade", "gw-6", **{HOPS_HEADER: "2"})

    assert answer["agent"] == "support_agent"  # the profile's fallback specialist
    assert answer["metadata"]["backend"]["status"] == "loop"
    call = BackendCall.objects.get()
    assert (call.status, call.http_status, call.latency_ms) == ("loop", None, 0.0)


# --- faults ------------------------------------------------------------------------------------------------


class StubBackend:
    """A tiny HTTP server in a thread: ``mode`` ``ok`` (a gateway answer), ``slow`` (sleeps first), ``503``,
    ``json`` (a 200 that is not an event stream). ``calls`` counts the requests it got, ``paths`` their targets."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.calls = 0
        self.paths: list[str] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server calls it by this name
                stub.calls += 1
                stub.paths.append(self.path)
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if stub.mode == "slow":
                    time.sleep(3)
                if stub.mode == "503":
                    self._send(503, "text/plain", b"down for maintenance")
                elif stub.mode == "json":
                    self._send(200, "application/json", b'{"answer": "not a stream"}')
                else:
                    done = json.dumps({"answer": "stub answer", "agent": "stub_agent", "conversation_key": "k"})
                    self._send(200, "text/event-stream", f"event: done\ndata: {done}\n\n".encode())

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                with contextlib.suppress(OSError):  # a client that timed out has gone
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        serve_in_thread(self.server)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub():
    server = StubBackend()
    yield server
    server.stop()


def faulty(telecom, base_url: str, **fields) -> None:
    backend(telecom, "flaky_remote", base_url, remote_agent_id="anything", keywords=["portabilidade"], **fields)


@pytest.mark.parametrize(
    ("mode", "status", "http_status"),
    [("503", "server_error", 503), ("json", "bad_answer", 200), ("slow", "timeout", None)],
)
def test_a_failing_backend_is_recorded_and_the_fallback_specialist_answers(
    api, telecom, stub, mode, status, http_status
):
    stub.mode = mode
    faulty(telecom, stub.base, timeout=1.0)

    answer = send(api, "Quero a portabilidade", f"gw-fault-{mode}")

    assert answer["agent"] == "support_agent" and answer["answer"].strip()
    assert answer["metadata"]["backend"]["status"] == status
    call = BackendCall.objects.get()
    assert (call.backend, call.status, call.http_status) == ("flaky_remote", status, http_status)
    assert call.error and call.message_id is not None
    assert call.latency_ms < 2500  # a slow backend (3 s) is given up at its timeout (1 s)
    conversation = Conversation.objects.get()
    assert (conversation.active_backend, conversation.active_specialist) == ("", "support_agent")


def test_a_base_url_with_a_path_and_a_query_gets_the_gateway_path_after_its_path_and_keeps_its_query(
    api, telecom, stub
):
    faulty(telecom, f"{stub.base}/tenants/a/?region=eu&token=q-t0k")

    answer = send(api, "Quero a portabilidade", "gw-query")

    assert answer["answer"] == "stub answer"
    assert stub.paths == ["/tenants/a/api/gateway/message/stream?region=eu&token=q-t0k"]


def test_an_unreachable_backend_without_a_fallback_gets_a_graceful_sentence(api, db):
    bare = AgentProfileFactory(agent_id="bare_gateway")  # a gateway with no specialist of its own
    faulty(bare, f"http://127.0.0.1:{free_port()}")

    answer = send(api, "portabilidade", "gw-down", agent_id="bare_gateway")

    assert answer["answer"] == say_in(answer["metadata"]["language"], BACKEND_UNAVAILABLE_ANSWER)
    assert BackendCall.objects.get().status == "unreachable"


def test_a_wrong_key_is_a_refused_call(api, telecom, remote):
    backend(telecom, "contas_remote", remote.base, "wrong-key", remote_agent_id="telecom_contas", keywords=["chip"])

    answer = send(api, "meu chip", "gw-key")

    assert answer["agent"] == "support_agent"
    call = BackendCall.objects.get()
    assert (call.status, call.http_status) == ("refused", 401)


def test_the_circuit_opens_after_n_failures_and_closes_after_the_pause(api, telecom, stub):
    stub.mode = "503"
    faulty(telecom, stub.base, failures_to_open=2, open_seconds=1.0)

    for session in ("c-1", "c-2", "c-3"):
        send(api, "portabilidade", session)
    assert stub.calls == 2  # the third message found the circuit open: not called
    statuses = list(BackendCall.objects.order_by("id").values_list("status", flat=True))
    assert statuses == ["server_error", "server_error", "circuit_open"]

    time.sleep(1.1)
    stub.mode = "ok"
    trial = send(api, "portabilidade", "c-4")  # after the pause, one call tries it: it answers, the circuit closes
    assert trial["agent"] == "flaky_remote" and trial["answer"] == "stub answer"
    send(api, "portabilidade", "c-5")
    assert stub.calls == 4


def test_the_circuit_opening_and_closing_publish_backend_down_and_backend_up(api, telecom, stub, settings):
    receiver = Receiver()
    settings.EVENTS_WEBHOOK_URL, settings.EVENTS_WEBHOOK_SECRET = receiver.url, "whsec-gateway"
    try:
        stub.mode = "503"
        faulty(telecom, stub.base, failures_to_open=2, open_seconds=1.0)
        send(api, "portabilidade", "ev-1")
        send(api, "portabilidade", "ev-2")  # the second failure in a row opens the circuit
        time.sleep(1.1)
        stub.mode = "ok"
        send(api, "portabilidade", "ev-3")  # the trial answers: the circuit closes
        events_flush()

        backend_events = [event for event in receiver.events() if event["type"].startswith("backend.")]
        assert [event["type"] for event in backend_events] == ["backend.down", "backend.up"]
        down, up = backend_events
        assert down["profile"] == "telecom_contas"
        assert down["data"]["backend"] == "flaky_remote" and down["data"]["failures"] == 2
        assert down["data"]["reason"].startswith("server_error") and down["data"]["open_seconds"] == 1.0
        assert up["data"] == {"backend": "flaky_remote"}
    finally:
        receiver.stop()


def test_each_hop_is_a_gateway_hop_span_with_the_backend_and_its_outcome(api, telecom, stub):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.tracing_use(provider)
    try:
        faulty(telecom, stub.base)
        send(api, "portabilidade", "span-1")  # answered
        stub.mode = "503"
        send(api, "portabilidade", "span-2")  # failed: the fallback answers
    finally:
        tracing.tracing_use(None)
        provider.shutdown()

    hops = [span for span in exporter.get_finished_spans() if span.name == "gateway.hop"]
    assert [(hop.attributes["backend"], hop.attributes["status"]) for hop in hops] == [
        ("flaky_remote", "ok"),
        ("flaky_remote", "server_error"),
    ]
    assert hops[0].status.status_code != StatusCode.ERROR and hops[1].status.status_code == StatusCode.ERROR
    assert hops[1].attributes["http_status"] == 503 and hops[0].attributes["conversation_key"].endswith(":span-1")
    turns = {span.context.span_id: span for span in exporter.get_finished_spans() if span.name == "turn"}
    assert all(hop.context.trace_id in {turn.context.trace_id for turn in turns.values()} for hop in hops)


def test_loop_safety_stops_a_backend_move_that_repeats_too_often(api, telecom, stub):
    telecom.loop_max_repeats = 2
    telecom.save(update_fields=["loop_max_repeats"])
    faulty(telecom, stub.base)

    send(api, "Minha fatura veio alta", "loop-1")  # billing_agent
    assert send(api, "portabilidade", "loop-1")["agent"] == "flaky_remote"  # billing_agent → flaky_remote
    assert send(api, "e a fatura?", "loop-1")["agent"] == "billing_agent"  # and back
    stopped = send(api, "portabilidade de novo", "loop-1")  # billing_agent → flaky_remote a second time: stopped

    assert stopped["agent"] == "billing_agent" and "Vou parar por aqui" in stopped["answer"]
    assert stub.calls == 1
    last = Handoff.objects.order_by("-id").first()
    assert (last.kind, last.status, last.outcome) == (HandoffKind.BACKEND, HandoffStatus.STOPPED, "path_repeated")
    assert Conversation.objects.get().active_backend == ""


@pytest.mark.parametrize("kind", ["gateway", "a2a"])
def test_a_backend_stored_on_an_internal_address_gets_no_request(api, telecom, settings, kind):
    """The outbound policy (common/outbound.py) holds when the hop is made, whatever address was stored before."""
    settings.OUTBOUND_ALLOWED = []
    receiver = Receiver()
    try:
        faulty(telecom, f"http://127.0.0.1:{receiver.port}", kind=kind)
        answer = send(api, "Quero a portabilidade", f"gw-internal-{kind}")
    finally:
        receiver.stop()

    assert receiver.requests == []
    assert answer["agent"] == "support_agent" and answer["metadata"]["backend"]["status"] == "unreachable"
    assert "outbound policy" in BackendCall.objects.get().error
