"""Conversation accuracy benchmark: whole conversations on the demo profiles, every turn checked.

    PYTHONPATH=. DJANGO_SETTINGS_MODULE=platform.settings .venv/bin/python bench/conversation_accuracy.py \
        [--set bench/conversations] [--profile P] [--category C] [--language L] [--failures]

(Figures in docs/benchmarks.md; the targets, in each of pt, en and es: every turn right in ≥ 90 % of the
conversations, digress-and-resume and correction each ≥ 90 %, every topic of a multi-topic message answered or
queued ≥ 90 %, and no small-talk or out-of-scope message pushing or popping a frame.)

Loads the demo (``config/demo``) into a throwaway SQLite database as ``seed_demo --sync`` loads it, its three MCP
servers running as the tests run them (:mod:`tests.mcp_processes`), the offline model answering, and sends every
turn of every conversation of the set through the real message path: ``POST /api/gateway/message`` in process
(DRF's test client, an API key of the demo's tenant), one session per conversation, the conversation's ``context``
with every turn (what a channel knows: the customer's line) and a turn's own ``context`` with that turn (an order
number the customer typed, as the demo's tests pass it).

A set is a directory of YAML files, one per category (``category: C`` / ``conversations: [...]``); each
conversation has an ``id``, a ``profile``, a ``lang`` (pt, en, es), an optional ``context`` and its ``turns``. A
turn is ``say`` (the customer's message), an optional ``context`` and ``aside`` (``small_talk`` or
``out_of_scope``: a message that must push or pop no frame) and what must be observable after it
(:data:`EXPECTATIONS`); a turn is right when every expectation it states holds:

* ``agent``: who answered (the answer's ``agent``);
* ``intent``: the decision's intent (``metadata.route_decision.intent``; when the decision's agent passed the
  message on — a coordinator delegating it —, the intent of the candidate it was passed on for, or the one intent
  the answering specialist owns);
* ``state``: the conversation's state after the turn (``Conversation.state``; ``""`` for none);
* ``top``: the top frame of ``metadata.conversation.stack`` after the turn, ``kind`` or ``kind:name`` (``""``:
  no frame open);
* ``events`` / ``no_events``: events of ``metadata.conversation.events`` that must / must not occur this turn,
  ``event`` or ``event:kind``;
* ``repair``: ``metadata.conversation.repair`` (``null``: the message was read as no repair);
* ``topics``: each intent listed in ``metadata.conversation.topics``, ``answered`` or ``queued`` (a mapping
  ``{intent, status}`` asks for that status);
* ``tool_args``: ``{tool: {argument: value}}``, each tool called this turn with at least those arguments and
  answering ``ok``.

An ``aside`` is also wrong when it moved a frame (a ``pushed``, ``closed`` or ``cancelled`` event, or another stack
after it than before it, apart from expiry); those are counted apart.

Every answer's language is read too (:func:`answer_language`), against the conversation's ``lang``: with the
platform's own detection (:func:`common.language.detect_language`) on the answer's own words — without what is not
the platform's to translate (:func:`platform_words`: quoted text, the customer's or a tool's; identifiers; the
specialist's display name before the offline model's notice) —, the whole and each sentence of three words or more
in lower case; and no fixed text of the platform in another language (the pieces of the pt and es catalogues'
translations and of their English message ids, :func:`fixed_read`). Target: ≥ 95 % of the answers in each language.

Reported per category, per language and per profile: conversations with every turn right, turns right, and for
the multi-topic messages every topic answered or queued; answers in the customer's language per category and
language; the asides that moved a frame, and the turns whose answer carried no ``metadata.conversation`` at all.
``--failures`` lists every wrong turn with what it got, and every answer not in the customer's language with the
sentences and fixed texts of another language found in it.
``--set`` runs another directory (a held-out set another person wrote); the set is checked first
(:func:`set_problems`) and a set with problems is not run.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SET = ROOT / "bench" / "conversations"
DEMO_DIR = ROOT / "config" / "demo"

CATEGORIES = (
    "digress_resume",
    "cancel",
    "correct",
    "multi_topic",
    "reply_in_flow",
    "repeat",
    "skip",
    "already_told",
    "out_of_scope_in_flow",
    "small_talk_in_flow",
)
LANGUAGES = ("pt", "en", "es")
EXPECTATIONS = ("agent", "intent", "state", "top", "events", "no_events", "repair", "topics", "tool_args")
TURN_KEYS = frozenset({"say", "context", "aside", *EXPECTATIONS})
CONVERSATION_KEYS = frozenset({"id", "profile", "lang", "category", "context", "note", "turns"})
ASIDES = ("small_talk", "out_of_scope")
# The observable contract of metadata.conversation (docs/routing.md).
FRAME_KINDS = ("state", "permission", "clarification", "delegation", "topic")
EVENTS = ("opened", "pushed", "resumed", "bound", "closed", "cancelled", "expired", "queued")
REPAIRS = ("cancel", "correct", "repeat", "skip", "already_told")
TOPIC_STATUSES = ("answered", "queued")
FRAME_MOVES = ("pushed", "closed", "cancelled")  # what an aside must never do
API_KEY_TENANT = "tenant_a"  # the tenant scripts/start gives its key


@dataclass(frozen=True)
class Turn:
    say: str
    context: dict[str, Any]
    aside: str
    expect: dict[str, Any]


@dataclass(frozen=True)
class Conversation:
    id: str
    category: str
    profile: str
    lang: str
    context: dict[str, Any]
    turns: tuple[Turn, ...]
    source: str


@dataclass(frozen=True)
class Demo:
    """What the demo configuration names, per profile: for checking a set without a database."""

    modes: dict[str, str]
    agents: dict[str, set[str]]
    intents: dict[str, set[str]]
    states: dict[str, set[str]]
    tools: set[str]
    owners: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # profile → specialist → its intents


def _written_whole(entry: dict[str, Any], category: Any) -> dict[str, Any]:
    """A conversation as the runner reads it from either way of writing one: ``language`` for ``lang``, the file's
    category when it names none, a turn's expectations under ``expect`` or beside ``say``."""
    entry = dict(entry)
    if "language" in entry and "lang" not in entry:
        entry["lang"] = entry.pop("language")
    if category is not None:
        entry.setdefault("category", category)
    turns = []
    for raw in entry.get("turns") or ():
        if isinstance(raw, dict) and isinstance(raw.get("expect"), dict):
            raw = {**{k: v for k, v in raw.items() if k != "expect"}, **raw["expect"]}
        turns.append(raw)
    entry["turns"] = turns
    return entry


def conversations_load(directory: Path) -> tuple[list[Conversation], list[str]]:
    """Every conversation of the set in ``directory`` (its ``*.yaml`` files), and what is wrong with its shape
    (an unknown key, a missing field, a file that is no category file); a malformed conversation is left out."""
    conversations: list[Conversation] = []
    problems: list[str] = []
    for path in sorted(directory.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        # A file of one category ({category, conversations}), or of several, each conversation naming its own.
        if not isinstance(data, dict) or not {"conversations"} <= set(data) <= {"category", "conversations"}:
            problems.append(f"{path.name}: expected the key conversations (and category, for a file of one)")
            continue
        for n, entry in enumerate(data["conversations"] or ()):
            where = f"{path.name}[{n}] {entry.get('id', '?') if isinstance(entry, dict) else '?'}"
            if isinstance(entry, dict):
                entry = _written_whole(entry, data.get("category"))
            if not isinstance(entry, dict) or not {"id", "profile", "lang", "category", "turns"} <= set(entry):
                problems.append(f"{where}: a conversation needs id, profile, lang, category and turns")
                continue
            if unknown := set(entry) - CONVERSATION_KEYS:
                problems.append(f"{where}: unknown keys {sorted(unknown)}")
            turns = []
            for k, raw in enumerate(entry["turns"] or ()):
                if not isinstance(raw, dict) or not isinstance(raw.get("say"), str) or not raw["say"].strip():
                    problems.append(f"{where} turn {k + 1}: a turn needs a say")
                    continue
                if unknown := set(raw) - TURN_KEYS:
                    problems.append(f"{where} turn {k + 1}: unknown keys {sorted(unknown)}")
                expect = {key: raw[key] for key in EXPECTATIONS if key in raw}
                turns.append(Turn(raw["say"], dict(raw.get("context") or {}), raw.get("aside", ""), expect))
            conversations.append(
                Conversation(
                    id=str(entry["id"]),
                    category=str(entry["category"]),
                    profile=str(entry["profile"]),
                    lang=str(entry["lang"]),
                    context=dict(entry.get("context") or {}),
                    turns=tuple(turns),
                    source=path.name,
                )
            )
    return conversations, problems


def demo_read(directory: Path = DEMO_DIR) -> Demo:
    """The demo's profiles, their specialists, intents and states, and the tools, from ``config/demo`` and the
    manifest of its goal server (a goal-mode profile's intents are ``<domain>.<goal>``, answered by the planner)."""
    from mcp_servers.finance.server import MANIFEST
    from routing.goals.planner import GOAL_AGENT

    manifests = {MANIFEST["domain"]: MANIFEST}
    profiles = yaml.safe_load((directory / "agents.yaml").read_text(encoding="utf-8"))["agents"]
    tools = set(yaml.safe_load((directory / "tools.yaml").read_text(encoding="utf-8"))["tools"])
    tools |= {capability["tool"] for manifest in manifests.values() for capability in manifest["capabilities"]}
    demo = Demo(modes={}, agents={}, intents={}, states={}, tools=tools)
    for profile in profiles:
        agent_id = profile["agent_id"]
        routing = yaml.safe_load((directory / f"routing.{agent_id}.yaml").read_text(encoding="utf-8"))
        mode = routing["router"]["mode"]
        demo.modes[agent_id] = mode
        demo.agents[agent_id] = {specialist["name"] for specialist in profile["specialists"]}
        demo.intents[agent_id] = {intent["name"] for intent in routing.get("intents") or ()}
        demo.owners[agent_id] = defaultdict(set)
        for intent in routing.get("intents") or ():
            demo.owners[agent_id][intent["agent"]].add(intent["name"])
        demo.states[agent_id] = set(routing.get("state_policies") or {})
        if mode == "goal":
            demo.agents[agent_id].add(GOAL_AGENT)
            for domain in routing["router"].get("goal_domains") or ():
                demo.intents[agent_id] |= {f"{domain}.{goal['goal']}" for goal in manifests[domain]["goals"]}
    return demo


def set_problems(conversations: Iterable[Conversation], demo: Demo) -> list[str]:
    """What names nothing the demo has, or says what the contract cannot show: categories, languages, profiles,
    agents, intents, states, frames, events, repairs, topics and tools, each turn checked; ids must be unique and a
    multi-topic conversation must be on a profile in router or hybrid mode."""
    problems: list[str] = []
    seen: Counter[str] = Counter()
    for conversation in conversations:
        where = f"{conversation.source} {conversation.id}"
        seen[conversation.id] += 1
        profile = conversation.profile
        if conversation.category not in CATEGORIES:
            problems.append(f"{where}: unknown category {conversation.category!r}")
        if conversation.lang not in LANGUAGES:
            problems.append(f"{where}: unknown language {conversation.lang!r}")
        if profile not in demo.modes:
            problems.append(f"{where}: no demo profile {profile!r}")
            continue
        if conversation.category == "multi_topic" and demo.modes[profile] not in ("router", "hybrid"):
            problems.append(f"{where}: multi-topic messages are measured in router and hybrid mode")
        if not conversation.turns:
            problems.append(f"{where}: no turns")
        for k, turn in enumerate(conversation.turns, 1):
            problems.extend(f"{where} turn {k}: {problem}" for problem in _turn_problems(turn, profile, demo))
    problems.extend(f"id {name!r} used {count} times" for name, count in seen.items() if count > 1)
    return problems


def _turn_problems(turn: Turn, profile: str, demo: Demo) -> Iterator[str]:
    expect = turn.expect
    if turn.aside and turn.aside not in ASIDES:
        yield f"aside {turn.aside!r} is none of {ASIDES}"
    if not isinstance(turn.context, dict) or not all(isinstance(v, str) for v in turn.context.values()):
        yield "context must map names to strings"
    if "agent" in expect and expect["agent"] not in demo.agents[profile]:
        yield f"{profile} has no specialist {expect['agent']!r}"
    if "intent" in expect and expect["intent"] not in demo.intents[profile]:
        yield f"{profile} has no intent {expect['intent']!r}"
    if "state" in expect and expect["state"] != "" and expect["state"] not in demo.states[profile]:
        yield f"{profile} has no state {expect['state']!r}"
    if "top" in expect and expect["top"] != "":
        kind, _, name = str(expect["top"]).partition(":")
        if kind not in FRAME_KINDS:
            yield f"top: no frame kind {kind!r}"
        elif kind == "state" and name and name not in demo.states[profile]:
            yield f"top: {profile} has no state {name!r}"
        elif kind == "delegation" and name and name not in demo.agents[profile]:
            yield f"top: {profile} has no specialist {name!r}"
        elif kind == "permission" and name and name not in demo.tools:
            yield f"top: no tool {name!r}"
    for key in ("events", "no_events"):
        for event in expect.get(key, ()):
            name, _, kind = str(event).partition(":")
            if name not in EVENTS or (kind and kind not in FRAME_KINDS):
                yield f"{key}: no event {event!r}"
    if "repair" in expect and expect["repair"] is not None and expect["repair"] not in REPAIRS:
        yield f"no repair {expect['repair']!r}"
    for topic in expect.get("topics", ()):
        intent, status = _topic(topic)
        if intent not in demo.intents[profile]:
            yield f"topics: {profile} has no intent {intent!r}"
        if status is not None and status not in TOPIC_STATUSES:
            yield f"topics: no status {status!r}"
    for tool, arguments in (expect.get("tool_args") or {}).items():
        if tool not in demo.tools:
            yield f"tool_args: no tool {tool!r}"
        if not isinstance(arguments, dict):
            yield f"tool_args: {tool}'s arguments must be a mapping"


def _topic(topic: str | Mapping[str, str]) -> tuple[str, str | None]:
    """An expected topic's intent and the status it must have (``None``: answered or queued)."""
    if isinstance(topic, Mapping):
        return str(topic.get("intent")), topic.get("status")
    return str(topic), None


# --- what a turn showed, and whether it is right ---------------------------------------------------------------


@dataclass
class Seen:
    """What one turn's answer showed, as the checks read it."""

    status: int
    agent: str = ""
    intent: str = ""
    state: str = ""
    stack: list[tuple[str, str]] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)
    repair: str | None = None
    topics: list[tuple[str, str]] = field(default_factory=list)
    tools: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    has_conversation: bool = False
    error: str = ""


def seen_read(status: int, body: Mapping[str, Any], state: str, owned: Mapping[str, set[str]]) -> Seen:
    """The observable parts of a turn's answer (:data:`EXPECTATIONS`); ``state`` is the conversation's column and
    ``owned`` the profile's intents per specialist."""
    if status != 200:
        return Seen(status=status, error=str(body)[:300])
    metadata = body.get("metadata") or {}
    decision = metadata.get("route_decision") or {}
    agent = body.get("agent") or ""
    intent = decision.get("intent") or ""
    if agent != decision.get("agent"):
        # The decision's agent passed the message on (a coordinator delegated, a delegated specialist gave it back
        # to be delegated again): the intent is the candidate's it was passed on for, else the one its specialist
        # owns, else unknown — never the intent of the agent that did not answer.
        candidates = (decision.get("metadata") or {}).get("candidates") or ()
        own = owned.get(agent, set())
        intent = next(
            (c["intent"] for c in candidates if c.get("agent") == agent), next(iter(own)) if len(own) == 1 else ""
        )
    conversation = metadata.get("conversation")
    seen = Seen(status=status, agent=agent, intent=intent, state=state, has_conversation=conversation is not None)
    conversation = conversation or {}
    seen.stack = [(frame.get("kind", ""), frame.get("name", "")) for frame in conversation.get("stack") or ()]
    seen.events = [
        (event.get("event", ""), (event.get("frame") or {}).get("kind", ""))
        for event in conversation.get("events") or ()
    ]
    seen.repair = conversation.get("repair")
    seen.topics = [(topic.get("intent", ""), topic.get("status", "")) for topic in conversation.get("topics") or ()]
    seen.tools = [
        (result.get("tool", ""), result.get("status", ""), result.get("arguments") or {})
        for result in metadata.get("mcp_results") or ()
    ]
    return seen


def turn_wrongs(turn: Turn, seen: Seen, stack_before: list[tuple[str, str]]) -> list[str]:
    """What is wrong with a turn: each expectation that does not hold, said with what was seen instead."""
    if seen.status != 200:
        return [f"HTTP {seen.status}: {seen.error}"]
    expect = turn.expect
    wrongs: list[str] = []
    for key in ("agent", "intent", "state"):
        if key in expect and expect[key] != getattr(seen, key):
            wrongs.append(f"{key} {getattr(seen, key)!r}, expected {expect[key]!r}")
    if "top" in expect:
        kind, _, name = str(expect["top"]).partition(":")
        top = seen.stack[-1] if seen.stack else ("", "")
        if top[0] != kind or (name and top[1] != name):
            wrongs.append(f"top frame {':'.join(top) if seen.stack else '(none)'!r}, expected {expect['top']!r}")
    for event in expect.get("events", ()):
        if not _occurred(event, seen.events):
            wrongs.append(f"no {event} event (events: {_events(seen)})")
    for event in expect.get("no_events", ()):
        if _occurred(event, seen.events):
            wrongs.append(f"a {event} event (events: {_events(seen)})")
    if "repair" in expect and expect["repair"] != seen.repair:
        wrongs.append(f"repair {seen.repair!r}, expected {expect['repair']!r}")
    if "topics" in expect and not topics_kept(expect["topics"], seen):
        wrongs.append(f"topics {seen.topics}, expected {expect['topics']}")
    for tool, arguments in (expect.get("tool_args") or {}).items():
        if not any(
            name == tool and status == "ok" and all(called.get(k) == v for k, v in arguments.items())
            for name, status, called in seen.tools
        ):
            calls = [(name, status, called) for name, status, called in seen.tools]
            wrongs.append(f"no ok call of {tool} with {arguments} (calls: {calls})")
    if turn.aside and frame_moved(seen, stack_before):
        wrongs.append(f"the {turn.aside} message moved a frame (events: {_events(seen)}; stack {seen.stack})")
    return wrongs


def topics_kept(expected: Iterable[str | Mapping[str, str]], seen: Seen) -> bool:
    """Every expected topic listed, answered or queued (or with the status it asks for)."""
    statuses = dict(seen.topics)
    for topic in expected:
        intent, status = _topic(topic)
        if statuses.get(intent) not in ((status,) if status else TOPIC_STATUSES):
            return False
    return True


def frame_moved(seen: Seen, stack_before: list[tuple[str, str]]) -> bool:
    """The turn pushed or popped a frame: a ``pushed``/``closed``/``cancelled`` event, or another stack after it
    than before it (unless a frame expired meanwhile)."""
    names = {name for name, _ in seen.events}
    return bool(names & set(FRAME_MOVES)) or ("expired" not in names and seen.stack != stack_before)


def _occurred(event: str, events: list[tuple[str, str]]) -> bool:
    name, _, kind = event.partition(":")
    return any(seen == name and (not kind or seen_kind == kind) for seen, seen_kind in events)


def _events(seen: Seen) -> str:
    return ", ".join(f"{name}:{kind}" for name, kind in seen.events) or "none"


# --- the answers' language -------------------------------------------------------------------------------------

# What in an answer is not the platform's to translate, left out before its language is read: the words between
# quotes (the customer's message said back, a tool's own sentence, a permission's purpose as the business wrote
# it), identifiers (tools, specialists: ``diagnosticar_linha``) and the label before the offline model's notice (a
# specialist's display name, the business's words: "Planos e serviços (offline model):").
_QUOTED = re.compile(r"“[^”]*”|\"[^\"\n]*\"|«[^»]*»")
_IDENTIFIER = re.compile(r"[\w.-]*_[\w.-]*")
_FIELD = re.compile(r"\{[^{}]*\}|%\([^)]*\)[a-z]")
_WORD = re.compile(r"[^\W\d_]{2,}")
MIN_FIXED_WORDS = 3  # a shorter piece of a fixed text ("sim", "Qual") is a word any answer may hold
# A sentence of the platform's words with this many words in lower case is read on its own too: one Portuguese
# sentence in an English answer ("[Supervisor] As respostas dos especialistas que a sua mensagem pediu.") is not
# outweighed by the English around it. Capitalised words are names and codes, the business's data ("1) Nordea Bank, OMX
# Stockholm, SEK"), not a sentence.
MIN_SENTENCE_WORDS = 3
_SENTENCE = re.compile(r"[.!?;:\n()\[\]]+")


@dataclass(frozen=True)
class Fixed:
    """The platform's fixed texts per language (the catalogues' translations; English: the message ids) and how
    its offline model's notice reads in each."""

    texts: dict[str, frozenset[str]]
    notices: tuple[str, ...]


def fixed_read(root: Path = ROOT) -> Fixed:
    """The pieces (between ``{fields}``) of :data:`MIN_FIXED_WORDS` words or more of every message of the pt and es
    catalogues, in each language; a piece that reads the same in two languages belongs to neither."""
    import gettext as gettext_module

    versions: dict[str, list[str]] = {language: [] for language in LANGUAGES}
    notices: set[str] = set()
    catalogues = {}
    for language in ("pt", "es"):
        with open(root / "locale" / language / "LC_MESSAGES" / "django.mo", "rb") as compiled:
            catalogues[language] = gettext_module.GNUTranslations(compiled)._catalog  # type: ignore[attr-defined]
    for key in set(catalogues["pt"]) | set(catalogues["es"]):
        if not isinstance(key, str) or not key:
            continue
        english = key.split("\x04")[-1]
        texts = {"en": english, **{language: catalogues[language].get(key) or english for language in catalogues}}
        if english == "(offline model)":
            notices |= set(texts.values())
        for language, text in texts.items():
            versions[language].extend(piece.strip() for piece in _FIELD.split(text))
    pieces = {
        language: {
            " ".join(piece.casefold().split()) for piece in found if len(_WORD.findall(piece)) >= MIN_FIXED_WORDS
        }
        for language, found in versions.items()
    }
    texts = {
        language: frozenset(own - set().union(*(pieces[other] for other in LANGUAGES if other != language)))
        for language, own in pieces.items()
    }
    return Fixed(texts=texts, notices=tuple(sorted(notices, key=len, reverse=True)))


def platform_words(answer: str, notices: Iterable[str]) -> str:
    """``answer`` without what is not the platform's to translate (quotes, identifiers, the label before the
    offline model's notice, on every line that has one)."""
    labels = "|".join(re.escape(notice) for notice in notices)
    if labels:
        answer = re.sub(rf"^[^\n]*?(?:{labels}):", "", answer, flags=re.MULTILINE)
    return _IDENTIFIER.sub(" ", _QUOTED.sub(" ", answer))


@dataclass(frozen=True)
class Answered:
    """One answer's language as the bench reads it."""

    language: str | None  # what detection reads in the platform's words; None: they tell no language
    others: tuple[str, ...]  # sentences of them read as another language than the customer's
    foreign: tuple[str, ...]  # the platform's fixed texts of another language found in the answer

    def fits(self, expected: str) -> bool:
        """In the customer's language: no other language read in the whole or a sentence, no fixed text of
        another language."""
        return self.language in (expected, None) and not self.others and not self.foreign


def answer_language(answer: str, expected: str, fixed: Fixed) -> Answered:
    """The language of ``answer``'s own words (:func:`platform_words`), and the fixed texts of another language
    than ``expected`` anywhere in it."""
    from common.language import detect_language

    folded = " ".join(answer.casefold().split())
    foreign = sorted(
        piece for language in LANGUAGES if language != expected for piece in fixed.texts[language] if piece in folded
    )
    words = platform_words(answer, fixed.notices)
    sentences = [" ".join(sentence.split()) for sentence in _SENTENCE.split(words)]
    others = [
        sentence
        for sentence in sentences
        if sum(word.islower() for word in _WORD.findall(sentence)) >= MIN_SENTENCE_WORDS
        and detect_language(sentence) not in (expected, None)
    ]
    named_only = not any(word.islower() for word in _WORD.findall(words))  # names and codes: data, no language
    return Answered(None if named_only else detect_language(words), tuple(others), tuple(foreign))


# --- running the set on the demo ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    conversation: Conversation
    wrongs: list[list[str]]  # per turn
    topic_turns: int = 0
    topic_turns_kept: int = 0
    asides_moved: int = 0
    without_metadata: int = 0
    answers: list[tuple[str, Answered] | None] = field(default_factory=list)  # per turn; None: no answer (not 200)

    @property
    def right(self) -> bool:
        return not any(self.wrongs)

    @property
    def in_language(self) -> int:
        """Answers in the customer's language."""
        return sum(answer is not None and answer[1].fits(self.conversation.lang) for answer in self.answers)

    @property
    def answered(self) -> int:
        return sum(answer is not None for answer in self.answers)


def conversation_run(client: Any, conversation: Conversation, demo: Demo, fixed: Fixed) -> Outcome:
    """Every turn of ``conversation`` through the gateway, checked, its answer's language read; one session of its
    own."""
    from conversations.models import Conversation as Row

    outcome = Outcome(conversation, [])
    stack: list[tuple[str, str]] = []
    for turn in conversation.turns:
        response = client.post(
            "/api/gateway/message",
            {
                "channel": "api",
                "agent_id": conversation.profile,
                "payload": {
                    "text": turn.say,
                    "session_id": f"bench-{conversation.id}",
                    "context": {**conversation.context, **turn.context},
                },
            },
            format="json",
        )
        body = response.json()
        row = Row.objects.filter(conversation_key=body.get("conversation_key", "")).only("state").first()
        seen = seen_read(response.status_code, body, row.state if row else "", demo.owners[conversation.profile])
        outcome.wrongs.append(turn_wrongs(turn, seen, stack))
        answer = str(body.get("answer") or "") if seen.status == 200 else None
        outcome.answers.append(None if answer is None else (answer, answer_language(answer, conversation.lang, fixed)))
        outcome.without_metadata += seen.status == 200 and not seen.has_conversation
        if "topics" in turn.expect:
            outcome.topic_turns += 1
            outcome.topic_turns_kept += seen.status == 200 and topics_kept(turn.expect["topics"], seen)
        if turn.aside:
            outcome.asides_moved += seen.status == 200 and frame_moved(seen, stack)
        stack = seen.stack if seen.status == 200 else stack
    return outcome


@contextmanager
def demo_running() -> Iterator[Any]:
    """The demo seeded (``seed_demo --sync``) in this process's database, its MCP servers running, and a client
    holding an API key of the demo's tenant."""
    from django.core.management import call_command
    from rest_framework.test import APIClient

    from tenants.services import api_key_create
    from tests.mcp_processes import SERVER_NAMES, running_mcp_servers

    with running_mcp_servers(*SERVER_NAMES) as urls:
        for name, url in urls.items():  # config/demo/mcp_servers.yaml reads MCP_<NAME>_HOST and _PORT
            address = urlsplit(url)
            os.environ[f"MCP_{name.upper()}_HOST"] = address.hostname or ""
            os.environ[f"MCP_{name.upper()}_PORT"] = str(address.port)
        call_command("migrate", "--noinput", verbosity=0)
        call_command("seed_demo", "--sync", verbosity=0, stdout=StringIO())
        _, raw = api_key_create(tenant_slug=API_KEY_TENANT, name="conversation bench")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
        yield client


# --- the report --------------------------------------------------------------------------------------------------


def report(outcomes: list[Outcome], *, failures: bool) -> None:
    for title, by in (
        ("category", lambda c: c.category),
        ("language", lambda c: c.lang),
        ("profile", lambda c: c.profile),
    ):
        print(f"\n{title:22} {'conversations right':>20} {'turns right':>17} {'topics kept':>15}")
        groups: dict[str, list[Outcome]] = defaultdict(list)
        for outcome in outcomes:
            groups[by(outcome.conversation)].append(outcome)
        for name in _ordered(groups, title):
            print(_line(name, groups[name]))
        print(_line("all", outcomes))
    print(f"\nconversations right, category × language: {'':3}" + "".join(f"{lang:>14}" for lang in LANGUAGES))
    cells: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        cells[outcome.conversation.category, outcome.conversation.lang].append(outcome)
    for category in CATEGORIES:
        row = [cells.get((category, lang), []) for lang in LANGUAGES]
        if any(row):
            print(f"  {category:43}" + "".join(f"{_share(sum(o.right for o in r), len(r)):>14}" for r in row))
    moved = sum(o.asides_moved for o in outcomes)
    asides = sum(bool(t.aside) for o in outcomes for t in o.conversation.turns)
    print(f"\nsmall-talk and out-of-scope turns that pushed or popped a frame: {moved} of {asides} (must be 0)")
    _language_report(outcomes, failures=failures)
    missing = sum(o.without_metadata for o in outcomes)
    turns = sum(len(o.wrongs) for o in outcomes)
    print(f"turns whose answer carried no metadata.conversation: {missing} of {turns}")
    if failures:
        print("\nwrong turns:")
        for outcome in outcomes:
            conversation = outcome.conversation
            for k, (turn, wrongs) in enumerate(zip(conversation.turns, outcome.wrongs, strict=True), 1):
                if wrongs:
                    print(
                        f"  {conversation.id} ({conversation.profile}, {conversation.category}) turn {k}: {turn.say!r}"
                    )
                    for wrong in wrongs:
                        print(f"      {wrong}")


def _language_report(outcomes: list[Outcome], *, failures: bool) -> None:
    """Answers in the customer's language per category × language, and under ``failures`` every answer that is
    not, with what was read in it."""
    print(f"\nanswers in the customer's language:{'':10}" + "".join(f"{lang:>17}" for lang in (*LANGUAGES, "all")))
    cells: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        cells[outcome.conversation.category, outcome.conversation.lang].append(outcome)
        cells[outcome.conversation.category, "all"].append(outcome)
        cells["all", outcome.conversation.lang].append(outcome)
        cells["all", "all"].append(outcome)
    for category in (*CATEGORIES, "all"):
        row = [cells.get((category, lang), []) for lang in (*LANGUAGES, "all")]
        if any(row):
            shares = [_share(sum(o.in_language for o in r), sum(o.answered for o in r)) for r in row]
            print(f"  {category:43}" + "".join(f"{share:>17}" for share in shares))
    foreign = sum(bool(a[1].foreign) for o in outcomes for a in o.answers if a is not None)
    print(f"answers holding a fixed text of the platform in another language: {foreign} (must be 0)")
    if not failures:
        return
    print("\nanswers not in the customer's language:")
    for outcome in outcomes:
        conversation = outcome.conversation
        for k, (turn, answer) in enumerate(zip(conversation.turns, outcome.answers, strict=True), 1):
            if answer is None or answer[1].fits(conversation.lang):
                continue
            text, answered = answer
            print(f"  {conversation.id} ({conversation.lang}) turn {k}: {turn.say!r} → read as {answered.language}")
            print(f"      {text[:300]!r}")
            for sentence in answered.others:
                print(f"      a sentence in another language: {sentence!r}")
            for piece in answered.foreign:
                print(f"      fixed text of another language: {piece!r}")


def _ordered(groups: Mapping[str, Any], title: str) -> list[str]:
    order = {"category": CATEGORIES, "language": LANGUAGES}.get(title, ())
    return [name for name in order if name in groups] + sorted(set(groups) - set(order))


def _line(name: str, outcomes: list[Outcome]) -> str:
    conversations = len(outcomes)
    turns = sum(len(o.wrongs) for o in outcomes)
    topic_turns = sum(o.topic_turns for o in outcomes)
    return (
        f"  {name:20} {_share(sum(o.right for o in outcomes), conversations):>20} "
        f"{_share(sum(not w for o in outcomes for w in o.wrongs), turns):>17} "
        f"{_share(sum(o.topic_turns_kept for o in outcomes), topic_turns) if topic_turns else '—':>15}"
    )


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%} ({part}/{whole})" if whole else "—"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--set", type=Path, default=DEFAULT_SET, help="the directory of conversations to run")
    parser.add_argument("--profile", help="only this profile's conversations")
    parser.add_argument("--category", choices=CATEGORIES, help="only this category")
    parser.add_argument("--language", choices=LANGUAGES, help="only this language")
    parser.add_argument("--failures", action="store_true", help="list every wrong turn and what it got")
    args = parser.parse_args()
    conversations, problems = conversations_load(args.set)
    demo = demo_read()
    problems += set_problems(conversations, demo)
    if problems:
        print(f"{args.set}: the set has problems, not run:", *problems, sep="\n  ")
        raise SystemExit(2)
    chosen = [
        c
        for c in conversations
        if (args.profile in (None, c.profile))
        and (args.category in (None, c.category))
        and (args.language in (None, c.lang))
    ]
    started = time.monotonic()
    with demo_running() as client:
        seeded = time.monotonic()
        fixed = fixed_read()
        outcomes = [conversation_run(client, conversation, demo, fixed) for conversation in chosen]
    finished = time.monotonic()
    turns = sum(len(c.turns) for c in chosen)
    print(f"{len(chosen)} conversations, {turns} turns, from {args.set}")
    report(outcomes, failures=args.failures)
    print(
        f"\ntime: {finished - started:.1f} s in all; the demo and its servers {seeded - started:.1f} s, "
        f"the conversations {finished - seeded:.1f} s ({(finished - seeded) / max(1, turns) * 1000:.0f} ms a turn)"
    )


def _environment() -> Path:
    """A throwaway SQLite database and what the demo's servers need (they listen on loopback); Django set up."""
    database = tempfile.NamedTemporaryFile(prefix="conversation-accuracy-", suffix=".sqlite3", delete=False)  # noqa: SIM115
    os.environ["DATABASE_URL"] = f"sqlite:///{database.name}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")
    os.environ.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    for name in ("httpx", "httpx2"):  # a line per MCP call otherwise
        logging.getLogger(name).setLevel(logging.WARNING)
    return Path(database.name)


if __name__ == "__main__":
    _database = _environment()
    try:
        main()
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(str(_database) + suffix).unlink(missing_ok=True)
