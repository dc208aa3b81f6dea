"""The rows a goal-mode answer leaves for the analytics: one :class:`GoalRun` and a :class:`GoalStepRun` per step.

The answer's ``metadata["goal"]`` is the whole record (intent, plan, outputs, clarification) and stays the source
of truth; :func:`goal_rows_create` copies out of it what the analytics count, in the transaction that stores the
turn. Everything is read defensively: a key left out (a clarification asked before any plan has no plan and no
outputs) or a value of the wrong type is read as absent, never as an error that would lose the turn.

A goal-mode turn that the intent adapter put in domain ``general`` (small talk, what no goal covers: answered by
a specialist, no plan; the graph's ``metadata["goal"]`` says ``{"status": "general", "intent_output": ...}``) is
recorded too, with status ``general``, so that the clarification rate is taken over every goal-mode answer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from django.db.models import Model
from django.utils import timezone

from conversations.models import Conversation, GoalRun, GoalRunStatus, GoalStepRun, GoalStepStatus, Message
from routing.public import GENERAL_DOMAIN

logger = logging.getLogger(__name__)

# The statuses of a turn that served a goal (``general``: the intent's domain, or the graph's status, says none).
TURN_STATUSES = frozenset({GoalRunStatus.SUCCESS, GoalRunStatus.FAILURE, GoalRunStatus.CLARIFICATION})
MAX_STEP_ID = 32767  # the column is a small integer


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any, max_length: int | None = None) -> str:
    text = value if isinstance(value, str) else ("" if value is None else str(value))
    return text[:max_length] if max_length is not None else text


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _field_length(model: type[Model], name: str) -> int | None:
    return getattr(model._meta.get_field(name), "max_length", None)


def _step_id(value: Any, position: int) -> int:
    """The plan's id for the step, or its 1-based position when the id is not a usable whole number."""
    try:
        step_id = int(value)
    except (TypeError, ValueError):
        return position
    return step_id if 0 <= step_id <= MAX_STEP_ID else position


def _step_status(output: Mapping[str, Any] | None) -> str:
    if output is None:
        return GoalStepStatus.SKIPPED  # planned, never ran: the plan ended before it
    status = output.get("status")
    return status if status in GoalStepStatus.values else GoalStepStatus.FAILURE


def _step_rows(goal: Mapping[str, Any]) -> list[GoalStepRun]:
    """One unsaved row per planned step, in plan order, then one per output no planned step accounts for."""
    plan = _mapping(goal.get("plan"))
    planned = [step for step in plan.get("steps") or () if isinstance(step, Mapping)]
    # Keys are the steps' ids as text once the metadata went through JSON, and may still be numbers before.
    outputs = {str(key): value for key, value in _mapping(goal.get("outputs")).items() if isinstance(value, Mapping)}
    rows: list[GoalStepRun] = []
    seen: set[str] = set()
    for position, step in enumerate(planned, start=1):
        key = str(step.get("id"))
        seen.add(key)
        rows.append(_step_row(step, outputs.get(key), _step_id(step.get("id"), position)))
    for key, output in outputs.items():
        if key not in seen:
            rows.append(_step_row({}, output, _step_id(key, len(rows) + 1)))
    return rows


def _step_row(step: Mapping[str, Any], output: Mapping[str, Any] | None, step_id: int) -> GoalStepRun:
    meta = _mapping((output or {}).get("metadata"))
    required = step.get("required", meta.get("required", True))
    error = meta.get("error")
    return GoalStepRun(
        step_id=step_id,
        domain=_text(step.get("domain") or meta.get("domain"), _field_length(GoalStepRun, "domain")),
        capability=_text(step.get("capability") or meta.get("capability"), _field_length(GoalStepRun, "capability")),
        status=_step_status(output),
        required=required if isinstance(required, bool) else True,
        latency_ms=_number(meta.get("latency_ms")),
        error="" if error in (None, "") else _text(error),
    )


def _run_status(goal: Mapping[str, Any], domain: str) -> str:
    status = goal.get("status")
    if domain == GENERAL_DOMAIN or status == GoalRunStatus.GENERAL:
        return GoalRunStatus.GENERAL
    if status in TURN_STATUSES:
        return status
    # The graph always writes one; a record that cannot say how the turn ended does not count as a success.
    logger.warning("A goal record with status %r is stored as a failure.", status)
    return GoalRunStatus.FAILURE


def goal_rows_create(
    *,
    message: Message,
    goal: Mapping[str, Any],
    tenant_id: int | None = None,
    profile_id: int | None = None,
) -> GoalRun:
    """Store what the analytics count of one goal-mode answer: a :class:`GoalRun` and its :class:`GoalStepRun`
    rows (every planned step in plan order, a step with no output as ``skipped``; then any output that no
    planned step names), dated like ``message``.

    ``message`` is the saved answer and ``goal`` its ``metadata["goal"]``. Call it in the transaction that stores
    the turn, once per goal-mode answer (domain ``general`` included: see the module's docstring). ``tenant_id``
    and ``profile_id`` are the conversation's; given (or with ``message.conversation`` already loaded) the call
    makes two inserts and no other query, else it reads them first. Never raises on a malformed ``goal``.
    """
    if tenant_id is None or profile_id is None:
        if Message.conversation.is_cached(message):
            tenant_id, profile_id = message.conversation.tenant_id, message.conversation.profile_id
        else:
            tenant_id, profile_id = (
                Conversation.objects.filter(pk=message.conversation_id).values_list("tenant_id", "profile_id").get()
            )
    intent = _mapping(goal.get("intent_output"))
    domain = _text(intent.get("primary_domain"), _field_length(GoalRun, "domain"))
    status = _run_status(goal, domain)
    clarification = _mapping(goal.get("clarification"))
    steps = _step_rows(goal)
    ran = any(step.status != GoalStepStatus.SKIPPED for step in steps)
    confidence = _number(intent.get("confidence"))
    run = GoalRun.objects.create(
        message=message,
        conversation_id=message.conversation_id,
        tenant_id=tenant_id,
        profile_id=profile_id,
        cohort=message.cohort,
        domain=domain,
        goal=_text(intent.get("goal"), _field_length(GoalRun, "goal")),
        status=status,
        clarification_reason=(
            _text(clarification.get("reason"), _field_length(GoalRun, "clarification_reason"))
            if status == GoalRunStatus.CLARIFICATION
            else ""
        ),
        confidence=0.0 if confidence is None else confidence,
        step_count=len(steps),
        failed_step_count=sum(step.status == GoalStepStatus.FAILURE for step in steps),
        plan_latency_ms=_number(goal.get("latency_ms")) if ran else None,
        created_at=message.created_at or timezone.now(),
    )
    for step in steps:
        step.run = run
        step.tenant_id, step.profile_id, step.created_at = tenant_id, profile_id, run.created_at
    if steps:
        GoalStepRun.objects.bulk_create(steps)
    return run
