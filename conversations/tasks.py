"""Celery tasks of the conversation engine: one supervisor-plan step, or one goal-plan MCP call, on a worker; and
the periodic jobs Celery beat sends (conversations' outcomes; the rollout plans' guard is releases.tasks).

Tasks take ids and plain values, never ORM objects: the profile by its
``agent_id``, the specialist and tools by name, the turn's masked text and
history, and the request context the tools need. The worker rebuilds the
specialist's request from its own compiled snapshot. The masking vault travels
with the task (placeholders and their originals) so placeholders a model writes
into tool arguments can be turned back into real values there; the broker
therefore sees the personal data the tools need, never the model, and results
expire (``CELERY_RESULT_EXPIRES``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

from celery import Task, signals
from django.conf import settings

from agents.public import AttachmentScope, Endpoint, attachments_for, tool_call
from common.infra import tracing
from common.infra.metrics import celery_task_observe, metrics_serve, multiprocess_dir, process_dead
from conversations.customer_data import retention_purge_all
from conversations.desk.webhook import desk_outbox_drain, desk_outbox_sweep
from conversations.outcomes import outcomes_close as outcomes_decide
from conversations.runtime import specialist_run
from conversations.steps import outcome_as_dict, partial_send, request_from_payload
from platform.celery import app
from routing.public import snapshot_current

logger = logging.getLogger(__name__)
_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _worker_loop() -> asyncio.AbstractEventLoop:
    """One event loop per worker process, reused task after task (model clients stay bound to it)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            _loop = asyncio.new_event_loop()
        return _loop


@signals.worker_init.connect
def _warm(**_kwargs: object) -> None:
    """The language model (the offline model and the judge read languages) and the compiled routing loaded in the
    worker's main process before its pool forks, so every child has them from its first step (platform/asgi.py does
    the same for the web). What they loaded is then frozen out of the collector's full passes (common/infra/heap.py),
    which also spares the children copies of the pages a collection would write."""
    from common.infra.heap import heap_settle
    from common.language import language_model_warm
    from routing.public import snapshot_warm

    language_model_warm()
    snapshot_warm()
    heap_settle()


# Task outcomes, every task's (Celery's own too), counted in the pool process that ran it (common/infra/metrics.py; they
# reach /metrics when the workers share PROMETHEUS_MULTIPROC_DIR with the web server). Connected here, in the module
# every worker imports: the Celery app (platform/celery.py) stands below the kernel.
@signals.task_success.connect
def _task_succeeded(sender: Any = None, **_kwargs: object) -> None:
    celery_task_observe(getattr(sender, "name", None) or "unknown", "success")


@signals.task_failure.connect
def _task_failed(sender: Any = None, **_kwargs: object) -> None:
    celery_task_observe(getattr(sender, "name", None) or "unknown", "failure")


@signals.task_retry.connect
def _task_retried(sender: Any = None, **_kwargs: object) -> None:
    celery_task_observe(getattr(sender, "name", None) or "unknown", "retry")


@signals.worker_ready.connect
def _pod_metrics(**_kwargs: object) -> None:
    """With ``METRICS_PORT`` (Kubernetes: each pod scraped on its own), the worker's main process serves its pool's
    figures, read from ``PROMETHEUS_MULTIPROC_DIR``, once the pool has started (common/infra/metrics.py)."""
    if not settings.METRICS_PORT:
        return
    if not multiprocess_dir():
        logger.warning("METRICS_PORT without PROMETHEUS_MULTIPROC_DIR: the pool processes' figures cannot be served")
    metrics_serve(host=settings.METRICS_HOST, port=settings.METRICS_PORT, token=settings.METRICS_TOKEN)
    logger.info("serving this worker's metrics on %s:%s/metrics", settings.METRICS_HOST, settings.METRICS_PORT)


@signals.worker_process_shutdown.connect
def _pool_process_ended(pid: int | None = None, **_kwargs: object) -> None:
    """A pool process ended: prometheus_client's bookkeeping for a dead process."""
    process_dead(pid or os.getpid())


@signals.worker_init.connect
@signals.worker_process_init.connect
def _traces(**_kwargs: object) -> None:
    """Traces on in the worker when configured (common/infra/tracing.py): its main process and each prefork child (the
    batch's export thread starts again after the fork). Here, not in platform/celery.py: that is the ground layer."""
    tracing.tracing_setup()


@signals.worker_process_shutdown.connect
def _traces_flushed(**_kwargs: object) -> None:
    """A pool child leaves without running ``atexit``: the spans still in its batch are exported first."""
    tracing.tracing_flush()


# The name predates the move from routing/ and stays: steps queued before a deploy still find their task.
@app.task(name="routing.specialist_step", bind=True, acks_late=True, reject_on_worker_lost=True)
def specialist_step(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """Answer one step of a supervisor plan; returns the outcome as plain data (see :mod:`conversations.fanout`).
    Its spans continue the request's trace (the task's headers: :func:`common.infra.tracing.headers_out`)."""
    with tracing.continued(self.request.headers):
        return _specialist_step(payload)


def _specialist_step(payload: dict[str, Any]) -> dict[str, Any]:

    loop = _worker_loop()
    request = request_from_payload(payload, snapshot_current())
    answer: dict[str, Any]  # {"status", "error"} or {"status", "outcome"}, read by conversations.fanout
    if request is None:
        answer = {"status": "error", "error": "unknown or disabled specialist"}
    else:
        with attachments_for(AttachmentScope.from_dict(payload.get("attachments"))):
            outcome = loop.run_until_complete(specialist_run(request))
        answer = {"status": "error" if outcome.error else "ok", "outcome": outcome_as_dict(outcome)}
    partial_send(payload, answer, loop)  # a streaming request shows it at once (conversations.steps)
    return answer


@app.task(name="conversations.goal_step", bind=True, acks_late=True, reject_on_worker_lost=True)
def goal_step(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """Make one goal-plan step's MCP call; returns the :class:`~agents.mcp.ToolResult` as plain data.

    ``payload`` holds plain values only — ``server``, ``endpoint`` (its URL), ``timeout`` (seconds), ``tool``,
    ``arguments``, ``schema`` (the tool's arguments schema) and ``attachments`` (whose the call's attachments are,
    :class:`~agents.mcp.AttachmentScope`) — so the worker needs no snapshot: the request
    (:mod:`conversations.goals.engine`) schedules the plan and reads each step's result. The call's
    ``mcp.tool_call`` span continues the request's trace (the task's headers).
    """

    endpoint = Endpoint(name=payload["server"], url=payload["endpoint"], timeout=float(payload["timeout"]))
    call = tool_call(endpoint=endpoint, tool=payload["tool"], arguments=payload["arguments"], schema=payload["schema"])
    scope = AttachmentScope.from_dict(payload.get("attachments"))
    with tracing.continued(self.request.headers), attachments_for(scope):
        return _worker_loop().run_until_complete(call).as_dict()


@app.task(name="conversations.outcomes_close", ignore_result=True)
def outcomes_close() -> int:
    """Celery beat, every OUTCOMES_CLOSE_SECONDS: decide the conversations idle past their profile's timeout
    (resolved or abandoned) and close the queued escalations of idle conversations (:mod:`conversations.outcomes`).
    Returns how many conversations were decided."""
    return outcomes_decide().conversations


@app.task(name="conversations.desk_webhook_deliver", bind=True, ignore_result=True, acks_late=True)
def desk_webhook_deliver(self: Task, escalation_id: str) -> int:
    """Post an escalation's due events to its external desk, in order (:mod:`conversations.desk.webhook`); after a
    failed post, retried when its pause is over (the attempts are counted with the event, not by Celery)."""

    drained = desk_outbox_drain(escalation_id=escalation_id)
    if drained.retry_in is not None:
        raise self.retry(countdown=drained.retry_in, max_retries=None)
    return drained.delivered


@app.task(name="conversations.desk_webhooks_sweep", ignore_result=True)
def desk_webhooks_sweep() -> int:
    """Celery beat, every minute: drain the escalations whose events are due and nobody is posting (a retry lost with a
    stopped worker or a restarted broker)."""

    return desk_outbox_sweep()


@app.task(name="conversations.retention_purge", ignore_result=True)
def retention_purge() -> int:
    """Celery beat, every RETENTION_PURGE_SECONDS: purge every tenant's conversations past its retention window, in
    short batches (:mod:`conversations.customer_data.retention`). Returns how many conversations were purged."""
    purges = retention_purge_all()
    return sum(purge.counts.get("conversations.Conversation", 0) for purge in purges)
