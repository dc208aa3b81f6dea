"""Conversation tests files travel with the configuration: ``manage.py import_config`` and the admin's import take a
file whose top level holds ``conversation_tests:`` (:func:`is_conversation_tests_file`, the shape of
:mod:`releases.evals.files`) beside the configuration's files and the routing tests', adding or updating its tests by
name (:func:`conversation_tests_import`; none is deleted); ``manage.py export_config`` writes each profile's as
``conversation_tests.<agent_id>.yaml`` (:func:`conversation_tests_files`), which imports back to no change."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents.models import AgentProfile
from releases.configio.exporter import HEADER
from releases.configio.source import Source, plain_value
from releases.evals.files import ConversationTestsFileError, conversation_tests_dump, conversation_tests_load
from releases.evals.files import conversation_tests_parse as parse
from releases.models import ConversationTest
from releases.routing_tests import LoadReport

TESTS_PERMISSIONS = ("releases.add_conversationtest", "releases.change_conversationtest")
FILE_KEY = "conversation_tests"


def conversation_tests_file_name(agent_id: str) -> str:
    return f"{FILE_KEY}.{agent_id}.yaml"


def is_conversation_tests_file(source: Source) -> bool:
    """A conversation tests file rather than configuration or routing tests: its top level names
    ``conversation_tests``. A file that is not YAML is the configuration importer's to report."""
    data = plain_value(source.text)  # within the importer's bounds
    return isinstance(data, dict) and FILE_KEY in data


@dataclass(frozen=True)
class ConversationTestsLoaded:
    """What importing one conversation tests file did (or would do) to a profile's saved tests."""

    file: str
    agent_id: str
    report: LoadReport


class ConversationTestsImportRefused(Exception):
    """Conversation tests files not imported; ``messages`` are every problem, ``file:line: field: message``."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{len(problems)} problem(s) in the conversation tests; nothing was imported.")
        self.messages = problems


def conversation_tests_import(sources: Sequence[Source], *, user: Any) -> list[ConversationTestsLoaded]:
    """Add or update the tests of each file by name, as ``user`` (``None``: the operator at the shell, who may).
    Raises :class:`ConversationTestsImportRefused` with every problem — each file's, unknown keys named, a profile
    that does not exist, the permissions missing — before anything is written."""
    if not sources:
        return []
    missing = [permission for permission in TESTS_PERMISSIONS if user is not None and not user.has_perm(permission)]
    if missing:
        names = ", ".join(source.name for source in sources)
        raise ConversationTestsImportRefused(
            [f"{names}: importing conversation tests needs the permission(s) {', '.join(missing)}."]
        )
    parsed: list[tuple[Source, str, list[Any]]] = []
    problems: list[str] = []
    for source in sources:
        try:
            agent_id, cases = parse(source.text, name=source.name)
        except ConversationTestsFileError as exc:
            problems.extend(exc.problems)
            continue
        parsed.append((source, agent_id, cases))
    profiles = AgentProfile.objects.in_bulk([agent_id for _, agent_id, _ in parsed], field_name="agent_id")
    problems += [
        f"{source.name}: profile: no profile {agent_id!r}."
        for source, agent_id, _ in parsed
        if agent_id not in profiles
    ]
    if problems:
        raise ConversationTestsImportRefused(problems)
    return [
        ConversationTestsLoaded(source.name, agent_id, conversation_tests_load(profile=profiles[agent_id], cases=cases))
        for source, agent_id, cases in parsed
    ]


def conversation_tests_files(profiles: Sequence[AgentProfile] | None = None) -> dict[str, str]:
    """The conversation tests file of each of ``profiles`` that has tests (every such profile by default), by name;
    disabled tests too (they say so)."""
    with_tests = set(ConversationTest.objects.values_list("profile_id", flat=True).distinct())
    if profiles is None:
        profiles = list(AgentProfile.objects.filter(pk__in=with_tests).order_by("agent_id"))
    return {
        conversation_tests_file_name(profile.agent_id): HEADER + conversation_tests_dump(profile)
        for profile in profiles
        if profile.pk in with_tests
    }
