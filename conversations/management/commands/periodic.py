"""``manage.py periodic``: Celery beat and a worker in one process, for the embedded default (no broker).

    manage.py periodic            # every job of CELERY_BEAT_SCHEDULE at its interval, until stopped
    manage.py periodic --once     # every job once, now

Each entry of ``CELERY_BEAT_SCHEDULE`` (the rollout guard, the outcomes' close, …) runs its task in this process
(Celery's ``Task.apply``: the task's own code, signals and metrics, no broker) when its schedule says it is due —
every job once at the start, then at its interval. A job that fails is logged by name and runs again at its next
time. ``scripts/start`` runs this command when ``REDIS_URL`` is unset; with a broker, Celery beat sends the same jobs
to the workers.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from celery import Task
from celery.schedules import maybe_schedule
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections, connection

from platform.celery import app

logger = logging.getLogger(__name__)

LONGEST_SLEEP = 60.0  # seconds: a schedule's estimate is checked again at least this often
SHORTEST_SLEEP = 0.1


@dataclass
class Job:
    """One entry of the beat's schedule: its name, task, arguments and schedule, and when it last ran."""

    name: str
    task: Task
    schedule: Any  # a celery.schedules schedule (a number of seconds becomes one)
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] | None = None
    last_run_at: Any = None

    def due_in(self) -> float:
        """Seconds until the job is due (0: now); a job that never ran is due."""
        if self.last_run_at is None:
            return 0.0
        due, next_seconds = self.schedule.is_due(self.last_run_at)
        return 0.0 if due else max(float(next_seconds), 0.0)

    def run(self) -> bool:
        """Run the task here and now; whether it succeeded (a failure is logged by the job's name and task)."""
        self.last_run_at = self.schedule.now()
        try:
            result = self.task.apply(args=self.args, kwargs=self.kwargs or {})
        finally:
            if not connection.in_atomic_block:  # a long-lived process: each job gets a fresh connection
                close_old_connections()
        if result.failed():
            logger.error("periodic job %s (%s) failed: %s", self.name, self.task.name, type(result.result).__name__)
            return False
        return True


def periodic_jobs(schedule: dict[str, dict[str, Any]]) -> list[Job]:
    """The jobs of a beat schedule, each with its task from the Celery app's registry. Raises
    :class:`CommandError` naming an entry whose task no app defines."""
    app.loader.import_default_modules()  # every app's tasks module (autodiscovery)
    jobs = []
    for name, entry in schedule.items():
        task = app.tasks.get(entry["task"])
        if task is None:
            raise CommandError(f"CELERY_BEAT_SCHEDULE[{name!r}]: no task named {entry['task']!r}.")
        jobs.append(
            Job(
                name=name,
                task=task,
                schedule=maybe_schedule(entry["schedule"], app=app),
                args=tuple(entry.get("args", ())),
                kwargs=dict(entry.get("kwargs", {})),
            )
        )
    return jobs


class Command(BaseCommand):
    help = "Run every job of Celery beat's schedule in this process at its interval (no broker needed)."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Run every job once, then stop.")

    def handle(self, *args, **options):
        jobs = periodic_jobs(settings.CELERY_BEAT_SCHEDULE)
        if options["once"]:
            failed = [job.name for job in jobs if not job.run()]
            if failed:
                raise CommandError(f"Failed: {', '.join(failed)}.")
            return
        self.stdout.write(f"Running {', '.join(job.name for job in jobs)} at their intervals; Ctrl-C stops.")
        while True:
            for job in jobs:
                if job.due_in() <= 0:
                    job.run()
            time.sleep(max(SHORTEST_SLEEP, min(LONGEST_SLEEP, *(job.due_in() for job in jobs))))
