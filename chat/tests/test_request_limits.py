"""Request limits on the chat faces (docs/api.md, Errors): body size (413), JSON nesting (400), context size (400).

Each refused request stores nothing: no conversation row, no message.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from django.test import Client

from chat.intake import message_body_limit
from common.parsers import ERROR_BODY_TOO_LARGE, ERROR_JSON_TOO_DEEP, ERROR_NUL_CHARACTER
from conversations.models import Conversation, Message
from routing import snapshot

pytestmark = pytest.mark.django_db

CHAT_PATHS = ["/api/gateway/message", "/api/chat/message"]


def nested(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def gateway_body(context_json: str) -> str:
    return '{"agent_id":"telecom_contas","payload":{"text":"oi","session_id":"deep-1","context":' + context_json + "}}"


def completions_body(extra_json: str) -> str:
    return '{"model":"telecom_contas","messages":[{"role":"user","content":"oi"}],"extra":' + extra_json + "}"


def post(tenant_key, path: str, body: str | bytes):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {tenant_key.raw}")
    return client.post(path, data=body, content_type="application/json")


def nothing_stored() -> bool:
    return not Conversation.objects.exists() and not Message.objects.exists()


@pytest.mark.parametrize("levels", [500, 10_000])
@pytest.mark.parametrize("path", CHAT_PATHS)
def test_deeply_nested_json_is_a_400_naming_the_body_and_stores_nothing(tenant_key, telecom, path, levels):
    response = post(tenant_key, path, gateway_body(nested(levels)))

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "json_too_deep"
    assert error["message"] == ERROR_JSON_TOO_DEEP.format(limit=32)
    assert error["fields"] == {"body": [error["message"]]}
    assert nothing_stored()


@pytest.mark.parametrize("levels", [500, 10_000, 100_000])
def test_deeply_nested_json_on_the_openai_face_is_a_400_in_its_shape(tenant_key, telecom, levels):
    response = post(tenant_key, "/v1/chat/completions", completions_body("[" * levels + "]" * levels))

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "json_too_deep" and error["param"] == "body"
    assert error["message"] == ERROR_JSON_TOO_DEEP.format(limit=32)
    assert nothing_stored()


def test_nesting_up_to_the_limit_is_answered(tenant_key, telecom, settings):
    settings.API_JSON_MAX_DEPTH = 8
    # The body and its payload are two levels; the context adds its own.
    ok = post(tenant_key, "/api/gateway/message", gateway_body(nested(6)))
    too_deep = post(tenant_key, "/api/gateway/message", gateway_body(nested(7)))

    assert ok.status_code == 200, ok.content
    assert too_deep.status_code == 400
    assert too_deep.json()["error"]["message"] == ERROR_JSON_TOO_DEEP.format(limit=8)


def test_brackets_inside_strings_do_not_count_as_nesting(tenant_key, telecom):
    context = json.dumps({"note": "[" * 5000 + "{" * 5000, "quote": '\\"[[[[' * 100})
    response = post(tenant_key, "/api/gateway/message", gateway_body(context))
    assert response.status_code == 200, response.content


@pytest.mark.parametrize("path", [*CHAT_PATHS, "/v1/chat/completions"])
def test_a_body_over_the_size_limit_is_a_json_413_and_stores_nothing(tenant_key, telecom, path, caplog):
    body = gateway_body(json.dumps({"blob": "a" * 3_000_000}))
    with caplog.at_level("WARNING"):
        response = post(tenant_key, path, body)

    assert response.status_code == 413, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == "body_too_large"
    assert error["message"] == ERROR_BODY_TOO_LARGE.format(limit=2_621_440)
    assert nothing_stored()
    assert not [r for r in caplog.records if r.levelname == "ERROR"], "a refused body is not a server error"


def test_the_body_limit_is_configurable(tenant_key, telecom, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_000
    response = post(tenant_key, "/api/gateway/message", gateway_body(json.dumps({"blob": "a" * 2_000})))
    assert response.status_code == 413
    assert response.json()["error"]["message"] == ERROR_BODY_TOO_LARGE.format(limit=2_000)


def test_a_context_over_its_limit_is_a_400_naming_payload_context(tenant_key, telecom):
    response = post(tenant_key, "/api/gateway/message", gateway_body(json.dumps({"blob": "a" * 100_000})))

    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert list(error["fields"]) == ["payload.context"]
    assert "65536 bytes" in error["fields"]["payload.context"][0]
    assert nothing_stored()


@pytest.mark.parametrize("context", ['{"note":"\\ud800"}', '{"\\udfff":"key"}', '{"deep":["a\\ud83db"]}'])
def test_a_context_with_an_unpaired_surrogate_is_a_400_naming_payload_context(tenant_key, telecom, context):
    """JSON can escape half a UTF-16 pair (\\ud800), which no UTF-8 text or PostgreSQL's JSON can hold: refused as
    the text field refuses it, not a 500 (nor a turn whose write would fail)."""
    response = post(tenant_key, "/api/gateway/message", gateway_body(context))

    assert response.status_code == 400, response.content[:300]
    error = response.json()["error"]
    assert list(error["fields"]) == ["payload.context"]
    assert "Surrogate characters are not allowed: U+" in error["fields"]["payload.context"][0]
    assert nothing_stored()


def test_a_form_body_is_refused_as_unsupported(tenant_key, telecom):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {tenant_key.raw}")
    response = client.post("/api/gateway/message", {"agent_id": "telecom_contas", "channel": "web"})

    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"
    assert nothing_stored()


@pytest.mark.django_db(transaction=True)
def test_a_websocket_frame_nested_too_deep_gets_an_error_event_and_the_socket_stays_open(tenant_key, telecom):
    from channels.testing import WebsocketCommunicator

    from platform.asgi import application

    async def go():
        communicator = WebsocketCommunicator(application, f"/ws/chat/telecom_contas/ws-deep/?key={tenant_key.raw}")
        connected, _ = await communicator.connect(timeout=5)
        assert connected
        await communicator.send_to(text_data='{"text":"oi","context":' + nested(10_000) + "}")
        error = await communicator.receive_json_from(timeout=5)
        await communicator.send_to(text_data='{"text":"oi","context":' + nested(500) + "}")
        second = await communicator.receive_json_from(timeout=5)
        await communicator.disconnect()
        return error, second

    error, second = asyncio.run(go())
    assert error["type"] == "error" and error["error"]["code"] == "json_too_deep"
    assert error["error"]["fields"] == {"frame": [ERROR_JSON_TOO_DEEP.format(limit=32)]}
    assert second["error"]["code"] == "json_too_deep"
    assert nothing_stored()


@pytest.mark.django_db(transaction=True)
def test_a_websocket_frame_with_a_nul_character_gets_an_error_event_naming_it_and_stores_nothing(tenant_key, telecom):
    from channels.testing import WebsocketCommunicator

    from platform.asgi import application

    async def go():
        communicator = WebsocketCommunicator(application, f"/ws/chat/telecom_contas/ws-nul/?key={tenant_key.raw}")
        connected, _ = await communicator.connect(timeout=5)
        assert connected
        await communicator.send_to(text_data='{"text":"oi","context":{"note":"a\\u0000b"}}')
        error = await communicator.receive_json_from(timeout=5)
        await communicator.disconnect()
        return error

    error = asyncio.run(go())
    assert error["type"] == "error"
    assert error["error"]["fields"] == {"frame": [f"context.note: {ERROR_NUL_CHARACTER}"]}
    assert nothing_stored()


@pytest.mark.parametrize("field", ["agent_id", "tenant_id"])
def test_a_slug_sent_as_a_number_is_refused_not_read_as_a_string(tenant_key, telecom, field):
    body = {"agent_id": "telecom_contas", "payload": {"text": "oi"}, field: 0}
    response = post(tenant_key, "/api/gateway/message", json.dumps(body))

    assert response.status_code == 400, response.content
    assert response.json()["error"]["fields"] == {field: ["Must be a string."]}
    assert nothing_stored()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"agent_id": "telecom_contas", "payload": {"text": "oi"}, "error": {"fields": {}}}, "error"),
        ({"agent_id": "telecom_contas", "payload": {"text": "oi", "sesion_id": "typo"}}, "payload.sesion_id"),
    ],
)
@pytest.mark.parametrize("path", [*CHAT_PATHS, "/api/chat/message/stream"])
def test_an_unknown_field_is_a_400_naming_it_not_silently_ignored(tenant_key, telecom, path, body, field):
    """A misspelt session_id would otherwise start a new conversation without a word (the schema says
    additionalProperties: false)."""
    response = post(tenant_key, path, json.dumps(body))

    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert nothing_stored()


def test_the_schema_says_the_message_bodies_take_no_other_fields(client):
    schema = client.get("/api/schema/?format=json").json()["components"]["schemas"]
    assert schema["MessageInput"]["additionalProperties"] is False
    assert schema["Payload"]["additionalProperties"] is False
    assert "additionalProperties" not in schema["Payload"]["properties"]["context"] or (
        schema["Payload"]["properties"]["context"]["additionalProperties"] is not False
    )  # the context stays an open object


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"text": "oi", "context": {"note": "a\u0000b"}}, "payload.context.note"),
        ({"text": "oi", "context": {"items": [{"sku": "x"}, {"sku": "\u0000"}]}}, "payload.context.items.1.sku"),
        ({"text": "oi", "context": {"a\u0000": 1}}, "payload.context.a\\u0000"),
        ({"text": "oi", "session_id": "s\u00001"}, "payload.session_id"),
        ({"text": "oi", "user_id": "u\u00001"}, "payload.user_id"),
        ({"text": "o\u0000i"}, "payload.text"),
    ],
)
@pytest.mark.parametrize("path", [*CHAT_PATHS, "/api/chat/message/stream"])
def test_a_nul_character_anywhere_in_a_json_body_is_a_400_naming_its_field_and_stores_nothing(
    tenant_key, telecom, path, payload, field
):
    """PostgreSQL's text and JSON cannot hold U+0000: a NUL that reached the database was a 500."""
    response = post(tenant_key, path, json.dumps({"agent_id": "telecom_contas", "payload": payload}))

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["fields"] == {field: [ERROR_NUL_CHARACTER]}
    assert nothing_stored()


def test_an_escaped_backslash_before_u0000_is_text_not_a_nul(tenant_key, telecom):
    context = '{"path":"C:\\\\u0000\\\\dir"}'  # the JSON of the text C:\u0000\dir
    response = post(tenant_key, "/api/gateway/message", gateway_body(context))

    assert response.status_code == 200, response.content


# -- a message body is refused by its length before it is parsed ------------------------------------------------


@pytest.mark.parametrize("path", [*CHAT_PATHS, "/api/chat/message/stream", "/api/debug/route", "/api/debug/plan"])
def test_a_body_longer_than_any_message_can_be_is_a_413_before_it_is_parsed(debug_key, telecom, path):
    """A 1.3 MB context of 100,000 keys took 250 ms of a worker to parse and refuse; by its length (under the
    2.5 MB of any body) it cannot be a message. The body here is not even JSON: it is never read as such."""
    limit = message_body_limit()
    response = post(debug_key, path, "{" + " " * 1_300_000)

    assert response.status_code == 413, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "body_too_large"
    assert error["fields"] == {"body": [ERROR_BODY_TOO_LARGE.format(limit=limit)]}
    assert nothing_stored()


def test_the_longest_message_every_character_escaped_with_a_full_context_is_read(tenant_key, telecom, settings):
    """The limit is what the text's and the context's limits allow, written in JSON's widest form: every text
    character outside the Basic Multilingual Plane (12 bytes each), every context character as an escape (6)."""
    settings.API_MAX_CONTEXT_BYTES = 4_000
    chars = snapshot.current().profiles["telecom_contas"].max_input_chars
    text = "\\ud83d\\ude00" * chars
    blob = "\\u0061" * (settings.API_MAX_CONTEXT_BYTES - len('{"b":""}'))
    payload = {"text": "T", "session_id": "s" * 200, "user_id": "u" * 200, "context": {"b": "B"}}
    plain = json.dumps({"agent_id": "telecom_contas", "channel": "web", "payload": payload}, separators=(",", ":"))
    body = plain.replace('"T"', f'"{text}"').replace('"B"', f'"{blob}"')
    assert len(body) > 6 * settings.API_MAX_CONTEXT_BYTES + 12 * chars

    response = post(tenant_key, "/api/gateway/message", body)

    assert response.status_code == 200, response.content[:300]


def test_a_profile_that_takes_longer_texts_raises_the_message_body_limit(telecom, settings):
    before = message_body_limit()
    telecom.guardrails = {**(telecom.guardrails or {}), "max_input_chars": settings.MAX_INPUT_CHARS + 1_000}
    telecom.save(update_fields=["guardrails"])

    assert message_body_limit() == before + 12 * 1_000
