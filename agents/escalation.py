"""A profile's people in the loop: when its conversations go to a person, to which team, on which desk, and when an
idle conversation counts as abandoned (docs/desk.md).

One JSON field, ``AgentProfile.escalation``, read and checked here only: :class:`EscalationSettings` is its typed
form (every key, its default, its meaning), :func:`validate_escalation_settings` the admin's, the YAML import's and
the model's one check, :meth:`EscalationSettings.as_json` what a version stores and an export writes. Pure data: no
ORM, no settings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from django.core.exceptions import ValidationError

TEAM_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
DEFAULT_TEAM = "support"
MAX_TEAMS = 50
MAX_FALLBACKS = 20
MAX_ABANDON_MINUTES = 7 * 24 * 60
ERROR_TEAM = "{where}: {value!r} is not a team name: lowercase letters, digits, - and _, at most 40 characters."


@dataclass(frozen=True)
class EscalationSettings:
    """What a profile does with people (every key optional in the JSON; the defaults below fill the rest).

    * ``enabled`` — customers may ask for a person ("quero falar com um atendente", "a real person please",
      "quiero hablar con una persona"), and the rules below may hand them one; off: the assistants answer
      everything, a request for a person included.
    * ``teams`` — the queues a conversation may wait in, the first the default one.
    * ``after_fallbacks`` — hand over after this many fallback answers in a row (0: never).
    * ``on_loop_stop``, ``on_goal_failure``, ``on_thumbs_down``, ``on_guardrail_block`` — hand over when loop safety
      stops a move, a goal cannot be handled (no plan, or its plan failed), the customer rates an answer down, or
      the input guardrails block a message.
    * ``specialist_tool`` — specialists are offered ``request_human`` (to hand the conversation over themselves).
    * ``desk`` — where escalations go: blank for the platform's own desk, else the name of an external desk the
      operator configured (a signed webhook to the business's contact-center tool).
    * ``abandon_after_minutes`` — a conversation without a customer message for this long is closed: resolved,
      escalated or abandoned (docs/analytics.md, "Outcomes").
    """

    enabled: bool = True
    teams: tuple[str, ...] = (DEFAULT_TEAM,)
    after_fallbacks: int = 0
    on_loop_stop: bool = False
    on_goal_failure: bool = False
    on_thumbs_down: bool = False
    on_guardrail_block: bool = False
    specialist_tool: bool = True
    desk: str = ""
    abandon_after_minutes: int = 30

    @property
    def default_team(self) -> str:
        return self.teams[0]

    def team_of(self, name: str) -> str:
        """``name`` when it is one of the teams, else the default team (a model's or an intent's stale name)."""
        return name if name in self.teams else self.default_team

    def as_json(self) -> dict[str, Any]:
        """Every key, as a version stores it and an export writes it."""
        value = asdict(self)
        value["teams"] = list(self.teams)
        return value

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> EscalationSettings:
        """The settings of a stored (valid) value, its missing keys at their defaults."""
        data = dict(value or {})
        if "teams" in data:
            data["teams"] = tuple(data["teams"]) or (DEFAULT_TEAM,)
        known = {item.name for item in fields(cls)}
        return cls(**{key: item for key, item in data.items() if key in known})


# The keys and the JSON types each may take (bool before int: True is an int to Python).
KEYS: dict[str, str] = {
    "enabled": "boolean",
    "teams": "list",
    "after_fallbacks": "integer",
    "on_loop_stop": "boolean",
    "on_goal_failure": "boolean",
    "on_thumbs_down": "boolean",
    "on_guardrail_block": "boolean",
    "specialist_tool": "boolean",
    "desk": "text",
    "abandon_after_minutes": "integer",
}


def default_escalation() -> dict[str, Any]:
    return EscalationSettings().as_json()


def escalation_problems(value: Any) -> list[tuple[str, str]]:
    """What is wrong with ``value`` as a profile's escalation settings: ``(key, message)`` pairs, each message naming
    its key; empty when it is fine."""
    if value in (None, {}):
        return []
    if not isinstance(value, Mapping):
        return [("escalation", "escalation must be a mapping of settings, e.g. {enabled: true, teams: [support]}.")]
    problems: list[tuple[str, str]] = []
    for key, item in value.items():
        kind = KEYS.get(key)
        where = f"escalation.{key}"
        if kind is None:
            problems.append((key, f"{where} is not a known setting; known: {', '.join(KEYS)}."))
        elif kind == "boolean" and not isinstance(item, bool):
            problems.append((key, f"{where} must be true or false."))
        elif kind == "integer" and (isinstance(item, bool) or not isinstance(item, int)):
            problems.append((key, f"{where} must be a whole number."))
        elif kind == "text" and not isinstance(item, str):
            problems.append((key, f"{where} must be text."))
        elif kind == "list":
            problems += [(key, message) for message in _teams_problems(item)]
    after = value.get("after_fallbacks")
    if isinstance(after, int) and not isinstance(after, bool) and not 0 <= after <= MAX_FALLBACKS:
        problems.append(("after_fallbacks", f"escalation.after_fallbacks must be from 0 (never) to {MAX_FALLBACKS}."))
    minutes = value.get("abandon_after_minutes")
    if isinstance(minutes, int) and not isinstance(minutes, bool) and not 1 <= minutes <= MAX_ABANDON_MINUTES:
        problems.append(
            (
                "abandon_after_minutes",
                f"escalation.abandon_after_minutes must be from 1 to {MAX_ABANDON_MINUTES} (a week).",
            )
        )
    desk = value.get("desk")
    if isinstance(desk, str) and desk and not TEAM_PATTERN.match(desk):
        problems.append(("desk", f"escalation.desk: {desk!r} is not a desk name (blank: the platform's own desk)."))
    return problems


def _teams_problems(teams: Any) -> list[str]:
    if not isinstance(teams, list) or not teams:
        return ["escalation.teams must be a list of one or more team names, the first the default, e.g. [support]."]
    if len(teams) > MAX_TEAMS:
        return [f"escalation.teams: at most {MAX_TEAMS} teams."]
    problems = []
    seen: set[str] = set()
    for index, team in enumerate(teams):
        if not isinstance(team, str) or not TEAM_PATTERN.match(team):
            problems.append(ERROR_TEAM.format(where=f"escalation.teams[{index}]", value=team))
        elif team in seen:
            problems.append(f"escalation.teams[{index}]: {team!r} is listed twice.")
        else:
            seen.add(team)
    return problems


def validate_escalation_settings(value: Any) -> None:
    """The model's validator: raises :class:`ValidationError` with every problem, each naming its key."""
    problems = escalation_problems(value)
    if problems:
        raise ValidationError([message for _, message in problems])


def validate_team_name(value: str) -> None:
    """A team an intent hands its conversations to (blank: the assistants answer it)."""
    if value and not TEAM_PATTERN.match(value):
        raise ValidationError(ERROR_TEAM.format(where="team", value=value))
