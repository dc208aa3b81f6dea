"""Saved conversation tests, the contract: what a test is, which keys it takes, and what is wrong with one.

A conversation test is a short conversation played against a version of a profile: its turns in order, each the
customer's message, and what each answer must show (``expect``). Every path that writes one — the model
(:class:`releases.models.ConversationTest`), the admin's form, the YAML file (:mod:`releases.evals`) — refuses the same
things, through :func:`conversation_test_problems`; :mod:`releases.evals` plays them.

A test (:data:`TEST_KEYS`): ``name``; ``required`` (default true: a failure blocks publishing and rollout stages);
``enabled`` (default true); ``language`` — the conversation's language, which every answer must be in unless a turn's
``expect`` names another ``answer_language``; ``user`` (the customer's id), ``channel`` and ``context`` as a face gives
them; ``tool_answers`` (``{tool: result}``, used in place of calling the tool's server); ``turns``. A turn
(:data:`TURN_KEYS`): ``user`` (the customer's message), its own ``channel``, ``context`` (added to the test's) and
``tool_answers`` (over the test's), and ``expect``:

* routing, as saved routing tests expect (:mod:`routing.expectations`): ``intent``, ``agent``, ``method``,
  ``next_state``, ``goal``, ``status``, ``events``, ``repair``, ``state_after``, ``topics``, ``language``; and
  ``state`` (the conversation's state after the turn) or ``no_state: true`` (none);
* the answer: ``answer_contains`` and ``answer_not_contains`` (lists of phrases, compared with case and accents
  folded), ``answer_matches`` (a regular expression, run by RE2: :mod:`common.patterns`), ``answer_language``,
  ``answer_schema`` (a JSON Schema the answer, read as JSON, must satisfy: :mod:`agents.structured`),
  ``answer_min_chars``, ``answer_max_chars``;
* tools: ``tools_called`` (a list of names, or ``{name: {argument: value}}`` for the arguments they were called
  with), ``tools_not_called``;
* flow: ``frame_pushed`` and ``frame_resumed`` (true, false, or the frame's name or kind: :mod:`routing.stack`),
  ``escalated`` (true or false), ``delegated_to`` (a specialist), ``returned`` (true, false, or the specialist that
  returned);
* knowledge: ``cites`` (true: the answer cites a passage of the profile's documents; false: none; or a document's
  title or file name it cites), ``grounded`` (true: the answer is grounded in the passages it cites —
  :func:`releases.evals.checks.grounding`), ``unknown`` (true: the answer says the documents do not say);
* ``judge``: ``{rubric, min_score, runs?}`` — a rubric in words, the lowest score in [0, 1] that passes, and how many
  times a model-judged test runs (:data:`JUDGE_MAX_RUNS` at most).

Everything is bounded (:data:`MAX_TURNS`, the texts' lengths, the context's and tool answers' sizes); unknown keys are
named. Pure: no database.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from django.conf import settings

from agents.public import schema_problem
from common.language import LANGUAGES
from common.patterns import pattern_problem
from routing.expectations import ROUTING_TEST_KEYS, Where, routing_test_expect_problems

TEST_KEYS = ("name", "required", "enabled", "language", "user", "channel", "context", "tool_answers", "turns")
TURN_KEYS = ("user", "channel", "context", "tool_answers", "expect")

ROUTING_KEYS = (*ROUTING_TEST_KEYS, "state", "no_state")
ANSWER_KEYS = (
    "answer_contains",
    "answer_not_contains",
    "answer_matches",
    "answer_language",
    "answer_schema",
    "answer_min_chars",
    "answer_max_chars",
)
TOOL_KEYS = ("tools_called", "tools_not_called")
FLOW_KEYS = ("frame_pushed", "frame_resumed", "escalated", "delegated_to", "returned")
KNOWLEDGE_KEYS = ("cites", "grounded", "unknown")
JUDGE_KEY = "judge"
EXPECT_KEYS = (*ROUTING_KEYS, *ANSWER_KEYS, *TOOL_KEYS, *FLOW_KEYS, *KNOWLEDGE_KEYS, JUDGE_KEY)
JUDGE_KEYS = ("rubric", "min_score", "runs")

MAX_TURNS = 20
NAME_MAX_CHARS = 200
USER_MAX_CHARS = 200  # the customer's id
CHANNEL_MAX_CHARS = 64  # as a face takes it
NAME_LIST_MAX = 50  # phrases in answer_contains, tools in tools_called, tool answers
PHRASE_MAX_CHARS = 500
PATTERN_MAX_CHARS = 1_000
ANSWER_MAX_CHARS = 100_000  # the largest answer_min_chars / answer_max_chars
TOOL_NAME_MAX_CHARS = 100
TOOL_ARGUMENTS_MAX_CHARS = 4_000  # the arguments tools_called names, as JSON
RUBRIC_MAX_CHARS = 2_000
JUDGE_MAX_RUNS = 10


@dataclass(frozen=True)
class Judge:
    """A model-judged criterion: the rubric, the lowest score that passes, how many runs."""

    rubric: str
    min_score: float
    runs: int = 1

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Judge:
        return cls(str(data["rubric"]), float(data["min_score"]), int(data.get("runs", 1)))


@dataclass(frozen=True)
class CaseTurn:
    """One turn of a conversation test: the customer's message, what the answer must show (``{}``: nothing), and
    what the turn gives beside the test's (a channel, context added to the test's, recorded tool answers)."""

    user: str
    expect: Mapping[str, Any] = field(default_factory=dict)
    channel: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)
    tool_answers: Mapping[str, Any] = field(default_factory=dict)

    @property
    def judge(self) -> Judge | None:
        read = self.expect.get(JUDGE_KEY)
        return Judge.of(read) if read else None


@dataclass(frozen=True)
class ConversationCase:
    """A saved conversation test, as plain data (checked: :func:`conversation_test_problems`)."""

    name: str
    turns: tuple[CaseTurn, ...]
    required: bool = True
    enabled: bool = True
    language: str = ""
    user: str = ""
    channel: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)
    tool_answers: Mapping[str, Any] = field(default_factory=dict)

    @property
    def runs(self) -> int:
        """How many times the test runs: its judges' largest ``runs`` (1 without a judge)."""
        return max((turn.judge.runs for turn in self.turns if turn.judge is not None), default=1)

    @classmethod
    def read(cls, data: Mapping[str, Any]) -> ConversationCase:
        """A test from its checked data (the YAML item's shape): texts stripped, defaults filled."""
        return cls(
            name=str(data["name"]).strip(),
            turns=tuple(
                CaseTurn(
                    user=str(turn["user"]).strip(),
                    expect=_expect_read(turn.get("expect") or {}),
                    channel=str(turn.get("channel") or "").strip(),
                    context=dict(turn.get("context") or {}),
                    tool_answers=dict(turn.get("tool_answers") or {}),
                )
                for turn in data["turns"]
            ),
            required=bool(data.get("required", True)),
            enabled=bool(data.get("enabled", True)),
            language=str(data.get("language") or ""),
            user=str(data.get("user") or "").strip(),
            channel=str(data.get("channel") or "").strip(),
            context=dict(data.get("context") or {}),
            tool_answers=dict(data.get("tool_answers") or {}),
        )

    def data(self) -> dict[str, Any]:
        """The test in the YAML item's shape, keys in :data:`TEST_KEYS` order, defaults left out (``required`` is
        always written): :meth:`read` gives it back."""
        out: dict[str, Any] = {"name": self.name, "required": self.required}
        if not self.enabled:
            out["enabled"] = False
        for key in ("language", "user", "channel", "context", "tool_answers"):
            if getattr(self, key):
                out[key] = _plain(getattr(self, key))
        out["turns"] = [turn_data(turn) for turn in self.turns]
        return out


def turn_data(turn: CaseTurn) -> dict[str, Any]:
    """A turn in the YAML item's shape (what :meth:`ConversationCase.read` reads)."""
    out: dict[str, Any] = {"user": turn.user}
    for key in ("channel", "context", "tool_answers"):
        if getattr(turn, key):
            out[key] = _plain(getattr(turn, key))
    if turn.expect:
        out["expect"] = {key: _plain(turn.expect[key]) for key in EXPECT_KEYS if key in turn.expect}
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _expect_read(expect: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in expect.items():
        if isinstance(value, str):
            out[key] = value.strip()
        elif isinstance(value, list):  # phrases, tools, events, topics
            out[key] = [str(item).strip() for item in value]
        elif key == "tools_called":
            out[key] = {str(name).strip(): dict(arguments or {}) for name, arguments in value.items()}
        elif key == JUDGE_KEY:
            judge = {"rubric": str(value["rubric"]).strip(), "min_score": float(value["min_score"])}
            out[key] = judge | ({"runs": int(value["runs"])} if "runs" in value else {})
        else:
            out[key] = value
    return out


# -- what is wrong with one -------------------------------------------------------------------------------------

Problems = list[tuple[Where, str]]


def conversation_test_problems(data: object, *, max_chars: int) -> Problems:
    """What is wrong with a test in the YAML item's shape (the model's fields give the same,
    :meth:`releases.models.ConversationTest.data`), each problem with where it is (``("turns", 0, "expect",
    "judge", "rubric")``); ``max_chars`` bounds each message (the profile's input limit)."""
    if not isinstance(data, Mapping):
        return [((), "must be a mapping with name and turns.")]
    problems: Problems = _unknown((), data, TEST_KEYS)
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        problems.append((("name",), "required text."))
    elif len(name.strip()) > NAME_MAX_CHARS:
        problems.append((("name",), f"longer than {NAME_MAX_CHARS} characters."))
    for key in ("required", "enabled"):
        if key in data and not isinstance(data[key], bool):
            problems.append(((key,), "must be true or false."))
    if data.get("language") not in (None, "", *LANGUAGES):
        problems.append((("language",), f"must be one of: {', '.join(LANGUAGES)}."))
    problems += _gives((), data, user_key="user")
    turns = data.get("turns")
    if not isinstance(turns, list) or not turns:
        problems.append((("turns",), "required list of one or more turns, each the customer's message (user)."))
        return problems
    if len(turns) > MAX_TURNS:
        problems.append((("turns",), f"at most {MAX_TURNS} turns ({len(turns)} given)."))
    for number, turn in enumerate(turns):
        problems += _turn_problems(("turns", number), turn, max_chars=max_chars)
    checks = any(isinstance(turn, Mapping) and turn.get("expect") for turn in turns)
    if not problems and not checks and not data.get("language"):
        problems.append(((), "checks nothing: give a turn an expect (or the test a language its answers must be in)."))
    return problems


def _unknown(where: Where, data: Mapping[Any, Any], allowed: Sequence[str]) -> Problems:
    return [
        ((*where, key), f"unknown key {key!r} (allowed: {', '.join(allowed)}).") for key in data if key not in allowed
    ]


def _text(where: Where, value: object, limit: int, *, required: bool = False) -> Problems:
    if value is None or (value == "" and not required):
        return [] if not required else [(where, "required text.")]
    if not isinstance(value, str) or (required and not value.strip()):
        return [(where, "required text." if required else f"must be text, not {type(value).__name__}.")]
    if len(value) > limit:
        return [(where, f"longer than {limit:,} characters ({len(value):,}).")]
    return []


def _gives(where: Where, data: Mapping[str, Any], *, user_key: str) -> Problems:
    """The keys a test and a turn both take: channel, context, tool answers (and the test's user id)."""
    problems: Problems = []
    if user_key == "user":
        problems += _text((*where, "user"), data.get("user"), USER_MAX_CHARS)
    problems += _text((*where, "channel"), data.get("channel"), CHANNEL_MAX_CHARS)
    context = data.get("context")
    if context is not None:
        if not isinstance(context, Mapping):
            problems.append(((*where, "context"), 'must be a mapping, e.g. {msisdn: "5511999999999"}.'))
        elif _json_size(context) > settings.API_MAX_CONTEXT_BYTES:
            problems.append(((*where, "context"), f"larger than {settings.API_MAX_CONTEXT_BYTES:,} bytes as JSON."))
    answers = data.get("tool_answers")
    if answers is not None:
        if not isinstance(answers, Mapping) or len(answers) > NAME_LIST_MAX:
            problems.append(
                ((*where, "tool_answers"), f"must be a mapping of at most {NAME_LIST_MAX} tools, each to its result.")
            )
        else:
            for tool, result in answers.items():
                if not isinstance(tool, str) or not tool.strip() or len(tool) > TOOL_NAME_MAX_CHARS:
                    problems.append(((*where, "tool_answers"), f"{tool!r} is not a tool's name."))
                elif _json_size(result) > settings.MCP_TOOL_OUTPUT_MAX_BYTES:
                    limit = settings.MCP_TOOL_OUTPUT_MAX_BYTES
                    problems.append(((*where, "tool_answers", tool), f"larger than {limit:,} bytes as JSON."))
    return problems


def _json_size(value: Any) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError):
        return 1 << 62  # not JSON: larger than any limit


def _turn_problems(where: Where, turn: object, *, max_chars: int) -> Problems:
    if not isinstance(turn, Mapping):
        return [(where, "must be a mapping with the customer's message (user) and, optionally, expect.")]
    problems = _unknown(where, turn, TURN_KEYS)
    user = turn.get("user")
    if not isinstance(user, str) or not user.strip():
        problems.append(((*where, "user"), "required text (the customer's message)."))
    elif len(user) > max_chars:
        problems.append(((*where, "user"), f"longer than the profile's limit of {max_chars} characters ({len(user)})."))
    problems += _gives(where, turn, user_key="")
    expect = turn.get("expect")
    if expect is not None:
        problems += [((*where, "expect", *inside), problem) for inside, problem in expect_problems(expect)]
    return problems


def expect_problems(expect: object) -> Problems:
    """What is wrong with a turn's ``expect``, each problem with the key it is about (``()``: the mapping)."""
    if not isinstance(expect, Mapping):
        return [((), f"must be a mapping of any of: {', '.join(EXPECT_KEYS)}.")]
    problems = _unknown((), expect, EXPECT_KEYS)
    routing = {key: value for key, value in expect.items() if key in ROUTING_TEST_KEYS}
    if routing:
        problems += [((key,), problem) for key, problem in routing_test_expect_problems(routing)]
    for key, value in expect.items():
        problems += [((key, *inside), problem) for inside, problem in _value_problems(key, value)]
    if expect.get("no_state") is True and "state" in expect:
        problems.append((("no_state",), "contradicts state: expect one of them."))
    low, high = expect.get("answer_min_chars"), expect.get("answer_max_chars")
    if _count(low) and _count(high) and low > high:
        problems.append((("answer_min_chars",), f"is more than answer_max_chars ({high})."))
    called, not_called = expect.get("tools_called"), expect.get("tools_not_called")
    if isinstance(called, (list, Mapping)) and isinstance(not_called, list):
        both = sorted({str(name) for name in called} & {str(name) for name in not_called})
        if both:
            problems.append((("tools_not_called",), f"names a tool tools_called names too: {', '.join(both)}."))
    return problems


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _value_problems(key: str, value: Any) -> Problems:
    """The problems of one key's value (the routing keys' are :func:`routing_test_expect_problems`')."""
    if key == "state" or key == "delegated_to":
        return _text((), value, TOOL_NAME_MAX_CHARS, required=True)
    if key == "cites":
        if isinstance(value, bool):
            return []
        if isinstance(value, str) and value.strip():
            return _text((), value, NAME_MAX_CHARS)
        return [((), "must be true, false or a document's title or file name.")]
    if key in ("no_state", "escalated", "grounded", "unknown"):
        return [] if isinstance(value, bool) else [((), "must be true or false.")]
    if key in ("frame_pushed", "frame_resumed", "returned"):
        if isinstance(value, bool) or (isinstance(value, str) and value.strip()):
            return _text((), value, TOOL_NAME_MAX_CHARS) if isinstance(value, str) else []
        named = "the specialist that returned" if key == "returned" else "a frame's name or kind"
        return [((), f"must be true, false or {named}.")]
    if key in ("answer_contains", "answer_not_contains"):
        return _names((), value, PHRASE_MAX_CHARS, 'a list of one or more phrases, e.g. ["fatura"]')
    if key == "answer_matches":
        found = _text((), value, PATTERN_MAX_CHARS, required=True)
        problem = "" if found else pattern_problem(value)
        return found or ([((), problem)] if problem else [])
    if key == "answer_language":
        return [] if value in LANGUAGES else [((), f"must be one of: {', '.join(LANGUAGES)}.")]
    if key == "answer_schema":
        if not isinstance(value, Mapping):
            return [((), 'must be a JSON Schema (a mapping), e.g. {type: object, required: ["status"]}.')]
        refused = schema_problem(value)
        return [((), refused)] if refused else []
    if key in ("answer_min_chars", "answer_max_chars"):
        if not _count(value) or not (key == "answer_min_chars" or value > 0) or not 0 <= value <= ANSWER_MAX_CHARS:
            return [((), f"must be a whole number from {0 if key == 'answer_min_chars' else 1} to {ANSWER_MAX_CHARS}.")]
        return []
    if key == "tools_called":
        return _tools_called(value)
    if key == "tools_not_called":
        return _names((), value, TOOL_NAME_MAX_CHARS, "a list of one or more tools' names")
    if key == JUDGE_KEY:
        return _judge_problems(value)
    return []


def _names(where: Where, value: object, limit: int, what: str) -> Problems:
    if not isinstance(value, list) or not value or len(value) > NAME_LIST_MAX:
        return [(where, f"must be {what} (at most {NAME_LIST_MAX}).")]
    problems: Problems = []
    for index, item in enumerate(value):
        problems += _text((*where, index), item, limit, required=True)
    return problems


def _tools_called(value: object) -> Problems:
    if isinstance(value, list):
        return _names((), value, TOOL_NAME_MAX_CHARS, "a list of tools' names, or a mapping of them to arguments")
    if not isinstance(value, Mapping) or not value or len(value) > NAME_LIST_MAX:
        return [
            (
                (),
                f"must be a list of one or more tools' names, or a mapping of at most {NAME_LIST_MAX} of them "
                'to the arguments they were called with ({consultar_fatura: {msisdn: "5511…"}}).',
            )
        ]
    problems: Problems = []
    for tool, arguments in value.items():
        if not isinstance(tool, str) or not tool.strip() or len(tool) > TOOL_NAME_MAX_CHARS:
            problems.append(((), f"{tool!r} is not a tool's name."))
        elif arguments is not None and not isinstance(arguments, Mapping):
            problems.append(((tool,), "must be a mapping of the arguments the tool was called with (or nothing)."))
        elif _json_size(arguments or {}) > TOOL_ARGUMENTS_MAX_CHARS:
            problems.append(((tool,), f"longer than {TOOL_ARGUMENTS_MAX_CHARS:,} characters as JSON."))
    return problems


def _judge_problems(value: object) -> Problems:
    if not isinstance(value, Mapping):
        return [((), 'must be a mapping: {rubric: "…", min_score: 0.7, runs: 3} (runs optional).')]
    problems = _unknown((), value, JUDGE_KEYS)
    problems += _text(("rubric",), value.get("rubric"), RUBRIC_MAX_CHARS, required=True)
    score = value.get("min_score")
    if not isinstance(score, (int, float)) or isinstance(score, bool) or not 0 <= score <= 1:
        problems.append((("min_score",), "required number from 0 to 1 (the lowest score that passes)."))
    runs = value.get("runs", 1)
    if not _count(runs) or not 1 <= runs <= JUDGE_MAX_RUNS:
        problems.append((("runs",), f"must be a whole number from 1 to {JUDGE_MAX_RUNS}."))
    return problems


def problem_text(where: Where, problem: str) -> str:
    """``turns[0].expect.judge.rubric: required text.``"""
    path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in where).lstrip(".")
    return f"{path}: {problem}" if path else problem
