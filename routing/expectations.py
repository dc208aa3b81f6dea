"""What a saved routing test may expect of a decision, and the checks every path that writes one shares (the model,
the admin's form, the YAML file): the keys, their values, the earlier turns of a short conversation. The saved
conversation tests (:mod:`routing.conversation_tests.cases`) expect these too, beside what they check of the answer."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from common.language import LANGUAGES
from routing.repairs import PATTERNS as REPAIR_PATTERNS

# A profile's expected decisions for given messages; they run on the draft or any version (releases.routing_tests)
# and gate publishing (releases.versions.version_publish).

ROUTING_TEST_EXPECT_KEYS = ("intent", "agent", "method", "next_state", "goal", "status")
# What the conversation must show after a message (routing.stack): events that occur, the repair pattern it reads as,
# the conversation's state after it ("" for none), intents among its requests.
ROUTING_TEST_CONVERSATION_KEYS = ("events", "repair", "state_after", "topics")
# The language the platform answers the message in (conversations.language: the conversation's, kept across turns).
ROUTING_TEST_LANGUAGE_KEY = "language"
ROUTING_TEST_KEYS = (*ROUTING_TEST_EXPECT_KEYS, *ROUTING_TEST_CONVERSATION_KEYS, ROUTING_TEST_LANGUAGE_KEY)
ROUTING_TEST_LIST_KEYS = ("events", "topics")
ROUTING_TEST_EVENTS = ("opened", "pushed", "resumed", "bound", "closed", "cancelled", "expired", "queued")
ROUTING_TEST_MAX_TURNS = 10  # earlier turns of a conversation test, before its own message
ROUTING_TEST_NAME_MAX = 200  # characters of a saved routing test's name
TURN_KEYS = ("message", "expect")

Where = tuple[int | str, ...]  # where a problem of a test's turns is: (), (2,), (2, "message"), (2, "expect", "events")


def routing_test_expect_problems(expect: object) -> list[tuple[str, str]]:
    """What is wrong with an ``expect`` mapping, each problem with the key it is about (``""``: the mapping)."""
    if not isinstance(expect, dict) or not expect:
        return [("", f"must be a mapping of one or more of: {', '.join(ROUTING_TEST_KEYS)}.")]
    problems: list[tuple[str, str]] = []
    for key, value in expect.items():
        if key not in ROUTING_TEST_KEYS:
            problems.append((key, f"unknown key {key!r} (allowed: {', '.join(ROUTING_TEST_KEYS)})."))
        elif key in ROUTING_TEST_EXPECT_KEYS and (not isinstance(value, str) or not value.strip()):
            problems.append((key, "must be a non-empty text."))
        elif key == "state_after" and not isinstance(value, str):
            problems.append((key, 'must be a text (the state after the message; "" for none).'))
        elif key == "repair" and value not in REPAIR_PATTERNS:
            problems.append((key, f"must be one of: {', '.join(REPAIR_PATTERNS)}."))
        elif key == ROUTING_TEST_LANGUAGE_KEY and value not in LANGUAGES:
            problems.append((key, f"must be one of: {', '.join(LANGUAGES)}."))
        elif key in ROUTING_TEST_LIST_KEYS:
            problems += [(key, problem) for problem in _list_problems(key, value)]
    return problems


def _list_problems(key: str, value: object) -> list[str]:
    if key == "events":
        if not isinstance(value, list) or not value:
            return [f"must be a list of one or more of: {', '.join(ROUTING_TEST_EVENTS)}."]
        return [
            f"no event {event!r} (events: {', '.join(ROUTING_TEST_EVENTS)})."
            for event in value
            if event not in ROUTING_TEST_EVENTS
        ]
    if not isinstance(value, list) or not value or not all(isinstance(item, str) and item.strip() for item in value):
        return ["must be a list of one or more intents."]
    return []


def routing_test_expect_errors(expect: object) -> list[str]:
    """What is wrong with an ``expect`` mapping (``[]``: nothing): unknown keys are named, values checked by key —
    the decision's are texts, ``events`` and ``topics`` lists, ``repair`` a pattern, ``state_after`` a text."""
    return [
        problem if problem.startswith("unknown key") or not key else f"{key}: {problem}"
        for key, problem in routing_test_expect_problems(expect)
    ]


def routing_test_turns_problems(turns: object, *, max_chars: int) -> list[tuple[Where, str]]:
    """What is wrong with a test's earlier turns — a list of at most :data:`ROUTING_TEST_MAX_TURNS` mappings of a
    ``message`` (a text within ``max_chars``, the profile's input limit) and an optional ``expect`` — each problem
    with where it is (:data:`Where`)."""
    if not isinstance(turns, list):
        return [((), "must be a list of turns, each a message and, optionally, what its decision must be.")]
    problems: list[tuple[Where, str]] = []
    if len(turns) > ROUTING_TEST_MAX_TURNS:
        problems.append(((), f"at most {ROUTING_TEST_MAX_TURNS} turns before the test's message ({len(turns)} given)."))
    for n, turn in enumerate(turns):
        if not isinstance(turn, dict):
            problems.append(((n,), "must be a mapping with message and, optionally, expect."))
            continue
        problems += [
            ((n, key), f"unknown key {key!r} (allowed: {', '.join(TURN_KEYS)}).")
            for key in turn
            if key not in TURN_KEYS
        ]
        message = turn.get("message")
        if not isinstance(message, str) or not message.strip():
            problems.append(((n, "message"), "required text."))
        elif len(message) > max_chars:
            problems.append(
                ((n, "message"), f"longer than the profile's limit of {max_chars} characters ({len(message)}).")
            )
        if "expect" in turn:
            problems += [
                ((n, "expect", key) if key else (n, "expect"), problem)
                for key, problem in routing_test_expect_problems(turn["expect"])
            ]
    return problems


def turns_where(where: Where) -> str:
    """``(1, "expect", "events")`` → ``turns[1].expect.events``."""
    return "turns" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in where)


def routing_test_input_limit(profile: Any) -> int:
    """The longest message ``profile`` takes (its guardrails' ``max_input_chars``, else ``MAX_INPUT_CHARS``): a
    conversation test's turns are bounded by it."""
    guardrails = getattr(profile, "guardrails", None) or {}
    return int(guardrails.get("max_input_chars", settings.MAX_INPUT_CHARS))
