"""The OpenAI-compatible endpoint, driven by the official ``openai`` SDK and LangChain's ``ChatOpenAI`` against a
real ASGI server (uvicorn).

The offline model answers, or the scripted OpenAI-compatible server stands in for the profile's model; streaming goes
through uvicorn and Django's ASGI handler chunk by chunk.
"""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest
from jsonschema import Draft202012Validator
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from agents.offline_words import offline_words
from common.sizes import CUT_MARK
from conversations.models import Conversation, Message
from tests.hostile_schemas import json_schema_format, padded, reference_tree

TEXT = "Minha fatura veio alta"


@pytest.fixture
def client(asgi_server, tenant_key, telecom):
    return openai.OpenAI(base_url=f"{asgi_server}/v1", api_key=tenant_key.raw, max_retries=0, timeout=30)


@pytest.fixture(autouse=True)
def rolled_out(multi_agent_for_everyone):
    """These tests are about the face, on the multi-agent graph (the flag itself: chat/tests/test_front_door.py)."""


def routing_of(completion) -> dict:
    return completion.model_extra["x_agent_routing"]


def test_metadata_is_kept_with_the_message_and_its_language_names_the_conversations(client, tenant):
    completion = client.chat.completions.create(
        model="telecom_contas",
        messages=[{"role": "user", "content": TEXT}],  # Portuguese words, an English-speaking channel
        user="meta-1",
        metadata={"language": "en-GB", "order": "P100", "campaign": "x" * 512},
    )

    conversation = Conversation.objects.get(conversation_key=f"{tenant.slug}:telecom_contas:meta-1")
    assert conversation.language == "en"
    assert "I received your message" in completion.choices[0].message.content
    stored = conversation.messages.get(role="user").metadata["client_metadata"]
    assert stored == {"language": "en-GB", "order": "P100", "campaign": "x" * 512}


@pytest.mark.parametrize(
    ("metadata", "param"),
    [
        ({f"k{n}": "v" for n in range(17)}, "metadata"),  # OpenAI's bound: 16 keys
        ({"k" * 65: "v"}, "metadata"),  # keys up to 64 characters
        ({"note": "x" * 513}, "metadata"),  # values up to 512
        ({"language": "fr"}, "metadata.language"),  # a language the platform does not speak
    ],
)
def test_metadata_beyond_openais_bounds_is_a_400_naming_it_and_nothing_is_stored(client, metadata, param):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="telecom_contas", messages=[{"role": "user", "content": TEXT}], metadata=metadata
        )

    assert refused.value.param == param
    assert not Conversation.objects.exists()


def test_models_lists_the_enabled_profiles_as_models_of_the_keys_tenant(client, tenant):
    models = client.models.list()

    ids = [model.id for model in models.data]
    assert "telecom_contas" in ids
    model = next(model for model in models.data if model.id == "telecom_contas")
    assert model.object == "model" and model.owned_by == tenant.slug and model.created > 0


def test_a_model_is_retrieved_as_the_list_shows_it_owned_by_the_keys_tenant(client, asgi_server, outsider_key):
    listed = next(model for model in client.models.list().data if model.id == "telecom_contas")

    model = client.models.retrieve("telecom_contas")

    assert model == listed and model.object == "model"
    outsider = openai.OpenAI(base_url=f"{asgi_server}/v1", api_key=outsider_key.raw, max_retries=0, timeout=30)
    assert outsider.models.retrieve("telecom_contas").owned_by == outsider_key.tenant.slug


def test_an_unknown_model_is_retrieved_as_a_404_in_openais_error_shape(client, asgi_server):
    with pytest.raises(openai.NotFoundError) as raised:
        client.models.retrieve("no_such_profile")

    assert raised.value.body == {
        "message": "The model 'no_such_profile' does not exist.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    wrong = openai.OpenAI(base_url=f"{asgi_server}/v1", api_key="ark_wrong_key", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.retrieve("telecom_contas")


@pytest.mark.parametrize("stream", [None, False])
def test_stream_options_without_stream_is_a_400_naming_it_and_nothing_is_stored(client, stream):
    extra = {} if stream is None else {"stream": stream}
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="telecom_contas",
            messages=[{"role": "user", "content": TEXT}],
            stream_options={"include_usage": True},
            **extra,
        )

    assert refused.value.param == "stream_options" and "only allowed when 'stream' is enabled" in refused.value.message
    assert not Conversation.objects.exists()


def test_a_completion_answers_from_the_routed_agent_with_the_routing_extension_and_headers(client, tenant):
    raw = client.chat.completions.with_raw_response.create(
        model="telecom_contas",
        messages=[
            {"role": "system", "content": "Responda em uma frase."},  # instructions: the offline model reads none
            {"role": "user", "content": TEXT},
        ],
        user="s1",
    )
    completion = raw.parse()

    assert completion.object == "chat.completion"
    assert completion.model == "telecom_contas"
    choice = completion.choices[0]
    assert choice.message.role == "assistant" and choice.finish_reason == "stop"
    assert choice.message.content
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens
    routing = routing_of(completion)
    assert routing["agent"] == "billing_agent"
    assert routing["intent"] == "billing_invoice_explanation"
    assert routing["method"] == "keyword"
    assert routing["conversation_key"] == f"{tenant.slug}:telecom_contas:s1"
    assert completion.to_dict()["x_agent_routing"] == routing
    conversation = Conversation.objects.get(conversation_key=routing["conversation_key"])
    stored = Message.objects.filter(conversation=conversation).order_by("id").values_list("role", "content")
    assert list(stored) == [("user", TEXT), ("assistant", choice.message.content)]
    answer = conversation.messages.get(role="assistant")
    assert completion.id == f"chatcmpl-{conversation.pk}_1" and routing["message_id"] == answer.pk
    assert (raw.headers["X-Agent-Route"], raw.headers["X-Agent-Intent"]) == ("billing_agent", routing["intent"])
    assert raw.headers["X-Conversation-Key"] == routing["conversation_key"]  # its colons stay as they are
    assert raw.headers["X-Message-Id"] == str(answer.pk)


def test_the_same_user_continues_the_same_conversation_and_earlier_messages_are_not_resent(client, tenant):
    first = client.chat.completions.create(
        model="telecom_contas", messages=[{"role": "user", "content": TEXT}], user="s1"
    )
    second = client.chat.completions.create(
        model="telecom_contas",
        messages=[
            {"role": "user", "content": TEXT},
            {"role": "assistant", "content": first.choices[0].message.content},
            {"role": "user", "content": [{"type": "text", "text": "Quero a segunda via do boleto"}]},
        ],
        user="s1",
    )

    key = f"{tenant.slug}:telecom_contas:s1"
    assert routing_of(first)["conversation_key"] == routing_of(second)["conversation_key"] == key
    conversation = Conversation.objects.get(conversation_key=key)
    users = conversation.messages.filter(role="user").order_by("id").values_list("content", flat=True)
    assert list(users) == [TEXT, "Quero a segunda via do boleto"]  # the platform's history, not the request's
    assert conversation.messages.filter(role="assistant").count() == 2


def test_a_user_that_is_an_email_names_the_conversation_by_its_pseudonym_and_is_stored_nowhere_raw(client, tenant):
    email = "joao.silva@example.com"
    first = client.chat.completions.create(
        model="telecom_contas", messages=[{"role": "user", "content": TEXT}], user=email
    )
    second = client.chat.completions.create(
        model="telecom_contas", messages=[{"role": "user", "content": TEXT}], user=email
    )

    key = routing_of(first)["conversation_key"]
    assert key == routing_of(second)["conversation_key"]  # the same customer continues the same conversation
    assert email not in key and key.startswith(f"{tenant.slug}:telecom_contas:email:")
    conversation = Conversation.objects.get(conversation_key=key)
    assert email not in (conversation.session_id, conversation.user_id)
    assert conversation.messages.count() == 4
    assert not Conversation.objects.filter(conversation_key__contains=email).exists()


def test_the_session_header_names_the_conversation_and_without_one_each_request_is_new(
    asgi_server, tenant_key, telecom, tenant
):
    with_header = openai.OpenAI(
        base_url=f"{asgi_server}/v1", api_key=tenant_key.raw, default_headers={"X-Session-Id": "chat-42"}
    )
    completion = with_header.chat.completions.create(
        model="telecom_contas", messages=[{"role": "user", "content": TEXT}], user="u9"
    )
    assert routing_of(completion)["conversation_key"] == f"{tenant.slug}:telecom_contas:chat-42"
    assert Conversation.objects.get(session_id="chat-42").messages.count() == 2

    anonymous = openai.OpenAI(base_url=f"{asgi_server}/v1", api_key=tenant_key.raw)
    keys = {
        routing_of(
            anonymous.chat.completions.create(model="telecom_contas", messages=[{"role": "user", "content": TEXT}])
        )["conversation_key"]
        for _ in range(2)
    }
    assert len(keys) == 2


def test_streaming_sends_the_answer_chunk_by_chunk_then_the_routing_extension(client):
    plain = client.chat.completions.create(
        model="telecom_contas", messages=[{"role": "user", "content": TEXT}], user="fresh-plain"
    )

    raw = client.chat.completions.with_raw_response.create(
        model="telecom_contas",
        messages=[{"role": "user", "content": TEXT}],
        user="fresh-stream",
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(raw.parse())

    assert all(chunk.object == "chat.completion.chunk" and chunk.model == "telecom_contas" for chunk in chunks)
    conversation = Conversation.objects.get(session_id="fresh-stream")
    assert {chunk.id for chunk in chunks} == {f"chatcmpl-{conversation.pk}_1"}
    # The response started when the route was decided: its headers say it; the stored answer's id comes at the end.
    assert (raw.headers["X-Agent-Route"], raw.headers["X-Agent-Intent"]) == (
        "billing_agent",
        "billing_invoice_explanation",
    )
    assert raw.headers["X-Conversation-Key"].endswith(":fresh-stream") and "X-Message-Id" not in raw.headers
    assert chunks[0].choices[0].delta.role == "assistant"
    text_chunks = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(text_chunks) > 10  # the offline model streams word by word
    assert "".join(text_chunks) == plain.choices[0].message.content
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    assert final.choices[0].finish_reason == "stop"
    routing = final.model_extra["x_agent_routing"]
    assert routing["agent"] == "billing_agent" and routing["conversation_key"].endswith(":fresh-stream")
    assert "revised_answer" not in routing
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    answer = conversation.messages.get(role="assistant")
    assert answer.content == "".join(text_chunks) and routing["message_id"] == answer.pk


def test_the_stream_is_server_sent_events_ending_with_done(asgi_server, tenant_key, telecom):
    with httpx.stream(
        "POST",
        f"{asgi_server}/v1/chat/completions",
        json={"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}], "stream": True},
        headers={"Authorization": f"Bearer {tenant_key.raw}"},
        timeout=30,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"


def test_a_wrong_key_is_an_authentication_error(asgi_server, telecom):
    wrong = openai.OpenAI(base_url=f"{asgi_server}/v1", api_key="ark_wrong_key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as raised:
        wrong.chat.completions.create(model="telecom_contas", messages=[{"role": "user", "content": TEXT}])
    assert raised.value.status_code == 401
    assert raised.value.body["type"] == "authentication_error"
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()


def test_an_unknown_model_is_not_found_in_openais_error_shape(client):
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model="no_such_profile", messages=[{"role": "user", "content": TEXT}])

    assert raised.value.body == {
        "message": "The model 'no_such_profile' does not exist.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    assert not Conversation.objects.exists()


# --- bad input (Django's test client is enough: nothing streams) ---------------------------------------------


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "telecom_contas"}, "messages"),
        ({"model": "telecom_contas", "messages": []}, "messages"),
        ({"model": "telecom_contas", "messages": "hello"}, "messages"),
        ({"model": "telecom_contas", "messages": [{"role": "system", "content": "x"}]}, "messages"),
        ({"model": "telecom_contas", "messages": [{"content": "x"}]}, "messages.0"),
        ({"model": "telecom_contas", "messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
        ({"model": "telecom_contas", "messages": [{"role": "user", "content": "  "}]}, "messages.0.content"),
        (
            {"model": "telecom_contas", "messages": [{"role": "user", "content": [{"type": "text"}]}]},
            "messages.0.content.0.text",
        ),
        ({"messages": [{"role": "user", "content": TEXT}]}, "model"),
        ({"model": 3, "messages": [{"role": "user", "content": TEXT}]}, "model"),
        ({"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}], "user": 7}, "user"),
        ({"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}], "stream": "yes"}, "stream"),
        ({"model": "telecom_contas", "messages": [{"role": "user", "content": "x" * 5000}]}, "messages"),
        # A NUL character, which no PostgreSQL text can hold, wherever it is (the user names the conversation).
        ({"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}], "user": "a\u0000b"}, "user"),
        ({"model": "telecom_contas", "messages": [{"role": "user", "content": "o\u0000i"}]}, "messages.0.content"),
        ({"model": "telecom_\u0000contas", "messages": [{"role": "user", "content": TEXT}]}, "model"),
    ],
)
def test_bad_input_is_a_400_naming_the_param(api, telecom, body, param):
    response = api.post("/v1/chat/completions", body, format="json")

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error" and error["message"]
    assert not Conversation.objects.exists()


def test_malformed_json_and_a_missing_key_answer_in_openais_shape(api, telecom):
    response = api.post("/v1/chat/completions", "{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"

    from rest_framework.test import APIClient

    response = APIClient().get("/v1/models")
    assert response.status_code == 401
    assert response.json()["error"]["type"] == "authentication_error"


def test_streaming_also_works_through_djangos_test_client(api, telecom):
    response = api.post(
        "/v1/chat/completions",
        {"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}], "stream": True, "user": "w"},
        format="json",
    )

    assert response.status_code == 200 and response.streaming
    with pytest.warns(Warning, match="consume asynchronous iterators"):
        body = b"".join(response).decode()
    assert body.startswith("data: {") and body.rstrip().endswith("data: [DONE]")
    assert '"x_agent_routing"' in body and '"billing_agent"' in body


def test_the_stream_reaches_the_client_while_the_turn_is_still_running(asgi_server, tenant_key, telecom, settings):
    settings.OFFLINE_LLM_LATENCY_MS = 400  # each model call takes this long
    started = time.monotonic()
    arrivals = []
    with httpx.stream(
        "POST",
        f"{asgi_server}/v1/chat/completions",
        json={"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}], "stream": True},
        headers={"Authorization": f"Bearer {tenant_key.raw}"},
        timeout=30,
    ) as response:
        for line in response.iter_lines():
            if line:
                arrivals.append((time.monotonic() - started, line))

    first, last = arrivals[0][0], arrivals[-1][0]
    assert '"role": "assistant"' in arrivals[0][1]
    # The role chunk left once the route was decided, before the model had answered: nothing buffered the stream.
    assert last - first >= 0.4


def fake_turn(tokens, answer, *, discard_after=None):
    """A ``run_turn`` streaming ``tokens`` (a ``discard`` after the first ``discard_after``), answering ``answer``."""
    from conversations.turn import TurnResult

    async def run(data, *, begun=None):
        for index, text in enumerate(tokens):
            await data.emit("token", {"agent": "billing_agent", "text": text})
            if discard_after is not None and index + 1 == discard_after:
                await data.emit("discard", {"agent": "billing_agent"})
        return TurnResult(answer=answer, agent="orders_agent", conversation_key="k", metadata={"handoffs": []})

    return run


def streamed(api, monkeypatch, run):
    import json

    monkeypatch.setattr("chat.openai.turns.run_turn", run)
    response = api.post(
        "/v1/chat/completions",
        {"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}], "stream": True},
        format="json",
    )
    with pytest.warns(Warning, match="consume asynchronous iterators"):
        events = [line[len("data: ") :] for line in b"".join(response).decode().splitlines() if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    text = "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks if chunk["choices"])
    return text, chunks[-1]["x_agent_routing"]


def test_text_the_model_did_not_stream_is_sent_before_the_end(api, telecom, monkeypatch):
    text, routing = streamed(api, monkeypatch, fake_turn(["Sua ", "fatura "], "Sua fatura foi explicada. [nota]"))

    assert text == "Sua fatura foi explicada. [nota]" and "revised_answer" not in routing


def test_streamed_text_the_graph_replaced_is_revised_in_the_extension(api, telecom, monkeypatch):
    text, routing = streamed(
        api, monkeypatch, fake_turn(["Vou passar ", "para pedidos."], "Pedido P100 em trânsito.", discard_after=2)
    )

    assert text == "Vou passar para pedidos."  # already on the client's screen: a stream cannot take it back
    assert routing["revised_answer"] == "Pedido P100 em trânsito." and routing["agent"] == "orders_agent"


def test_the_usage_is_what_the_turns_models_reported_as_stored_with_the_answer(client, scripted_llm):
    scripted_llm.reply("Sua fatura está em dia.", usage=(321, 12))

    completion = client.chat.completions.create(
        model="telecom_contas", messages=[{"role": "user", "content": TEXT}], user="s-usage"
    )

    usage = completion.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (321, 12, 333)
    answer = Message.objects.get(conversation__session_id="s-usage", role="assistant")
    assert (answer.prompt_tokens, answer.completion_tokens, answer.llm_model) == (321, 12, "scripted-model")


def test_a_customer_who_asks_for_a_person_is_told_their_place_and_the_extension_says_so(client):
    completion = client.chat.completions.create(
        model="telecom_contas", messages=[{"role": "user", "content": "I want to talk to a real person"}], user="p1"
    )

    assert "You are number 1 in line" in completion.choices[0].message.content
    escalation = routing_of(completion)["escalation"]
    assert (escalation["status"], escalation["queue"], escalation["position"]) == ("queued", "support", 1)
    assert escalation["reason"] == "customer_request"


def test_a_request_for_a_person_says_the_escalation_in_the_routing_details(client):
    completion = client.chat.completions.create(
        model="telecom_contas", messages=[{"role": "user", "content": "quero falar com um atendente"}], user="p1"
    )

    escalation = routing_of(completion)["escalation"]
    assert (escalation["status"], escalation["queue"], escalation["position"]) == ("queued", "support", 1)
    assert "1º da fila" in completion.choices[0].message.content


# --- every parameter honoured or refused: the official SDK and LangChain's ChatOpenAI ----------------------------


class Reply(BaseModel):
    """A structured answer, as with_structured_output and the SDK's parse send it (a strict json_schema)."""

    answer: str
    urgent: bool


def chat_openai(asgi_server, tenant_key, **options) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=f"{asgi_server}/v1",
        api_key=tenant_key.raw,
        model="telecom_contas",
        max_retries=0,
        timeout=30,
        **options,
    )


def test_max_tokens_cuts_the_answer_with_finish_reason_length_stored_and_streamed_alike(client):
    ask = {"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}]}
    whole = client.chat.completions.create(**ask, user="whole").choices[0].message.content

    cut = client.chat.completions.create(**ask, user="cut", max_tokens=5)
    chunks = list(client.chat.completions.create(**ask, user="cut-stream", max_completion_tokens=5, stream=True))

    # Four characters a token, as the offline model counts its usage.
    assert cut.choices[0].message.content == whole[:20] and cut.choices[0].finish_reason == "length"
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    final = next(chunk for chunk in chunks if chunk.choices and chunk.choices[0].finish_reason)
    assert streamed == whole[:20] and final.choices[0].finish_reason == "length"
    for session in ("cut", "cut-stream"):
        answer = Message.objects.get(conversation__session_id=session, role="assistant")
        assert answer.content == whole[:20] and answer.metadata["limits"][-1]["limit"] == "max_tokens"


def test_n_above_one_and_client_tools_are_refused_by_name_through_the_sdk_and_langchain(
    client, asgi_server, tenant_key
):
    ask = {"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}]}
    with pytest.raises(openai.BadRequestError) as two:
        client.chat.completions.create(**ask, n=2)
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    with pytest.raises(openai.BadRequestError) as tools:
        client.chat.completions.create(**ask, tools=[tool])

    def lookup(order_id: str) -> str:
        """Look an order up."""
        return order_id

    with pytest.raises(openai.BadRequestError) as bound:
        chat_openai(asgi_server, tenant_key).bind_tools([lookup]).invoke(TEXT)

    assert (two.value.body["param"], two.value.body["code"]) == ("n", "unsupported_parameter")
    assert tools.value.body["param"] == bound.value.body["param"] == "tools"
    assert "MCP tools" in tools.value.body["message"]
    assert not Conversation.objects.exists()


def test_structured_output_is_json_valid_for_the_schema_through_the_sdk_and_langchain(client, asgi_server, tenant_key):
    parsed = client.chat.completions.parse(
        model="telecom_contas", messages=[{"role": "user", "content": TEXT}], response_format=Reply, user="s-json"
    )
    llm = chat_openai(asgi_server, tenant_key, model_kwargs={"user": "lc-json"})

    structured = llm.with_structured_output(Reply).invoke(TEXT)
    json_mode = llm.bind(response_format={"type": "json_object"}).invoke(TEXT)

    reply = parsed.choices[0].message.parsed
    assert reply.answer.startswith(f"Billing Agent {offline_words('pt')['notice']}:")
    assert reply.urgent is False  # the least the schema allows
    assert isinstance(structured, Reply) and structured.answer == reply.answer
    assert json.loads(json_mode.content) == {"answer": reply.answer}


def test_langchain_sees_the_route_in_the_headers_and_rates_the_answer_by_its_id(asgi_server, tenant_key, telecom, api):
    llm = chat_openai(asgi_server, tenant_key, include_response_headers=True, model_kwargs={"user": "lc-1"})

    reply = llm.invoke(TEXT)
    first_chunk = next(iter(llm.stream("E o vencimento?")))
    cut = llm.bind(max_tokens=3).invoke("E a segunda via?")

    headers = reply.response_metadata["headers"]
    assert (headers["x-agent-route"], headers["x-agent-intent"]) == ("billing_agent", "billing_invoice_explanation")
    assert first_chunk.response_metadata["headers"]["x-agent-route"] == "billing_agent"
    assert cut.response_metadata["finish_reason"] == "length" and len(cut.content) == 12
    key = headers["x-conversation-key"]
    conversation = Conversation.objects.get(conversation_key=key)
    assert reply.response_metadata["id"] == f"chatcmpl-{conversation.pk}_1"
    rated = api.post(
        f"/api/sessions/{key}/feedback", {"message_id": reply.response_metadata["id"], "rating": "down"}, format="json"
    )
    assert rated.status_code == 201, rated.content
    assert rated.json()["message_id"] == int(headers["x-message-id"])
    # Another conversation's id, or a turn that stored nothing, names no answer of this one.
    for wrong in (f"chatcmpl-{conversation.pk + 1}_1", f"chatcmpl-{conversation.pk}_9", "chatcmpl-abc"):
        refused = api.post(f"/api/sessions/{key}/feedback", {"message_id": wrong, "rating": "up"}, format="json")
        assert refused.status_code == 400 and "message_id" in refused.json()["error"]["fields"], wrong


def test_the_parameters_reach_the_profiles_model_which_writes_in_the_format_asked(client, scripted_llm):
    scripted_llm.reply("Sua fatura subiu por causa", finish_reason="length")
    scripted_llm.reply('{"answer": "Sua fatura está em dia.", "urgent": false}')
    scripted_llm.reply("Sua fatura está em dia.")  # prose, though JSON was asked for: the platform puts it in

    cut = client.chat.completions.create(
        model="telecom_contas",
        messages=[{"role": "system", "content": "Responda em uma frase."}, {"role": "user", "content": TEXT}],
        user="real",
        max_tokens=50,
        temperature=0.3,
        top_p=0.9,
        seed=11,
        stop=["FIM"],
        frequency_penalty=0.5,
        presence_penalty=-0.5,
    )
    answers = [
        client.chat.completions.parse(
            model="telecom_contas", messages=[{"role": "user", "content": TEXT}], response_format=Reply
        )
        for _ in range(2)
    ]

    sent = scripted_llm.requests[0]
    asked = {key: sent.get(key) for key in ("max_completion_tokens", "temperature", "top_p", "seed", "stop")}
    assert asked == {"max_completion_tokens": 50, "temperature": 0.3, "top_p": 0.9, "seed": 11, "stop": ["FIM"]}
    assert (sent["frequency_penalty"], sent["presence_penalty"]) == (0.5, -0.5)
    assert any("Responda em uma frase." in m["content"] for m in sent["messages"] if m["role"] == "system")
    # The model stopped at its max_tokens: so does the completion.
    assert (cut.choices[0].message.content, cut.choices[0].finish_reason) == ("Sua fatura subiu por causa", "length")
    schema = scripted_llm.requests[1]["response_format"]
    assert schema["type"] == "json_schema" and schema["json_schema"]["name"] == "Reply"
    assert [answer.choices[0].message.parsed for answer in answers] == [
        Reply(answer="Sua fatura está em dia.", urgent=False)
    ] * 2


def test_a_supervisors_parts_are_merged_in_prose_then_put_in_the_json_asked_for(api, telecom):
    telecom.routing_mode = "supervisor"
    telecom.save()
    body = {
        "model": "telecom_contas",
        "messages": [{"role": "user", "content": "Meu pedido atrasou e minha fatura veio duplicada"}],
        "user": "plan",
        "response_format": {"type": "json_object"},
    }

    response = api.post("/v1/chat/completions", body, format="json")

    assert response.status_code == 200, response.content
    answer = json.loads(response.json()["choices"][0]["message"]["content"])
    assert "billing_agent:" in answer["answer"] and "orders_agent:" in answer["answer"]
    parts = Message.objects.filter(role="agent").values_list("content", flat=True)
    assert len(parts) == 2 and not any(part.startswith("{") for part in parts)  # each part wrote prose


# --- structured output within the platform's limits, whatever the client's schema says ----------------------------


def test_a_schema_whose_answer_cannot_fit_the_limit_is_refused_by_name_before_anything_is_stored(client, settings):
    ask = {"model": "telecom_contas", "messages": [{"role": "user", "content": "oi"}], "user": "schema"}
    refused = []
    for schema in (
        padded({"type": "string", "minLength": 1_000_000}),  # 331 bytes asked a 1 MB answer
        padded({"type": "array", "minItems": 800_000, "items": {"type": "integer"}}),
        reference_tree(12),
    ):
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError) as error:
                client.chat.completions.create(**ask, response_format=json_schema_format(schema), stream=stream)
            refused.append(error.value)

    assert {(error.body["param"], error.body["code"]) for error in refused} == {
        ("response_format.json_schema.schema", "invalid_schema")
    }
    assert all(f"{settings.ANSWER_MAX_CHARS:,} characters" in error.body["message"] for error in refused)
    assert not Conversation.objects.exists()


def test_a_number_json_cannot_write_in_a_schema_is_a_400_naming_it(api, telecom):
    body = json.dumps(
        {
            "model": "telecom_contas",
            "messages": [{"role": "user", "content": "oi"}],
            "response_format": json_schema_format(padded({"type": "integer", "minimum": 1})),
        }
    ).replace('"minimum": 1', '"minimum": 1e999')  # JSON's number syntax has no limit; Python reads it as infinite

    response = api.post("/v1/chat/completions", body, content_type="application/json")

    assert response.status_code == 400, response.content
    assert response.json()["error"]["param"] == "response_format.json_schema.schema"
    assert not Conversation.objects.exists()


def test_a_filled_answer_is_returned_streamed_and_stored_within_the_answers_limit(client, settings):
    settings.ANSWER_MAX_CHARS = 200
    schema = padded({"type": "string", "minLength": 120})
    ask = {"model": "telecom_contas", "messages": [{"role": "user", "content": TEXT}]}

    whole = client.chat.completions.create(**ask, response_format=json_schema_format(schema), user="fit")
    chunks = client.chat.completions.create(
        **ask, response_format=json_schema_format(schema), user="fit-stream", stream=True
    )
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)

    for session, content in (("fit", whole.choices[0].message.content), ("fit-stream", streamed)):
        stored = Message.objects.get(conversation__session_id=session, role="assistant").content
        assert stored == content and len(stored) <= 200
        value = json.loads(stored)
        kept = value["answer"].partition(CUT_MARK.partition("{")[0])[0]  # the pad's room ends inside the header
        assert value["pad"] == "-" * 120 and kept.startswith("Billing Agent (")
        assert f"Billing Agent {offline_words('pt')['notice']}:".startswith(kept)
        assert value["answer"].endswith("more characters]")  # cut to the room the pad leaves


def test_a_models_answer_too_long_against_a_pattern_or_too_deep_is_put_into_the_schema_within_the_limit(
    client, scripted_llm, settings
):
    limit = settings.ANSWER_MAX_CHARS
    schema = padded({"type": "string", "pattern": "^(a|aa)*$"})
    too_long = {"answer": "Sua fatura está em dia. " * 400, "pad": "aa"}  # valid
    scripted_llm.reply(json.dumps(too_long, ensure_ascii=False))
    scripted_llm.reply(json.dumps({"answer": "Sua fatura.", "pad": "a" * 3_000 + "!"}))  # exponential to backtrack
    scripted_llm.reply("[" * 3_000 + "]" * 3_000)  # deeper than Python's JSON decoder nests

    answers = [
        client.chat.completions.create(
            model="telecom_contas",
            messages=[{"role": "user", "content": TEXT}],
            response_format=json_schema_format(schema),
            user=f"model-{index}",
        )
        .choices[0]
        .message.content
        for index in range(3)
    ]

    for answer in answers:
        assert len(answer) <= limit and Draft202012Validator(schema).is_valid(json.loads(answer))
    assert json.loads(answers[0])["answer"].startswith('{"answer": "Sua fatura está em dia.')
    assert json.loads(answers[1]) == {"answer": '{"answer": "Sua fatura.", "pad": "' + "a" * 3_000 + '!"}', "pad": ""}
    assert json.loads(answers[2])["answer"].startswith("[[[[")
    stored = Message.objects.filter(role="assistant").values_list("content", flat=True)
    assert sorted(stored) == sorted(answers)
