"""Where a supervisor plan's specialists run: in this process, or on Celery workers.

Both executors honour one contract (:class:`PlanExecutor`); the graph does not
know which one ran. With a broker (``REDIS_URL``) the plan's steps are Celery
tasks running in parallel on the workers (``celery -A platform worker``), each
with its own time limit, and the request collects what finishes in time. With
no broker (the embedded default) the same steps run concurrently here.
``SUPERVISOR_EXECUTOR`` (``auto`` | ``celery`` | ``inprocess``) forces one.

A streaming turn (WebSocket, SSE) passes ``on_partial`` and hears of each step
the moment it finishes. In-process that is a call; from a Celery worker the
step's answer comes through the Channels layer (Redis, ``channels_redis``): the
request opens a channel of its own, the task carries its name
(``reply_channel``), and the worker sends the answer there before it stores its
result. A step whose message is lost is still reported, once, when the plan's
results have been collected.

Redis down is not a failed turn: when the broker cannot take the steps within
``PUBLISH_TIMEOUT_SECONDS`` (or failed moments ago: the :class:`~common.infra.circuit.Circuit`
stays open for ``REDIS_OUTAGE_PAUSE_SECONDS``), the plan runs in-process instead;
steps whose results cannot be read any more (Redis went away after they were
sent) are run again in-process within what is left of the time limit; a
channel layer that cannot be reached only means the parts are reported when
the plan's results are in.

A goal plan's steps (:mod:`conversations.goals.engine`) use the same switch
(:func:`executor_name`), broker hand-off (:func:`broker_send`), circuit and
result collection (:func:`results_collect`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Callable
from functools import lru_cache
from typing import Any, ClassVar, TypeVar

from asgiref.sync import sync_to_async
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers
from django.conf import settings

from common.infra import tracing
from common.infra.cache import REDIS_DOWN
from common.infra.circuit import Circuit
from common.rehearsal import rehearsal_current
from conversations.guardrails import MaskVault
from conversations.runtime import SpecialistRequest
from conversations.steps import PARTIAL_MESSAGE_TYPE, outcome_from_dict, payload_from_request
from conversations.supervisor import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_TIMEOUT,
    Partial,
    PartialReport,
    PlanResult,
    plan_run,
)
from conversations.tasks import specialist_step
from platform.celery import app
from routing.public import PlanStep

logger = logging.getLogger(__name__)

T = TypeVar("T")

# The request's side of the layer, one instance per event loop: channels_redis lets one loop at a time
# receive on an instance (a process-wide one breaks as soon as a second loop receives: async_to_sync,
# a WSGI request's loop, a test's asyncio.run), and its Redis connections belong to the loop that opened them.
_layers_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def receiving_layer() -> Any:
    """This event loop's own channel layer instance, or ``None`` when no layer is configured."""
    if DEFAULT_CHANNEL_LAYER not in settings.CHANNEL_LAYERS:
        return None
    loop = asyncio.get_running_loop()
    layer = _layers_by_loop.get(loop)
    if layer is None:
        layer = _layers_by_loop[loop] = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
    return layer


# Extra seconds a worker gets beyond the step's limit before Celery kills the task outright.
HARD_LIMIT_SLACK_SECONDS = 5
# How long a plan waits for the broker to take its steps before it runs them in-process.
PUBLISH_TIMEOUT_SECONDS = 2.0

# Redis as the fan-out sees it (broker, results, channel layer): one outage, logged once.
redis_circuit = Circuit("Redis (fan-out broker)", pause=settings.REDIS_OUTAGE_PAUSE_SECONDS, logger=logger)


class PlanExecutor:
    """Run a plan's steps concurrently, each under ``timeout`` seconds.

    Returns one :class:`~conversations.supervisor.Partial` per step, in step order,
    tagged with ``round_number``; a step that fails or overruns is a partial
    with status ``error`` or ``timeout``. Never raises.
    """

    name: ClassVar[str]

    async def run(
        self,
        steps: list[PlanStep],
        requests: dict[str, SpecialistRequest | None],
        *,
        timeout: float,
        round_number: int,
        vault: MaskVault,
        on_partial: PartialReport | None = None,
    ) -> PlanResult:
        raise NotImplementedError


class InProcessExecutor(PlanExecutor):
    name = "inprocess"

    async def run(self, steps, requests, *, timeout, round_number, vault, on_partial=None) -> PlanResult:
        return await plan_run(
            steps,
            lambda step: requests[step.agent],
            timeout=timeout,
            round_number=round_number,
            on_partial=on_partial,
        )


class CeleryExecutor(PlanExecutor):
    name = "celery"

    async def run(self, steps, requests, *, timeout, round_number, vault, on_partial=None) -> PlanResult:
        in_process = InProcessExecutor()
        if not redis_circuit.allows():
            return await in_process.run(
                steps, requests, timeout=timeout, round_number=round_number, vault=vault, on_partial=on_partial
            )
        started = time.perf_counter()
        payloads = [
            payload_from_request(requests[step.agent], vault) if requests[step.agent] else None for step in steps
        ]
        reported: set[int] = set()

        def partial_of(index: int, answer: dict[str, Any]) -> Partial:
            partial = _partial(steps[index], answer, timeout)
            partial.round = round_number
            partial.latency_ms = answer.get("latency_ms", (time.perf_counter() - started) * 1000)
            return partial

        async def report(index: int, partial: Partial) -> None:
            if on_partial is not None and index not in reported:
                reported.add(index)
                await on_partial(partial)

        layer = receiving_layer() if on_partial is not None else None
        listener = None
        if layer is not None:
            channel = await layer.new_channel("plan.")
            for index, payload in enumerate(payloads):
                if payload is not None:
                    payload["reply_channel"], payload["reply_index"] = channel, index
            listener = asyncio.create_task(_listen(layer, channel, len(payloads), partial_of, report))
        try:
            headers = tracing.headers_out()  # the workers' spans join this trace
            sent = await broker_send(lambda: _send(payloads, timeout, headers))
            if sent is None:  # the broker cannot take the steps: run them here
                return await in_process.run(
                    steps, requests, timeout=timeout, round_number=round_number, vault=vault, on_partial=on_partial
                )
            answers = await sync_to_async(results_collect, thread_sensitive=False)(sent, started + timeout)
        finally:
            if listener is not None:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener
        lost = [index for index, answer in enumerate(answers) if answer is None]
        rerun: dict[int, Partial] = {}
        if lost:  # Redis went away after the steps were sent: answer them here with the time that is left
            again = await in_process.run(
                [steps[index] for index in lost],
                requests,
                timeout=max(started + timeout - time.perf_counter(), 0.001),
                round_number=round_number,
                vault=vault,
                on_partial=on_partial,
            )
            for index, partial in zip(lost, again.partials, strict=True):
                reported.add(index)
                rerun[index] = partial
        partials = [rerun.get(index) or partial_of(index, answer or {}) for index, answer in enumerate(answers)]
        for index, partial in enumerate(partials):
            await report(index, partial)  # the ones whose message did not come (unknown step, timeout, lost)
        return PlanResult(partials=partials)


async def _listen(layer: Any, channel: str, expected: int, partial_of, report) -> None:
    """Report each step a worker sends to ``channel`` until all have come (cancelled when the plan ends)."""
    heard = 0
    while heard < expected:
        try:
            message = await layer.receive(channel)
        except Exception as exc:  # noqa: BLE001 — no layer, no early parts: they are reported with the results
            redis_circuit.failed(exc)
            return
        if message.get("type") != PARTIAL_MESSAGE_TYPE:
            continue
        heard += 1
        try:
            index = int(message["index"])
            await report(index, partial_of(index, message["answer"]))
        except Exception:
            logger.warning("Ignoring a malformed plan.partial message on %s", channel, exc_info=True)


async def broker_send(send: Callable[[], T]) -> T | None:
    """``send()`` — which hands tasks to the broker — in a thread, given ``PUBLISH_TIMEOUT_SECONDS``; ``None``
    when the broker could not take them (the circuit records it): the caller then runs the work in-process."""
    try:
        sent = await asyncio.wait_for(sync_to_async(send, thread_sensitive=False)(), PUBLISH_TIMEOUT_SECONDS)
    except Exception as exc:  # noqa: BLE001 — whatever stops the broker taking the tasks
        redis_circuit.failed(exc if str(exc) else TimeoutError(f"no answer in {PUBLISH_TIMEOUT_SECONDS:g}s"))
        return None
    redis_circuit.succeeded()
    return sent


def _send(payloads: list[dict[str, Any] | None], timeout: float, headers: dict[str, str] | None = None) -> list[Any]:

    return [
        # The limits keep fractions of a second: Celery's timers take float seconds (celery-types says int).
        specialist_step.apply_async(
            args=(payload,),
            soft_time_limit=timeout,  # type: ignore[arg-type]  # Celery takes float seconds
            time_limit=timeout + HARD_LIMIT_SLACK_SECONDS,  # type: ignore[arg-type]  # Celery takes float seconds
            expires=timeout,
            headers=headers or {},
        )
        if payload is not None
        else None
        for payload in payloads
    ]


@lru_cache(maxsize=4)
def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def results_collect(results: list[Any], deadline: float) -> list[dict[str, Any] | None]:
    """Wait for every result until ``deadline`` (``time.perf_counter()``); missing ones are timeouts, as are those
    a worker's time limit ended (it is the same limit, which the worker may see a moment before the request), and
    ``None`` when Redis could not be read (the caller answers those steps itself).

    Celery's own waiting does not fit per-step deadlines on the Redis backend:
    ``AsyncResult.get(timeout=...)`` waits in whole-second slices and
    ``GroupResult.get()`` sleeps 0.5 s before it reads. So we subscribe to the
    results' pub/sub channels (where the backend publishes each result as it is
    stored), read what is already stored, and take the rest as it arrives.
    """
    from celery import states

    backend = app.backend
    answers: list[dict[str, Any] | None] = [
        None if result is not None else {"status": STATUS_ERROR, "error": "unknown or disabled specialist"}
        for result in results
    ]
    keys = {
        # A key-value backend's method (Redis here, returning bytes); app.backend is typed as the base Backend.
        backend.get_key_for_task(result.id).decode(): index  # type: ignore[attr-defined]  # Redis backend only
        for index, result in enumerate(results)
        if result is not None
    }

    def take(raw: bytes, index: int) -> None:
        meta = backend.decode_result(raw)
        if meta["status"] not in states.READY_STATES or answers[index] is not None:
            return
        value = meta["result"]
        if meta["status"] == states.SUCCESS and isinstance(value, dict):
            answers[index] = value
        elif isinstance(value, SoftTimeLimitExceeded | TimeLimitExceeded):
            # The step's limit on the worker is the request's own: whichever side saw it first, it is a timeout.
            answers[index] = {"status": STATUS_TIMEOUT}
        else:
            answers[index] = {"status": STATUS_ERROR, "error": f"{meta['status']}: {value}"}

    lost = False
    if keys:
        client = _redis(settings.CELERY_RESULT_BACKEND)
        pubsub = client.pubsub()
        try:
            pubsub.subscribe(*keys)
            confirmed = 0
            while confirmed < len(keys) and time.perf_counter() < deadline:
                message = pubsub.get_message(timeout=min(1.0, max(deadline - time.perf_counter(), 0.01)))
                if message and message["type"] == "subscribe":
                    confirmed += 1
            for raw, index in zip(client.mget(list(keys)), keys.values(), strict=True):
                if raw is not None:
                    take(raw, index)
            while any(answers[index] is None for index in keys.values()):
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    break
                message = pubsub.get_message(ignore_subscribe_messages=True, timeout=remaining)
                if message and message["type"] == "message":
                    take(message["data"], keys[message["channel"].decode()])
        except REDIS_DOWN as exc:
            redis_circuit.failed(exc)
            lost = True
        finally:
            with contextlib.suppress(*REDIS_DOWN):
                pubsub.close()
    if lost:
        return answers
    collected: list[dict[str, Any] | None] = []
    for answer, result in zip(answers, results, strict=True):
        if answer is None:
            with contextlib.suppress(Exception):  # best effort: an expiring task is dropped by the worker anyway
                result.revoke()  # still queued or running past its deadline: nobody waits for it any more
            answer = {"status": STATUS_TIMEOUT}
        collected.append(answer)
    return collected


def _partial(step: PlanStep, answer: dict[str, Any], timeout: float) -> Partial:
    status = answer.get("status", STATUS_ERROR)
    if status == STATUS_TIMEOUT:
        return Partial(step.agent, step.intent, STATUS_TIMEOUT, error=f"no answer within {timeout:g}s")
    outcome = outcome_from_dict(answer["outcome"]) if answer.get("outcome") else None
    if status == STATUS_OK and outcome is not None:
        return Partial(step.agent, step.intent, STATUS_OK, outcome=outcome)
    error = answer.get("error") or (outcome.error if outcome else "") or "failed"
    return Partial(step.agent, step.intent, STATUS_ERROR, outcome=outcome, error=error)


EXECUTORS: dict[str, type[PlanExecutor]] = {
    InProcessExecutor.name: InProcessExecutor,
    CeleryExecutor.name: CeleryExecutor,
}


def executor_name() -> str:
    """``celery`` when a broker is configured (or ``SUPERVISOR_EXECUTOR`` forces it), otherwise ``inprocess``; always
    ``inprocess`` for a conversation test's turn (:mod:`common.rehearsal`)."""
    if rehearsal_current() is not None:
        return InProcessExecutor.name
    choice = settings.SUPERVISOR_EXECUTOR
    if choice == "auto":
        choice = CeleryExecutor.name if settings.REDIS_URL else InProcessExecutor.name
    return choice


def executor_for() -> PlanExecutor:
    """Celery when a broker is configured (or forced), otherwise in-process."""
    return EXECUTORS[executor_name()]()
