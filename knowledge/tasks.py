"""Celery tasks of the knowledge: an upload read into its source (:mod:`knowledge.uploads`), and a profile's
documents embedded again (:mod:`knowledge.vectors`)."""

from __future__ import annotations

from knowledge.uploads import UPLOAD_TASK, upload_read
from knowledge.vectors import EMBED_TASK, profile_embed
from platform.celery import app


@app.task(name=UPLOAD_TASK, ignore_result=True)
def knowledge_upload_read(upload_pk: int) -> None:
    """A queued upload read into its source by the worker that claims it."""
    upload_read(upload_pk)


@app.task(name=EMBED_TASK, ignore_result=True)
def knowledge_profile_embed(profile_pk: int) -> None:
    """The profile's documents not embedded by the configured model, embedded."""
    profile_embed(profile_pk)
