"""The A2A face (chat/a2a.py), driven by the official ``a2a-sdk`` client against ``platform.asgi`` served by uvicorn:
the card, a message sent and streamed as a task of the conversation its context names, the task read back, the
keys and tenants, the protocol's errors, an escalation's state, and a caller's trace continued."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3.types import AgentCard as AgentCardV03
from a2a.helpers import get_artifact_text, get_message_text, new_text_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    InvalidParamsError,
    Message,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from chat.a2a import ERROR_NO_TEXT, ERROR_ROLE, PERSON_NOTICE
from common.errors import ERROR_INVALID_KEY, ERROR_NOT_AUTHENTICATED, ERROR_UNKNOWN_AGENT
from conversations.models import A2ATask, Conversation
from routing import snapshot
from tests.stock_paths import fast_path_only

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

TEXT = "Minha fatura veio alta"
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"


@pytest.fixture(autouse=True)
def rolled_out(multi_agent_for_everyone):
    """On the multi-agent graph, as the other faces' tests (the flag itself: chat/tests/test_front_door.py)."""


@pytest.fixture
def agent(asgi_server, telecom) -> str:
    return f"{asgi_server}/a2a/telecom_contas/"


def message(text: str, context_id: str = "", task_id: str = "", **metadata) -> SendMessageRequest:
    sent = Message(
        message_id=f"m-{time.monotonic_ns()}",
        role=Role.ROLE_USER,
        parts=[new_text_part(text)],
        context_id=context_id,
        task_id=task_id,
        metadata=metadata or None,
    )
    return SendMessageRequest(message=sent)


class Caller:
    """The SDK's client for one key, made from the card at ``url``; each call runs on its own event loop."""

    def __init__(self, url: str, key: str, *, streaming: bool = False, headers: dict[str, str] | None = None) -> None:
        self.url, self.key, self.streaming, self.headers = url, key, streaming, headers or {}

    async def _call(self, work):
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {self.key}"}, timeout=30)
        try:
            client = await ClientFactory(ClientConfig(streaming=self.streaming, httpx_client=http)).create_from_url(
                self.url
            )
            return await work(client, ClientCallContext(service_parameters=dict(self.headers)))
        finally:
            await http.aclose()

    def send(self, request: SendMessageRequest) -> list[StreamResponse]:
        async def work(client, context):
            return [event async for event in client.send_message(request, context=context)]

        return asyncio.run(self._call(work))

    def get(self, task_id: str):
        return asyncio.run(self._call(lambda client, context: client.get_task(GetTaskRequest(id=task_id))))

    def cancel(self, task_id: str):
        return asyncio.run(self._call(lambda client, context: client.cancel_task(CancelTaskRequest(id=task_id))))


def answered(events: list[StreamResponse]):
    """The task a non-streaming send answered with."""
    (event,) = events
    assert event.HasField("task"), event
    return event.task


def test_the_card_names_the_profile_its_skills_and_the_key_it_needs(agent, asgi_server):
    async def resolve():
        async with httpx.AsyncClient(timeout=10) as http:
            return await A2ACardResolver(http, agent).get_agent_card()

    card = asyncio.run(resolve())

    assert card.name and card.capabilities.streaming and not card.capabilities.push_notifications
    interfaces = [(item.url, item.protocol_binding, item.protocol_version) for item in card.supported_interfaces]
    assert interfaces == [(agent, "JSONRPC", "1.0"), (agent, "JSONRPC", "0.3")]
    skills = {skill.id: skill for skill in card.skills}
    assert {"billing_agent", "orders_agent"} <= skills.keys()
    assert "billing_invoice_explanation" in skills["billing_agent"].tags
    (scheme,) = card.security_schemes.values()
    assert scheme.http_auth_security_scheme.scheme == "bearer"
    assert [list(requirement.schemes) for requirement in card.security_requirements] == [["tenant_api_key"]]

    unknown = httpx.get(f"{asgi_server}/a2a/nope/.well-known/agent-card.json", timeout=10)
    assert unknown.status_code == 404
    assert unknown.json()["error"]["fields"] == {"agent_id": [ERROR_UNKNOWN_AGENT.format(agent_id="nope")]}
    stray = httpx.get(f"{asgi_server}/a2a/telecom_contas/elsewhere", timeout=10)
    assert stray.status_code == 404 and stray.headers["content-type"] == "application/json"


def test_a_message_is_a_task_of_the_conversation_its_context_names_and_reads_back(agent, tenant_key, tenant):
    caller = Caller(agent, tenant_key.raw)

    task = answered(caller.send(message(TEXT, context_id="ctx-1", user_id="u-1")))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.context_id == "ctx-1"
    routing = MessageToDict(task.status.message.metadata)
    key = f"{tenant.slug}:telecom_contas:ctx-1"
    assert (routing["agent"], routing["intent"], routing["conversation_key"]) == (
        "billing_agent",
        "billing_invoice_explanation",
        key,
    )
    (artifact,) = task.artifacts
    conversation = Conversation.objects.get(conversation_key=key)
    stored = list(conversation.messages.order_by("id").values_list("role", "content"))
    assert stored == [("user", TEXT), ("assistant", get_artifact_text(artifact))]
    assert get_message_text(task.status.message) == get_artifact_text(artifact)
    assert int(routing["message_id"]) == conversation.messages.get(role="assistant").pk
    assert conversation.user_id == "u-1" and conversation.channel == "a2a"

    read = caller.get(task.id)
    assert (read.id, read.status.state, get_artifact_text(read.artifacts[0])) == (
        task.id,
        TaskState.TASK_STATE_COMPLETED,
        get_artifact_text(artifact),
    )
    second = answered(caller.send(message("Quero a segunda via do boleto", context_id="ctx-1")))
    assert second.id != task.id and second.context_id == "ctx-1"
    assert conversation.messages.filter(role="user").count() == 2

    with pytest.raises(TaskNotCancelableError):
        caller.cancel(task.id)


def test_the_stream_writes_the_answer_token_by_token_and_ends_completed(agent, tenant_key, tenant):
    events = Caller(agent, tenant_key.raw, streaming=True).send(message(TEXT, context_id="ctx-s"))

    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[0] == "task" and events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    chunks = [event.artifact_update for event in events if event.HasField("artifact_update")]
    assert len(chunks) > 2  # token by token, then what closes the artifact
    assert not chunks[0].append and all(chunk.append for chunk in chunks[1:])
    assert chunks[-1].last_chunk
    last = events[-1].status_update
    assert last.status.state == TaskState.TASK_STATE_COMPLETED
    streamed = "".join(get_artifact_text(chunk.artifact) for chunk in chunks)
    conversation = Conversation.objects.get(conversation_key=f"{tenant.slug}:telecom_contas:ctx-s")
    assert streamed == conversation.messages.get(role="assistant").content == get_message_text(last.status.message)


def test_the_protocols_older_method_names_are_answered_too(agent, tenant_key):
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "message/send",
        "params": {"message": {"messageId": "m-1", "role": "user", "parts": [{"kind": "text", "text": TEXT}]}},
    }
    response = httpx.post(agent, json=body, headers={"Authorization": f"Bearer {tenant_key.raw}"}, timeout=30)

    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert (result["kind"], result["status"]["state"]) == ("task", "completed")
    assert result["artifacts"][0]["parts"][0]["text"]


def test_an_absent_or_wrong_key_is_refused_before_anything_runs(agent, tenant_key):
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}

    absent = httpx.post(agent, json=body, timeout=10)
    wrong = httpx.post(agent, json=body, headers={"Authorization": "Bearer ark_nope_wrong"}, timeout=10)

    assert (absent.status_code, absent.json()["error"]["message"]) == (401, ERROR_NOT_AUTHENTICATED)
    assert (wrong.status_code, wrong.json()["error"]["message"]) == (401, ERROR_INVALID_KEY)
    assert wrong.headers["www-authenticate"] == "Bearer"
    with pytest.raises(A2AClientError):
        Caller(agent, "ark_nope_wrong").send(message(TEXT))
    assert not A2ATask.objects.exists() and not Conversation.objects.exists()


def test_another_tenants_key_finds_neither_the_task_nor_the_conversation(agent, tenant_key, tenant, outsider_key):
    task = answered(Caller(agent, tenant_key.raw).send(message(TEXT, context_id="shared")))
    outsider = Caller(agent, outsider_key.raw)

    with pytest.raises(TaskNotFoundError):
        outsider.get(task.id)
    with pytest.raises(TaskNotFoundError):
        outsider.send(message("e o valor?", context_id="shared", task_id=task.id))
    theirs = answered(outsider.send(message("e o valor?", context_id="shared")))

    outsider_key_of = MessageToDict(theirs.status.message.metadata)["conversation_key"]
    assert outsider_key_of == f"{outsider_key.tenant.slug}:telecom_contas:shared"
    mine = Conversation.objects.get(conversation_key=f"{tenant.slug}:telecom_contas:shared")
    assert list(mine.messages.filter(role="user").values_list("content", flat=True)) == [TEXT]


def test_a_message_without_text_is_the_protocols_invalid_params_naming_the_parts(agent, tenant_key):
    with pytest.raises(InvalidParamsError) as refused:
        Caller(agent, tenant_key.raw).send(message("   "))

    assert refused.value.data["fields"] == {"message.parts": [ERROR_NO_TEXT]}
    assert not A2ATask.objects.exists()


def test_a_conversation_handed_to_a_person_leaves_its_task_waiting_for_input(agent, tenant_key, tenant):
    task = answered(Caller(agent, tenant_key.raw).send(message("quero falar com um atendente humano", "ctx-h")))

    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    routing = MessageToDict(task.status.message.metadata)
    assert routing["escalation"]["status"] == "queued" and routing["escalation"]["position"] == 1
    text = get_message_text(task.status.message)
    assert text and text != PERSON_NOTICE
    assert A2ATask.objects.get(task_id=task.id).state == "TASK_STATE_INPUT_REQUIRED"


def test_a_callers_traceparent_makes_the_request_and_its_turn_part_of_the_callers_trace(agent, tenant_key, spans):
    traceparent = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
    Caller(agent, tenant_key.raw, headers={"traceparent": traceparent, "tracestate": "vendor=1"}).send(message(TEXT))

    finished = spans.get_finished_spans()
    requests = {span.attributes["method"]: span for span in finished if span.name == "a2a.request"}
    assert requests.keys() == {"GET", "POST"}  # the card (read without the caller's headers), the message
    request = requests["POST"]
    (turn,) = [span for span in finished if span.name == "turn"]
    assert format(request.parent.span_id, "016x") == CALLER_SPAN and request.parent.is_remote
    assert turn.parent.span_id == request.context.span_id
    assert (request.attributes["agent_id"], request.attributes["http_status"]) == ("telecom_contas", 200)
    assert turn.context.trace_state.get("vendor") == "1"
    card = requests["GET"].context.trace_id
    assert {format(span.context.trace_id, "032x") for span in finished if span.context.trace_id != card} == {
        CALLER_TRACE
    }


def test_a_message_over_the_keys_message_rate_is_an_http_429_with_retry_after_and_starts_no_task(
    agent, tenant_key, settings
):
    settings.API_MESSAGE_RATE_PER_KEY = "1/day"
    body = {
        "jsonrpc": "2.0",
        "id": 8,
        "method": "message/send",
        "params": {"message": {"messageId": "m-2", "role": "user", "parts": [{"kind": "text", "text": TEXT}]}},
    }
    headers = {"Authorization": f"Bearer {tenant_key.raw}"}
    first = httpx.post(agent, json=body, headers=headers, timeout=30)
    refused = httpx.post(agent, json={**body, "id": 9}, headers=headers, timeout=30)

    assert first.status_code == 200, first.text
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["Retry-After"]) >= 1
    error = refused.json()["error"]
    assert error["message"].startswith("Too many messages for this API key")
    assert error["data"]["code"] == "throttled" and error["data"]["retry_after"] >= 1
    assert A2ATask.objects.count() == 1
    # The SDK's client, streaming: refused the same way, before any event.
    with pytest.raises(A2AClientError, match="429"):
        Caller(agent, tenant_key.raw, streaming=True).send(message(TEXT))


def test_a_message_over_the_profiles_size_limit_is_invalid_params_naming_the_parts_and_starts_no_task(
    agent, tenant_key, settings
):
    settings.MAX_INPUT_CHARS = 10

    with pytest.raises(InvalidParamsError) as refused:
        Caller(agent, tenant_key.raw).send(message("a text longer than ten characters"))

    assert refused.value.data["fields"] == {"message.parts": ["Text is longer than the limit of 10 characters."]}
    assert not A2ATask.objects.exists() and not Conversation.objects.exists()


def test_the_message_id_the_metadata_carries_rates_the_answer(agent, tenant_key, tenant, api):
    task = answered(Caller(agent, tenant_key.raw).send(message(TEXT, context_id="ctx-rated")))
    routing = MessageToDict(task.status.message.metadata)  # a protobuf Struct: every number is a double

    rated = api.post(
        f"/api/sessions/{routing['conversation_key']}/feedback",
        {"message_id": routing["message_id"], "rating": "up"},
        format="json",
    )

    assert rated.status_code == 201, rated.content
    assert rated.json()["message_id"] == Conversation.objects.get().messages.get(role="assistant").pk


def test_a_message_in_the_agents_role_is_invalid_params_naming_the_role(agent, tenant_key):
    sent = message(TEXT)
    sent.message.role = Role.ROLE_AGENT

    with pytest.raises(InvalidParamsError) as refused:
        Caller(agent, tenant_key.raw).send(sent)

    assert refused.value.data["fields"] == {"message.role": [ERROR_ROLE]}
    assert not A2ATask.objects.exists() and not Conversation.objects.exists()


def rpc(agent: str, key: str, method: str, params: dict, version: str = "1.0") -> dict:
    """One JSON-RPC call as a client that is not the SDK's writes it (the TCK, a script), with ``A2A-Version``."""
    headers = {"Authorization": f"Bearer {key}", "A2A-Version": version}
    body = {"jsonrpc": "2.0", "id": 11, "method": method, "params": params}
    response = httpx.post(agent, json=body, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_list_of_tasks_by_a_state_the_protocol_has_not_is_invalid_params_naming_the_status(agent, tenant_key):
    answered(Caller(agent, tenant_key.raw).send(message(TEXT, context_id="ctx-l")))

    refused = rpc(agent, tenant_key.raw, "ListTasks", {"status": "INVALID_STATUS"})
    listed = rpc(agent, tenant_key.raw, "ListTasks", {"status": "TASK_STATE_COMPLETED"})
    nested = rpc(agent, tenant_key.raw, "SendMessage", {"message": {**SENT, "role": "ROLE_SOMEONE"}})

    assert refused["error"]["code"] == -32602, refused
    assert list(fields_named(refused)) == ["status"]
    assert "INVALID_STATUS" in fields_named(refused)["status"][0]
    assert len(listed["result"]["tasks"]) == 1
    assert nested["error"]["code"] == -32602 and list(fields_named(nested)) == ["message.role"]
    assert A2ATask.objects.count() == 1


def fields_named(answer: dict) -> dict:
    """The fields a JSON-RPC error names: its ``data`` is the protocol's typed details, the first an ErrorInfo."""
    (info,) = [detail for detail in answer["error"]["data"] if detail["@type"].endswith("google.rpc.ErrorInfo")]
    return info["metadata"]["fields"]


SENT = {"messageId": "m-raw", "role": "ROLE_USER", "parts": [{"text": TEXT}]}


@fast_path_only  # the SDK's own response path (STOCK_PATHS) writes the id as protobuf's double, 686.0
def test_the_answers_message_id_is_an_integer_a_json_client_sends_back_as_read(agent, asgi_server, tenant_key):
    task = rpc(agent, tenant_key.raw, "SendMessage", {"message": {**SENT, "contextId": "ctx-int"}})["result"]["task"]
    routing = task["status"]["message"]["metadata"]

    assert type(routing["message_id"]) is int, routing
    rated = httpx.post(
        f"{asgi_server}/api/sessions/{routing['conversation_key']}/feedback",
        json={"message_id": routing["message_id"], "rating": "up"},
        headers={"Authorization": f"Bearer {tenant_key.raw}"},
        timeout=30,
    )
    assert rated.status_code == 201, rated.text


def test_an_older_method_name_under_version_one_is_method_not_found_naming_the_newer_one(agent, tenant_key):
    params = {"message": {"messageId": "m-1", "role": "user", "parts": [{"kind": "text", "text": TEXT}]}}

    refused = rpc(agent, tenant_key.raw, "message/send", params)
    older = rpc(agent, tenant_key.raw, "message/send", params, version="0.3")

    assert refused["error"]["code"] == -32601, refused
    assert "SendMessage" in refused["error"]["message"] and "0.3" in refused["error"]["message"]
    assert older["result"]["status"]["state"] == "completed"
    assert A2ATask.objects.count() == 1


def test_a_client_of_the_older_protocol_finds_the_agent_by_its_card_and_talks_to_it(agent, tenant_key):
    card = httpx.get(f"{agent}.well-known/agent-card.json", timeout=10).json()
    # What a 0.3 client reads of a card: its own schema, without the 1.0 interfaces list.
    older = AgentCardV03.model_validate(card)
    assert (older.url, older.preferred_transport, older.protocol_version) == (agent, "JSONRPC", "0.3")
    card.pop("supportedInterfaces")

    async def send():
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {tenant_key.raw}"}, timeout=30)
        try:
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(parse_agent_card(card))
            return [event async for event in client.send_message(message(TEXT, context_id="ctx-03"))]
        finally:
            await http.aclose()

    task = answered(asyncio.run(send()))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED and get_artifact_text(task.artifacts[0])


@pytest.mark.parametrize("bucket", ["context", "api_key", "fixed"])
def test_a_caller_without_a_user_id_is_bucketed_for_the_rollout_as_the_profile_says(agent, tenant_key, telecom, bucket):
    caller = Caller(agent, tenant_key.raw)
    unbucketed = MessageToDict(answered(caller.send(message(TEXT, context_id="anon-1"))).status.message.metadata)
    telecom.a2a_anonymous_bucket = bucket
    telecom.save(update_fields=["a2a_anonymous_bucket"])
    snapshot.invalidate()

    bucketed = MessageToDict(answered(caller.send(message(TEXT, context_id="anon-2"))).status.message.metadata)
    named = MessageToDict(
        answered(caller.send(message(TEXT, context_id="anon-3", user_id="u-9"))).status.message.metadata
    )

    assert (unbucketed["cohort"], bucketed["cohort"], named["cohort"]) == ("single_agent", "multi_agent", "multi_agent")
    assert bucketed["agent"] == "billing_agent"
    anonymous = Conversation.objects.get(conversation_key=bucketed["conversation_key"])
    assert anonymous.user_id == ""  # the bucket places the message; it names no user
