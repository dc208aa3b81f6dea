"""Reads of agent data that the faces above share."""

from __future__ import annotations

from agents.models import AgentProfile

ERROR_UNKNOWN_PROFILE = "Unknown profile {profile!r}."


def profile_pk(agent_id: str) -> int | None:
    """The primary key of the profile whose ``agent_id`` this is, ``None`` when there is none; a query parameter
    naming a profile that does not exist is refused with :data:`ERROR_UNKNOWN_PROFILE`."""
    return AgentProfile.objects.filter(agent_id=agent_id).values_list("pk", flat=True).first()
