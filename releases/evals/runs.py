"""Runs kept: a run of a profile's conversation tests against one of its versions, written as it goes
(:class:`releases.models.ConversationTestRun`, a :class:`~releases.models.ConversationTestResult` per test) — by
``manage.py run_conversation_tests``, the admin and the API alike.

* :func:`conversation_test_run_create` checks what is asked (the version, the version compared with, the tests by
  name), each problem a :class:`~common.errors.DomainError` naming its field (400), and stores the run, queued.
* :func:`conversation_test_run_play` plays it (:func:`releases.evals.run.conversation_tests_run`, or
  :func:`releases.evals.compare.conversation_tests_compare` beside another version, which is played first): the
  count of tests done is written as each result comes, so a page shows the progress; then each test's result, the
  counts, the coverage (:mod:`releases.evals.coverage`) and the model usage of the turns and judges — the run's own:
  the turns' usage rows are rolled back with them, so nothing reaches a tenant's usage. A run that cannot be played
  (a version deleted meanwhile) is kept with its error.
* :func:`conversation_test_run_start` plays it here, or — a suite of :data:`QUEUE_FROM` tests or more, where a broker
  is configured — hands it to a Celery worker (:data:`RUN_TASK`) once the run is committed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from common.errors import DomainError, NotFound
from common.text import whole_number
from platform.celery import app
from releases.evals.compare import Comparison, conversation_tests_compare
from releases.evals.coverage import Coverage, suite_coverage
from releases.evals.files import conversation_test_case
from releases.evals.run import CaseResult, SuiteRun, conversation_tests_run
from releases.models import ConversationTest, ConversationTestResult, ConversationTestRun, ConversationTestRunStatus
from releases.routing_tests import DRAFT, LIVE, routing_tests_spec
from routing.public import ConversationCase

QUEUE_FROM = 20  # tests: a suite this large goes to a Celery worker where a broker is configured
RUN_TASK = "releases.conversation_tests_run"
NAMES_MAX = 500
ERROR_VERSION = "Must be draft, live or a version number."
ERROR_NAMES = "Must be a list of the profile's test names."
ERROR_UNKNOWN_NAMES = "No enabled test of {agent_id} is named {names}."
ERROR_NO_TESTS = "{agent_id} has no enabled conversation test to run."


@dataclass(frozen=True)
class RunPlayed:
    """A run as played: its row, the suite's results (the version under test's), the comparison and the coverage."""

    run: ConversationTestRun
    suite: SuiteRun
    comparison: Comparison | None
    coverage: Coverage


def version_read(value: Any, *, field: str) -> str | int:
    """``draft``, ``live`` or a version number (an int, or a string of digits); else a 400 naming ``field``."""
    if value in (DRAFT, LIVE):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    number = whole_number(value) if isinstance(value, str) else None
    if number:
        return number
    raise DomainError(f"{field}: {ERROR_VERSION}", fields={field: [ERROR_VERSION]})


def _version_checked(profile: Any, version: str | int, field: str) -> None:
    try:
        routing_tests_spec(profile, version)
    except NotFound as exc:
        raise DomainError(exc.message, fields={field: [exc.message]}) from None


def _saved(profile: Any, names: Sequence[str]) -> list[tuple[ConversationCase, int | None]]:
    rows = ConversationTest.objects.filter(profile=profile, enabled=True).order_by("name")
    if names:
        rows = rows.filter(name__in=names)
    return [(conversation_test_case(row), row.source_message_id) for row in rows]


def conversation_test_run_create(
    *,
    profile: Any,
    source: str,
    version: Any = DRAFT,
    names: Any = (),
    compare: Any = "",
    started_by: Any = None,
    tenant: Any = None,
    cases: Sequence[ConversationCase] | None = None,
) -> ConversationTestRun:
    """A queued run of ``profile``'s enabled saved tests (those named in ``names``; none named: every one) against
    ``version``, beside ``compare`` when given. Raises :class:`DomainError` naming ``version``, ``compare`` or
    ``names`` (a version the profile does not have, a name no enabled test has, no test at all); nothing is
    stored then. ``cases``: tests that are not saved (a file's), played instead — pass them to
    :func:`conversation_test_run_play` too."""
    against = version_read(version, field="version")
    _version_checked(profile, against, "version")
    compared = "" if compare in (None, "") else version_read(compare, field="compare")
    if compared != "":
        _version_checked(profile, compared, "compare")
    if cases is not None:
        names = [case.name for case in cases]
        return _stored(profile, source, against, compared, names, len(names), started_by, tenant)
    if isinstance(names, str) or not isinstance(names, Sequence) or len(names) > NAMES_MAX:
        raise DomainError(f"names: {ERROR_NAMES}", fields={"names": [ERROR_NAMES]})
    if not all(isinstance(name, str) and name.strip() and "\x00" not in name for name in names):
        raise DomainError(f"names: {ERROR_NAMES}", fields={"names": [ERROR_NAMES]})
    asked = sorted({name.strip() for name in names})
    found = {case.name for case, _ in _saved(profile, asked)}
    unknown = [name for name in asked if name not in found]
    if unknown:
        said = ERROR_UNKNOWN_NAMES.format(agent_id=profile.agent_id, names=", ".join(map(repr, unknown)))
        raise DomainError(said, fields={"names": [said]})
    if not found:
        said = ERROR_NO_TESTS.format(agent_id=profile.agent_id)
        raise DomainError(said, fields={"names": [said]})
    return _stored(profile, source, against, compared, asked, len(found), started_by, tenant)


def _stored(
    profile: Any,
    source: str,
    against: str | int,
    compared: str | int,
    names: list[str],
    total: int,
    started_by: Any,
    tenant: Any,
) -> ConversationTestRun:
    return ConversationTestRun.objects.create(
        profile=profile,
        version=str(against),
        compared_with=str(compared),
        names=names,
        source=source,
        started_by=started_by if getattr(started_by, "pk", None) else None,
        tenant=tenant,
        total=total,
    )


def conversation_test_run_play(
    run: ConversationTestRun, *, cases: Sequence[ConversationCase] | None = None, processes: int = 1
) -> RunPlayed | None:
    """Play ``run`` (its saved tests; ``cases``: these instead, e.g. a file's) and store what came, in ``processes``
    processes (:func:`releases.evals.run.conversation_tests_run`). ``None`` when it could not be played (its
    ``error`` says why). Runs outside any transaction of the caller's: the turns may call models, and the progress is
    written as it goes."""
    profile = run.profile
    picked = [(case, None) for case in cases] if cases is not None else _saved(profile, run.names)
    now = timezone.now()
    ConversationTestRun.objects.filter(pk=run.pk).update(
        status=ConversationTestRunStatus.RUNNING, started_at=now, total=len(picked), done=0
    )

    def one_more(result: CaseResult) -> None:
        ConversationTestRun.objects.filter(pk=run.pk).update(done=F("done") + 1)

    tests = [case for case, _ in picked]
    try:
        spec = routing_tests_spec(profile, version_read(run.version, field="version"))
        comparison = None
        if run.compared_with:
            base = routing_tests_spec(profile, version_read(run.compared_with, field="compare"))
            comparison = conversation_tests_compare(
                base, spec, tests, labels=(run.compared_with, run.version), on_result=one_more, processes=processes
            )
            suite = SuiteRun([test.after for test in comparison.tests])
        else:
            suite = conversation_tests_run(spec, tests, on_result=one_more, processes=processes)
    except DomainError as exc:
        _failed(run, exc.message)
        return None
    coverage = suite_coverage(spec, tests, [result.as_dict() for result in suite.results])
    sources = {case.name: source for case, source in picked}
    compared = {test.case.name: test for test in comparison.tests} if comparison else {}
    with transaction.atomic():
        ConversationTestResult.objects.bulk_create(
            [_result_row(run, result, sources.get(result.case.name), compared) for result in suite.results]
        )
        run.status, run.finished_at, run.version_number = (
            ConversationTestRunStatus.FINISHED,
            timezone.now(),
            spec.version,
        )
        run.total = run.done = suite.total
        run.passed, run.failed, run.required_failed = suite.passed, suite.failed, len(suite.required_failures)
        run.changed = len(comparison.changed) if comparison else 0
        run.usage, run.coverage = suite.usage().as_dict(), coverage.as_dict()
        run.save(
            update_fields=[
                "status",
                "finished_at",
                "version_number",
                "total",
                "done",
                "passed",
                "failed",
                "required_failed",
                "changed",
                "usage",
                "coverage",
            ]
        )
    return RunPlayed(run, suite, comparison, coverage)


def _result_row(
    run: ConversationTestRun, result: CaseResult, source: int | None, compared: Mapping[str, Any]
) -> ConversationTestResult:
    shown = result.as_dict()
    test = compared.get(result.case.name)
    if test is not None:
        shown["compared"] = test.as_dict()
    return ConversationTestResult(
        run=run,
        name=result.case.name,
        required=result.case.required,
        passed=result.passed,
        outcome=test.outcome if test is not None else "",
        source_message_id=source,
        result=shown,
    )


def _failed(run: ConversationTestRun, error: str) -> None:
    run.status, run.error, run.finished_at = ConversationTestRunStatus.ERROR, error, timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])


def conversation_test_run_start(**asked: Any) -> ConversationTestRun:
    """Create a run (:func:`conversation_test_run_create`'s arguments) and play it here — or queue it for a Celery
    worker when it has :data:`QUEUE_FROM` tests or more and a broker is configured (``REDIS_URL``): its status is then
    ``queued`` until a worker takes it. Returns the run, as it stands."""
    run = conversation_test_run_create(**asked)
    if run.total >= QUEUE_FROM and settings.REDIS_URL:
        transaction.on_commit(lambda: app.send_task(RUN_TASK, args=(run.pk,)))
        return run
    conversation_test_run_play(run)
    run.refresh_from_db()
    return run


def run_report(run: ConversationTestRun) -> dict[str, Any]:
    """A run as the API answers it and a page shows it: what was asked, its progress and counts, each test's result
    (failures first, once finished), the usage and the coverage."""
    shown: dict[str, Any] = {
        "id": run.pk,
        "profile": run.profile.agent_id,
        "version": run.version,
        "version_number": run.version_number,
        "compared_with": run.compared_with or None,
        "names": run.names,
        "source": run.source,
        "status": run.status,
        "total": run.total,
        "done": run.done,
        "passed": run.passed,
        "failed": run.failed,
        "required_failed": run.required_failed,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }
    if run.compared_with:
        shown["changed"] = run.changed
    if run.error:
        shown["error"] = run.error
    if run.status == ConversationTestRunStatus.FINISHED:
        shown["results"] = [row.result for row in run.results.order_by("passed", "pk")]
        shown["usage"] = run.usage
        shown["coverage"] = run.coverage
    return shown
