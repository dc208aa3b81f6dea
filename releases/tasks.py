"""Celery tasks of the release lifecycle: the rollout plans' guard, which Celery beat sends every
ROLLOUT_EVALUATE_SECONDS (``CELERY_BEAT_SCHEDULE``; without a broker, ``manage.py periodic`` runs it).

The task keeps the name it had when the guard lived in the engine (``conversations.rollout_evaluate``): beat
schedules and messages already queued name it so."""

from __future__ import annotations

from platform.celery import app
from releases.rollout_guard import plans_evaluate


@app.task(name="conversations.rollout_evaluate", ignore_result=True)
def rollout_evaluate(interval: float | None = None) -> int:
    """Celery beat, every ROLLOUT_EVALUATE_SECONDS (``interval``, as the beat has it): advance, hold or roll back
    each running rollout plan."""

    return len(plans_evaluate(actor="beat", interval=interval))
