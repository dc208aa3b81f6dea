"""Reads of agent data that the faces above share."""

from __future__ import annotations

from collections.abc import Iterable

from agents.models import PROFILE_TRANSLATED, SPECIALIST_TRANSLATED, AgentProfile, ExternalDesk, Specialist
from common.translation_forms import rows_missing

ERROR_UNKNOWN_PROFILE = "Unknown profile {profile!r}."
ERROR_UNKNOWN_DESK = (
    "{desk!r} is not an external desk the operator set up and enabled ({known}); leave it blank for the platform's "
    "own desk."
)


def profile_pk(agent_id: str) -> int | None:
    """The primary key of the profile whose ``agent_id`` this is, ``None`` when there is none; a query parameter
    naming a profile that does not exist is refused with :data:`ERROR_UNKNOWN_PROFILE`."""
    return AgentProfile.objects.filter(agent_id=agent_id).values_list("pk", flat=True).first()


def external_desk_names(*, enabled_only: bool = True) -> list[str]:
    """The external desks' names, sorted: those a profile may choose (enabled), or all of them."""
    desks = ExternalDesk.objects.filter(enabled=True) if enabled_only else ExternalDesk.objects.all()
    return list(desks.order_by("name").values_list("name", flat=True))


def external_desk_refusal(*, desk: str, stored: str = "") -> str | None:
    """Why a profile may not send its escalations to ``desk``, ``None`` when it may: blank (the platform's desk), an
    enabled external desk, or the desk it names already (``stored``: a file that repeats what is stored, or a form
    saved for another field, passes while the operator has the desk switched off). The admin's profile form and the
    YAML import ask it."""
    if not desk or desk == stored:
        return None
    known = external_desk_names()
    if desk in known:
        return None
    return ERROR_UNKNOWN_DESK.format(desk=desk, known=", ".join(known) or "there is none")


def external_desk_get(*, name: str) -> ExternalDesk | None:
    """The enabled external desk ``name``, ``None`` when there is none (or it is off)."""
    return ExternalDesk.objects.filter(name=name, enabled=True).first() if name else None


def external_desk_profiles(*, name: str) -> list[str]:
    """The profiles whose escalation settings name the desk ``name`` (their ``agent_id``s)."""
    return list(
        AgentProfile.objects.filter(escalation__desk=name).order_by("agent_id").values_list("agent_id", flat=True)
    )


# How the admin's warning names a specialist's texts.
SPECIALIST_TEXT_NAMES = {"display_name": "display name", "description": "description"}


def specialist_translations_missing(*, specialists: Iterable[Specialist], language: str, named: bool) -> list[str]:
    """A line per text of ``specialists`` (written in ``language``, their profile's) that lacks another language:
    "display name lacks en, es", each prefixed "specialist <name>: " when ``named``."""
    return rows_missing(
        ((f"specialist {specialist.name}" if named else "", specialist) for specialist in specialists),
        SPECIALIST_TRANSLATED,
        own=language,
        labels=SPECIALIST_TEXT_NAMES,
    )


def profile_translations_missing(profile: AgentProfile) -> list[str]:
    """A line per text of ``profile`` itself (its name, its description) that lacks another language: "profile name
    lacks en"."""
    return rows_missing(
        [("", profile)],
        PROFILE_TRANSLATED,
        own=profile.language,
        labels={"name": "profile name", "description": "profile description"},
    )
