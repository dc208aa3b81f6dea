"""What one played turn showed (:class:`Observed`), and its expectations checked against it (:func:`turn_checked`).

Each expectation of a turn (:mod:`routing.conversation_tests.cases` lists them) is one check; a check that fails is a
:class:`Failure` naming the key, what was expected and what came. How each is read:

* routing: ``intent``, ``method``, ``next_state`` are the route decision's; ``agent`` is the specialist that answered;
  ``goal`` and ``status`` goal mode's reading; ``events``, ``repair``, ``topics`` what the message did to the
  conversation's frames (each event or topic named must be among those that occurred); ``state``, ``state_after``
  and ``no_state`` the conversation's state after the turn; ``language`` the conversation's;
* the answer: phrases are found in it with case and accents folded (``"Fatura"`` finds "FATURA" and "fatúra"; a
  phrase may be part of a word); ``answer_matches`` is searched by RE2; ``answer_language`` is the language the
  answer's own words read as (:func:`common.language.detect_language`): an answer too short to tell fails an explicit
  ``answer_language``, and passes the test's ``language`` when no turn asks; what the answer quotes (a tool's rows,
  a name in quotes) is someone else's words and is not read; ``answer_schema`` reads the answer as
  JSON and checks it within the platform's step budget; lengths count characters;
* tools: the calls the turn made (:mod:`common.rehearsal`), with the arguments they were called with, whatever their
  outcome; ``{tool: {argument: value}}`` passes when one call of the tool had every argument named with that value;
* flow: ``frame_pushed`` / ``frame_resumed`` true (some frame), false (none) or a frame's name or kind;
  ``escalated`` whether the turn leaves the conversation with a person; ``delegated_to`` a delegation to that
  specialist in the turn, ``returned`` a return (from that specialist, when named);
* knowledge (``metadata.knowledge``): ``cites`` the passages the answer cites (a document named by its title, case and
  accents folded, or its file name); ``unknown`` whether the answer said the documents do not say; ``grounded`` the
  answer against the passages it cites (:func:`grounding`): every number it states is in them or in the customer's
  message, and at least :data:`GROUNDED_SHARE` of its content words are (the words it shares with them on their first
  letters, as the relevance bar reads them) — a check of words, not of meaning: an answer that rewords its passages
  freely wants a ``judge``.

``judge`` is not checked here: :mod:`releases.evals.judging` scores it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.public import SchemaTooCostly, content_words, offline_words, schema_errors, words_held
from common.language import detect_language
from common.patterns import pattern_compiled
from common.text import fold
from conversations.public import unquoted
from routing.public import JUDGE_KEY, ROUTING_TEST_LIST_KEYS, ProfileSpec

NOTHING = "(none)"
GROUNDED_SHARE = 0.7  # of the answer's content words found in the passages it cites (or the customer's message)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CITATION_MARK = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class Cited:
    """A passage the answer cites: its document's title and file name, and its text."""

    title: str
    file_name: str
    text: str


@dataclass(frozen=True)
class Observed:
    """What a played turn showed: its answer, the decision, the conversation after it, the tools it called and the
    moves between agents."""

    answer: str
    agent: str
    decision: Mapping[str, Any]  # intent, method, next_state, goal, status, language, events, repair, topics
    state: str  # the conversation's, after the turn
    tools: Sequence[Mapping[str, Any]] = ()  # common.rehearsal.ToolCalled.as_dict()
    handoffs: Sequence[Mapping[str, Any]] = ()  # the turn's moves: {from_agent, to_agent, kind, ...}
    frames: Sequence[Mapping[str, Any]] = ()  # the conversation's events: {event, frame: {kind, name}}
    escalated: bool = False
    judged: Mapping[str, Any] = field(default_factory=dict)
    question: str = ""  # the customer's message
    knowledge: Mapping[str, Any] = field(default_factory=dict)  # metadata.knowledge
    cited: Sequence[Cited] = ()  # the passages its citations name, in their order
    # Texts around the answer that are no claim: the specialist's name, the platform's own words.
    framing: Sequence[str] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "agent": self.agent,
            "decision": dict(self.decision),
            "state": self.state,
            "tools": [dict(tool) for tool in self.tools],
            "handoffs": [dict(move) for move in self.handoffs],
            "escalated": self.escalated,
            "cited": [cited.title for cited in self.cited],
        }


@dataclass(frozen=True)
class Failure:
    """A check that failed: the key, what was expected and what came (as shown to a person)."""

    key: str
    expected: Any
    actual: Any
    note: str = ""

    def text(self) -> str:
        said = f"{self.key}: expected {shown(self.expected)}, got {shown(self.actual)}"
        return f"{said} ({self.note})" if self.note else said

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "expected": self.expected, "actual": self.actual, "note": self.note}


def shown(value: Any) -> str:
    if value is None or value == "" or value == []:
        return NOTHING
    if isinstance(value, str):
        return repr(value) if len(value) <= 200 else repr(value[:200] + "…")
    return json.dumps(value, ensure_ascii=False, default=str)


def turn_checked(expect: Mapping[str, Any], seen: Observed, *, language: str = "") -> list[Failure]:
    """Every expectation of ``expect`` that ``seen`` does not meet (the judge's aside); ``language``: the test's,
    which the answer must be in unless ``expect`` names an ``answer_language``."""
    failures: list[Failure] = []
    for key, expected in expect.items():
        if key == JUDGE_KEY:
            continue
        failure = _check(key, expected, seen)
        if failure is not None:
            failures.append(failure)
    if language and "answer_language" not in expect:
        told = own_language(seen.answer)
        if told is not None and told != language:
            failures.append(Failure("answer_language", language, told, "the test's language"))
    return failures


def own_language(answer: str) -> str | None:
    """The language of the answer's own words, without what it quotes; ``None`` when they are too few to tell."""
    words = unquoted(answer)
    return detect_language(words) if words.strip() else None


def _check(key: str, expected: Any, seen: Observed) -> Failure | None:
    answer = seen.answer
    if key == "agent":
        return None if seen.agent == expected else Failure(key, expected, seen.agent)
    if key in ROUTING_TEST_LIST_KEYS:
        occurred = list(seen.decision.get(key) or ())
        missing = [item for item in expected if item not in occurred]
        return Failure(key, expected, occurred, f"missing {', '.join(missing)}") if missing else None
    if key in ("state", "state_after"):
        return None if seen.state == expected else Failure(key, expected, seen.state)
    if key == "no_state":
        return None if (seen.state == "") == expected else Failure(key, expected, seen.state or NOTHING)
    if key == "goal":
        came = seen.decision.get("goal", "")
        return None if expected in (came, came.partition(".")[2]) else Failure(key, expected, came)
    if key in ("intent", "method", "next_state", "status", "repair", "language"):
        came = seen.decision.get(key) or ""
        return None if came == expected else Failure(key, expected, came)
    if key == "answer_contains":
        missing = [phrase for phrase in expected if folded(phrase) not in folded(answer)]
        return Failure(key, expected, answer, f"missing {', '.join(map(repr, missing))}") if missing else None
    if key == "answer_not_contains":
        found = [phrase for phrase in expected if folded(phrase) in folded(answer)]
        return Failure(key, expected, answer, f"found {', '.join(map(repr, found))}") if found else None
    if key == "answer_matches":
        compiled = pattern_compiled(expected)
        return None if compiled is not None and compiled.search(answer) else Failure(key, expected, answer)
    if key == "answer_language":
        told = own_language(answer)
        if told == expected:
            return None
        return Failure(key, expected, told, "" if told else "the answer is too short or mixed to tell")
    if key == "answer_schema":
        return _schema_failure(expected, answer)
    if key == "answer_min_chars":
        return None if len(answer) >= expected else Failure(key, expected, len(answer))
    if key == "answer_max_chars":
        return None if len(answer) <= expected else Failure(key, expected, len(answer))
    if key == "tools_called":
        return _tools_called(expected, seen.tools)
    if key == "tools_not_called":
        called = sorted({tool["tool"] for tool in seen.tools} & set(expected))
        return Failure(key, expected, called, "called") if called else None
    if key in ("frame_pushed", "frame_resumed"):
        return _frame(key, expected, seen.frames)
    if key == "escalated":
        return None if seen.escalated == expected else Failure(key, expected, seen.escalated)
    if key == "delegated_to":
        to = [move["to_agent"] for move in seen.handoffs if move.get("kind") == "delegation"]
        return None if expected in to else Failure(key, expected, to)
    if key == "returned":
        back = [move["from_agent"] for move in seen.handoffs if move.get("kind") == "return"]
        met = bool(back) == expected if isinstance(expected, bool) else expected in back
        return None if met else Failure(key, expected, back)
    if key in ("cites", "grounded", "unknown"):
        return _knowledge(key, expected, seen)
    return Failure(key, expected, None, "not a key this platform checks")


def _knowledge(key: str, expected: Any, seen: Observed) -> Failure | None:
    titles = [cited.title for cited in seen.cited]
    if key == "unknown":
        said = bool(seen.knowledge.get("unknown"))
        return None if said == expected else Failure(key, expected, said)
    if key == "cites":
        if isinstance(expected, bool):
            met = bool(seen.cited) == expected
        else:
            met = any(folded(expected) == folded(cited.title) or expected == cited.file_name for cited in seen.cited)
        return None if met else Failure(key, expected, titles)
    why = grounding(seen.answer, seen.question, seen.cited, framing=seen.framing)
    return None if (not why) == expected else Failure(key, expected, not why, why)


def grounding(answer: str, question: str, cited: Sequence[Cited], *, framing: Sequence[str] = ()) -> str:
    """Why ``answer`` is not grounded in the passages it cites (``""``: it is): it cites none, states a number
    neither they nor the customer's message hold, or fewer than :data:`GROUNDED_SHARE` of its content words are theirs
    or the message's. The answer is read without its line of sources and its citation marks (``[1]``); the words of
    ``framing`` (who answers, the platform's own phrases around an answer) are no claim and count as held."""
    if not cited:
        return "the answer cites no passage"
    own = _CITATION_MARK.sub(" ", _without_sources(answer, cited[-1].title))
    support = "\n".join((*(passage.text for passage in cited), *(passage.title for passage in cited), question))
    support = "\n".join((support, *framing))
    known = {_digits(number) for number in _NUMBER.findall(support)}
    invented = [number for number in dict.fromkeys(_NUMBER.findall(own)) if _digits(number) not in known]
    if invented:
        return f"states {', '.join(invented)}, which neither the cited passages nor the message hold"
    held, words = words_held(own, support)
    if words and held / words < GROUNDED_SHARE:
        missing = [word for word in content_words(own) if not words_held(word, support)[0]]
        shown_missing = ", ".join(missing[:8]) + (", …" if len(missing) > 8 else "")
        return f"{words - held} of its {words} content words are not in the cited passages: {shown_missing}"
    return ""


def answer_framing(profile: ProfileSpec, agent: str, language: str | None) -> tuple[str, ...]:
    """What frames an answer of ``agent`` and is no claim: its display name in the conversation's ``language``, and
    the offline model's own words in it."""
    specialist = profile.specialists.get(agent)
    named = (profile.display_name_in(specialist, language),) if specialist is not None else ()
    return (*named, *offline_words(language).values())


def _without_sources(answer: str, last_title: str) -> str:
    """``answer`` without its closing line of sources (a last paragraph ending in the last citation's title)."""
    body, _, tail = answer.rstrip().rpartition("\n\n")
    return body if body and tail.rstrip().endswith(last_title) else answer


def _digits(number: str) -> str:
    return number.replace(".", "").replace(",", "")


def folded(text: str) -> str:
    """Case and accents folded, spaces collapsed: how phrases are found in an answer."""
    return " ".join(fold(text).split())


def _schema_failure(schema: Mapping[str, Any], answer: str) -> Failure | None:
    try:
        value = json.loads(answer)
    except ValueError:
        return Failure("answer_schema", schema, answer, "the answer is not JSON")
    try:
        errors = schema_errors(schema, value)
    except SchemaTooCostly as exc:
        return Failure("answer_schema", schema, value, str(exc))
    if not errors:
        return None
    first = errors[0]
    where = "/".join(str(part) for part in first.absolute_path) or "the answer"
    return Failure("answer_schema", schema, value, f"{where}: {first.message}")


def _tools_called(expected: Any, tools: Sequence[Mapping[str, Any]]) -> Failure | None:
    called = [tool["tool"] for tool in tools]
    if isinstance(expected, list):
        missing = [name for name in expected if name not in called]
        return Failure("tools_called", expected, called, f"not called: {', '.join(missing)}") if missing else None
    wrong = []
    for name, arguments in expected.items():
        calls = [tool["arguments"] for tool in tools if tool["tool"] == name]
        if not any(all(call.get(key) == value for key, value in arguments.items()) for call in calls):
            wrong.append(name)
    if not wrong:
        return None
    came = [tool for tool in tools if tool["tool"] in wrong] or called
    return Failure("tools_called", expected, came, f"not called so: {', '.join(wrong)}")


def _frame(key: str, expected: Any, events: Sequence[Mapping[str, Any]]) -> Failure | None:
    event = "pushed" if key == "frame_pushed" else "resumed"
    frames = [item.get("frame") or {} for item in events if item.get("event") == event]
    if isinstance(expected, bool):
        met = bool(frames) == expected
    else:
        met = any(expected in (frame.get("name"), frame.get("kind")) for frame in frames)
    return None if met else Failure(key, expected, [frame.get("name") or frame.get("kind") for frame in frames])
