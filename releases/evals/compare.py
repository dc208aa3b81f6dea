"""Two versions side by side: the same conversation tests played against each (:func:`conversation_tests_compare`),
and per test both results and, for each turn whose answer differs, both answers — what a publish would change in the
answers, as the impact preview says what it would change in the routing.

The turns compared are those of each side's play shown (:attr:`releases.evals.run.CaseResult.shown`: the first that
failed, else the first); a turn one side could not play is compared with an empty answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from releases.evals.run import CaseResult, Played, conversation_tests_run
from routing.public import ConversationCase, ProfileSpec
from tenants.models import Tenant

STILL_PASSES, NOW_FAILS, NOW_PASSES, STILL_FAILS = "still passes", "now fails", "now passes", "still fails"


@dataclass(frozen=True)
class AnswerChanged:
    """A turn whose answer differs: its place, the customer's message and the two answers (each with its agent)."""

    number: int
    user: str
    before: str
    after: str
    before_agent: str
    after_agent: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "turn": self.number,
            "user": self.user,
            "before": {"answer": self.before, "agent": self.before_agent},
            "after": {"answer": self.after, "agent": self.after_agent},
        }


@dataclass(frozen=True)
class TestCompared:
    """One test against both versions: each side's result and the turns whose answers differ."""

    __test__ = False  # not a pytest test class

    before: CaseResult
    after: CaseResult
    answers: tuple[AnswerChanged, ...]

    @property
    def case(self) -> ConversationCase:
        return self.after.case

    @property
    def outcome(self) -> str:
        """``still passes``, ``now fails``, ``now passes`` or ``still fails``."""
        if self.before.passed:
            return STILL_PASSES if self.after.passed else NOW_FAILS
        return NOW_PASSES if self.after.passed else STILL_FAILS

    @property
    def changed(self) -> bool:
        return bool(self.answers) or self.before.passed != self.after.passed

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.case.name,
            "required": self.case.required,
            "outcome": self.outcome,
            "before": {"passed": self.before.passed, "failures": self.before.failure_lines()},
            "after": {"passed": self.after.passed, "failures": self.after.failure_lines()},
            "answers_changed": [answer.as_dict() for answer in self.answers],
        }


@dataclass(frozen=True)
class Comparison:
    """A suite against two versions (``before``: the one compared with, e.g. live; ``after``: e.g. the draft), the
    tests in the suite's order."""

    before: str
    after: str
    tests: tuple[TestCompared, ...]

    @property
    def changed(self) -> list[TestCompared]:
        """The tests whose result or an answer differs, those that now fail first."""
        order = {NOW_FAILS: 0, NOW_PASSES: 1, STILL_FAILS: 2, STILL_PASSES: 3}
        return sorted((test for test in self.tests if test.changed), key=lambda test: order[test.outcome])

    def as_dict(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "total": len(self.tests),
            "changed": len(self.changed),
            "now_failing": sum(test.outcome == NOW_FAILS for test in self.tests),
            "tests": [test.as_dict() for test in self.tests],
        }


def answers_changed(before: CaseResult, after: CaseResult) -> tuple[AnswerChanged, ...]:
    """The turns whose answers differ between two results of one test (a turn not played: no answer)."""
    old, new = before.shown.turns, after.shown.turns
    changed = []
    for number, turn in enumerate(after.case.turns, 1):
        was = old[number - 1].seen if number <= len(old) else None
        now = new[number - 1].seen if number <= len(new) else None
        if (was.answer if was else "") != (now.answer if now else ""):
            changed.append(
                AnswerChanged(
                    number,
                    turn.user,
                    was.answer if was else "",
                    now.answer if now else "",
                    was.agent if was else "",
                    now.agent if now else "",
                )
            )
    return tuple(changed)


def conversation_tests_compare(
    before: ProfileSpec,
    after: ProfileSpec,
    cases: Sequence[ConversationCase],
    *,
    labels: tuple[str, str] = ("live", "draft"),
    tenant: Tenant | None = None,
    on_result: Played | None = None,
    processes: int = 1,
) -> Comparison:
    """Play ``cases`` against ``before`` and ``after`` (compiled versions: :func:`releases.routing_tests.
    routing_tests_spec`), each in isolation as :func:`releases.evals.run.conversation_tests_run` plays them (in
    ``processes`` processes), and pair the results test by test; ``labels`` name the two sides. ``before`` is played
    first; ``on_result`` is told of each result of ``after``."""
    old = conversation_tests_run(before, cases, tenant=tenant, processes=processes)
    new = conversation_tests_run(after, cases, tenant=tenant, on_result=on_result, processes=processes)
    tests = tuple(
        TestCompared(was, now, answers_changed(was, now)) for was, now in zip(old.results, new.results, strict=True)
    )
    return Comparison(labels[0], labels[1], tests)
