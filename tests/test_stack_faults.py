"""Fault tests: break one part of a production-like stack during traffic, then mend it (tests/production_stack.py).

Each test asserts what the clients got while the part was down, that nothing was lost or stored twice, and that
the next message of every conversation is answered within seconds once the part is back. The figures (requests
during the fault by status, the slowest answer during it, the time to the first answer after recovery, each
conversation's next-message latency) are printed and kept in ``$TEST_OUTPUT_DIR/fault-figures/<test>.json``;
docs/operations.md quotes them.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.production_stack import (
    DATABASE_POOL_TIMEOUT_SECONDS,
    MCP_TIMEOUT_SECONDS,
    ON_THE_STACKS_WORKER,
    ROUTER_PROFILE,
    STACK_TEST_TIMEOUT,
    SUPERVISOR_PROFILE,
    ProductionStack,
    Reply,
    conversation_key,
    post_message,
    status_counts,
    stored_once_problems,
    write_figures,
)
from tests.stock_paths import fast_path_only

pytestmark = [pytest.mark.slow, pytest.mark.faults, ON_THE_STACKS_WORKER]

OUTAGE_SECONDS = 6.0
CLIENT_TIMEOUT = 60.0  # a request still unanswered after this is a hang (the stuck ticket waited 300 s)
NEXT_MESSAGE_TIMEOUT = 30.0  # "answered within seconds": far below the 300 s turn lease a held ticket costs
NEXT_MESSAGE_AFTER_RETURN_SECONDS = 5.0  # the next message after PostgreSQL's return, queued turns ahead of it
HAND_ON_SECONDS = 5.0  # a released ticket's hand-on, from the background, once its turn has come
QUEUED_SENDERS = 3  # clients per conversation, each sending again as soon as it is answered: two messages wait
RECOVERY_TIMEOUT = 60.0
PAUSE_AFTER_FAILURE = 0.3  # a client that got an error waits this long before its next message
# The most a request may take while PostgreSQL is down: the pool's wait for a connection, and a margin.
# A request already under way when the database goes waits once for the pool's whole timeout (its process has
# not met the outage yet), then about 1 s a step with the circuit open (common/infra/outages.py), plus its own work
# on a loaded machine; every later request is refused at once.
FAIL_FAST_SECONDS = DATABASE_POOL_TIMEOUT_SECONDS + 7.0

INVOICE = "Minha fatura veio alta"
ORDER = "Meu pedido P100 atrasou, onde está a entrega?"
FANOUT = "Minha fatura e meu pedido, quero saber do plano e fazer uma troca"  # four specialists at once
CUSTOMER = {"msisdn": "5511999999999", "invoice_id": "INV001", "order_id": "P100"}


@dataclass(frozen=True)
class Chat:
    """One client's conversation: which profile, which session, what it keeps asking."""

    agent_id: str
    session_id: str
    text: str = INVOICE
    context: dict[str, Any] = field(default_factory=lambda: dict(CUSTOMER))

    @property
    def key(self) -> str:
        return conversation_key(self.agent_id, self.session_id)

    async def send(self, client: Any, stack: ProductionStack, ref: str, *, timeout: float) -> Reply:
        """The chat's message, marked ``ref`` (every text unique), to the stack's gateway."""
        return await post_message(
            client,
            stack.keys["tenant_a"],
            agent_id=self.agent_id,
            session_id=self.session_id,
            text=f"{self.text} (ref {ref})",
            context=self.context,
            timeout=timeout,
        )


@dataclass
class WsTurn:
    text: str
    conversation_key: str
    started: float
    seconds: float
    outcome: str  # "done", "error: <code>", "closed <code>", "no answer"
    answer: str = ""


@dataclass
class Run:
    """Everything the clients saw during one fault."""

    fault_start: float = 0.0
    fault_end: float = 0.0
    replies: list[Reply] = field(default_factory=list)
    ws_turns: list[WsTurn] = field(default_factory=list)
    ws_closes: list[int] = field(default_factory=list)
    ws_connect_failures: list[str] = field(default_factory=list)
    broken_at: float = 0.0  # the part is down from here (break_part returned) ...
    mending_at: float = 0.0  # ... to here (mend_part called)
    probes: list[tuple[float, float, int | None, Any]] = field(default_factory=list)  # (sent, answered, status, body)
    next_replies: list[Reply] = field(default_factory=list)
    in_flight: dict[str, float] = field(default_factory=dict)

    def while_down(self, sent: float, answered: float | None = None) -> bool:
        """Whether a probe sent (and answered) at these times met the part down the whole time."""
        return self.broken_at <= sent and (answered or sent) <= self.mending_at

    def probes_while_down(self) -> list[tuple[int | None, Any]]:
        return [(status, body) for sent, answered, status, body in self.probes if self.while_down(sent, answered)]

    def during(self) -> list[Reply]:
        return [reply for reply in self.replies if reply.overlaps(self.fault_start, self.fault_end)]

    def answered(self) -> dict[str, list[tuple[str, str]]]:
        turns: dict[str, list[tuple[str, str]]] = {}
        for reply in [*self.replies, *self.next_replies]:
            turns.setdefault(reply.conversation_key, [])
            if reply.status == 200:
                turns[reply.conversation_key].append((reply.text, reply.answer))
        for turn in self.ws_turns:
            turns.setdefault(turn.conversation_key, [])
            if turn.outcome == "done":
                turns[turn.conversation_key].append((turn.text, turn.answer))
        return turns

    def figures(self) -> dict[str, Any]:
        during = self.during()
        after = [r for r in self.replies if r.status == 200 and r.started >= self.fault_end]
        ws_during = [
            t for t in self.ws_turns if t.started <= self.fault_end and t.started + t.seconds >= self.fault_start
        ]
        figures: dict[str, Any] = {
            "fault_seconds": round(self.fault_end - self.fault_start, 2),
            "requests": len(self.replies),
            "requests_by_status": status_counts(self.replies),
            "requests_during_fault_by_status": status_counts(during),
            "max_latency_during_fault_seconds": round(max((r.seconds for r in during), default=0.0), 2),
            "latencies_during_fault_seconds": {
                status: sorted(
                    round(r.seconds, 2)
                    for r in during
                    if (str(r.status) if r.status is not None else "no answer") == status
                )
                for status in status_counts(during)
            },
            "first_success_after_recovery_seconds": (
                round(min(r.ended for r in after) - self.fault_end, 2) if after else None
            ),
            "next_message_seconds": {r.conversation_key: round(r.seconds, 2) for r in self.next_replies},
            "next_message_status": status_counts(self.next_replies),
        }
        if self.ws_turns or self.ws_closes:
            outcomes: dict[str, int] = {}
            for turn in ws_during:
                outcomes[turn.outcome] = outcomes.get(turn.outcome, 0) + 1
            figures["websocket"] = {
                "turns": len(self.ws_turns),
                "turns_during_fault_by_outcome": outcomes,
                "max_turn_seconds_during_fault": round(max((t.seconds for t in ws_during), default=0.0), 2),
                "closes": self.ws_closes,
                "connect_failures": len(self.ws_connect_failures),
            }
        if self.probes:
            figures["health_ready_during_fault"] = status_counts(
                [Reply("", "", sent, 0.0, status) for sent, _, status, _ in self.probes if self.while_down(sent)]
            )
        return figures


# ---- the clients


async def http_client(client, stack: ProductionStack, chat: Chat, label: str, run: Run, stop: asyncio.Event) -> None:
    """Send ``chat``'s message again and again (each text unique) until ``stop``."""
    number = 0
    while not stop.is_set():
        number += 1
        run.in_flight[label] = time.monotonic()
        reply = await chat.send(client, stack, f"{label}x{number}", timeout=CLIENT_TIMEOUT)
        run.in_flight.pop(label, None)
        run.replies.append(reply)
        if reply.status != 200:
            await asyncio.sleep(PAUSE_AFTER_FAILURE)


async def ws_client(stack: ProductionStack, chat: Chat, label: str, run: Run, stop: asyncio.Event) -> None:
    """One WebSocket (``?key=``) sending ``chat``'s message turn after turn; reconnects when the server closes it."""
    import websockets

    url = f"{stack.ws_url}/ws/chat/{chat.agent_id}/{chat.session_id}/?key={stack.keys['tenant_a']}"
    number = 0
    while not stop.is_set():
        try:
            socket = await asyncio.wait_for(websockets.connect(url, open_timeout=10), timeout=15)
        except (OSError, TimeoutError, websockets.exceptions.WebSocketException) as exc:
            run.ws_connect_failures.append(f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(PAUSE_AFTER_FAILURE)
            continue
        try:
            while not stop.is_set():
                number += 1
                text = f"{chat.text} (ref {label}x{number})"
                turn = WsTurn(text, chat.key, time.monotonic(), 0.0, "no answer")
                run.ws_turns.append(turn)
                try:
                    await socket.send(json.dumps({"text": text, "context": chat.context}))
                    async with asyncio.timeout(CLIENT_TIMEOUT):
                        while True:
                            event = json.loads(await socket.recv())
                            if event["type"] == "done":
                                turn.outcome, turn.answer = "done", event["answer"]
                                break
                            if event["type"] == "error":
                                turn.outcome = f"error: {event['error']['code']}"
                                break
                except TimeoutError:
                    pass
                finally:
                    turn.seconds = time.monotonic() - turn.started
                if turn.outcome != "done":
                    await asyncio.sleep(PAUSE_AFTER_FAILURE)
        except websockets.exceptions.ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd is not None else 1006  # 1006: closed without a close frame
            run.ws_closes.append(code)
            if run.ws_turns and run.ws_turns[-1].outcome == "no answer":
                run.ws_turns[-1].outcome = f"closed {code}"
        finally:
            await socket.close()


async def probe_ready(stack: ProductionStack, run: Run, client, until: asyncio.Event) -> None:
    """``GET /api/health/ready`` every half second while the part is down."""
    import httpx

    while not until.is_set():
        began = time.monotonic()
        try:
            response = await client.get("/api/health/ready", timeout=10)
            body: Any = response.json() if "json" in response.headers.get("content-type", "") else response.text
            run.probes.append((began, time.monotonic(), response.status_code, body))
        except httpx.HTTPError as exc:
            run.probes.append((began, time.monotonic(), None, str(exc)))
        await asyncio.sleep(0.5)


async def until(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout:g} s"
        await asyncio.sleep(0.1)


async def drive(
    stack: ProductionStack,
    *,
    chats: list[Chat],
    ws_chats: list[Chat] = (),  # type: ignore[assignment]
    break_part: Callable[[], None],
    mend_part: Callable[[], None],
    hold: Callable[[Run], Awaitable[None]] | None = None,
    probe: bool = False,
    outage: float = OUTAGE_SECONDS,
    senders: int = 1,
    next_within: float | None = None,
) -> Run:
    """Traffic on ``chats`` (HTTP, ``senders`` clients each) and ``ws_chats`` (WebSocket); break the part once every
    conversation has an answer, keep it broken ``outage`` seconds, mend it, go on until every conversation has an
    answer sent after the mend; then the next message of every conversation, all at once.

    ``next_within``: the clients stop when the part is mended and the next message of every conversation is sent
    at once, each to be answered within that many seconds of the mend (behind the turns still under way)."""
    import httpx

    run = Run()
    stop, mended = asyncio.Event(), asyncio.Event()
    everyone = [*chats, *ws_chats]
    async with httpx.AsyncClient(base_url=stack.base_url) as client:
        clients = [
            asyncio.create_task(http_client(client, stack, chat, f"h{n}s{k}", run, stop))
            for n, chat in enumerate(chats)
            for k in range(senders)
        ]
        clients += [asyncio.create_task(ws_client(stack, chat, f"w{n}", run, stop)) for n, chat in enumerate(ws_chats)]
        all_keys = {chat.key for chat in everyone}

        def answered_keys(since: float) -> set[str]:
            keys = {r.conversation_key for r in run.replies if r.status == 200 and r.started >= since}
            return keys | {t.conversation_key for t in run.ws_turns if t.outcome == "done" and t.started >= since}

        try:
            await until(lambda: answered_keys(0.0) >= all_keys, timeout=RECOVERY_TIMEOUT, what="every client answered")
            if hold is not None:
                await hold(run)
            run.fault_start = time.monotonic()
            await asyncio.to_thread(break_part)
            run.broken_at = time.monotonic()
            prober = asyncio.create_task(probe_ready(stack, run, client, mended)) if probe else None
            await asyncio.sleep(outage)
            run.mending_at = time.monotonic()
            await asyncio.to_thread(mend_part)
            run.fault_end = time.monotonic()
            mended.set()
            if next_within is not None:
                stop.set()
                run.next_replies = list(
                    await asyncio.gather(
                        *(
                            next_message(client, stack, chat, f"next{n}", within=next_within)
                            for n, chat in enumerate(everyone)
                        )
                    )
                )
            if prober is not None:
                await prober
            if next_within is None:
                await until(
                    lambda: answered_keys(run.fault_end) >= all_keys,
                    timeout=RECOVERY_TIMEOUT,
                    what="every client answered again after the part came back",
                )
        finally:
            stop.set()
            mended.set()
            await asyncio.gather(*clients, return_exceptions=True)

        if next_within is None:  # the next message of every conversation, all at once, each bounded
            run.next_replies = list(
                await asyncio.gather(
                    *(next_message(client, stack, chat, f"next{n}") for n, chat in enumerate(everyone))
                )
            )
    return run


async def next_message(
    client: Any, stack: ProductionStack, chat: Chat, label: str, *, within: float = NEXT_MESSAGE_TIMEOUT
) -> Reply:
    """``chat``'s next message, sent as a client that honours ``Retry-After`` would, until it is answered or
    ``within`` seconds have passed since the first try: a web worker that met the outage's last moments
    may answer 503 for one more pause (``DATABASE_OUTAGE_PAUSE_SECONDS``), never for longer. ``seconds`` spans
    every try."""
    began = time.monotonic()
    while True:
        left = within - (time.monotonic() - began)
        reply = await chat.send(client, stack, label, timeout=max(left, 0.1))
        wait = float(reply.retry_after or 0)
        if reply.status != 503 or not wait or time.monotonic() + wait - began >= within:
            reply.started, reply.seconds = began, time.monotonic() - began
            return reply
        await asyncio.sleep(wait)


def assert_consistent(stack: ProductionStack, run: Run) -> None:
    """The next message of every conversation answered; nothing lost or stored twice; no ticket held."""
    late = [(r.conversation_key, r.status, round(r.seconds, 1), r.error) for r in run.next_replies if r.status != 200]
    assert not late, f"next messages not answered within {NEXT_MESSAGE_TIMEOUT:g} s: {late}"
    assert stored_once_problems(stack, run.answered()) == []
    # The traffic has drained; a ticket a process still hands on in the background is passed within a poll.
    deadline = time.monotonic() + HAND_ON_SECONDS
    while (held := stack.unbalanced_conversations()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert held == {}, f"conversations holding a ticket (issued, done) once the traffic drained: {held}"


def chats_on_both_paths(prefix: str, count: int) -> list[Chat]:
    """``count`` conversations, alternately on the supervisor profile (Celery) and the router profile (in-process)."""
    chats = []
    for n in range(count):
        if n % 2 == 0:
            chats.append(Chat(SUPERVISOR_PROFILE, f"{prefix}-{n}", INVOICE))
        else:
            chats.append(Chat(ROUTER_PROFILE, f"{prefix}-{n}", ORDER, {"order_id": "P100"}))
    return chats


def is_json_error(reply: Reply) -> bool:
    return (
        reply.content_type.startswith("application/json")
        and isinstance(reply.body, dict)
        and isinstance(reply.body.get("error"), dict)
        and {"code", "message"} <= set(reply.body["error"])
    )


# ---- the faults


@pytest.mark.timeout(STACK_TEST_TIMEOUT)
@fast_path_only  # Django's own cache (STOCK_PATHS) fails the requests that touch it while Redis is down
def test_with_redis_stopped_chat_keeps_answering_and_websockets_survive_or_reconnect(production_stack):
    stack = production_stack
    chats = chats_on_both_paths("redis", 4)
    ws_chats = [Chat(SUPERVISOR_PROFILE, "redis-ws-0", INVOICE), Chat(ROUTER_PROFILE, "redis-ws-1", ORDER)]

    run = asyncio.run(
        drive(
            stack, chats=chats, ws_chats=ws_chats, break_part=stack.stop_redis, mend_part=stack.start_redis, probe=True
        )
    )
    figures = run.figures()
    write_figures("redis_stopped", figures)

    failed = [(r.conversation_key, r.status, r.error or r.body) for r in run.replies if r.status != 200]
    assert not failed, f"chat requests failed while Redis was down or after: {failed}"
    ws_failed = [(t.conversation_key, t.outcome) for t in run.ws_turns if t.outcome not in ("done",)]
    unclean = [code for code in run.ws_closes if code == 1006]
    assert not unclean, f"WebSockets dropped without a close frame: {run.ws_closes}"
    # A socket closed cleanly mid-turn may lose that turn's events (the turn itself finishes and is stored).
    assert all(outcome.startswith("closed ") for _, outcome in ws_failed), f"WebSocket turns failed: {ws_failed}"
    down = run.probes_while_down()
    assert down, "no readiness probe while Redis was down"
    for status, body in down:
        assert status == 200, f"/api/health/ready while Redis was down: {status} {body}"
        assert isinstance(body, dict) and body.get("status") == "degraded", body
        assert "redis" in json.dumps(body).lower(), body
    assert_consistent(stack, run)


@pytest.mark.timeout(STACK_TEST_TIMEOUT)
@fast_path_only  # answering within 5 s of PostgreSQL's return is the hand-written pool's retry (decisions/)
def test_with_postgres_stopped_requests_fail_fast_with_json_503_and_no_conversation_is_held_though_messages_queue(
    production_stack,
):
    """Several clients per conversation, each sending again as soon as it is answered, so messages always wait for
    their turn. The outage lasts the pool's wait for a connection: the waits of the requests under way run out as
    PostgreSQL comes back. The turns waiting for their ticket fail with the database; each ticket is handed on when
    the turn before it ends (not after the 300 s lease), the database circuit closes as soon as PostgreSQL answers,
    and the next message of every conversation is answered within seconds of its return."""
    stack = production_stack
    chats = chats_on_both_paths("pg", 6)

    run = asyncio.run(
        drive(
            stack,
            chats=chats,
            break_part=stack.stop_postgres,
            mend_part=stack.start_postgres,
            probe=True,
            outage=DATABASE_POOL_TIMEOUT_SECONDS,
            senders=QUEUED_SENDERS,
            next_within=NEXT_MESSAGE_AFTER_RETURN_SECONDS,
        )
    )
    figures = run.figures()
    figures["next_message_after_return_seconds"] = {
        r.conversation_key: round(r.ended - run.fault_end, 2) for r in run.next_replies
    }
    write_figures("postgres_stopped", figures)

    hung = [(r.conversation_key, round(r.seconds, 1), r.error) for r in run.replies if r.status is None]
    assert not hung, f"requests without an HTTP answer (client gave up after {CLIENT_TIMEOUT:g} s): {hung}"
    refused = [r for r in run.replies if r.status != 200]
    assert refused, "no request met the outage"
    for reply in refused:
        assert reply.status == 503 and is_json_error(reply), (reply.status, reply.content_type, reply.body)
        assert reply.retry_after, f"503 without Retry-After: {reply.body}"
    slow = [(r.conversation_key, r.status, round(r.seconds, 1)) for r in run.during() if r.seconds > FAIL_FAST_SECONDS]
    assert not slow, f"requests during the outage took longer than {FAIL_FAST_SECONDS:g} s: {slow}"
    down = run.probes_while_down()
    assert down, "no readiness probe while PostgreSQL was down"
    assert {status for status, _ in down} == {503}, down
    late = [
        (r.conversation_key, r.status, round(r.ended - run.fault_end, 1), r.error)
        for r in run.next_replies
        if r.status != 200 or r.ended - run.fault_end > NEXT_MESSAGE_AFTER_RETURN_SECONDS
    ]
    assert not late, f"next messages not answered within {NEXT_MESSAGE_AFTER_RETURN_SECONDS:g} s of the return: {late}"
    assert_consistent(stack, run)


@pytest.mark.timeout(STACK_TEST_TIMEOUT)
def test_a_celery_worker_killed_mid_fan_out_loses_no_turn_and_a_new_worker_takes_over(production_stack):
    stack = production_stack
    chats = [Chat(SUPERVISOR_PROFILE, f"celery-{n}", FANOUT) for n in range(3)]

    async def mid_fan_out(run: Run) -> None:
        # Every client has had its fan-out in flight for a moment: its specialists' tasks are on the worker.
        await until(
            lambda: len(run.in_flight) == len(chats) and time.monotonic() - max(run.in_flight.values()) > 0.3,
            timeout=RECOVERY_TIMEOUT,
            what="every client mid fan-out",
        )

    old_worker = stack.worker.pid
    run = asyncio.run(
        drive(
            stack, chats=chats, break_part=stack.kill_worker, mend_part=stack.start_worker, hold=mid_fan_out, outage=2.0
        )
    )
    figures = run.figures()
    lost = [r for r in run.during() if r.status == 200 and gave_up_steps(r)]
    figures["turns_that_lost_a_step"] = len(lost)
    figures["max_seconds_of_a_turn_that_lost_a_step"] = round(max((r.seconds for r in lost), default=0.0), 2)
    write_figures("celery_worker_killed", figures)

    assert stack.worker.pid != old_worker
    failed = [(r.conversation_key, r.status, r.error or r.body) for r in run.replies if r.status != 200]
    assert not failed, f"turns not answered: {failed}"
    assert lost, "the kill met no specialist step: no turn in flight gave one up"
    for reply in lost:  # the step the killed worker held was asked again, and the new worker answered it
        parts = reply.body["metadata"]["supervisor"]
        agents = {p["agent"] for p in parts}
        assert all(any(p["agent"] == a and p["status"] == "ok" for p in parts) for a in agents), parts
    assert_consistent(stack, run)
    for reply in run.next_replies:  # answered by the new worker: every specialist's part is there
        parts = reply.body["metadata"]["supervisor"]
        assert len({p["agent"] for p in parts}) >= 2, parts
        assert all(p["status"] == "ok" for p in parts if p["round"] == 0), parts


def gave_up_steps(reply: Reply) -> list[dict[str, Any]]:
    """The parts of a supervisor answer whose specialist step was given up on (lost with a worker, or late)."""
    parts = reply.body.get("metadata", {}).get("supervisor", []) if isinstance(reply.body, dict) else []
    return [part for part in parts if part["status"] != "ok"]


def tool_calls_since(stack: ProductionStack, keys: list[str], since_id: int) -> list[tuple[int, str, str, str, float]]:
    """``(id, conversation_key, tool, status, latency_ms)`` of the tool calls stored after ``since_id``."""
    return [
        (row[0], row[1], row[2], row[3], row[4])
        for row in stack.query(
            "SELECT t.id, c.conversation_key, t.tool, t.status, t.latency_ms FROM routing_toolcall t"
            " JOIN routing_conversation c ON c.id = t.conversation_id"
            " WHERE c.conversation_key = ANY(%s) AND t.id > %s ORDER BY t.id",
            keys,
            since_id,
        )
    ]


@pytest.mark.timeout(STACK_TEST_TIMEOUT)
def test_a_frozen_or_killed_mcp_server_is_named_in_the_answer_and_tools_work_again_without_restarts(production_stack):
    """The telecom tools through a supervisor profile (Celery worker) and a coordinator's delegation (web)."""
    import httpx

    stack = production_stack
    chats = [Chat(SUPERVISOR_PROFILE, "mcp-supervisor"), Chat("telecom_assistente", "mcp-router")]
    keys = [chat.key for chat in chats]
    web_pid, worker_pid = stack.web.pid, stack.worker.pid
    phases: dict[str, list[Reply]] = {}
    tool_rows: dict[str, list[tuple[int, str, str, str, float]]] = {}
    last_id = [0]

    async def turn(client, phase: str) -> None:
        phases[phase] = list(
            await asyncio.gather(*(chat.send(client, stack, phase, timeout=CLIENT_TIMEOUT) for chat in chats))
        )
        tool_rows[phase] = tool_calls_since(stack, keys, last_id[0])
        last_id[0] = max([last_id[0], *(row[0] for row in tool_rows[phase])])

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=stack.base_url) as client:
            await turn(client, "before")
            stack.freeze_mcp("telecom")
            try:
                await turn(client, "frozen")
            finally:
                stack.thaw_mcp("telecom")
            await turn(client, "thawed")
            await asyncio.to_thread(stack.kill_mcp, "telecom")
            await turn(client, "killed")
            await asyncio.to_thread(stack.start_mcp, "telecom")
            await turn(client, "restarted")

    asyncio.run(scenario())
    figures = {
        phase: {
            "status": status_counts(replies),
            "seconds": {r.conversation_key: round(r.seconds, 2) for r in replies},
            "tool_calls": [f"{tool}:{status}:{latency:.0f}ms" for _, _, tool, status, latency in tool_rows[phase]],
        }
        for phase, replies in phases.items()
    }
    write_figures("mcp_server_frozen_and_killed", figures)

    for phase, replies in phases.items():
        assert [r.status for r in replies] == [200, 200], (phase, [(r.status, r.body) for r in replies])
        assert tool_rows[phase], f"{phase}: no tool was called"
    for phase in ("before", "thawed", "restarted"):
        assert {status for *_, status, _ in tool_rows[phase]} == {"ok"}, (phase, tool_rows[phase])
        assert all("289,90" in r.answer for r in phases[phase]), (phase, [r.answer for r in phases[phase]])
    for phase, reason in (("frozen", "timeout"), ("killed", "unavailable")):
        assert {status for *_, status, _ in tool_rows[phase]} == {reason}, (phase, tool_rows[phase])
        for reply in phases[phase]:
            # The reason is named, with what happened after its colon (it was once cut off there).
            assert re.search(rf"{reason}: \w", reply.answer), (phase, reply.answer)
            calls = sum(1 for row in tool_rows[phase] if row[1] == reply.conversation_key)
            assert reply.seconds <= calls * MCP_TIMEOUT_SECONDS + 6.0, (phase, reply.seconds, calls)
    overrun = [row for row in tool_rows["frozen"] if row[4] > (MCP_TIMEOUT_SECONDS + 1.0) * 1000]
    assert not overrun, f"tool calls past the server's {MCP_TIMEOUT_SECONDS:g} s timeout: {overrun}"
    assert (stack.web.pid, stack.worker.pid) == (web_pid, worker_pid), "the web server or the worker was restarted"
    assert stack.web.alive() and stack.worker.alive(), "the web server or the worker died"
    assert stored_once_problems(stack, {r.conversation_key: [] for r in phases["before"]}) == []
    assert stack.unbalanced_conversations() == {}
