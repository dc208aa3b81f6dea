"""Celery tasks of the knowledge: an upload read into its source (:mod:`knowledge.uploads`)."""

from __future__ import annotations

from knowledge.uploads import UPLOAD_TASK, upload_read
from platform.celery import app


@app.task(name=UPLOAD_TASK, ignore_result=True)
def knowledge_upload_read(upload_pk: int) -> None:
    """A queued upload read into its source by the worker that claims it."""
    upload_read(upload_pk)
