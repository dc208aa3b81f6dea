"""The answer's limit (``ANSWER_MAX_CHARS``) on what a turn streams as on what it stores: a model endpoint that writes
far more than the limit reaches no face's client past it, and the cut is recorded as every cut is.

Against the scripted OpenAI-compatible server, on every face that streams: Server-Sent Events, the WebSocket, chat
completions and responses (the ``openai`` SDK against a served ASGI app)."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient

from agents.models import McpTool
from agents.offline_words import offline_words
from common.config_version import config_version_bump
from common.sizes import CUT_MARK
from conversations.answer_limit import answer_stream_bounded, stream_room
from conversations.judges import review_note
from conversations.models import Message
from platform.asgi import application
from tests.hostile_schemas import json_schema_format, padded
from tests.streaming import run, sse_events

LIMIT = 300
TEXT = "Minha fatura veio alta"
# A model's answer 24 times the limit, in pieces as an endpoint streams them.
PIECES = ["Sua fatura ", "está em dia ", "e o pagamento ", "foi recebido. "] * 150
MARK_END = CUT_MARK[CUT_MARK.index("}") + 1 :]  # " more characters]"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def limited(settings, multi_agent_for_everyone):
    settings.ANSWER_MAX_CHARS = LIMIT


@pytest.fixture
def model(scripted_llm):
    scripted_llm.reply_streamed(PIECES)
    return scripted_llm


def stored(session: str) -> Message:
    return Message.objects.get(conversation__session_id=session, role="assistant")


def assert_cut_and_recorded(answer: str, metadata: dict) -> None:
    assert len(answer) <= LIMIT and answer.startswith("Sua fatura está em dia") and answer.endswith(MARK_END)
    (hit,) = [hit for hit in metadata["limits"] if hit["limit"] == "answer_chars"]
    assert hit["value"] == LIMIT and hit["asked"] == len("".join(PIECES)) and hit["ran"] == len(answer)


def sse_turn(tenant_key, session: str) -> tuple[str, dict]:
    """The text a Server-Sent Events client was streamed, and its ``done`` event."""

    async def stream() -> bytes:
        response = await AsyncClient().post(
            "/api/gateway/message/stream",
            {"agent_id": "telecom_contas", "payload": {"text": TEXT, "session_id": session}},
            content_type="application/json",
            headers={"Authorization": f"Bearer {tenant_key.raw}"},
        )
        return b"".join([chunk async for chunk in response.streaming_content])

    events = sse_events(run(stream()))
    assert events[-1][0] == "done"
    return "".join(data["text"] for name, data in events if name == "token"), events[-1][1]


def test_a_streamed_answer_reaches_an_sse_client_within_the_limit(tenant_key, telecom, model):
    tokens, done = sse_turn(tenant_key, "sse-limit")

    assert len(tokens) <= stream_room(LIMIT) and done["answer"].startswith(tokens)
    assert_cut_and_recorded(done["answer"], done["metadata"])
    assert stored("sse-limit").content == done["answer"]


async def chat_socket(tenant_key, session: str) -> list[dict]:
    """A WebSocket client's events for :data:`TEXT`, to its ``done``."""
    socket = WebsocketCommunicator(application, f"/ws/chat/telecom_contas/{session}/?key={tenant_key.raw}")
    connected, _ = await socket.connect(timeout=5)
    assert connected
    try:
        await socket.send_json_to({"text": TEXT, "user_id": "customer-1"})  # the rollout's stickiness
        events: list[dict] = []
        while not events or events[-1]["type"] != "done":
            events.append(await socket.receive_json_from(timeout=20))
        return events
    finally:
        await socket.disconnect()


def socket_turn(tenant_key, session: str) -> tuple[str, dict]:
    """The text a WebSocket client was streamed, and its ``done`` event."""
    events = run(chat_socket(tenant_key, session))
    return "".join(event["text"] for event in events if event["type"] == "token"), events[-1]


def test_a_streamed_answer_reaches_a_websocket_client_within_the_limit(tenant_key, telecom, model):
    tokens, done = socket_turn(tenant_key, "ws-limit")

    assert len(tokens) <= stream_room(LIMIT) and done["answer"].startswith(tokens)
    assert_cut_and_recorded(done["answer"], done["metadata"])
    assert stored("ws-limit").content == done["answer"]


@pytest.fixture
def client(asgi_server, tenant_key, telecom):
    return openai.OpenAI(base_url=f"{asgi_server}/v1", api_key=tenant_key.raw, max_retries=0, timeout=30)


def test_a_streamed_chat_completion_sends_the_stored_answer_and_finishes_with_length(client, model):
    chunks = list(
        client.chat.completions.create(
            model="telecom_contas", messages=[{"role": "user", "content": TEXT}], stream=True, user="completion-limit"
        )
    )
    content = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    last = next(chunk for chunk in reversed(chunks) if chunk.choices)

    assert content == stored("completion-limit").content  # what the client got is what is stored: nothing to revise
    assert last.choices[0].finish_reason == "length"
    assert "revised_answer" not in last.model_extra["x_agent_routing"]
    assert_cut_and_recorded(content, stored("completion-limit").metadata)


def test_a_streamed_response_sends_the_stored_answer_and_is_incomplete(client, model):
    events = list(client.responses.create(model="telecom_contas", input=TEXT, user="response-limit", stream=True))
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    final = events[-1].response  # response.incomplete (the SDK's stream helper waits for response.completed)

    assert "".join(deltas) == final.output_text == stored("response-limit").content
    assert final.status == "incomplete" and "revised_answer" not in final.model_extra["x_agent_routing"]
    assert_cut_and_recorded(final.output_text, stored("response-limit").metadata)


# --- an answer that changed something and failed the judges: it stands, with the review's note -------------------

# In English to a question in Portuguese, naming none of the invoice's figures: the rule-based judge fails it.
UNGROUNDED = ["Your invoice ", "is up to date ", "and the payment ", "was received. "] * 150


@pytest.mark.parametrize("face", [sse_turn, socket_turn])
def test_a_streamed_answer_that_gets_the_review_note_is_stored_as_its_client_saw_it_the_note_within_the_limit(
    tenant_key, live_mcp, scripted_llm, face
):
    McpTool.objects.filter(name="consultar_fatura").update(read_only=False)  # its server says it changes things
    config_version_bump()  # QuerySet.update bypasses the invalidation signals
    scripted_llm.reply_tool_call("consultar_fatura", {"msisdn": "5511999999999", "invoice_id": "INV001"})
    scripted_llm.reply_streamed(UNGROUNDED)
    session = f"noted-{face.__name__}"

    tokens, done = face(tenant_key, session)

    note = review_note("pt")
    assert done["metadata"]["review"]["action"] == "note"
    assert tokens.startswith("Your invoice is up to date") and done["answer"].startswith(tokens)
    assert done["answer"].endswith(f"{MARK_END}\n\n{note}") and len(done["answer"]) <= LIMIT
    assert stored(session).content == done["answer"]  # a client reloading the conversation reads what it saw


# --- a formatted answer: its text cut to make room for the schema's other values --------------------------------


ROOMY = padded({"type": "string", "minLength": 200})  # leaves the text under 80 of the limit's 300 characters


def assert_fitted_and_recorded(answer: str, metadata: dict, finish: str) -> None:
    value = json.loads(answer)
    assert len(answer) <= LIMIT and value["pad"] == "-" * 200 and value["answer"].endswith(MARK_END)
    (hit,) = [hit for hit in metadata["limits"] if hit["limit"] == "answer_chars"]
    assert hit["value"] == LIMIT and hit["ran"] == len(answer) and hit["asked"] > LIMIT
    assert finish == "length"


@pytest.mark.parametrize("stream", [False, True])
def test_an_offline_answer_cut_to_fit_the_schema_finishes_with_length_and_records_the_cut(client, stream):
    asked = {"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}]}
    session = f"offline-fit-{stream}"

    completion = client.chat.completions.create(
        **asked, response_format=json_schema_format(ROOMY), user=session, stream=stream
    )
    if stream:
        chunks = [chunk for chunk in completion if chunk.choices]
        answer = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
        finish = chunks[-1].choices[0].finish_reason
    else:
        answer, finish = completion.choices[0].message.content, completion.choices[0].finish_reason

    header = f"Billing Agent {offline_words('pt')['notice']}"
    assert answer == stored(session).content and json.loads(answer)["answer"].startswith(header)
    assert_fitted_and_recorded(answer, stored(session).metadata, finish)


def test_a_models_prose_cut_to_fit_the_schema_finishes_with_length_and_records_the_cut(client, scripted_llm):
    scripted_llm.reply("Sua fatura está em dia. " * 10)  # 240 characters: within the limit, not beside the pad

    completion = client.chat.completions.create(
        model="telecom_contas",
        messages=[{"role": "user", "content": TEXT}],
        response_format=json_schema_format(ROOMY),
        user="model-fit",
    )
    answer = completion.choices[0].message.content

    assert json.loads(answer)["answer"].startswith("Sua fatura está em dia.")
    assert_fitted_and_recorded(answer, stored("model-fit").metadata, completion.choices[0].finish_reason)


# --- the bound itself ------------------------------------------------------------------------------------------


def test_the_stream_keeps_each_answers_text_and_each_part_within_the_limit_and_starts_again_after_a_discard():
    sent: list[tuple[str, dict]] = []

    async def emit(event: str, data: dict) -> None:
        sent.append((event, data))

    async def turn() -> None:
        bounded = answer_stream_bounded(emit, 400)
        await bounded("route", {"agent": "a"})
        for _ in range(30):
            await bounded("token", {"agent": "a", "text": "0123456789"})
        await bounded("discard", {"agent": "a"})
        await bounded("token", {"agent": "b", "text": "x" * 500})
        await bounded("partial", {"agent": "c", "answer": "y" * 500})

    asyncio.run(turn())

    first = "".join(data["text"] for event, data in sent[: sent.index(("discard", {"agent": "a"}))] if event == "token")
    second = [data["text"] for event, data in sent if event == "token" and data["agent"] == "b"]
    partial = next(data for event, data in sent if event == "partial")
    assert sent[0] == ("route", {"agent": "a"})
    assert first == ("0123456789" * 30)[: stream_room(400)]
    assert second == ["x" * stream_room(400)]
    assert len(partial["answer"]) == 400 and partial["answer"].endswith(MARK_END)
