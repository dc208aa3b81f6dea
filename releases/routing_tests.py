"""Saved routing tests: run a profile's expected decisions against its draft or any version.

* :func:`routing_tests_run` decides every case with the compiled profile — :func:`routing.decide.route_decide`
  with the case's state and active specialist, or :func:`routing.goals.decide.goal_decide` when the profile is in
  goal mode or the case expects a goal or a status — and never touches the database: the cases and the
  :class:`~routing.specs.ProfileSpec` are read before. It returns a :class:`TestRun`: each case's pass or fail
  with the actual decision, its reason and the expectations that failed; the counts; a confusion matrix of
  intents (expected → actual) and precision and recall per intent.
* :func:`routing_tests_spec` compiles what to run against: the draft, the live version or version N.
* :func:`routing_tests_parse`, :func:`routing_tests_load` and :func:`routing_tests_dump` exchange a profile's
  tests as YAML (``profile: P`` / ``tests: [{name, message, state?, active_specialist?, expect}]``); errors name
  the file's line and the field.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from django.db import transaction
from django.utils import timezone
from rest_framework import status

from agents.models import AgentProfile, UsagePurpose
from agents.public import TurnUsage, model_usage_record, usage_counting
from common.errors import DomainError, NotFound
from conversations.public import language_decide
from releases.configio.exporter import dump
from releases.configio.source import Problems, Source, load
from releases.models import RoutingTestCase
from routing.models import RoutingVersion
from routing.public import (
    DELEGATION,
    GENERAL,
    GOAL_AGENT,
    GOAL_METHOD,
    GOAL_MODE,
    ROUTING_TEST_CONVERSATION_KEYS,
    ROUTING_TEST_EXPECT_KEYS,
    ROUTING_TEST_KEYS,
    ROUTING_TEST_LIST_KEYS,
    STATE,
    STORED_KINDS,
    Frame,
    ProfileSpec,
    RouteDecision,
    StackStep,
    backends_load,
    conversation_decide,
    delegated_of,
    delegation_active,
    flow_of,
    goal_decide,
    live_version,
    profile_compile,
    profile_documents,
    route_decide,
    routing_test_expect_problems,
    routing_test_input_limit,
    routing_test_turns_problems,
    snapshot_current,
)

CONCURRENCY = 8  # cases decided at once: the classifier or goal mode may call a model
FIRST_FAILURES = 5  # failures kept in a summary and named in the gate's message
DRAFT, LIVE = "draft", "live"


@dataclass(frozen=True)
class CaseTurn:
    """An earlier turn of a conversation test: the customer's message and what it must show (``{}``: not checked)."""

    message: str
    expect: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"message": self.message, **({"expect": dict(self.expect)} if self.expect else {})}


@dataclass(frozen=True)
class Case:
    """One saved routing test, as plain data; with ``turns``, a short conversation whose last message is
    ``message``."""

    name: str
    message: str
    expect: Mapping[str, Any]
    state: str = ""
    active_specialist: str = ""
    turns: tuple[CaseTurn, ...] = ()

    @classmethod
    def of(cls, row: RoutingTestCase) -> Case:
        return cls(
            name=row.name,
            message=row.message,
            expect=dict(row.expect),
            state=row.state,
            active_specialist=row.active_specialist,
            turns=tuple(CaseTurn(str(turn["message"]), dict(turn.get("expect") or {})) for turn in row.turns or ()),
        )

    @property
    def wants_goal(self) -> bool:
        return "goal" in self.expect or "status" in self.expect

    @property
    def is_conversation(self) -> bool:
        """Played through the conversation stack: it has earlier turns, or expects what only the stack shows."""
        return bool(self.turns) or any(key in self.expect for key in ROUTING_TEST_CONVERSATION_KEYS)


def value_text(value: Any) -> str:
    """An expected or actual value in a sentence: ``(none)`` for nothing, a list as ``[a, b]``."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(item) for item in value) + "]"
    return str(value) if value else "(none)"


@dataclass(frozen=True)
class TurnResult:
    """An earlier turn of a conversation test as played: its place (1: the first message), what was decided and
    shown, why, and the expectations it missed."""

    number: int
    turn: CaseTurn
    actual: Mapping[str, Any]
    reason: str
    failed: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.failed

    def as_dict(self) -> dict[str, Any]:
        return {
            "turn": self.number,
            "message": self.turn.message,
            "expect": dict(self.turn.expect),
            "passed": self.passed,
            "actual": dict(self.actual),
            "reason": self.reason,
            "failed": list(self.failed),
        }


@dataclass(frozen=True)
class CaseResult:
    """A case's outcome: the actual decision for its message (every expectable key), why, and the expectations it
    missed; a conversation's earlier turns as played (``turns``): it passes when every turn does."""

    case: Case
    actual: Mapping[str, Any]
    reason: str
    failed: tuple[str, ...]
    turns: tuple[TurnResult, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failed and all(turn.passed for turn in self.turns)

    @property
    def played(self) -> tuple[TurnResult, ...]:
        """Every turn of a conversation test as played, its own message last (``()`` for a single message)."""
        if not self.case.turns:
            return ()
        own = TurnResult(
            len(self.turns) + 1, CaseTurn(self.case.message, self.case.expect), self.actual, self.reason, self.failed
        )
        return (*self.turns, own)

    @property
    def failing_turn(self) -> int | None:
        """The first turn that failed (the case's own message is turn ``len(turns) + 1``), ``None`` when passed."""
        earlier = next((turn.number for turn in self.turns if not turn.passed), None)
        return earlier if earlier is not None else (len(self.turns) + 1 if self.failed else None)

    def failure_text(self) -> str:
        """``fatura alta: expected intent=X, agent=Y; got intent=Z, agent=W (reason)``; a conversation's names the
        first turn that failed: ``cancelar: turn 2 of 3 (“deixa pra lá”): expected …``."""
        number = self.failing_turn
        if not self.case.turns or number is None or number > len(self.turns):
            return f"{self.case.name}: {_missed(self.case.expect, self.actual, self.failed, self.reason)}"
        turn = self.turns[number - 1]
        where = f"turn {number} of {len(self.turns) + 1} (“{turn.turn.message}”)"
        return f"{self.case.name}: {where}: {_missed(turn.turn.expect, turn.actual, turn.failed, turn.reason)}"

    def as_dict(self) -> dict[str, Any]:
        shown = {
            "name": self.case.name,
            "message": self.case.message,
            "expect": dict(self.case.expect),
            "passed": self.passed,
            "actual": dict(self.actual),
            "reason": self.reason,
            "failed": list(self.failed),
        }
        if self.case.turns:  # a conversation: its earlier turns, and which one failed first
            shown.update(turns=[turn.as_dict() for turn in self.turns], failing_turn=self.failing_turn)
        return shown


def _missed(expect: Mapping[str, Any], actual: Mapping[str, Any], failed: Sequence[str], reason: str) -> str:
    expected = ", ".join(f"{key}={value_text(expect[key])}" for key in failed)
    got = ", ".join(f"{key}={value_text(actual.get(key))}" for key in failed)
    return f"expected {expected}; got {got} ({reason})"


@dataclass(frozen=True)
class IntentScore:
    precision: float | None  # of the cases decided as this intent, the share expected as it (None: none decided)
    recall: float | None  # of the cases expected as this intent, the share decided as it (None: none expected)
    support: int  # cases expected as this intent


@dataclass
class TestRun:
    """The outcome of a run: every case's result, the counts, and the intents' confusion matrix and scores."""

    __test__ = False  # not a pytest test class

    results: list[CaseResult]
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)  # expected intent → actual intent → cases
    scores: dict[str, IntentScore] = field(default_factory=dict)
    usage: TurnUsage = field(default_factory=TurnUsage)  # the model calls the cases made (classifier, planner, goals)

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

    def as_dict(self) -> dict[str, Any]:
        """Everything, as JSON: for a page or an API answer."""
        return {
            "total": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "results": [result.as_dict() for result in self.results],
            "confusion": self.confusion,
            "scores": {
                intent: {"precision": score.precision, "recall": score.recall, "support": score.support}
                for intent, score in self.scores.items()
            },
        }

    def summary(self) -> dict[str, Any]:
        """The figures kept with a published version: counts and the first failures' lines."""
        return {
            "total": self.total,
            "passed": self.passed,
            "failed": self.failed,
            "failures": [result.failure_text() for result in self.failures[:FIRST_FAILURES]],
        }


def _matches(key: str, expected: Any, actual: Mapping[str, Any]) -> bool:
    if key == "goal":  # a goal may be named alone (TOP_MOVERS) or with its domain (finance.TOP_MOVERS)
        return expected in (actual.get("goal", ""), actual.get("goal_name", ""))
    if key in ROUTING_TEST_LIST_KEYS:  # each event or topic named must be among what occurred
        return set(expected) <= set(actual.get(key) or ())
    return expected == actual.get(key, "")


def _misses(expect: Mapping[str, Any], actual: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(key for key, value in expect.items() if not _matches(key, value, actual))


async def _decide(profile: ProfileSpec, case: Case) -> tuple[dict[str, str], str]:
    """The actual decision for ``case``, as the engine would take it for a new conversation in the case's state."""
    actual = {
        **dict.fromkeys(ROUTING_TEST_EXPECT_KEYS, ""),
        "language": language_decide(kept="", channel="", text=case.message, own=profile.language)[0],
    }
    if profile.effective_mode == GOAL_MODE or case.wants_goal:
        decision = await goal_decide(profile=profile, text=case.message, goal_state=None)
        read = decision.intent_output
        actual["status"] = decision.status
        if decision.status != GENERAL:
            goal = f"{read.primary_domain}.{read.goal}" if read.goal else ""
            actual.update(goal=goal, goal_name=read.goal, intent=goal, agent=GOAL_AGENT, method=GOAL_METHOD)
            return actual, decision.reason
    routed = await route_decide(
        profile=profile,
        text=case.message,
        state=case.state or None,
        active_agent=case.active_specialist,
        delegated_to=delegated_of(profile, case.active_specialist),
    )
    actual.update(
        intent=routed.intent or "", agent=routed.agent or "", method=routed.method, next_state=routed.next_state or ""
    )
    return actual, routed.reason


# -- a conversation, turn by turn ------------------------------------------------------------------------------


@dataclass
class Conversation:
    """What a conversation carries from one message to the next, as the conversation's row does in the chat: the
    stored frames (state and queued requests), the state, the active specialist and its intent, goal mode's goal
    state and the context a correction changed."""

    frames: list[Frame]
    state: str
    agent: str
    intent: str = ""
    goal_state: dict[str, Any] | None = None
    context: dict[str, Any] = field(default_factory=dict)
    language: str = ""  # the one the conversation keeps (conversations.language)

    def frames_live(self, delegated: str) -> list[Frame]:
        """The frames a message finds (as ``conversations.stack_turn.frames_live`` reads them from the row): the
        stored ones whose state is still the conversation's, a frame for a state none holds, and an open
        delegation on top."""
        frames = [frame for frame in self.frames if frame.kind != STATE or frame.name == self.state]
        if self.state and not any(frame.kind == STATE for frame in frames):
            frames.append(Frame(kind=STATE, name=self.state, agent=self.agent, intent=self.intent))
        if delegated:
            frames.append(Frame(kind=DELEGATION, name=delegated, agent=delegated, intent=self.intent))
        return frames

    def carry(self, profile: ProfileSpec, decision: RouteDecision, step: StackStep | None, delegated: str) -> None:
        """The row after the message (``conversations.graph.routing_decision`` and ``turn_store.turn_persist``):
        the step's frames are stored; unless the decision keeps the conversation (small talk, a repeat), the state
        is the topmost state frame's (the decision's own without a stack) and its specialist and intent are the
        active ones — under a coordinator, the open delegation's specialist, else the coordinator."""
        if step is not None:
            self.frames = [frame for frame in step.frames if frame.kind in STORED_KINDS]
            self.context.update(step.corrected)
        if decision.keeps_conversation:
            return
        if step is not None:
            self.state = next((frame.name for frame in reversed(self.frames) if frame.kind == STATE), "")
        else:
            self.state = decision.next_state or ""
        if delegation_active(profile):
            ended = step is not None and step.cancelled is not None and step.cancelled.kind == DELEGATION
            self.agent = delegated if delegated and not ended else profile.coordinator
        else:
            self.agent = decision.agents[0] if decision.is_plan else decision.agent
        self.intent = decision.plan[0].intent if decision.plan else decision.intent


async def _turn(
    profile: ProfileSpec, talk: Conversation, text: str, expect: Mapping[str, Any], number: int, now: Any
) -> tuple[dict[str, Any], str]:
    """One message of a conversation test, decided as the chat decides it (goal mode's reading with the goal
    state, else :func:`routing.stack.conversation_decide` with the frames), and what it shows; ``talk`` carries
    the conversation on."""
    actual: dict[str, Any] = {**dict.fromkeys(ROUTING_TEST_KEYS, ""), "events": [], "topics": []}
    actual["language"], talk.language = language_decide(kept=talk.language, channel="", text=text, own=profile.language)
    step: StackStep | None = None
    delegated = ""
    if profile.effective_mode == GOAL_MODE or "goal" in expect or "status" in expect:
        read = await goal_decide(profile=profile, text=text, goal_state=talk.goal_state)
        talk.goal_state = read.goal_state
        actual["status"] = read.status
        if read.status != GENERAL:
            output = read.intent_output
            goal = f"{output.primary_domain}.{output.goal}" if output.goal else ""
            actual.update(goal=goal, goal_name=output.goal, intent=goal, agent=GOAL_AGENT, method=GOAL_METHOD)
            talk.state, talk.agent, talk.intent = "", GOAL_AGENT, goal  # a goal's decision sets no state
            return actual, read.reason
        decision = await route_decide(
            profile=profile, text=text, state=talk.state or None, active_agent=talk.agent, active_intent=talk.intent
        )
    else:
        delegated = delegated_of(profile, talk.agent)
        decision, step = await conversation_decide(
            profile=profile,
            text=text,
            frames=talk.frames_live(delegated),
            turn=number,
            now=now,
            active_agent=talk.agent,
            active_intent=talk.intent,
            delegated_to=delegated,
            delegated_intent=talk.intent if delegated else "",
            context=talk.context,
        )
        actual.update(
            events=[event["event"] for event in step.events],
            repair=step.repair.pattern if step.repair else "",
            topics=[topic["intent"] for topic in step.topics],
        )
    talk.carry(profile, decision, step, delegated)
    actual.update(
        intent=decision.intent or "",
        agent=decision.agent or "",
        method=decision.method,
        next_state=decision.next_state or "",
        state_after=talk.state,
    )
    return actual, decision.reason


async def _play(profile: ProfileSpec, case: Case) -> CaseResult:
    """A conversation test: its earlier turns in order, then its message, each checked against its expectations."""
    # A conversation found in a state has that flow open, as the route preview reads one.
    opened = [flow_of(profile, case.state, case.active_specialist)] if case.state else []
    talk = Conversation(
        frames=opened, state=case.state, agent=case.active_specialist, intent=opened[0].intent if opened else ""
    )
    now = timezone.now()
    turns = []
    for number, turn in enumerate(case.turns, 1):
        actual, reason = await _turn(profile, talk, turn.message, turn.expect, number, now)
        failed = _misses(turn.expect, actual)
        turns.append(TurnResult(number, turn, _shown(actual), reason, failed))
    actual, reason = await _turn(profile, talk, case.message, case.expect, len(case.turns) + 1, now)
    failed = _misses(case.expect, actual)
    return CaseResult(case, _shown(actual), reason, failed, tuple(turns))


def _shown(actual: dict[str, Any]) -> dict[str, Any]:
    """What a result shows of the decision: ``goal_name`` is only matched (a goal named without its domain)."""
    actual.pop("goal_name", None)
    return actual


async def routing_tests_run_async(profile: ProfileSpec, cases: Sequence[Case]) -> TestRun:
    """:func:`routing_tests_run` for async callers; the model calls the cases made are counted in the run's
    ``usage``, which the caller stores (:func:`agents.services.model_usage_record`)."""
    gate = asyncio.Semaphore(CONCURRENCY)
    usage = TurnUsage()

    async def one(case: Case) -> CaseResult:
        async with gate:
            if case.is_conversation:
                return await _play(profile, case)
            actual, reason = await _decide(profile, case)
        failed = _misses(case.expect, actual)
        return CaseResult(case=case, actual=_shown(actual), reason=reason, failed=failed)

    with usage_counting(usage):  # the cases' tasks carry the context: their model calls add to it
        results = list(await asyncio.gather(*(one(case) for case in cases)))
    run = TestRun(results=results, usage=usage)
    run.confusion, run.scores = _intent_figures(results)
    return run


def routing_tests_run(
    profile: ProfileSpec, cases: Sequence[Case], *, purpose: str = UsagePurpose.ROUTING_TESTS
) -> TestRun:
    """Decide every case with ``profile`` (no database access) and compare with what it expects; then store the
    model calls the run made (a classifier, the supervisor's planner, goal mode's reading) as ``purpose``'s usage
    (:func:`agents.services.model_usage_record`): every model call lands in the usage figures.

    Sync code that runs where an event loop is parked in the thread (a command called from a Playwright test,
    a notebook) cannot block on it: the run then gets an event loop of its own in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        run = async_to_sync(routing_tests_run_async)(profile, cases)
    else:
        with ThreadPoolExecutor(max_workers=1) as worker:
            run = worker.submit(asyncio.run, routing_tests_run_async(profile, cases)).result()
    model_usage_record(usage=run.usage, purpose=purpose, profile_id=profile.pk)
    return run


def _intent_figures(results: Iterable[CaseResult]) -> tuple[dict[str, dict[str, int]], dict[str, IntentScore]]:
    """The confusion matrix (expected → actual → cases) and per-intent precision and recall over the cases that
    expect an intent."""
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    for result in results:
        expected = result.case.expect.get("intent")
        if expected is not None:
            confusion[expected][result.actual.get("intent", "")] += 1
    decided: Counter[str] = Counter()
    for row in confusion.values():
        decided.update(row)
    scores = {}
    for intent in sorted(set(confusion) | set(decided)):
        hits = confusion.get(intent, Counter())[intent]
        support = sum(confusion.get(intent, Counter()).values())
        scores[intent] = IntentScore(
            precision=hits / decided[intent] if decided[intent] else None,
            recall=hits / support if support else None,
            support=support,
        )
    return {expected: dict(row) for expected, row in sorted(confusion.items())}, scores


# -- which spec, which cases -------------------------------------------------------------------------------------


def routing_tests_spec(profile: Any, version: str | int = DRAFT) -> ProfileSpec:
    """The compiled profile to test: its draft, its live version (the draft when never published), or version N.

    Raises :class:`~common.errors.NotFound` for a version the profile does not have."""
    backends = backends_load([profile.pk]).get(profile.pk, {})  # not versioned: the saved ones

    if version == DRAFT:
        spec = snapshot_current().profile(profile.agent_id, draft=True)
        if spec is not None:
            return spec
        return profile_compile(
            profile_documents([profile.agent_id])[profile.agent_id], pk=profile.pk, backends=backends
        )
    if version == LIVE:
        live = live_version(profile)
        if live is None:
            return routing_tests_spec(profile, DRAFT)
        return profile_compile(live.document, pk=profile.pk, version=live.number, backends=backends)
    stored = RoutingVersion.objects.filter(profile=profile, number=int(version)).first()
    if stored is None:
        raise NotFound(f"{profile.agent_id} has no version {version}.", fields={"version": [f"No version {version}."]})
    return profile_compile(stored.document, pk=profile.pk, version=stored.number, backends=backends)


def routing_tests_saved(profile: Any) -> list[Case]:
    """The profile's enabled saved tests, by name."""
    return [Case.of(row) for row in RoutingTestCase.objects.filter(profile=profile, enabled=True).order_by("name")]


# -- the publishing gate -------------------------------------------------------------------------------------

FORCE_PERMISSION = "routing.publish_failing_version"


class RoutingTestsFailed(DomainError):
    status_code = status.HTTP_409_CONFLICT
    code = "routing_tests_failed"


class PublishForbidden(DomainError):
    status_code = status.HTTP_403_FORBIDDEN
    code = "permission_denied"


@dataclass(frozen=True)
class GateOutcome:
    """What the gate let through: the run's summary to keep with the version (``{}``: no saved tests) and the
    reason kept when it was published although tests failed (``""`` otherwise)."""

    summary: dict[str, Any]
    forced_reason: str = ""


def forced_reason_checked(*, user: Any, forced_reason: str, tests: str) -> str:
    """``forced_reason`` stripped, when ``user`` may give one (``routing.publish_failing_version``); raises
    :class:`PublishForbidden` (naming the ``tests`` that would fail) for anyone else's."""
    reason = forced_reason.strip()
    if reason and not (user is not None and user.has_perm(FORCE_PERMISSION)):
        raise PublishForbidden(
            f"You may not publish a version whose {tests} fail (it takes the permission {FORCE_PERMISSION}).",
            fields={"forced_reason": ["Only a user with the permission to publish failing versions may give one."]},
        )
    return reason


def routing_tests_gate(
    *, profile: Any, document: Mapping[str, Any], user: Any = None, forced_reason: str = "", enforce: bool = True
) -> GateOutcome:
    """Run the profile's enabled saved tests against ``document`` (the one about to be published).

    A failure refuses the publish (:class:`RoutingTestsFailed`, naming how many failed and the first failures)
    unless ``forced_reason`` is given by a user with ``routing.publish_failing_version``; a reason given by a user
    without it is refused (:class:`PublishForbidden`). Without ``enforce`` (a revert) the run is only recorded.
    Runs before the publish's transaction: a classifier may call a model, and no lock is held across it."""

    reason = forced_reason_checked(user=user, forced_reason=forced_reason, tests="routing tests")
    cases = routing_tests_saved(profile)
    if not cases:
        return GateOutcome(summary={})
    backends = backends_load([profile.pk]).get(profile.pk, {})
    spec = profile_compile(document, pk=profile.pk, backends=backends)
    run = routing_tests_run(spec, cases, purpose=UsagePurpose.PUBLISH_GATE)
    summary = run.summary()
    if not run.failed:
        return GateOutcome(summary=summary)
    if reason or not enforce:
        return GateOutcome(summary={**summary, "forced": bool(reason)}, forced_reason=reason)
    shown = "; ".join(summary["failures"])
    raise RoutingTestsFailed(
        f"{run.failed} of {run.total} routing tests of {profile.agent_id} fail: {shown}"
        + (" …" if run.failed > len(summary["failures"]) else "")
        + ". Fix the draft, or publish anyway with a written reason (it takes the permission to publish failing "
        "versions).",
        fields={"tests": summary["failures"]},
    )


# -- YAML exchange --------------------------------------------------------------------------------------------


class RoutingTestsFileError(DomainError):
    """A routing tests file that cannot be read; ``problems`` are ``file:line: field: message`` lines."""

    code = "invalid_routing_tests"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems), fields={"file": problems})
        self.problems = problems


CASE_KEYS = ("name", "message", "state", "active_specialist", "turns", "expect")
InputLimit = Callable[[str], int]  # a profile's agent_id → the longest message it takes


def profile_input_limit(agent_id: str) -> int:
    """The longest message the profile ``agent_id`` takes (the platform's limit for a profile not found): what a
    conversation test's turns are bounded by."""
    return routing_test_input_limit(AgentProfile.objects.filter(agent_id=agent_id).only("guardrails").first())


def routing_tests_parse(
    text: str, *, name: str = "tests.yaml", input_limit: InputLimit = profile_input_limit
) -> tuple[str, list[Case]]:
    """The profile's agent_id and the cases of a routing tests file; :class:`RoutingTestsFileError` names the line
    and field of every problem. A conversation test's turns are bounded by the profile's input limit
    (``input_limit``, asked once, and only when the file has turns)."""

    problems = Problems()
    root = load(Source(name, text), problems)
    cases: list[Case] = []
    agent_id = ""
    if root is not None:
        if not isinstance(root.value, dict):
            problems.add(root, "must be a mapping with 'profile' and 'tests'.")
        else:
            for key, node in root.items():
                if key not in ("profile", "tests"):
                    problems.add(node, f"unknown key {key!r} (allowed: profile, tests).")
            if not isinstance(root.value.get("profile"), str) or not root.value["profile"].strip():
                if "profile" in root.value:
                    problems.add(root.child("profile"), "required text (the profile's agent_id).")
                else:
                    problems.add(root, "profile: required text (the profile's agent_id).")
            else:
                agent_id = root.value["profile"].strip()
            limits: list[int] = []

            def limit() -> int:
                if not limits:
                    limits.append(input_limit(agent_id))
                return limits[0]

            tests = root.child("tests") if "tests" in root.value else None
            if tests is None or not isinstance(tests.value, list):
                problems.add(tests or root, ("" if tests else "tests: ") + "required list of tests.")
            else:
                seen: dict[str, int] = {}
                for item in tests.elements():
                    case = _case(item, problems, limit)
                    if case is None:
                        continue
                    if case.name in seen:
                        problems.add(
                            item.child("name"), f"{case.name!r} is repeated (first on line {seen[case.name]})."
                        )
                    seen.setdefault(case.name, item.line)
                    cases.append(case)
    if problems:
        raise RoutingTestsFileError([str(problem) for problem in problems.errors])
    return agent_id, cases


def _case(item: Any, problems: Any, limit: Callable[[], int]) -> Case | None:
    if not isinstance(item.value, dict):
        problems.add(item, "must be a mapping with name, message and expect.")
        return None
    before = len(problems.errors)
    for key, node in item.items():
        if key not in CASE_KEYS:
            problems.add(node, f"unknown key {key!r} (allowed: {', '.join(CASE_KEYS)}).")
    values: dict[str, str] = {}
    for key in ("name", "message", "state", "active_specialist"):
        value = item.value.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            problems.add(item.child(key), f"must be text, not {type(value).__name__}.")
        elif key in ("name", "message") and not value.strip():
            problems.add(
                item.child(key) if key in item.value else item,
                ("" if key in item.value else f"{key}: ") + "required text.",
            )
        values[key] = value.strip() if isinstance(value, str) else ""
    if "expect" not in item.value:
        problems.add(item, "expect: required mapping.")
    else:
        _expect_checked(item.child("expect"), problems)
    turns = item.child("turns") if item.value.get("turns") is not None else None
    if turns is not None:
        max_chars = limit() if isinstance(turns.value, list) and turns.value else 0
        for where, problem in routing_test_turns_problems(turns.value, max_chars=max_chars):
            node, rest = turns.deepest(where)
            problems.add(node, (f"{'.'.join(map(str, rest))}: " if rest else "") + problem)
    if len(problems.errors) > before:
        return None
    return Case(
        name=values["name"],
        message=values["message"],
        state=values["state"],
        active_specialist=values["active_specialist"],
        expect=_expect_read(item.value["expect"]),
        turns=tuple(
            CaseTurn(turn["message"].strip(), _expect_read(turn.get("expect") or {}))
            for turn in (turns.value if turns is not None else ())
        ),
    )


def _expect_checked(expect: Any, problems: Any) -> None:
    """An ``expect`` mapping's problems, each at the key it is about."""
    if not isinstance(expect.value, dict):
        problems.add(expect, "must be a mapping.")
        return
    for key, problem in routing_test_expect_problems(expect.value):
        problems.add(expect.child(key) if key in expect.value else expect, problem)


def _expect_read(expect: Mapping[str, Any]) -> dict[str, Any]:
    """An ``expect`` mapping as a case keeps it: texts stripped, events and topics as lists of texts."""
    return {
        key: [str(item).strip() for item in value] if key in ROUTING_TEST_LIST_KEYS else str(value).strip()
        for key, value in expect.items()
    }


@dataclass(frozen=True)
class LoadReport:
    created: int
    updated: int
    deleted: int


def routing_tests_load(*, profile: Any, cases: Sequence[Case], replace: bool = False) -> LoadReport:
    """Save ``cases`` as the profile's tests, matched by name: new names are created, known ones updated (and
    enabled); with ``replace`` the profile's tests the file does not name are deleted."""
    rows = {
        case.name: {
            "message": case.message,
            "state": case.state,
            "active_specialist": case.active_specialist,
            "turns": [turn.as_dict() for turn in case.turns],
            "expect": dict(case.expect),
            "enabled": True,
        }
        for case in cases
    }
    return tests_save_by_name(RoutingTestCase, profile=profile, rows=rows, replace=replace)


@transaction.atomic
def tests_save_by_name(
    model: Any, *, profile: Any, rows: Mapping[str, Mapping[str, Any]], replace: bool = False
) -> LoadReport:
    """Save a profile's saved tests of ``model`` (each row's field values, by its name): new names are created,
    known ones updated where a value changed; with ``replace`` the profile's tests not named are deleted."""
    existing = {row.name: row for row in model.objects.select_for_update().filter(profile=profile)}
    created = updated = 0
    for name, values in rows.items():
        row = existing.get(name)
        if row is None:
            model.objects.create(profile=profile, name=name, **values)
            created += 1
        elif any(getattr(row, key) != value for key, value in values.items()):
            for key, value in values.items():
                setattr(row, key, value)
            row.save(update_fields=[*values, "updated_at"])
            updated += 1
    deleted = 0
    if replace:
        deleted, _ = model.objects.filter(profile=profile).exclude(name__in=list(rows)).delete()
    return LoadReport(created=created, updated=updated, deleted=deleted)


def routing_tests_dump(profile: Any) -> str:
    """The profile's saved tests (enabled ones) as a routing tests file :func:`routing_tests_parse` reads back."""

    tests = []
    for case in routing_tests_saved(profile):
        item: dict[str, Any] = {"name": case.name}
        if not case.turns:
            item["message"] = case.message
        if case.state:
            item["state"] = case.state
        if case.active_specialist:
            item["active_specialist"] = case.active_specialist
        if case.turns:  # a conversation reads in its order: where it starts, the earlier turns, its last message
            item["turns"] = [
                {"message": turn.message, **({"expect": _expect_ordered(turn.expect)} if turn.expect else {})}
                for turn in case.turns
            ]
            item["message"] = case.message
        item["expect"] = _expect_ordered(case.expect)
        tests.append(item)
    return dump({"profile": profile.agent_id, "tests": tests})


def _expect_ordered(expect: Mapping[str, Any]) -> dict[str, Any]:
    return {key: expect[key] for key in ROUTING_TEST_KEYS if key in expect}
