"""A profile's conversation tests as YAML, and saved: :func:`conversation_tests_parse` reads a file
(``profile: P`` / ``conversation_tests: [...]``, the shape :mod:`routing.conversation_tests.cases` defines), naming the
line and field of every problem; :func:`conversation_tests_text` writes one it reads back;
:func:`conversation_tests_load`
saves tests as a profile's, :func:`conversation_tests_saved` reads them back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from common.errors import DomainError
from releases.configio.exporter import dump
from releases.configio.source import Node, Problems, Source, load
from releases.models import ConversationTest
from releases.routing_tests import InputLimit, LoadReport, profile_input_limit, tests_save_by_name
from routing.public import ConversationCase, conversation_test_problems

FILE_KEYS = ("profile", "conversation_tests")
MAX_TESTS = 2_000  # per file


class ConversationTestsFileError(DomainError):
    """A conversation tests file that cannot be read; ``problems`` are ``file:line: field: message`` lines."""

    code = "invalid_conversation_tests"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems), fields={"file": problems})
        self.problems = problems


def conversation_tests_parse(
    text: str, *, name: str = "conversation_tests.yaml", input_limit: InputLimit = profile_input_limit
) -> tuple[str, list[ConversationCase]]:
    """The profile's agent_id and the tests of a conversation tests file; :class:`ConversationTestsFileError` names
    the line and field of every problem (unknown keys included). The customer's messages are bounded by the
    profile's input limit (``input_limit``, asked once)."""
    problems = Problems()
    root = load(Source(name, text), problems)
    cases: list[ConversationCase] = []
    agent_id = ""
    if root is not None and not isinstance(root.value, dict):
        problems.add(root, "must be a mapping with 'profile' and 'conversation_tests'.")
    elif root is not None:
        for key, node in root.items():
            if key not in FILE_KEYS:
                problems.add(node, f"unknown key {key!r} (allowed: {', '.join(FILE_KEYS)}).")
        agent_id = _profile(root, problems)
        tests = root.child("conversation_tests") if "conversation_tests" in root.value else None
        if tests is None or not isinstance(tests.value, list) or not tests.value:
            problems.add(tests or root, ("" if tests else "conversation_tests: ") + "required list of tests.")
        elif len(tests.value) > MAX_TESTS:
            problems.add(tests, f"at most {MAX_TESTS:,} tests in a file ({len(tests.value):,} given).")
        else:
            cases = _cases(tests, problems, lambda: input_limit(agent_id))
    if problems:
        raise ConversationTestsFileError([str(problem) for problem in problems.errors])
    return agent_id, cases


def _profile(root: Node, problems: Problems) -> str:
    value = root.value.get("profile")
    if isinstance(value, str) and value.strip():
        return value.strip()
    if "profile" in root.value:
        problems.add(root.child("profile"), "required text (the profile's agent_id).")
    else:
        problems.add(root, "profile: required text (the profile's agent_id).")
    return ""


def _cases(tests: Node, problems: Problems, input_limit: Callable[[], int]) -> list[ConversationCase]:
    limit = input_limit()
    cases: list[ConversationCase] = []
    seen: dict[str, int] = {}
    for item in tests.elements():
        found = conversation_test_problems(item.value, max_chars=limit)
        for where, problem in found:
            node, rest = item.deepest(where)
            problems.add(node, (f"{'.'.join(map(str, rest))}: " if rest else "") + problem)
        if found:
            continue
        case = ConversationCase.read(item.value)
        if case.name in seen:
            problems.add(item.child("name"), f"{case.name!r} is repeated (first on line {seen[case.name]}).")
            continue
        seen[case.name] = item.line
        cases.append(case)
    return cases


def conversation_tests_text(agent_id: str, cases: Sequence[ConversationCase]) -> str:
    """``cases`` as a conversation tests file of ``agent_id``, which :func:`conversation_tests_parse` reads back."""
    return dump({"profile": agent_id, "conversation_tests": [case.data() for case in cases]})


def conversation_tests_dump(profile: Any) -> str:
    """The profile's saved tests, disabled ones too (they say so), as a conversation tests file."""
    return conversation_tests_text(profile.agent_id, conversation_tests_saved(profile, enabled_only=False))


def conversation_test_case(row: ConversationTest) -> ConversationCase:
    return ConversationCase.read(row.data())


def conversation_tests_saved(profile: Any, *, enabled_only: bool = True) -> list[ConversationCase]:
    """The profile's saved tests by name (the enabled ones unless ``enabled_only`` is off)."""
    rows = ConversationTest.objects.filter(profile=profile)
    if enabled_only:
        rows = rows.filter(enabled=True)
    return [conversation_test_case(row) for row in rows.order_by("name")]


def _row_values(case: ConversationCase) -> dict[str, Any]:
    data = case.data()
    return {
        "required": case.required,
        "enabled": case.enabled,
        "language": case.language,
        "user_id": case.user,
        "channel": case.channel,
        "context": data.get("context", {}),
        "tool_answers": data.get("tool_answers", {}),
        "turns": data["turns"],
    }


def conversation_tests_load(*, profile: Any, cases: Sequence[ConversationCase], replace: bool = False) -> LoadReport:
    """Save ``cases`` as the profile's tests, matched by name: new names are created, known ones updated; with
    ``replace`` the profile's tests the file does not name are deleted."""
    rows = {case.name: _row_values(case) for case in cases}
    return tests_save_by_name(ConversationTest, profile=profile, rows=rows, replace=replace)
