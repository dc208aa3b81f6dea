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
