"""Every request parameter OpenAI defines is honoured or refused by name, on both OpenAI-compatible faces.

The tables (chat/openai/params.py) are held against the official ``openai`` SDK's request types: a parameter the SDK
adds fails here until it is decided. Refusals come before anything is stored; Django's test client is enough.
"""

from __future__ import annotations

import typing
from pathlib import Path

import pytest
from openai.types.chat import completion_create_params
from openai.types.responses import response_create_params

from chat.openai.params import CHAT_HONOURED, CHAT_REFUSED, RESPONSES_HONOURED, RESPONSES_REFUSED
from conversations.models import Conversation

USER = [{"role": "user", "content": "Minha fatura veio alta"}]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "openai.md"
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
# A value of each refused parameter that asks something of the platform (a refused parameter needs one here).
ASKING = {
    "n": 2,
    "tools": [TOOL],
    "tool_choice": "required",
    "functions": [TOOL["function"]],
    "function_call": {"name": "lookup"},
    "logprobs": True,
    "top_logprobs": 2,
    "logit_bias": {"50256": -100},
    "audio": {"voice": "alloy", "format": "mp3"},
    "modalities": ["text", "audio"],
    "prediction": {"type": "content", "content": "x"},
    "store": False,
    "metadata": {"order": "P100"},
    "service_tier": "flex",
    "safety_identifier": "user-1",
    "prompt_cache_key": "k",
    "prompt_cache_retention": "24h",
    "prompt_cache_options": {},
    "reasoning_effort": "low",
    "verbosity": "low",
    "web_search_options": {},
    "moderation": {},
    "background": True,
    "background_options": {},
    "conversation": "conv_1",
    "prompt": {"id": "pmpt_1"},
    "include": ["message.output_text.logprobs"],
    "max_tool_calls": 3,
    "truncation": "disabled",
    "reasoning": {"effort": "low"},
    "context_management": [{"type": "compaction"}],
    "access_programs": {},
    "image": {},
}


def sdk_parameters(params: type) -> set[str]:
    return set(typing.get_type_hints(params)) | {"stream"}


@pytest.mark.parametrize(
    ("params", "honoured", "refused"),
    [
        (completion_create_params.CompletionCreateParamsBase, CHAT_HONOURED, CHAT_REFUSED),
        (response_create_params.ResponseCreateParamsBase, RESPONSES_HONOURED, RESPONSES_REFUSED),
    ],
)
def test_every_parameter_of_the_official_sdk_is_decided_documented_and_refused_values_have_an_example(
    params, honoured, refused
):
    defined, decided = sdk_parameters(params), honoured | set(refused)

    assert defined <= decided, f"undecided: {sorted(defined - decided)}"
    assert not honoured & set(refused)
    documented = DOCS.read_text()
    assert [name for name in sorted(decided) if f"`{name}`" not in documented] == []
    assert set(refused) <= set(ASKING)


def refusals(api, path: str, base: dict, bodies: list[tuple[dict, str, str | None]]) -> list[str]:
    """What went otherwise than a 400 naming ``param`` (with ``code``) for each body, sent on ``path``."""
    wrong = []
    for extra, param, code in bodies:
        response = api.post(path, {**base, **extra}, format="json")
        error = (response.json().get("error") or {}) if response.status_code == 400 else {}
        if error.get("param") != param or (code is not None and error.get("code") != code):
            wrong.append(f"{extra} -> {response.status_code} {response.content[:300]!r}")
        elif code == "unsupported_parameter" and not (
            param in error["message"] and "not supported" in error["message"]
        ):
            wrong.append(f"{extra} -> {error['message']!r}")
    return wrong


def test_asking_either_face_what_the_platform_cannot_do_is_a_400_naming_the_parameter(api, telecom):
    chat = [({name: ASKING[name]}, name, "unsupported_parameter") for name in sorted(CHAT_REFUSED)]
    responses = [({name: ASKING[name]}, name, "unsupported_parameter") for name in sorted(RESPONSES_REFUSED)]

    assert refusals(api, "/v1/chat/completions", {"model": "telecom_contas", "messages": USER}, chat) == []
    assert refusals(api, "/v1/responses", {"model": "telecom_contas", "input": "Minha fatura"}, responses) == []
    assert not Conversation.objects.exists()


CHAT_WRONG = [
    ({"max_token": 5}, "max_token", "unknown_parameter"),  # misspelt: never silently ignored
    ({"temperature": 3}, "temperature", "invalid_value"),
    ({"temperature": True}, "temperature", "invalid_value"),
    ({"top_p": -0.1}, "top_p", "invalid_value"),
    ({"max_tokens": 0}, "max_tokens", "invalid_value"),
    ({"max_tokens": 5, "max_completion_tokens": 6}, "max_tokens", "invalid_value"),
    ({"seed": "7"}, "seed", "invalid_value"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "invalid_value"),
    ({"stop": [""]}, "stop", "invalid_value"),
    ({"parallel_tool_calls": "yes"}, "parallel_tool_calls", "invalid_value"),
    ({"response_format": {"type": "xml"}}, "response_format.type", "invalid_value"),
    ({"response_format": {"type": "json_schema"}}, "response_format.json_schema.name", "invalid_value"),
    (
        {"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "strng"}}}},
        "response_format.json_schema.schema",
        "invalid_schema",
    ),
    (  # a pattern the platform could not fill with the answer's text
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "n", "schema": {"type": "string", "pattern": "^[0-9]+$"}},
            }
        },
        "response_format.json_schema.schema",
        "invalid_schema",
    ),
    (  # a schema whose least value is over the answer's limit (ANSWER_MAX_CHARS)
        {"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"minLength": 10**6}}}},
        "response_format.json_schema.schema",
        "invalid_schema",
    ),
    ({"stream": True, "stream_options": {"include_obfuscation": True}}, "stream_options.include_obfuscation", None),
    (
        {"stream": True, "stream_options": {"include_tokens": True}},
        "stream_options.include_tokens",
        "unknown_parameter",
    ),
    (
        {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
        "messages.0.content.0.type",
        "unsupported_parameter",
    ),
    ({"messages": [*USER, {"role": "assistant", "content": "Sua"}]}, "messages.1", "invalid_value"),
    ({"messages": [*USER, {"role": "tool", "content": "{}"}]}, "messages.1", "invalid_value"),
    ({"messages": [{"role": "robot", "content": "x"}, *USER]}, "messages.0.role", "invalid_value"),
    ({"messages": [{"role": "system", "content": "x" * 5000}, *USER]}, "messages", "invalid_value"),
]


RESPONSES_WRONG = [
    ({"input": ""}, "input"),
    ({"input": []}, "input"),
    ({"input": [{"role": "assistant", "content": "x"}]}, "input"),
    ({"input": [*USER, {"type": "function_call_output", "call_id": "c", "output": "{}"}]}, "input.1.type"),
    (
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
        "input.0.content.0.type",
    ),
    ({"instructions": 5}, "instructions"),
    ({"instructions": "x" * 5000}, "instructions"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
    ({"text": {"verbosity": "low"}}, "text.verbosity"),
    ({"text": {"format": {"type": "json_schema", "schema": {}}}}, "text.format.name"),
    ({"text": {"format": {"type": "json_schema", "name": "n", "schema": {"minLength": 10**6}}}}, "text.format.schema"),
    ({"frequency_penalty": 1}, "frequency_penalty"),  # the Responses API has none
    ({"previous_response_id": 5}, "previous_response_id"),
    ({"model": None}, "model"),
]


def test_a_parameter_with_a_wrong_value_is_a_400_naming_it_on_either_face(api, telecom):
    chat_base = {"model": "telecom_contas", "messages": USER}
    responses_base = {"model": "telecom_contas", "input": "Minha fatura"}
    wrong = [(body, param, None) for body, param in RESPONSES_WRONG]

    assert refusals(api, "/v1/chat/completions", chat_base, CHAT_WRONG) == []
    assert refusals(api, "/v1/responses", responses_base, wrong) == []
    assert not Conversation.objects.exists()


def test_values_that_ask_nothing_of_the_platform_are_accepted(api, telecom):
    neutral = {
        "n": 1,
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "logprobs": False,
        "store": True,
        "modalities": ["text"],
        "service_tier": "auto",
        "metadata": {},
        "logit_bias": {},
        "response_format": {"type": "text"},
        "temperature": 0,
    }

    response = api.post("/v1/chat/completions", {"model": "telecom_contas", "messages": USER, **neutral}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["choices"][0]["finish_reason"] == "stop"
    asked = {"include": [], "truncation": "auto", "background": False, "tool_choice": "none", "reasoning": None}
    response = api.post("/v1/responses", {"model": "telecom_contas", "input": "Minha fatura", **asked}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "completed"
