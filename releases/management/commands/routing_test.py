"""``manage.py routing_test --profile P [--file tests.yaml] [--version N|draft|live] [--junit FILE]``: run routing
tests, one line per failure, ``N passed, M failed``, exit status 1 on any failure."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from django.core.management.base import BaseCommand, CommandError

from agents.models import AgentProfile
from common.errors import DomainError
from common.text import whole_number
from releases.routing_tests import (
    DRAFT,
    LIVE,
    TestRun,
    routing_tests_parse,
    routing_tests_run,
    routing_tests_saved,
    routing_tests_spec,
)


def version_arg(value: str) -> str | int:
    if value in (DRAFT, LIVE):
        return value
    number = whole_number(value)
    if number:
        return number
    raise CommandError(f"--version: {value!r} is not a version number, 'draft' or 'live'.")


def junit_xml(run: TestRun, *, suite: str) -> bytes:
    """The run as a JUnit XML report (one testsuite, one testcase per routing test) that CI tools read."""
    root = ElementTree.Element("testsuites", tests=str(run.total), failures=str(run.failed))
    tests = ElementTree.SubElement(
        root, "testsuite", name=suite, tests=str(run.total), failures=str(run.failed), errors="0", skipped="0"
    )
    for result in run.results:
        case = ElementTree.SubElement(tests, "testcase", classname=suite, name=result.case.name)
        if not result.passed:
            failure = ElementTree.SubElement(case, "failure", message=result.failure_text())
            if not result.case.turns:
                lines = [f"message: {result.case.message}", *_checks(result.case.expect, result.actual)]
                failure.text = "\n".join([*lines, f"reason: {result.reason}"])
                continue
            lines = []
            for turn in result.played:  # a conversation: each turn, passed or not
                lines += [f"turn {turn.number} ({'pass' if turn.passed else 'FAIL'}): {turn.turn.message}"]
                lines += [f"  {line}" for line in (*_checks(turn.turn.expect, turn.actual), f"reason: {turn.reason}")]
            failure.text = "\n".join(lines)
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)


def _checks(expect: Mapping[str, Any], actual: Mapping[str, Any]) -> list[str]:
    return [f"{key}: expected {want!r}, got {actual.get(key)!r}" for key, want in expect.items()]


class Command(BaseCommand):
    help = (
        "Run a profile's saved routing tests (or a tests file's) against its draft, its live version or version N. "
        "Prints one line per failure and 'N passed, M failed'; exits 1 when a test fails."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version names the profile's version to test (the spelling), not Django's version: ours wins.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("--profile", required=True, help="The profile's agent_id.")
        parser.add_argument("--file", help="A routing tests YAML file to run instead of the saved tests.")
        parser.add_argument(
            "--version", default=DRAFT, help="draft (default), live, or a version number.", dest="against"
        )
        parser.add_argument("--junit", help="Write a JUnit XML report to this file.")

    def handle(self, *args, **options):
        profile = AgentProfile.objects.filter(agent_id=options["profile"]).first()
        if profile is None:
            raise CommandError(f"Unknown profile {options['profile']!r}.")
        against = version_arg(options["against"])
        if options["file"]:
            path = Path(options["file"])
            try:
                text = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"--file: cannot read {path}: {exc.strerror}.") from None
            try:
                agent_id, cases = routing_tests_parse(text, name=path.name)
            except DomainError as exc:
                raise CommandError(exc.message) from None
            if agent_id != profile.agent_id:
                raise CommandError(f"{path.name}: its profile is {agent_id!r}, not {profile.agent_id!r}.")
        else:
            cases = routing_tests_saved(profile)
        try:
            spec = routing_tests_spec(profile, against)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        run = routing_tests_run(spec, cases)
        for result in run.failures:
            self.stdout.write(f"FAIL {result.failure_text()}")
        if options["junit"]:
            suite = f"routing_tests.{profile.agent_id}.{against}"
            Path(options["junit"]).write_bytes(junit_xml(run, suite=suite))
        self.stdout.write(f"{run.passed} passed, {run.failed} failed")
        if run.failed:
            sys.exit(1)
