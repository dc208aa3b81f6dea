"""Saved conversation tests, played against a version of a profile (:func:`conversation_tests_run`).

Each test's turns are played in order as one conversation, each through the real turn
(:func:`conversations.graph.run_turn`, the profile under test as the turn's profile, as a draft is tried in the
chat): guardrails, routing, the specialists and their tools, the judge, the conversation store. Each test is isolated:

* everything the turns write to the database — the conversation, its messages and decisions, tool calls, handoffs,
  escalations and what they queue, usage — is written in one transaction that is rolled back when the test ends, so
  nothing reaches the conversation store, the analytics, the desks or the usage figures; what the turn would run
  on commit (pushes, a desk's webhook, the events of an escalation) is dropped with it. By default the test runs
  under a tenant made for it in that transaction (a real tenant may be named: its settings then apply);
* what would leave the process on the way — operational events, pushes, a plan's steps on Celery workers — is held
  back by :mod:`common.rehearsal`, and tools with a recorded answer (the test's and the turn's ``tool_answers``)
  are not called: the answer is taken as the tool's. Other tools are called for real.

The transaction is held across the turn's model and tool calls: it holds no lock another request waits on (its rows
are the test's own, invisible outside it) — on PostgreSQL. SQLite (the quick start) takes one writer at a time: a
long test there holds other writers back while it runs.

A test whose turns ask a model judge (``runs: N``, with a model configured) is played N times and passes when at
least :data:`MIN_PASS_RATE` of its runs pass; offline, once (the offline judge is deterministic).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection, connections, transaction

from agents.public import TurnUsage, llm_configured, usage_counting
from common.infra.statements import insert_statement, inserted, statement_cursor
from common.processes import process_pool, processes_usable
from common.rehearsal import rehearsing
from conversations.models import Conversation
from conversations.public import TurnInput, TurnResult, run_turn
from knowledge.models import KnowledgePassage
from releases.evals.checks import Cited, Failure, Observed, answer_framing, turn_checked
from releases.evals.judging import Verdict, answer_judged
from routing.public import (
    JUDGE_KEY,
    CaseTurn,
    ConversationCase,
    ProfileSpec,
    Snapshot,
    snapshot_adopt,
    snapshot_current,
)
from tenants.models import Tenant

CONCURRENCY = 4  # tests played at once on PostgreSQL: a turn mostly waits on the database
MIN_PASS_RATE = 2 / 3  # of a model-judged test's runs
FIRST_FAILURES = 5  # named in a summary
# Pieces of a suite for each process when it is played in several: a process that is slower (or started later) takes
# fewer; each piece costs a hand-over and the start of its threads.
PIECES_A_PROCESS = 16
# A new process's start (its imports, its first turns) costs about as much CPU as this many tests (docs/benchmarks.md).
TESTS_A_NEW_PROCESS = 250
SESSION_PREFIX = "conversation-test-"


@dataclass(frozen=True)
class TurnPlayed:
    """A turn as played: what it showed, the expectations it missed, the judge's verdict (when it asks one)."""

    number: int
    turn: CaseTurn
    seen: Observed
    failures: tuple[Failure, ...]
    verdict: Verdict | None = None
    usage: TurnUsage = field(default_factory=TurnUsage, compare=False)  # the turn's model calls and its judge's

    @property
    def passed(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict[str, Any]:
        shown = {
            "turn": self.number,
            "user": self.turn.user,
            "passed": self.passed,
            "failures": [failure.as_dict() for failure in self.failures],
            **self.seen.as_dict(),
        }
        if self.verdict is not None:
            shown["judge"] = self.verdict.as_dict()
        return shown


@dataclass(frozen=True)
class Attempt:
    """One play of a test: its turns, up to the first that could not be played (``error``)."""

    turns: tuple[TurnPlayed, ...]
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.error and all(turn.passed for turn in self.turns)


@dataclass(frozen=True)
class CaseResult:
    """A test's outcome: each play of it (one, or the judge's ``runs``), and whether it passed."""

    case: ConversationCase
    attempts: tuple[Attempt, ...]

    @property
    def pass_rate(self) -> float:
        return sum(attempt.passed for attempt in self.attempts) / len(self.attempts)

    @property
    def passed(self) -> bool:
        if len(self.attempts) == 1:
            return self.attempts[0].passed
        return self.pass_rate >= MIN_PASS_RATE

    @property
    def shown(self) -> Attempt:
        """The play shown: the first that failed, else the first."""
        return next((attempt for attempt in self.attempts if not attempt.passed), self.attempts[0])

    def failure_lines(self) -> list[str]:
        """Each failed check of the play shown: ``turn 2 of 3 (“obrigado”): answer_contains: expected …, got …``."""
        attempt = self.shown
        total = len(self.case.turns)
        lines = [
            f"turn {turn.number} of {total} (“{turn.turn.user}”): {failure.text()}"
            for turn in attempt.turns
            for failure in turn.failures
        ]
        if attempt.error:
            lines.append(f"turn {len(attempt.turns) + 1} of {total}: could not be played: {attempt.error}")
        return lines

    def failure_text(self) -> str:
        """One line: the test's name, its pass rate over several runs, its first failed check."""
        rate = f" (passed {self.pass_rate:.0%} of {len(self.attempts)} runs)" if len(self.attempts) > 1 else ""
        first = self.failure_lines()[:1] or ["every run passed"]
        return f"{self.case.name}{rate}: {first[0]}"

    def as_dict(self) -> dict[str, Any]:
        attempt = self.shown
        return {
            "name": self.case.name,
            "required": self.case.required,
            "passed": self.passed,
            "runs": len(self.attempts),
            "pass_rate": self.pass_rate,
            "failures": self.failure_lines(),
            "error": attempt.error,
            "turns": [turn.as_dict() for turn in attempt.turns],
        }


@dataclass
class SuiteRun:
    """A run of tests against one version: the results in the tests' order."""

    results: list[CaseResult]

    @property
    def total(self) -> int:
        return len(self.results)

    @property
    def failures(self) -> list[CaseResult]:
        return [result for result in self.results if not result.passed]

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def passed(self) -> int:
        return self.total - self.failed

    @property
    def required_failures(self) -> list[CaseResult]:
        """The failed tests that block publishing and rollout stages."""
        return [result for result in self.failures if result.case.required]

    def usage(self) -> TurnUsage:
        """The model calls of every turn played (each run of a model-judged test) and of their judges."""
        total = TurnUsage()
        for result in self.results:
            for attempt in result.attempts:
                for turn in attempt.turns:
                    total = total.merged(turn.usage)
        return total

    def as_dict(self) -> dict[str, Any]:
        """Everything, failures first: for a page, an API answer, a report."""
        ordered = sorted(self.results, key=lambda result: result.passed)
        return {
            "total": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "results": [result.as_dict() for result in ordered],
        }

    def summary(self) -> dict[str, Any]:
        """The counts and the first failures' lines (what a gate keeps and names)."""
        return {
            "total": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "required_failed": len(self.required_failures),
            "failures": [result.failure_text() for result in self.failures[:FIRST_FAILURES]],
        }


# -- playing -----------------------------------------------------------------------------------------------------


Played = Callable[[CaseResult], None]


def conversation_tests_run(
    profile: ProfileSpec,
    cases: Sequence[ConversationCase],
    *,
    tenant: Tenant | None = None,
    on_result: Played | None = None,
    processes: int = 1,
) -> SuiteRun:
    """Play every test of ``cases`` against ``profile`` (the version under test, compiled:
    :func:`releases.routing_tests.routing_tests_spec`), each isolated (see the module); results in the tests' order.
    ``on_result`` is called with each test's result as it comes (from the thread that played it, outside the test's
    transaction: a progress count it writes is committed at once outside a transaction of the caller's).

    Sync. On PostgreSQL, outside a transaction, :data:`CONCURRENCY` tests are played at once, each thread on a
    connection of its own (closed after): a turn mostly waits on the database. Inside a transaction (whose rows
    other connections cannot see), on SQLite (one writer at a time), the tests are played one after the other, in
    this thread — or in a thread of its own where an event loop already runs in this one.

    ``processes`` above 1 plays the suite, in pieces, in this process and ``processes - 1`` new ones
    (:func:`common.processes.process_pool`), each playing its pieces as above: the turn is mostly CPU, and a process
    plays under one interpreter lock. Where they cannot share the database (:func:`common.processes.processes_usable`:
    SQLite, inside a transaction), in this process alone. A piece whose process failed (it ended, its results could
    not come back) is a failed test each, its error naming what happened, and the other processes play the rest;
    ``on_result`` is told of a new process's results from a thread of this one, as each piece ends."""
    apart = processes_usable(processes) if len(cases) > 1 else 1
    if apart > 1:
        return SuiteRun(_played_apart(profile, cases, tenant, on_result, apart))
    workers = min(CONCURRENCY, len(cases)) if connection.vendor == "postgresql" else 1
    if connection.in_atomic_block:
        workers = 1
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if workers <= 1:
            return SuiteRun(_cases_run(profile, cases, tenant, on_result))
    shares = [list(cases[start :: max(workers, 1)]) for start in range(max(workers, 1))]
    with ThreadPoolExecutor(max_workers=len(shares)) as pool:
        played = list(pool.map(lambda share: _in_own_thread(profile, share, tenant, on_result), shares))
    results: list[CaseResult] = []
    for index in range(len(cases)):  # dealt round-robin: gathered back in the tests' order
        results.append(played[index % len(shares)][index // len(shares)])
    return SuiteRun(results)


def processes_worth(tests: int, *, cores: int) -> int:
    """How many processes a suite of ``tests`` is worth playing in: one a core, and a new one only for each
    :data:`TESTS_A_NEW_PROCESS` tests (a small suite would spend more starting them than playing)."""
    return max(1, min(cores, 1 + tests // TESTS_A_NEW_PROCESS))


def _played_apart(
    profile: ProfileSpec,
    cases: Sequence[ConversationCase],
    tenant: Tenant | None,
    on_result: Played | None,
    processes: int,
) -> list[CaseResult]:
    """Play ``cases`` in this process and ``processes - 1`` new ones, in lanes: each lane plays a piece of
    consecutive tests (:data:`PIECES_A_PROCESS` a process), then takes the next piece left, so a process that started
    later (a new one's start costs it seconds) plays fewer. This process's lane plays its pieces as one process
    does; a new process's lane stops when its process ended, leaving the rest to the others. Gathered back in the
    tests' order."""
    size = -(-len(cases) // (processes * PIECES_A_PROCESS))
    pieces = [list(cases[start : start + size]) for start in range(0, len(cases), size)]
    played: list[list[CaseResult]] = [[] for _ in pieces]
    taking, left = threading.Lock(), iter(range(processes, len(pieces)))  # each lane's first: its own number

    def taken(first: int) -> Iterator[int]:
        if first < len(pieces):
            yield first
        while True:
            with taking:
                index = next(left, None)
            if index is None:
                return
            yield index

    def here() -> None:
        try:
            for index in taken(0):
                run = conversation_tests_run(profile, pieces[index], tenant=tenant, on_result=on_result)
                played[index] = run.results
        finally:
            connections.close_all()  # this thread's, when a piece was played in it

    def there(lane: int, pool: ProcessPoolExecutor) -> None:
        try:
            for index in taken(lane):
                ended = False
                try:
                    results = pool.submit(_piece_played, pieces[index]).result()
                except Exception as exc:  # noqa: BLE001 — the piece's tests fail, and say why
                    results, ended = (
                        [_unplayed(case, exc) for case in pieces[index]],
                        isinstance(exc, BrokenProcessPool),
                    )
                played[index] = results
                if on_result is not None:
                    for result in results:
                        on_result(result)
                if ended:
                    return  # its process ended: the other lanes play what is left
        finally:
            connections.close_all()  # what on_result opened in this thread

    with (
        process_pool(processes - 1, ready=_process_ready, ready_args=(profile, tenant, snapshot_current())) as pool,
        ThreadPoolExecutor(max_workers=processes) as lanes,
    ):
        running = [lanes.submit(here), *(lanes.submit(there, lane, pool) for lane in range(1, processes))]
        for lane in running:
            lane.result()
    return [result for piece in played for result in piece]


# In a process playing pieces of a suite (:func:`_played_apart`): the version under test and the tenant, sent once
# (with the parent's routing snapshot, which the process serves rather than compiling its own).
_PLAYING: dict[str, Any] = {}


def _process_ready(profile: ProfileSpec, tenant: Tenant | None, current: Snapshot) -> None:
    snapshot_adopt(current)  # the parent's, unless the configuration moved on since
    _PLAYING.update(profile=profile, tenant=tenant)


def _piece_played(cases: Sequence[ConversationCase]) -> list[CaseResult]:
    """A piece of a suite, played in a process of its own (:func:`_played_apart`)."""
    return conversation_tests_run(_PLAYING["profile"], cases, tenant=_PLAYING["tenant"]).results


def _unplayed(case: ConversationCase, error: BaseException) -> CaseResult:
    """A test of a piece whose process failed: failed, with what happened as its error."""
    return CaseResult(case, (Attempt((), error=f"{type(error).__name__}: {error}"),))


def _cases_run(
    profile: ProfileSpec, cases: Sequence[ConversationCase], tenant: Tenant | None, on_result: Played | None
) -> list[CaseResult]:
    """Play ``cases`` one after the other in one event loop: its database work runs in this thread (each test's
    transaction on this thread's connection), as :func:`asgiref.sync.async_to_sync` runs a coroutine's
    ``sync_to_async`` calls. One loop for the whole share, not one per test: a loop and its thread cost a test
    more than its transaction (docs/benchmarks.md)."""
    return async_to_sync(_cases_played)(profile, cases, tenant, on_result)


async def _cases_played(
    profile: ProfileSpec, cases: Sequence[ConversationCase], tenant: Tenant | None, on_result: Played | None
) -> list[CaseResult]:
    results = []
    for case in cases:
        runs = case.runs if llm_configured(profile) else 1
        results.append(CaseResult(case, tuple([await _attempt(profile, case, tenant) for _ in range(runs)])))
        if on_result is not None:
            await sync_to_async(on_result)(results[-1])
    return results


def _in_own_thread(
    profile: ProfileSpec, cases: Sequence[ConversationCase], tenant: Tenant | None, on_result: Played | None
) -> list[CaseResult]:
    try:
        return _cases_run(profile, cases, tenant, on_result)
    finally:
        connections.close_all()  # this thread's own


@dataclass
class _Isolated:
    """A test's transaction, open on the thread that runs the loop's database work, and the tenant it runs under."""

    atomic: transaction.Atomic
    tenant: Tenant
    current: Snapshot


def _isolation_begin(tenant: Tenant | None, name: str) -> _Isolated:
    """Open the test's transaction and make its tenant in it (unless one is named); closed by
    :func:`_isolation_end`, in the same thread. A failure here closes it before it goes up."""
    atomic = transaction.atomic()
    atomic.__enter__()
    try:
        return _Isolated(atomic, tenant or _tenant_made(name), snapshot_current())
    except BaseException:
        _isolation_end(atomic)
        raise


def _isolation_end(atomic: transaction.Atomic) -> None:
    """Roll the test's transaction back: everything it wrote, and what it would have run on commit, goes."""
    transaction.set_rollback(True)
    atomic.__exit__(None, None, None)


async def _attempt(profile: ProfileSpec, case: ConversationCase, tenant: Tenant | None) -> Attempt:
    played: list[TurnPlayed] = []
    isolated = None
    try:
        isolated = await sync_to_async(_isolation_begin)(tenant, case.name)
        await _play(profile, case, isolated.tenant, isolated.current, played)
    except Exception as exc:  # noqa: BLE001 — a turn that cannot be played fails its test, and says why
        return Attempt(tuple(played), error=f"{type(exc).__name__}: {exc}")
    finally:
        if isolated is not None:
            await sync_to_async(_isolation_end)(isolated.atomic)
    return Attempt(tuple(played))


def _tenant_made(name: str) -> Tenant:
    """A tenant for one test, in its transaction. Written past the tenants' watch (``config_models_watch``: no
    ``save()``): it never exists outside the transaction, so no process has to learn of it, and the version's bump
    would lock the version row until the test ends and make this process rebuild its routing snapshot for every
    test."""
    made = Tenant(slug=f"{SESSION_PREFIX}{uuid.uuid4().hex[:12]}", name=name[:200])
    with statement_cursor() as cursor:  # bulk_create's own INSERT, without its compiler: one for every test
        cursor.execute(*insert_statement([made]))
        inserted([made], cursor.fetchall())
    return made


async def _play(
    profile: ProfileSpec, case: ConversationCase, tenant: Tenant, current: Snapshot, played: list[TurnPlayed]
) -> None:
    session = f"{SESSION_PREFIX}{uuid.uuid4().hex[:12]}"
    for number, turn in enumerate(case.turns, 1):
        data = TurnInput(
            tenant_pk=tenant.pk,
            tenant_slug=tenant.slug,
            profile=profile,
            text=turn.user,
            session_id=session,
            session_new=number == 1,
            user_id=case.user,
            channel=turn.channel or case.channel or "api",
            context={**case.context, **turn.context},
            snapshot=current,
            language_hint=case.language,
        )
        with rehearsing({**case.tool_answers, **turn.tool_answers}) as rehearsal:
            result = await run_turn(data)
        state = result.state if result.state is not None else await sync_to_async(_state_after)(result.conversation_pk)
        cited = await sync_to_async(cited_passages)(result.metadata.get("knowledge") or {})
        seen = observed(
            result,
            state,
            [call.as_dict() for call in rehearsal.calls],
            question=turn.user,
            cited=cited,
            framing=answer_framing(profile, result.agent, result.metadata.get("language") or None),
        )
        failures = turn_checked(turn.expect, seen, language=case.language)
        verdict = None
        usage = turn_usage(result.metadata.get("usage") or {})
        if turn.judge is not None:
            results = result.metadata.get("mcp_results") or []
            with usage_counting(usage):
                verdict = await answer_judged(
                    profile=profile, judge=turn.judge, question=turn.user, answer=result.answer, tools=results
                )
            if not verdict.passed:
                score = "no score" if verdict.score is None else verdict.score
                failures.append(Failure(JUDGE_KEY, f"score ≥ {turn.judge.min_score}", score, verdict.reason))
        played.append(TurnPlayed(number, turn, seen, tuple(failures), verdict, usage))


def turn_usage(shown: Mapping[str, Any]) -> TurnUsage:
    """A turn's model calls, read back from its answer's ``metadata["usage"]`` (:meth:`TurnUsage.as_dict`)."""
    usage = TurnUsage()
    for call in shown.get("calls") or ():
        usage.add(call["kind"], call["model"], call["prompt_tokens"], call["completion_tokens"], call["calls"])
    return usage


def _state_after(conversation_pk: int | None) -> str:
    """The conversation's state as the turn stored it (``""`` when it stored none), read from the database for a
    turn whose result does not say it (:attr:`conversations.turn.TurnResult.state`): one fixed statement, prepared
    once per connection, without the query compiler (which cost more CPU than the read)."""
    if conversation_pk is None:
        return ""
    quote, opts = connection.ops.quote_name, Conversation._meta
    state = quote(str(opts.get_field("state").column))
    read = f"SELECT {state} FROM {quote(opts.db_table)} WHERE {quote(str(opts.pk.column))} = %s"  # noqa: S608  # the model's names
    with statement_cursor() as cursor:
        cursor.execute(read, [conversation_pk])
        row = cursor.fetchone()
    return (row[0] if row else "") or ""


def cited_passages(knowledge: Mapping[str, Any]) -> tuple[Cited, ...]:
    """The passages ``metadata.knowledge``'s citations name, in their order (a passage gone since: left out)."""
    ids = [citation["passage"] for citation in knowledge.get("citations") or ()]
    if not ids:
        return ()
    rows = KnowledgePassage.objects.filter(pk__in=ids).values_list(
        "pk", "document__title", "document__file_name", "text"
    )
    found = {pk: Cited(title, file_name, text) for pk, title, file_name, text in rows}
    return tuple(found[pk] for pk in ids if pk in found)


def observed(
    result: TurnResult,
    state: str,
    tools: Sequence[Mapping[str, Any]],
    *,
    question: str = "",
    cited: Sequence[Cited] = (),
    framing: Sequence[str] = (),
) -> Observed:
    """What a turn showed, read from its answer's metadata, the conversation's state after it, the tool calls it
    made, the customer's message and the passages its answer cites."""
    metadata = result.metadata
    route = metadata.get("route_decision") or {}
    goal = metadata.get("goal") or {}
    read = goal.get("intent_output") or {}
    talk = metadata.get("conversation") or {}
    events = list(talk.get("events") or ())
    decision = {
        "intent": metadata.get("intent") or "",
        "method": route.get("method") or "",
        "next_state": route.get("next_state") or "",
        "goal": f"{read.get('primary_domain', '')}.{read.get('goal', '')}" if read.get("goal") else "",
        "status": goal.get("status") or "",
        "language": metadata.get("language") or "",
        "events": [event.get("event") for event in events],
        "repair": talk.get("repair") or "",
        "topics": [topic.get("intent") for topic in talk.get("topics") or ()],
    }
    return Observed(
        answer=result.answer,
        agent=result.agent,
        decision=decision,
        state=state,
        tools=tuple(tools),
        handoffs=tuple(metadata.get("handoffs") or ()),
        frames=tuple(events),
        escalated=metadata.get("escalation") is not None,
        question=question,
        knowledge=metadata.get("knowledge") or {},
        cited=tuple(cited),
        framing=tuple(framing),
    )
