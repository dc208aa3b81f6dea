"""The Celery application: ``celery -A platform worker``.

Celery finds this module as ``platform.celery``. It is not imported from
``platform/__init__.py`` on purpose: that package is also the standard
library's ``platform`` and is imported by ``uuid`` long before Django or
Celery are ready. Apps import :data:`app` where they define tasks.
"""

import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from celery import Celery, bootsteps, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")

# The worker's liveness (deploy/kubernetes/base/worker.yaml, docker-compose.yml): a file its main process touches.
HEARTBEAT_FILE = Path(tempfile.gettempdir()) / "celery-worker-heartbeat"
HEARTBEAT_SECONDS = 5.0

app = Celery("platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class Heartbeat(bootsteps.StartStopStep):
    """The worker's main process touches :data:`HEARTBEAT_FILE` every :data:`HEARTBEAT_SECONDS`, from a thread of its
    own, from the moment its pool has started until it stops; a liveness probe checks the file's age.

    It tells that the process runs, not that the broker or the database answer: during a Redis outage the worker's
    loop waits in Celery's reconnection (the timers of its event loop with it), and a probe that asked the broker
    (``celery inspect ping``) restarted every worker of a deployment after a few minutes of an outage the worker
    recovers from by itself. A process that is stopped, killed or whose interpreter hangs stops touching it."""

    requires = ("celery.worker.components:Pool",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._stopped = threading.Event()

    def start(self, parent: Any) -> None:
        threading.Thread(target=self._beat, name="liveness-heartbeat", daemon=True).start()

    def stop(self, parent: Any) -> None:
        self._stopped.set()

    def _beat(self) -> None:
        while True:
            HEARTBEAT_FILE.touch()
            if self._stopped.wait(HEARTBEAT_SECONDS):
                return


app.steps["worker"].add(Heartbeat)


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
