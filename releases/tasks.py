"""Celery tasks of the release lifecycle: the rollout plans' guard, which Celery beat sends every
ROLLOUT_EVALUATE_SECONDS (``CELERY_BEAT_SCHEDULE``; without a broker, ``manage.py periodic`` runs it), and a queued
run of conversation tests (:mod:`releases.evals.runs`).

The task keeps the name it had when the guard lived in the engine (``conversations.rollout_evaluate``): beat
schedules and messages already queued name it so."""

from __future__ import annotations

import logging

from platform.celery import app
from releases.evals.runs import RUN_TASK, conversation_test_run_play
from releases.models import ConversationTestRun, ConversationTestRunStatus
from releases.rollout.guard import plans_evaluate

logger = logging.getLogger(__name__)


@app.task(name="conversations.rollout_evaluate", ignore_result=True)
def rollout_evaluate(interval: float | None = None) -> int:
    """Celery beat, every ROLLOUT_EVALUATE_SECONDS (``interval``, as the beat has it): advance, hold or roll back
    each running rollout plan."""

    return len(plans_evaluate(actor="beat", interval=interval))


@app.task(name=RUN_TASK, ignore_result=True)
def conversation_tests_run(run_pk: int) -> None:
    """A queued run of conversation tests, played by the worker that claims it (a run no longer queued — taken by
    another worker, or gone — is left alone)."""
    claimed = ConversationTestRun.objects.filter(pk=run_pk, status=ConversationTestRunStatus.QUEUED).update(
        status=ConversationTestRunStatus.RUNNING
    )
    if not claimed:
        logger.info("conversation test run %s is not queued: left alone", run_pk)
        return
    conversation_test_run_play(ConversationTestRun.objects.select_related("profile").get(pk=run_pk))
