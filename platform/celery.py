"""The Celery application: ``celery -A platform worker``.

Celery finds this module as ``platform.celery``. It is not imported from
``platform/__init__.py`` on purpose: that package is also the standard
library's ``platform`` and is imported by ``uuid`` long before Django or
Celery are ready. Apps import :data:`app` where they define tasks.
"""

import logging
import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")

app = Celery("platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _logs_without_secrets_or_personal_data(logger: logging.Logger, **_kwargs: object) -> None:
    """Celery sets up the worker's logging itself (Django's ``LOGGING`` is replaced): its handlers get the same
    redaction as the web server's, and its success line loses the task's return value (platform/logs.py)."""
    from platform.logs import TaskResultFilter, redact_handlers

    redact_handlers(logger)
    trace = logging.getLogger("celery.app.trace")
    if not any(isinstance(existing, TaskResultFilter) for existing in trace.filters):
        trace.addFilter(TaskResultFilter())


# Task outcomes, counted in the process that ran the task (common/metrics.py; the figures reach /metrics through
# PROMETHEUS_MULTIPROC_DIR when the workers share it with the web server).
@signals.task_success.connect
def _task_succeeded(sender: object = None, **_kwargs: object) -> None:
    _task_outcome(sender, "success")


@signals.task_failure.connect
def _task_failed(sender: object = None, **_kwargs: object) -> None:
    _task_outcome(sender, "failure")


@signals.task_retry.connect
def _task_retried(sender: object = None, **_kwargs: object) -> None:
    _task_outcome(sender, "retry")


def _task_outcome(task: object, state: str) -> None:
    from common.metrics import celery_task_observe

    celery_task_observe(getattr(task, "name", None) or "unknown", state)


@signals.worker_process_shutdown.connect
def _worker_process_ended(pid: int | None = None, **_kwargs: object) -> None:
    """A prefork child ended: its live figures are dropped (prometheus_client's ``mark_process_dead``)."""
    from common.metrics import process_dead

    process_dead(pid or os.getpid())
