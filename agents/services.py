"""Writes of agent data: prompt versions."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from agents.models import Specialist, SpecialistPrompt


@transaction.atomic
def prompt_version_create(
    *, specialist: Specialist, text: str, note: str = "", user=None, activate: bool = True
) -> SpecialistPrompt:
    """Add the next prompt version of ``specialist``; by default it becomes the active one.

    Versions are never edited in place: history is the list of versions.
    """
    Specialist.objects.select_for_update().filter(pk=specialist.pk).first()
    latest = specialist.prompts.aggregate(latest=Max("version"))["latest"] or 0
    if activate:
        specialist.prompts.filter(is_active=True).update(is_active=False)
    return SpecialistPrompt.objects.create(
        specialist=specialist,
        version=latest + 1,
        text=text,
        note=note,
        is_active=activate,
        created_by=user if getattr(user, "pk", None) else None,
    )


@transaction.atomic
def prompt_activate(*, prompt: SpecialistPrompt) -> SpecialistPrompt:
    """Make ``prompt`` the specialist's active version (a revert when it is an older one)."""
    SpecialistPrompt.objects.filter(specialist_id=prompt.specialist_id, is_active=True).exclude(pk=prompt.pk).update(
        is_active=False
    )
    if not prompt.is_active:
        prompt.is_active = True
        prompt.save(update_fields=["is_active"])
    return prompt
