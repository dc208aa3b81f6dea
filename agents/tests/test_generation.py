"""How a client asks the answer written (agents/generation.py), and the offline model keeping it."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest
from jsonschema import Draft202012Validator
from langchain_core.messages import HumanMessage
from pydantic import BaseModel, Field

from agents.generation import (
    FINISH_LENGTH,
    FINISH_STOP,
    Generation,
    answer_fitted,
    answer_formatted,
    format_problem,
    json_answer,
    text_within,
)
from agents.llm import OfflineChatModel
from agents.offline_words import offline_words
from agents.structured import FILL_MAX_STEPS, schema_instance
from agents.usage import text_tokens
from tests.hostile_schemas import fan_out, padded, reference_tree


class Line(BaseModel):
    product: str
    quantity: int = Field(ge=1)


class Invoice(BaseModel):
    """A nested model, as LangChain's with_structured_output sends it: $defs, Optional, Literal, a bounded list."""

    summary: str
    status: Literal["open", "paid"]
    total: float = Field(gt=0)
    lines: list[Line] = Field(min_length=1)
    due: str | None = None
    previous: Invoice | None = None


def json_schema(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}


def test_a_schema_is_filled_with_the_text_in_its_answer_like_string_and_the_least_of_everything_else():
    schema = Invoice.model_json_schema()

    value = schema_instance(schema, "Sua fatura veio alta.", limit=8_000)

    assert Draft202012Validator(schema).is_valid(value)
    assert value["summary"] == "Sua fatura veio alta."
    assert value["status"] == "open" and value["total"] > 0
    assert value["lines"] == [{"product": "", "quantity": 1}]
    assert value["due"] is None and value["previous"] is None  # an optional value stays empty; a recursion ends
    preferred = {"type": "object", "properties": {"title": {"type": "string"}, "answer": {"type": "string"}}}
    assert schema_instance(preferred, "x", limit=8_000) == {"title": "", "answer": "x"}


def test_a_schema_the_platform_cannot_fill_or_no_schema_at_all_is_named_as_a_problem():
    assert format_problem(json_schema(Invoice.model_json_schema())) is None
    assert format_problem({"type": "json_object"}) is None
    assert "cannot fill" in format_problem(json_schema({"type": "string", "pattern": "^[0-9]+$"}))
    assert format_problem(json_schema({"type": "strng"})).startswith("Not a valid JSON Schema")
    assert "reference" in format_problem(json_schema({"$ref": "https://example.com/schema.json"}))


def test_text_not_in_the_format_is_put_into_it_and_text_in_it_is_kept():
    assert json.loads(answer_formatted("Olá", {"type": "json_object"})) == {"answer": "Olá"}
    assert answer_formatted('{"ok": true}', {"type": "json_object"}) == '{"ok": true}'
    assert answer_formatted("[1, 2]", {"type": "json_object"}) == '{"answer": "[1, 2]"}'  # an array is no object
    schema = {"type": "object", "properties": {"reply": {"type": "string"}}, "required": ["reply"]}
    assert json.loads(answer_formatted("Olá", json_schema(schema))) == {"reply": "Olá"}
    assert answer_formatted('{"reply": "já"}', json_schema(schema)) == '{"reply": "já"}'
    assert answer_formatted("prose", None) == "prose"


def test_the_text_ends_before_its_first_stop_sequence_and_within_four_characters_a_token():
    assert text_within("uma duas três", max_tokens=None, stop=("duas", "uma d")) == ("", FINISH_STOP)
    assert text_within("uma duas três", max_tokens=None, stop=("três",)) == ("uma duas ", FINISH_STOP)
    assert text_within("uma duas três", max_tokens=2) == ("uma duas", FINISH_LENGTH)
    assert text_within("uma duas", max_tokens=2) == ("uma duas", FINISH_STOP)
    assert text_tokens(text_within("x" * 100, max_tokens=7)[0]) == 7


def test_a_generation_goes_to_an_endpoint_as_request_options_and_to_the_offline_model_as_its_rules():
    generation = Generation(
        max_tokens=5, temperature=0.2, seed=7, stop=("fim",), response_format={"type": "json_object"}
    )

    assert generation.request_options() == {
        "temperature": 0.2,
        "seed": 7,
        "max_tokens": 5,
        "stop": ["fim"],
        "extra_body": {"response_format": {"type": "json_object"}},
    }
    assert generation.offline_options() == {
        "max_tokens": 5,
        "stop": ["fim"],
        "response_format": {"type": "json_object"},
    }
    assert Generation.from_dict(generation.as_dict()) == generation
    assert generation.without_format().response_format is None


@pytest.fixture
def offline():
    return OfflineChatModel(display_name="Faturas", topic="Explicar a fatura", agent="billing_agent")


def test_the_offline_model_cuts_its_answer_at_max_tokens_and_says_length_as_an_endpoint_does(offline):
    whole = offline.invoke([HumanMessage("Minha fatura veio alta")])
    cut = offline.bind(max_tokens=5).invoke([HumanMessage("Minha fatura veio alta")])

    assert whole.response_metadata["finish_reason"] == "stop"
    assert cut.content == whole.content[:20] and cut.response_metadata["finish_reason"] == "length"
    assert cut.usage_metadata["output_tokens"] == 5  # its usage counts what it wrote


def test_the_offline_model_streams_its_answer_in_json_valid_for_the_schema_and_ends_at_stop_sequences(offline):
    schema = Invoice.model_json_schema()
    bound = offline.bind(response_format=json_schema(schema))

    async def chunks() -> list:
        return [chunk async for chunk in bound.astream([HumanMessage("Minha fatura")])]

    streamed = asyncio.run(chunks())
    text = "".join(chunk.content for chunk in streamed)

    value = json.loads(text)
    notice = offline_words("pt")["notice"]  # "Minha fatura": answered in Portuguese
    assert Draft202012Validator(schema).is_valid(value) and notice in value["summary"]
    assert len(streamed) > 3  # word by word, as its prose
    stopped = offline.invoke([HumanMessage("Minha fatura")], stop=["recebi"])
    assert stopped.content.endswith(f"{notice}: ") and stopped.response_metadata["finish_reason"] == "stop"


# --- bounded whatever the schema asks ------------------------------------------------------------------------


def test_a_schema_whose_least_value_is_over_the_answers_limit_is_refused_whatever_makes_it_long(settings):
    too_long = f"longer than the answer's limit of {settings.ANSWER_MAX_CHARS:,} characters"

    for schema in (
        padded({"type": "string", "minLength": 1_000_000}),
        padded({"type": "array", "minItems": 100_000, "items": {"type": "integer"}}),
        padded({"type": "object", "minProperties": 100_000}),
        padded({"const": "x" * 9_000}),
        padded({"enum": [["x" * 9_000]]}),
        padded({"type": "array", "minItems": 30, "items": {"type": "integer", "minimum": 10.0**300}}),
        reference_tree(12),
    ):
        assert too_long in (format_problem(json_schema(schema)) or ""), schema


def test_a_schema_whose_filling_fans_out_is_refused_by_its_steps_before_its_value_is_made():
    problem = format_problem(json_schema(fan_out(14, "allOf", {"type": "integer"})))

    assert problem == f"Filling the schema takes more than {FILL_MAX_STEPS:,} steps."


def test_a_number_json_cannot_write_is_named_as_a_problem():
    for number in (float("inf"), float("-inf"), float("nan")):
        assert "JSON cannot write" in format_problem(json_schema(padded({"type": "integer", "minimum": number})))
    assert "JSON cannot write" in format_problem(
        json_schema(padded({"type": "number", "multipleOf": 1e-300, "minimum": 1e300}))
    )


def test_an_answer_put_into_the_format_is_within_the_answers_limit_its_text_cut(settings):
    settings.ANSWER_MAX_CHARS = 300
    schema = padded({"type": "string", "minLength": 100})
    text = 'Sua fatura "subiu"\n' * 40

    filled = answer_formatted(text, json_schema(schema))
    wrapped = answer_formatted(text, {"type": "json_object"})

    for answer in (filled, wrapped):
        assert len(answer) <= 300 and json.loads(answer)["answer"].startswith('Sua fatura "subiu"\nSua')
        assert json.loads(answer)["answer"].endswith("more characters]")
    assert Draft202012Validator(schema).is_valid(json.loads(filled))
    # JSON in the format but over the limit is put into it as text, within the limit too.
    too_long = json.dumps({"answer": text, "pad": "-" * 100})
    assert len(answer_formatted(too_long, json_schema(schema))) <= 300


def test_an_answer_put_into_the_format_says_how_long_it_would_have_been_with_its_text_whole(settings):
    settings.ANSWER_MAX_CHARS = 300
    schema = padded({"type": "string", "minLength": 100})
    text = 'Sua fatura "subiu"\n' * 40
    whole = {"answer": text, "pad": "-" * 100}

    filled = answer_fitted(text, json_schema(schema))
    wrapped = answer_fitted(text, {"type": "json_object"})
    short = answer_fitted("Olá", json_schema(schema))
    short_answers = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 10}}}
    bounded = answer_fitted(text, json_schema(short_answers))  # the schema's own cut, not the limit's

    assert filled == (answer_formatted(text, json_schema(schema)), len(json.dumps(whole, ensure_ascii=False)))
    assert wrapped.asked == len(json.dumps({"answer": text})) > len(wrapped.answer)
    assert short == (short.answer, len(short.answer))
    assert bounded == ('{"answer": "Sua fatura"}', len('{"answer": "Sua fatura"}'))


def test_json_nested_deeper_than_the_api_takes_is_not_read_as_the_json_asked_for():
    deep = "[" * 5_000 + "]" * 5_000

    assert json_answer(deep, {"type": "json_object"}) == (False, None)
    assert json.loads(answer_formatted(deep, json_schema({"type": "array"}))) == []
    assert json.loads(answer_formatted(deep, {"type": "json_object"}))["answer"].startswith("[[[")


def test_a_clients_pattern_checks_an_answer_in_time_linear_in_its_text():
    schema = padded({"type": "string", "pattern": "^(a|aa)*$"})
    answer = json.dumps({"answer": "x", "pad": "a" * 5_000 + "!"})  # exponential for a backtracking engine

    filled = json.loads(answer_formatted(answer, json_schema(schema)))

    assert filled == {"answer": answer, "pad": ""}  # not valid: put into the schema as text
    assert "is not one the platform runs" in format_problem(json_schema(padded({"type": "string", "pattern": "(?=a)"})))
