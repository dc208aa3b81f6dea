"""Every request parameter OpenAI's API defines, on the OpenAI-compatible faces: honoured, or refused by name.

A parameter the platform honours is read here (how the answer is written: :class:`agents.generation.Generation`;
the rest by each face). A parameter it cannot honour is refused with a 400 naming it (``code``
``unsupported_parameter``) and why, unless its value asks nothing of the platform (``n: 1``, ``tools: []``,
``store: true`` …: :attr:`Refused.accepts`, and ``null`` always). A name OpenAI's API does not define is refused
too (``unknown_parameter``): a misspelt ``max_token`` must not be silently ignored. docs/openai.md has the tables;
chat/tests/test_openai_params.py holds them against the official ``openai`` SDK's request types, so a parameter the
SDK adds is decided here before it can be ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agents.public import FORMAT_JSON_OBJECT, FORMAT_JSON_SCHEMA, FORMAT_TEXT, Generation, format_problem
from chat.openai.errors import OpenAIError, invalid

ERROR_UNKNOWN = "Unrecognized request argument supplied: {name}."
ERROR_REFUSED = "{name} is not supported here: {why}"
ERROR_STREAM_OPTIONS = "The 'stream_options' parameter is only allowed when 'stream' is enabled."
MAX_STOP_SEQUENCES = 4


@dataclass(frozen=True)
class Refused:
    """A parameter the platform cannot honour: why, and the values that ask nothing of it (accepted, as ``null``)."""

    why: str
    accepts: tuple[Any, ...] = ()

    def admits(self, value: Any) -> bool:
        # Typed: True is not n=1, nor 0 logprobs=false.
        return value is None or any(type(value) is type(ok) and value == ok for ok in self.accepts)


_NO_CLIENT_TOOLS = (
    "the specialists call the MCP tools their operator configured; tools the client runs are not offered to them"
)
_NO_LOGPROBS = (
    "an answer is written by the profile's specialists, guardrails and judges over several model calls, so it has no "
    "token log probabilities"
)
_OPERATORS_MODEL = "the profile's model and its settings are its operator's choice"
_PROMPT_CACHING = "prompt caching is the model endpoint's business; the platform's prompts are its own"

# Refused on both faces.
_REFUSED_BOTH: dict[str, Refused] = {
    "tools": Refused(f"{_NO_CLIENT_TOOLS} (send no tools, or [])", ([],)),
    "tool_choice": Refused(f'{_NO_CLIENT_TOOLS} ("auto" and "none" are accepted)', ("auto", "none")),
    "top_logprobs": Refused(_NO_LOGPROBS),
    "store": Refused(
        "every turn is stored in its conversation: that is what continues it, and what feedback rates (true)",
        (True,),
    ),
    "service_tier": Refused(f'{_OPERATORS_MODEL} ("auto" and "default" are accepted)', ("auto", "default")),
    "safety_identifier": Refused("the end user is `user` (or the X-Session-Id header)"),
    "prompt_cache_key": Refused(_PROMPT_CACHING),
    "prompt_cache_retention": Refused(_PROMPT_CACHING),
    "prompt_cache_options": Refused(_PROMPT_CACHING),
    "moderation": Refused("the profile's guardrails check every message and answer"),
}

CHAT_REFUSED: dict[str, Refused] = {
    **_REFUSED_BOTH,
    "n": Refused("a turn has one answer, stored in its conversation; send the message again for another (1)", (1,)),
    "functions": Refused(_NO_CLIENT_TOOLS),
    "function_call": Refused(_NO_CLIENT_TOOLS, ("auto", "none")),
    "logprobs": Refused(f"{_NO_LOGPROBS} (false)", (False,)),
    "logit_bias": Refused("token ids belong to a model's tokenizer, and " + _OPERATORS_MODEL, ({},)),
    "audio": Refused("answers are text"),
    "modalities": Refused('answers are text (["text"])', (["text"],)),
    "prediction": Refused("an answer is not an edit of a known text"),
    "reasoning_effort": Refused(_OPERATORS_MODEL),
    "verbosity": Refused(_OPERATORS_MODEL),
    "web_search_options": Refused("the specialists search nothing but their MCP tools"),
}
# Read by the chat completion face (model, messages, stream, stream_options, user) or into its Generation.
CHAT_HONOURED = frozenset(
    {
        "model",
        "messages",
        "stream",
        "stream_options",
        "user",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "frequency_penalty",
        "presence_penalty",
        "seed",
        "stop",
        "response_format",
        "parallel_tool_calls",
        "metadata",
    }
)

RESPONSES_REFUSED: dict[str, Refused] = {
    **_REFUSED_BOTH,
    "background": Refused("a response is answered while the request waits, or streams (false)", (False,)),
    "background_options": Refused("a response is answered while the request waits, or streams"),
    "conversation": Refused("a conversation continues through previous_response_id, the X-Session-Id header or user"),
    "prompt": Refused("the specialists answer with their own prompts; send instructions"),
    "include": Refused("a response includes its output text and nothing more ([])", ([],)),
    "max_tool_calls": Refused("the specialists' tool calls are bounded by their step limits"),
    "truncation": Refused('the platform keeps each conversation\'s recent history itself ("auto")', ("auto",)),
    "reasoning": Refused(_OPERATORS_MODEL, ({},)),
    "context_management": Refused("the platform keeps each conversation's recent history itself"),
    "access_programs": Refused("no access program is offered"),
    "image": Refused("answers are text"),
}
RESPONSES_HONOURED = frozenset(
    {
        "model",
        "input",
        "instructions",
        "previous_response_id",
        "stream",
        "stream_options",
        "user",
        "max_output_tokens",
        "temperature",
        "top_p",
        "text",
        "parallel_tool_calls",
        "metadata",
    }
)
# OpenAI's bounds on a request's metadata.
MAX_METADATA_KEYS = 16
MAX_METADATA_KEY_CHARS = 64
MAX_METADATA_VALUE_CHARS = 512


def parameters_check(body: Mapping[str, Any], *, honoured: frozenset[str], refused: Mapping[str, Refused]) -> None:
    """Refuse, naming it, the first parameter of ``body`` the face does not honour: one it cannot (unless its value
    asks nothing of it) or one OpenAI's API does not define. Raises :class:`OpenAIError`."""
    for name, value in body.items():
        if name in honoured:
            continue
        rule = refused.get(name)
        if rule is None:
            raise invalid(name, ERROR_UNKNOWN.format(name=name), code="unknown_parameter")
        if not rule.admits(value):
            raise invalid(name, ERROR_REFUSED.format(name=name, why=rule.why), code="unsupported_parameter")


# --- reading what is honoured ------------------------------------------------------------------------------


def _number(body: Mapping[str, Any], name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise invalid(name, f"'{name}' must be a number from {low:g} to {high:g}.")
    return float(value)


def integer_read(body: Mapping[str, Any], name: str, *, minimum: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise invalid(name, f"'{name}' must be an integer of at least {minimum}.")
    return value


def boolean_read(body: Mapping[str, Any], name: str, default: bool = False) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(name, f"'{name}' must be a boolean.")
    return value


def metadata_read(body: Mapping[str, Any]) -> dict[str, str]:
    """The request's ``metadata`` (``{}`` when none) within OpenAI's bounds — at most :data:`MAX_METADATA_KEYS` keys
    of up to :data:`MAX_METADATA_KEY_CHARS` characters, each a string of up to :data:`MAX_METADATA_VALUE_CHARS`;
    beyond them a 400 naming ``metadata``."""
    value = body.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise invalid("metadata", "'metadata' must be an object of strings.")
    if len(value) > MAX_METADATA_KEYS:
        raise invalid("metadata", f"'metadata' may hold at most {MAX_METADATA_KEYS} keys.")
    for key, item in value.items():
        if not isinstance(key, str) or not 0 < len(key) <= MAX_METADATA_KEY_CHARS:
            raise invalid("metadata", f"'metadata' keys must be 1 to {MAX_METADATA_KEY_CHARS} characters.")
        if not isinstance(item, str) or len(item) > MAX_METADATA_VALUE_CHARS:
            raise invalid(
                "metadata", f"'metadata.{key}' must be a string of at most {MAX_METADATA_VALUE_CHARS} characters."
            )
    return dict(value)


def stream_options_read(body: Mapping[str, Any], *, usage: bool, stream: bool) -> bool:
    """Whether a stream ends with a usage chunk (``include_usage``, the chat face's); ``include_obfuscation`` (the
    stream's padding) is not sent, so only false is accepted. Options for a request that does not ``stream`` are a
    400 naming ``stream_options``, as OpenAI answers them (:data:`ERROR_STREAM_OPTIONS`)."""
    options = body.get("stream_options")
    if options is None:
        return False
    if not stream:
        raise invalid("stream_options", ERROR_STREAM_OPTIONS, code=None)
    if not isinstance(options, Mapping):
        raise invalid("stream_options", "'stream_options' must be an object.")
    known = {"include_obfuscation", *(("include_usage",) if usage else ())}
    for name, value in options.items():
        param = f"stream_options.{name}"
        if name not in known:
            raise invalid(param, ERROR_UNKNOWN.format(name=param), code="unknown_parameter")
        if value is not None and not isinstance(value, bool):
            raise invalid(param, f"'{param}' must be a boolean.")
    if options.get("include_obfuscation"):
        why = "events carry no padding (false)"
        raise invalid(
            "stream_options.include_obfuscation",
            ERROR_REFUSED.format(name="stream_options.include_obfuscation", why=why),
            code="unsupported_parameter",
        )
    return bool(options.get("include_usage"))


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    value = body.get("stop")
    if value is None:
        return ()
    sequences = [value] if isinstance(value, str) else value
    if (
        not isinstance(sequences, list)
        or len(sequences) > MAX_STOP_SEQUENCES
        or not all(isinstance(item, str) and item for item in sequences)
    ):
        raise invalid("stop", f"'stop' must be a string or up to {MAX_STOP_SEQUENCES} non-empty strings.")
    return tuple(sequences)


def _format(value: Any, param: str, *, schema_in: str) -> Mapping[str, Any] | None:
    """A format as OpenAI's chat ``response_format`` says it (``None``: prose). ``schema_in``: where the face's
    request holds the json_schema's name and schema (``json_schema`` in a chat completion's ``response_format``,
    the format itself in a response's ``text.format``)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or value.get("type") not in (FORMAT_TEXT, FORMAT_JSON_OBJECT, FORMAT_JSON_SCHEMA):
        raise invalid(f"{param}.type", f"'{param}.type' must be one of text, json_object, json_schema.")
    kind = value["type"]
    if kind == FORMAT_TEXT:
        return None
    if kind == FORMAT_JSON_OBJECT:
        return {"type": FORMAT_JSON_OBJECT}
    spec = value.get("json_schema") if schema_in == "json_schema" else value
    where = f"{param}.json_schema" if schema_in == "json_schema" else param
    if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise invalid(f"{where}.name", f"'{where}.name' must name the schema.")
    schema = spec.get("schema", {})
    if not isinstance(schema, Mapping):
        raise invalid(f"{where}.schema", f"'{where}.schema' must be a JSON Schema object.")
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise invalid(f"{where}.strict", f"'{where}.strict' must be a boolean.")
    response_format = {
        "type": FORMAT_JSON_SCHEMA,
        "json_schema": {"name": spec["name"], "schema": dict(schema), "strict": bool(strict)},
    }
    problem = format_problem(response_format)
    if problem is not None:
        raise invalid(f"{where}.schema", problem, code="invalid_schema")
    return response_format


def _generation(
    body: Mapping[str, Any], *, max_tokens: int | None, stop: tuple[str, ...], response_format: Any
) -> Generation | None:
    generation = Generation(
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 0, 2),
        top_p=_number(body, "top_p", 0, 1),
        frequency_penalty=_number(body, "frequency_penalty", -2, 2),
        presence_penalty=_number(body, "presence_penalty", -2, 2),
        seed=integer_read(body, "seed", minimum=-(2**63)),
        stop=stop,
        response_format=response_format,
    )
    return None if generation == Generation() else generation


def chat_generation(body: Mapping[str, Any]) -> Generation | None:
    """How a chat completion asks its answer written (``None``: as the profile's model writes it)."""
    max_tokens = integer_read(body, "max_tokens", minimum=1)
    max_completion_tokens = integer_read(body, "max_completion_tokens", minimum=1)
    if None not in (max_tokens, max_completion_tokens) and max_tokens != max_completion_tokens:
        message = "'max_tokens' and 'max_completion_tokens' say different limits; send one of them."
        raise invalid("max_tokens", message)
    boolean_read(body, "parallel_tool_calls")  # no client tools: nothing to run in parallel, either way
    return _generation(
        body,
        max_tokens=max_completion_tokens or max_tokens,
        stop=_stop(body),
        response_format=_format(body.get("response_format"), "response_format", schema_in="json_schema"),
    )


def responses_generation(body: Mapping[str, Any]) -> Generation | None:
    """How a response asks its output written (``text.format``; the Responses API has no stop sequences nor
    penalties)."""
    text = body.get("text")
    response_format = None
    if text is not None:
        if not isinstance(text, Mapping):
            raise invalid("text", "'text' must be an object.")
        for name in text:
            if name == "verbosity" and text[name] is not None:
                refused = ERROR_REFUSED.format(name="text.verbosity", why=_OPERATORS_MODEL)
                raise invalid("text.verbosity", refused, code="unsupported_parameter")
            if name not in ("format", "verbosity"):
                raise invalid(f"text.{name}", ERROR_UNKNOWN.format(name=f"text.{name}"), code="unknown_parameter")
        response_format = _format(text.get("format"), "text.format", schema_in="format")
    boolean_read(body, "parallel_tool_calls")
    return _generation(
        body,
        max_tokens=integer_read(body, "max_output_tokens", minimum=1),
        stop=(),
        response_format=response_format,
    )


def refusal(name: str, why: str) -> OpenAIError:
    """A 400 refusing ``name`` (a part of a parameter) with ``why``."""
    return invalid(name, ERROR_REFUSED.format(name=name, why=why), code="unsupported_parameter")
