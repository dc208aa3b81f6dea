"""The rollout guard's beat task lives in the releases app and keeps the name it had in the engine, so beat
schedules and tasks queued before a deploy still find it."""

from __future__ import annotations

from django.conf import settings

from platform.celery import app
from releases import tasks


def test_the_guards_task_keeps_its_old_name_and_the_beat_schedule_sends_it():
    app.loader.import_default_modules()  # every app's tasks module, as a worker loads them

    assert tasks.rollout_evaluate.name == "conversations.rollout_evaluate"
    assert app.tasks["conversations.rollout_evaluate"].run.__module__ == "releases.tasks"
    assert "conversations.rollout_evaluate" in {job["task"] for job in settings.CELERY_BEAT_SCHEDULE.values()}
