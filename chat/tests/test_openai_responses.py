"""OpenAI's Responses API on the platform, driven by the official ``openai`` SDK and LangChain's ``ChatOpenAI``
(``use_responses_api=True``) against a real ASGI server (uvicorn): the offline model answers, or the scripted
OpenAI-compatible server stands in for the profile's model."""

from __future__ import annotations

import json

import openai
import pytest
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from agents.offline_words import offline_words
from conversations.models import Conversation, IdempotentRequest
from tests.hostile_schemas import padded

TEXT = "Minha fatura veio alta"
PT_NOTICE = offline_words("pt")["notice"]  # the Portuguese catalogue's "(offline model)"


class Reply(BaseModel):
    answer: str


@pytest.fixture
def client(asgi_server, tenant_key, telecom):
    return openai.OpenAI(base_url=f"{asgi_server}/v1", api_key=tenant_key.raw, max_retries=0, timeout=30)


@pytest.fixture(autouse=True)
def rolled_out(multi_agent_for_everyone):
    """On the multi-agent graph, as the chat completion tests (the flag itself: chat/tests/test_front_door.py)."""


def test_a_responses_metadata_is_echoed_kept_and_its_language_names_the_conversations(client, tenant):
    response = client.responses.create(
        model="telecom_contas", input=TEXT, user="meta-r1", metadata={"language": "es", "ticket": "T-9"}
    )

    conversation = Conversation.objects.get(conversation_key=f"{tenant.slug}:telecom_contas:meta-r1")
    assert response.metadata == {"language": "es", "ticket": "T-9"}
    assert conversation.language == "es" and "recibí su mensaje" in response.output_text
    assert conversation.messages.get(role="user").metadata["client_metadata"] == {"language": "es", "ticket": "T-9"}


def test_a_response_echoes_its_user_and_metadata_streamed_or_not_and_replayed_without_storing_them_raw(client, tenant):
    email = "joao.silva@example.com"
    asked = {"user": email, "metadata": {"contact": email}, "extra_headers": {"Idempotency-Key": "echo-once"}}

    response = client.responses.create(model="telecom_contas", input=TEXT, **asked)
    replayed = client.responses.create(model="telecom_contas", input=TEXT, **asked)
    with client.responses.stream(model="telecom_contas", input=TEXT, user="echo-stream") as events:
        kinds = {event.type: event for event in events}

    assert (response.user, replayed.user, replayed.id) == (email, email, response.id)
    assert response.metadata == replayed.metadata == {"contact": email}
    assert kinds["response.created"].response.user == "echo-stream"
    assert kinds["response.completed"].response.user == "echo-stream"
    stored = IdempotentRequest.objects.get(key="echo-once").response
    assert email not in json.dumps(stored)


def test_a_retrieved_response_says_the_metadata_and_user_its_create_call_stored(client):
    metadata = {"ticket": "T-9", "campaign": "x" * 512, **{f"k{n}": "v" for n in range(14)}}  # OpenAI's bounds
    created = client.responses.create(model="telecom_contas", input=TEXT, user="meta-get", metadata=metadata)
    bare = client.responses.create(model="telecom_contas", input=TEXT)

    retrieved = client.responses.retrieve(created.id)

    assert (retrieved.user, retrieved.metadata) == ("meta-get", metadata)
    assert (client.responses.retrieve(bare.id).user, client.responses.retrieve(bare.id).metadata) == (None, {})


def test_a_retrieved_response_says_personal_data_in_its_metadata_and_user_as_stored_never_raw(client):
    email = "joao.silva@example.com"
    created = client.responses.create(model="telecom_contas", input=TEXT, user=email, metadata={"contact": email})

    retrieved = client.responses.retrieve(created.id)

    assert created.user == email  # the create call's own echo
    assert retrieved.user and email not in retrieved.user
    assert set(retrieved.metadata) == {"contact"} and email not in retrieved.metadata["contact"]


def test_stream_options_without_stream_is_a_400_naming_it_on_responses_too(client):
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="telecom_contas", input=TEXT, stream_options={"include_obfuscation": False})

    assert refused.value.param == "stream_options"
    assert not Conversation.objects.exists()


def routing_of(response) -> dict:
    return response.model_extra["x_agent_routing"]


def test_a_response_answers_the_next_continues_its_conversation_and_both_can_be_read_back(client, tenant):
    raw = client.responses.with_raw_response.create(model="telecom_contas", input=TEXT, user="r1")
    first = raw.parse()
    second = client.responses.create(
        model="telecom_contas",
        input=[
            {"role": "user", "content": TEXT},
            {"role": "assistant", "content": first.output_text},  # the client's view: the platform keeps its own
            {"role": "user", "content": [{"type": "input_text", "text": "Quero a segunda via do boleto"}]},
        ],
        instructions="Responda em uma frase.",
        previous_response_id=first.id,
    )
    third = client.responses.create(
        model="telecom_contas", input="E o vencimento?", previous_response_id=first.id, max_output_tokens=4
    )

    key = f"{tenant.slug}:telecom_contas:r1"
    conversation = Conversation.objects.get(conversation_key=key)
    assert (first.id, second.id, third.id) == tuple(f"resp_{conversation.pk}_{turn}" for turn in (1, 2, 3))
    assert first.object == "response" and first.status == "completed" and first.model == "telecom_contas"
    assert PT_NOTICE in first.output_text and first.output[0].id == f"msg_{conversation.pk}_1"
    assert (
        first.usage.output_tokens > 0
        and first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens
    )
    assert routing_of(first)["agent"] == "billing_agent" and routing_of(second)["conversation_key"] == key
    assert (raw.headers["X-Agent-Route"], raw.headers["X-Conversation-Key"]) == ("billing_agent", key)
    assert second.previous_response_id == first.id and second.instructions == "Responda em uma frase."
    users = conversation.messages.filter(role="user").order_by("id").values_list("content", flat=True)
    assert list(users) == [TEXT, "Quero a segunda via do boleto", "E o vencimento?"]
    # An older response continues the conversation after its latest message; cut, it is incomplete.
    assert third.status == "incomplete" and third.incomplete_details.reason == "max_output_tokens"
    assert len(third.output_text) == 16
    stored = client.responses.retrieve(second.id)
    assert (stored.output_text, stored.usage.output_tokens) == (second.output_text, second.usage.output_tokens)
    assert routing_of(stored)["message_id"] == routing_of(second)["message_id"]
    assert client.responses.retrieve(third.id).status == "incomplete"


def test_a_streamed_response_sends_the_responses_events_and_continues_a_conversation(client):
    with client.responses.stream(model="telecom_contas", input=TEXT, user="r-stream") as stream:
        events = list(stream)
        final = stream.get_final_response()
    later = list(
        client.responses.create(
            model="telecom_contas", input="E o vencimento?", previous_response_id=final.id, stream=True
        )
    )

    kinds = [event.type for event in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [event.sequence_number for event in events] == list(range(len(events)))
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert len(deltas) > 10 and "".join(deltas) == final.output_text  # word by word, as the offline model writes
    assert events[0].response.id == final.id and events[0].response.status == "in_progress"
    assert routing_of(final)["agent"] == "billing_agent"
    completed = later[-1].response
    assert completed.status == "completed" and completed.previous_response_id == final.id
    assert routing_of(completed)["conversation_key"] == routing_of(final)["conversation_key"]


def test_an_unknown_or_another_tenants_response_is_not_found_and_cannot_be_continued(client, asgi_server, outsider_key):
    retried = {"Idempotency-Key": "r-once"}
    first = client.responses.create(model="telecom_contas", input=TEXT, extra_headers=retried)
    again = client.responses.with_raw_response.create(model="telecom_contas", input=TEXT, extra_headers=retried)
    outsider = openai.OpenAI(base_url=f"{asgi_server}/v1", api_key=outsider_key.raw, max_retries=0)

    for response_id in ("resp_999999_1", first.id.replace("_1", "_7"), "chatcmpl-1_1"):
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(response_id)
    with pytest.raises(openai.NotFoundError):
        outsider.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError) as continued:
        outsider.responses.create(model="telecom_contas", input=TEXT, previous_response_id=first.id)
    with pytest.raises(openai.BadRequestError) as other_model:
        client.responses.create(model="retail_orders", input=TEXT, previous_response_id=first.id)

    assert (continued.value.body["param"], continued.value.body["code"]) == (
        "previous_response_id",
        "previous_response_not_found",
    )
    assert other_model.value.body["param"] == "model"
    assert again.headers["Idempotent-Replayed"] == "true" and again.parse().id == first.id
    assert again.headers["X-Message-Id"] == str(routing_of(first)["message_id"])
    assert Conversation.objects.count() == 1  # the retry ran no second turn


def test_langchain_speaks_the_responses_api_plainly_structured_and_streamed(asgi_server, tenant_key, telecom):
    llm = ChatOpenAI(
        base_url=f"{asgi_server}/v1",
        api_key=tenant_key.raw,
        model="telecom_contas",
        use_responses_api=True,
        max_retries=0,
        model_kwargs={"user": "lc-responses"},
    )

    reply = llm.invoke(TEXT)
    structured = llm.with_structured_output(Reply).invoke(TEXT)
    streamed = list(llm.stream("E o vencimento?"))

    assert PT_NOTICE in reply.text and reply.response_metadata["id"].startswith("resp_")
    assert isinstance(structured, Reply) and PT_NOTICE in structured.answer
    text = "".join(chunk.text for chunk in streamed)
    assert PT_NOTICE in text and "vencimento" in text
    conversation = Conversation.objects.get(session_id="lc-responses")
    assert conversation.messages.filter(role="assistant").count() == 3


def test_a_responses_parameters_and_instructions_reach_the_profiles_model(client, scripted_llm):
    scripted_llm.reply("Sua fatura está em dia.")  # prose, though JSON was asked for: the platform puts it in

    response = client.responses.create(
        model="telecom_contas",
        input=[{"role": "developer", "content": "Cite o valor."}, {"role": "user", "content": TEXT}],
        instructions="Responda em uma frase.",
        temperature=0.2,
        top_p=0.5,
        max_output_tokens=50,
        text={"format": {"type": "json_object"}},
        user="r-real",
    )

    sent = scripted_llm.requests[0]
    asked = {key: sent.get(key) for key in ("temperature", "top_p", "max_completion_tokens", "response_format")}
    assert asked == {
        "temperature": 0.2,
        "top_p": 0.5,
        "max_completion_tokens": 50,
        "response_format": {"type": "json_object"},
    }
    system = "\n".join(message["content"] for message in sent["messages"] if message["role"] == "system")
    assert "Responda em uma frase." in system and "Cite o valor." in system
    assert json.loads(response.output_text) == {"answer": "Sua fatura está em dia."}
    assert response.text.format.type == "json_object"


def test_a_text_format_whose_answer_cannot_fit_the_limit_is_refused_by_name_before_anything_is_stored(client):
    schema = padded({"type": "array", "minItems": 100_000, "items": {"type": "integer"}})
    refused = []
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as error:
            client.responses.create(
                model="telecom_contas",
                input=TEXT,
                text={"format": {"type": "json_schema", "name": "x", "schema": schema}},
                stream=stream,
            )
        refused.append(error.value.body)

    assert [(body["param"], body["code"]) for body in refused] == [("text.format.schema", "invalid_schema")] * 2
    assert not Conversation.objects.exists()
