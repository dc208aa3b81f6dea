"""``manage.py run_conversation_tests --profile P [--version draft|live|N] [--compare live|draft|N] [--file F.yaml]
[--junit FILE] [--only NAME] [--processes N]``: play a profile's conversation tests, failures first, ``N passed, M
failed``, exit status 1 on any failure. With ``--compare`` the tests are played against that version too, and each
test whose result or answers changed is printed first, with both results and both answers
(:func:`releases.evals.compare.conversation_tests_compare`). Then what of the profile the tests covered
(:mod:`releases.evals.coverage`). The run is kept (:mod:`releases.evals.runs`): the admin lists it with the others.
The tests are played in ``--processes`` processes (by default one a core, as many as the suite is worth:
:func:`releases.evals.run.processes_worth`; one on SQLite)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from agents.models import AgentProfile, McpServer
from common.errors import DomainError
from common.outbound import url_refusal
from releases.evals import conversation_tests_parse, conversation_tests_saved
from releases.evals.compare import Comparison
from releases.evals.junit import junit_xml
from releases.evals.run import TESTS_A_NEW_PROCESS, processes_worth
from releases.evals.runs import conversation_test_run_create, conversation_test_run_play
from releases.management.commands.routing_test import version_arg
from releases.models import ConversationTestRunSource
from releases.routing_tests import DRAFT


class Command(BaseCommand):
    help = (
        "Play a profile's saved conversation tests (or a file's) against its draft, its live version or version N, "
        "each in isolation. Prints each failed check, failures first, and 'N passed, M failed'; exits 1 when a test "
        "fails."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        # --version names the profile's version to test, not Django's version: ours wins.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("--profile", required=True, help="The profile's agent_id.")
        parser.add_argument("--file", help="A conversation tests YAML file to run instead of the saved tests.")
        parser.add_argument(
            "--version", default=DRAFT, help="draft (default), live, or a version number.", dest="against"
        )
        parser.add_argument(
            "--compare",
            metavar="VERSION",
            help="Play the tests against this version too (live, draft or a number) and print, per test whose result "
            "or answer changed, both results and both answers.",
        )
        parser.add_argument("--junit", help="Write a JUnit XML report to this file.")
        parser.add_argument("--only", action="append", default=[], help="Run only the test of this name (repeatable).")
        parser.add_argument(
            "--processes",
            type=int,
            help="Play the tests in this many processes (default: one a core, one for each "
            f"{TESTS_A_NEW_PROCESS} tests at most); SQLite plays them in one.",
        )

    def handle(self, *args, **options):
        profile = AgentProfile.objects.filter(agent_id=options["profile"]).first()
        if profile is None:
            raise CommandError(f"Unknown profile {options['profile']!r}.")
        if options["processes"] is not None and options["processes"] < 1:
            raise CommandError("--processes: must be 1 or more.")
        against = version_arg(options["against"])
        cases = self._cases(profile, options["file"])
        if options["only"]:
            unknown = sorted(set(options["only"]) - {case.name for case in cases})
            if unknown:
                raise CommandError(f"--only: no test named {', '.join(map(repr, unknown))}.")
            cases = [case for case in cases if case.name in options["only"]]
        compare = version_arg(options["compare"]) if options["compare"] else ""
        self._refused_servers()
        try:
            kept = conversation_test_run_create(
                profile=profile, source=ConversationTestRunSource.COMMAND, version=against, compare=compare, cases=cases
            )
        except DomainError as exc:
            raise CommandError(exc.message) from None
        processes = options["processes"] or processes_worth(len(cases), cores=os.cpu_count() or 1)
        played = conversation_test_run_play(kept, cases=cases, processes=processes)
        if played is None:
            raise CommandError(kept.error)
        if played.comparison is not None:
            self._compared(played.comparison)
        run = played.suite
        for result in run.failures:
            self.stdout.write(f"FAIL {result.case.name}" + (" (required)" if result.case.required else ""))
            for line in result.failure_lines():
                self.stdout.write(f"  {line}")
        if options["junit"]:
            Path(options["junit"]).write_bytes(junit_xml(run, suite=f"conversation_tests.{profile.agent_id}.{against}"))
        self.stdout.write(f"{run.passed} passed, {run.failed} failed")
        self.stdout.write("Coverage: " + "; ".join(played.coverage.lines()))
        if run.failed:
            sys.exit(1)

    def _refused_servers(self) -> None:
        """Say on stderr which MCP servers the outbound policy refuses to this process: their tools' calls end "not
        run" in every test that records no answer for them, which a failed check alone does not explain."""
        for server in McpServer.objects.filter(enabled=True).order_by("name"):
            refusal = url_refusal(server.endpoint)
            if refusal is not None:
                self.stderr.write(
                    f"MCP server {server.name!r} is refused to this command ({refusal}): its tools are not run "
                    "where a test records no answer for them. Allow it in OUTBOUND_ALLOWED (docs/settings.md)."
                )

    def _compared(self, compared: Comparison) -> None:
        before, after = compared.before, compared.after
        for test in compared.changed:
            self.stdout.write(
                f"CHANGED {test.case.name}: {before} {_passed(test.before.passed)}, {after} "
                f"{_passed(test.after.passed)} ({test.outcome})"
            )
            for answer in test.answers:
                self.stdout.write(f"  turn {answer.number} (“{answer.user}”):")
                self.stdout.write(f"    {before} ({answer.before_agent or 'no answer'}): {_indented(answer.before)}")
                self.stdout.write(f"    {after} ({answer.after_agent or 'no answer'}): {_indented(answer.after)}")
        summary = compared.as_dict()
        self.stdout.write(
            f"{before} → {after}: {summary['changed']} of {summary['total']} tests changed, "
            f"{summary['now_failing']} now fail"
        )

    def _cases(self, profile, file):
        if not file:
            return conversation_tests_saved(profile)
        path = Path(file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"--file: cannot read {path}: {exc.strerror}.") from None
        try:
            agent_id, cases = conversation_tests_parse(text, name=path.name)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        if agent_id != profile.agent_id:
            raise CommandError(f"{path.name}: its profile is {agent_id!r}, not {profile.agent_id!r}.")
        return cases


def _passed(passed: bool) -> str:
    return "passed" if passed else "failed"


def _indented(answer: str) -> str:
    """An answer's later lines under its first, so that each side reads as one block."""
    return answer.strip().replace("\n", "\n      ")
