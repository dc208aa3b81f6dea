"""What the offline model reads of the tools it is offered (:mod:`agents.llm`): the values the customer said for a
tool's parameters, the tools with no argument a turn asks for, and whether it searches the business's documents
instead."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from agents.passages import SEARCH_KNOWLEDGE, asks_documents, coverage
from common.text import described_example, identifier_shape, identifiers, normalize
from handoffs.public import CONTROL_TOOLS


def said_identifiers(messages: list[Any]) -> list[str]:
    """The identifiers the customer wrote (:func:`common.text.identifiers`), newest first: the last message's, then
    the earlier ones', each message's from its end. What :func:`said_values` reads a tool's arguments from, read once a
    turn for every tool offered."""
    return [
        token
        for message in reversed(messages)
        if getattr(message, "type", "") == "human" and isinstance(message.content, str)
        for token in reversed(identifiers(message.content))
    ]


@lru_cache(maxsize=512)
def _example_shape(description: str) -> str:
    """The form of the example a parameter's description gives (:func:`common.text.described_example`), or ``""``."""
    example = described_example(description)
    return identifier_shape(example) if example else ""


def said_values(parameters: dict[str, Any], said: list[str]) -> dict[str, str]:
    """The values the customer said for a tool's parameters: a parameter whose description gives an example of its
    form ("Número do pedido (ex. P100)") takes the identifier of that form the customer wrote last (``said``, from
    :func:`said_identifiers`) — as a model reads "meu pedido P200" into ``order_id``. A form two parameters share
    goes to the required one only. The request's context wins over it (the caller's data)."""
    required = set(parameters.get("required") or ())
    shapes: dict[str, list[str]] = {}
    for name, spec in (parameters.get("properties") or {}).items():
        shape = _example_shape(str(spec.get("description", ""))) if isinstance(spec, dict) else ""
        if shape:
            shapes.setdefault(shape, []).append(name)
    wanted = {
        shape: next((name for name in names if name in required), names[0] if len(names) == 1 else "")
        for shape, names in shapes.items()
    }
    needed = sum(1 for name in wanted.values() if name)
    values: dict[str, str] = {}
    for token in said:
        if len(values) == needed:
            break
        name = wanted.get(identifier_shape(token), "")
        if name and name not in values:
            values[name] = token
    return values


ASKED_WORD_CHARS = 5  # a word of a tool's name that the message shares, this long or longer
_NAME_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def named_in(function: dict[str, Any], text: str) -> bool:
    """Whether the message names a tool: it shares a word of the tool's name (case and accents aside; words of
    :data:`ASKED_WORD_CHARS` letters or more, the same when their first letters up to that length are: "operation"
    and "operações"). Its description does not count: its common words ("whether", "progress") are shared by
    messages that ask for something else."""
    said = {word[:ASKED_WORD_CHARS] for word in normalize(text).split() if len(word) >= ASKED_WORD_CHARS}
    own = normalize(" ".join(_NAME_WORDS.findall(str(function.get("name", ""))))).split()
    return any(word[:ASKED_WORD_CHARS] in said for word in own if len(word) >= ASKED_WORD_CHARS)


def asked_without_arguments(tools: list[dict[str, Any]], intent_tools: tuple[str, ...], text: str) -> set[str]:
    """The offered tools with no required argument that this turn asks for. Nothing in the context is a sign that
    such a tool is wanted (a tool with required arguments is called when the context holds them), so: the winning
    intent's own tool, when it names exactly one such tool (the router read the message as that intent, and the
    intent is there for that tool); and any such tool the message names (:func:`named_in`) — the choice among
    several an intent names, or one offered by another route (a flow's earlier intent, a plan). An intent that
    names many leaves the choice to the message: the offline model cannot read what each does, and running every
    one on every turn made turns as slow as the slowest tool."""
    free = {
        tool["function"]["name"]: tool["function"]
        for tool in tools
        if tool["function"]["name"] not in CONTROL_TOOLS
        and not ((tool["function"].get("parameters") or {}).get("required"))
    }
    by_intent = [name for name in intent_tools if name in free]
    asked = {name for name, function in free.items() if named_in(function, text)}
    return asked | set(by_intent) if len(by_intent) == 1 else asked


def documents_asked(tools: list[dict[str, Any]], intent_tools: tuple[str, ...], text: str) -> bool:
    """Whether the offline model searches the business's documents (``search_knowledge`` is offered and it calls no
    other tool): when the message asks how something is done, where, or whether it may be
    (:func:`agents.passages.general_question`: "Como eu tiro a segunda via pelo aplicativo?"), or asks a question that
    names none of the customer's own things (:func:`agents.passages.question_in_general`: "O frete é grátis?" to
    billing, whose tools want the customer's line; "Quando vence a minha conta?" is theirs), or when it is about
    none of the offered MCP tools — the turn's winning intent lists none of them (the routing read the message, in
    whatever language it came) and it shares no content word (:func:`agents.passages.coverage`) with one's name or
    description.

    A request about the customer's own account that a tool answers once an argument is given ("Minha fatura veio
    alta", "My bill is too high" without the line) is that tool's, and the specialist asks for the argument: searching
    for it cost each such message a search (2.4 times the CPU of a message to the demo's billing), and in English or
    Spanish, whose words a Portuguese tool description does not share, it answered "My bill is too high" with the
    article on e-mail bills."""
    functions = [tool["function"] for tool in tools]
    if SEARCH_KNOWLEDGE not in {function["name"] for function in functions}:
        return False
    if asks_documents(text):
        return True
    if intent_tools:
        return False
    own = (f for f in functions if f["name"] != SEARCH_KNOWLEDGE and f["name"] not in CONTROL_TOOLS)
    return not any(
        coverage(text, " ".join(_NAME_WORDS.findall(f["name"])) + " " + f.get("description", "")) for f in own
    )
