"""The gateway's remote backends of kind A2A: a conversation handed to an A2A agent written here with the official
``a2a-sdk`` (its Starlette routes served by uvicorn on a free port) and back, its tokens relayed, its faults, and one
trace across both sides: the agent reads the hop's W3C ``traceparent`` and its span joins the turn's trace in the
test's collector."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from a2a.helpers import get_message_text, new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, TaskState
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from google.protobuf.json_format import MessageToDict
from opentelemetry import propagate
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette

from agents.models import BackendKind, RemoteBackend
from common.infra import tracing
from conversations.gateway import HOPS_HEADER, a2a_card_location, backend_circuits_reset, remote_session_id
from conversations.models import BackendCall, Conversation
from handoffs.models import Handoff, HandoffKind, HandoffStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

KEY = "a2a-agent-key"
WORDS = ["Sua", "portabilidade", "foi", "agendada."]


class PortingAgent(AgentExecutor):
    """An A2A agent of the test: answers word by word (a streamed artifact), in a span of its own that continues
    the caller's trace; records what each call brought (headers, context, metadata)."""

    def __init__(self, tracer) -> None:
        self.tracer = tracer
        self.calls: list[dict] = []
        self.state = TaskState.TASK_STATE_COMPLETED
        self.asks = False  # a new task asks the caller a question first (input-required), as a real agent may

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        headers = context.call_context.state["headers"]
        self.calls.append(
            {
                "headers": headers,
                "context_id": context.context_id,
                "text": get_message_text(context.message),
                "metadata": MessageToDict(context.message.metadata),
                "task_id": context.task_id,
                "continued": context.current_task is not None,
            }
        )
        if self.asks:
            await self._ask_then_finish(context, event_queue)
            return
        with self.tracer.start_as_current_span("porting.answer", context=propagate.extract(headers)):
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            await event_queue.enqueue_event(
                new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message])
            )
            await updater.start_work()
            for index, word in enumerate(WORDS):
                text = word if index == 0 else f" {word}"
                await updater.add_artifact([new_text_part(text)], artifact_id="answer", append=index > 0)
            message = updater.new_agent_message([new_text_part(" ".join(WORDS))])
            await updater.update_status(self.state, message)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    async def _ask_then_finish(self, context: RequestContext, event_queue: EventQueue) -> None:
        """A new task: what it did so far as an artifact, and a question in its status (input-required). The task
        continued (the caller's answer names it): done."""
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(
                new_task(context.task_id, context.context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message])
            )
            await updater.add_artifact([new_text_part(STARTED)], artifact_id="progress")
            await updater.requires_input(updater.new_agent_message([new_text_part(QUESTION)]))
            return
        await updater.complete(updater.new_agent_message([new_text_part(DONE)]))


STARTED = "Pedido de portabilidade aberto."
QUESTION = "Qual é o seu CPF para continuar?"
DONE = "Portabilidade agendada para o documento informado."


class KeyCheck:
    """The agent wants its key (as any A2A agent may); the card is public."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        keyed = (b"authorization", f"Bearer {KEY}".encode()) in scope.get("headers", [])
        if scope["type"] == "http" and scope["method"] == "POST" and not keyed:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def collector() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider
    provider.shutdown()


@pytest.fixture(scope="module")
def porting(collector) -> Iterator[tuple[str, PortingAgent]]:
    """The A2A agent at ``http://127.0.0.1:<port>/agents/porting/``, served by uvicorn in a thread."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/agents/porting/"
    agent = PortingAgent(collector[1].get_tracer("porting-agent"))
    card = AgentCard(
        name="porting_agent",
        description="Number porting.",
        version="1",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="porting", name="Porting", description="Moves a number here.", tags=["porting"])],
    )
    handler = DefaultRequestHandler(agent_executor=agent, task_store=InMemoryTaskStore(), agent_card=card)
    routes = [
        *create_agent_card_routes(card, card_url="/agents/porting/.well-known/agent-card.json"),
        *create_jsonrpc_routes(handler, rpc_url="/agents/porting/"),
    ]
    server = uvicorn.Server(uvicorn.Config(KeyCheck(Starlette(routes=routes)), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a hang guard
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield url, agent
    server.should_exit = True
    thread.join(10)
    sock.close()


@pytest.fixture(autouse=True)
def fresh(porting, collector):
    backend_circuits_reset()
    porting[1].calls.clear()
    porting[1].state = TaskState.TASK_STATE_COMPLETED
    porting[1].asks = False
    collector[0].clear()
    tracing.tracing_use(collector[1])
    yield
    tracing.tracing_use(None)
    backend_circuits_reset()


def a2a_backend(profile, url: str, key: str = KEY) -> RemoteBackend:
    return RemoteBackend.objects.create(
        profile=profile,
        name="porting_remote",
        kind=BackendKind.A2A,
        base_url=url,
        api_key=key,
        description="Number porting (an A2A agent)",
        keywords=["portabilidade"],
    )


def send(api, text: str, session: str) -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_a_conversation_goes_to_the_a2a_agent_and_back_in_one_trace(api, telecom, porting, collector):
    url, agent = porting
    a2a_backend(telecom, url)

    first = send(api, "Minha fatura veio alta", "a2a-1")
    there = send(api, "Quero fazer a portabilidade do meu número", "a2a-1")
    back = send(api, "E a minha fatura, quando vence?", "a2a-1")

    assert first["agent"] == "billing_agent" and back["agent"] == "billing_agent"
    assert there["agent"] == "porting_remote" and there["answer"] == " ".join(WORDS)
    hop = there["metadata"]["backend"]
    assert (hop["status"], hop["remote_agent"]) == ("ok", "porting_agent")
    key = there["conversation_key"]
    assert hop["remote_conversation_key"] == remote_session_id(key)
    (call,) = agent.calls
    assert call["context_id"] == remote_session_id(key) and call["text"].startswith("Quero fazer a portabilidade")
    gateway = call["metadata"]["context"]["gateway"]
    assert gateway["from_profile"] == "telecom_contas" and "fatura" in gateway["handoff_summary"]
    assert call["headers"][HOPS_HEADER.lower()] == "1"

    conversation = Conversation.objects.get(conversation_key=key)
    assert (conversation.active_backend, conversation.active_specialist) == ("", "billing_agent")
    moves = list(Handoff.objects.filter(conversation=conversation).order_by("created_at", "id"))
    assert [(m.kind, m.from_agent, m.to_agent, m.status) for m in moves] == [
        (HandoffKind.BACKEND, "billing_agent", "porting_remote", HandoffStatus.COMPLETED),
        (HandoffKind.BACKEND, "porting_remote", "billing_agent", HandoffStatus.COMPLETED),
    ]
    assert [(c.backend, c.status, c.remote_agent) for c in BackendCall.objects.all()] == [
        ("porting_remote", "ok", "porting_agent")
    ]

    finished = collector[0].get_finished_spans()
    (hop_span,) = [span for span in finished if span.name == "gateway.hop"]
    (remote_span,) = [span for span in finished if span.name == "porting.answer"]
    turns = [span for span in finished if span.name == "turn" and span.context.trace_id == hop_span.context.trace_id]
    assert len(turns) == 1  # the hop's turn: one trace from the turn down to the A2A agent's own span
    assert remote_span.context.trace_id == hop_span.context.trace_id
    assert remote_span.parent.span_id == hop_span.context.span_id and remote_span.parent.is_remote
    assert call["headers"]["traceparent"].split("-")[1] == format(hop_span.context.trace_id, "032x")


def test_an_a2a_agents_question_reaches_the_customer_and_their_reply_continues_its_task(api, telecom, porting):
    url, agent = porting
    agent.asks = True
    a2a_backend(telecom, url)

    asked = send(api, "Quero fazer a portabilidade do meu número", "a2a-ask")
    replied = send(api, "o número do documento é 12345", "a2a-ask")
    back = send(api, "E a minha fatura, quando vence?", "a2a-ask")

    assert asked["agent"] == "porting_remote" and QUESTION in asked["answer"] and STARTED in asked["answer"]
    assert replied["agent"] == "porting_remote" and replied["answer"] == DONE
    first, second = agent.calls
    assert (second["task_id"], second["context_id"], second["continued"]) == (
        first["task_id"],
        first["context_id"],
        True,
    )
    assert second["text"] == "o número do documento é 12345"
    assert back["agent"] == "billing_agent" and len(agent.calls) == 2
    assert [call.status for call in BackendCall.objects.order_by("id")] == ["ok", "ok"]


def test_the_stream_relays_the_a2a_agents_words_as_they_come(tenant_key, telecom, porting):
    from django.test import AsyncClient

    from tests.streaming import run, sse_events

    a2a_backend(telecom, porting[0])

    async def stream():
        response = await AsyncClient().post(
            "/api/gateway/message/stream",
            {"agent_id": "telecom_contas", "payload": {"text": "portabilidade", "session_id": "a2a-s"}},
            content_type="application/json",
            headers={"Authorization": f"Bearer {tenant_key.raw}"},
        )
        return b"".join([chunk async for chunk in response.streaming_content])

    events = sse_events(run(stream()))

    tokens = [data for name, data in events if name == "token"]
    assert len(tokens) > 1 and "".join(data["text"] for data in tokens) == " ".join(WORDS)  # as the masking cuts them
    assert {data["agent"] for data in tokens} == {"porting_remote"}
    assert events[-1][0] == "done" and events[-1][1]["answer"] == " ".join(WORDS)


@pytest.mark.parametrize(
    ("key", "state", "status", "http_status"),
    [
        ("wrong", TaskState.TASK_STATE_COMPLETED, "refused", 401),
        (KEY, TaskState.TASK_STATE_FAILED, "server_error", 200),
        (KEY, TaskState.TASK_STATE_REJECTED, "refused", 200),
    ],
)
def test_a_refused_or_failed_a2a_call_is_recorded_and_the_fallback_answers(
    api, telecom, porting, key, state, status, http_status
):
    porting[1].state = state
    a2a_backend(telecom, porting[0], key=key)

    answer = send(api, "Quero a portabilidade", f"a2a-fault-{status}-{http_status}")

    assert answer["agent"] == "support_agent" and answer["answer"].strip()
    call = BackendCall.objects.get()
    assert (call.status, call.http_status) == (status, http_status)
    assert KEY not in call.error


def test_the_agent_is_found_by_its_address_or_by_its_cards_own_url():
    assert a2a_card_location("https://a.example/agents/x/") == (
        "https://a.example/agents/x",
        AGENT_CARD_WELL_KNOWN_PATH,
    )
    assert a2a_card_location("https://a.example/cards/x.json?v=1") == ("https://a.example/cards", "x.json")
