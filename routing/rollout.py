"""Percentage rollout flags: pure evaluation over plain data, no ORM, no settings.

A flag is switched on for a stable share of subjects. Each subject gets a
bucket from 1 to 100 from the flag's key and its stickiness value (the user
id or the session id), the same number every Unleash SDK computes for it
(Node, Java, Go, .NET, Python and the Rust ``yggdrasil`` engine call it the
*normalized* value)::

    bucket = murmur3_x86_32(utf8(f"{flag_key}:{stickiness_value}"), seed 0, unsigned) % 100 + 1
    in     = percentage > 0 and bucket <= percentage

So a flag here puts the same people in as an Unleash ``flexibleRollout``
strategy with ``groupId`` = the flag key and ``stickiness`` = ``userId`` or
``sessionId``; the public Unleash client-specification vectors check this in
``routing/tests/test_rollout.py``. The value is hashed as the client sent it,
in memory only: what an evaluation shows (and the platform stores) is the
caller's pseudonym of it, or nothing, since a user id may be an e-mail.
Two properties follow from the formula and are what make a rollout safe to
turn up and down:

- *sticky*: a subject's bucket never changes, so it gets the same answer on
  every message and in every process;
- *monotonic*: raising the percentage only adds subjects, and lowering it back
  gives exactly the earlier cohort (10 % → 20 % → 10 % is the same 10 %).

Decision order, recorded as :attr:`FlagEvaluation.reason`:

1. ``unknown_flag``        — no flag of that key: off;
2. ``kill_switch``         — off for everyone, overrides included;
3. ``user_override``       — the user is listed on the flag: on or off as listed;
4. ``tenant_override``     — the tenant is listed on the flag: on or off as listed;
5. ``no_stickiness_value`` — the subject has no value for the flag's stickiness
   (no user id, or no session id): off, never a random bucket, so a subject
   cannot flip between messages;
6. ``bucket``              — on when the bucket is within the percentage.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import mmh3

STICKINESS_USER = "user_id"
STICKINESS_SESSION = "session_id"

REASON_KILL_SWITCH = "kill_switch"
REASON_USER_OVERRIDE = "user_override"
REASON_TENANT_OVERRIDE = "tenant_override"
REASON_BUCKET = "bucket"
REASON_NO_STICKINESS = "no_stickiness_value"
REASON_UNKNOWN_FLAG = "unknown_flag"
# The conversation keeps the cohort it started in, whatever the bucket says now (conversations.graph).
REASON_CONVERSATION = "conversation_cohort"

# The flag that rolls the multi-agent graph out, and the cohorts it puts messages in.
MULTI_AGENT_FLAG = "multi_agent"
COHORT_MULTI_AGENT = "multi_agent"
COHORT_SINGLE_AGENT = "single_agent"


def bucket(group_id: str, identifier: str, *, modulus: int = 100, seed: int = 0) -> int:
    """The subject's bucket, from 1 to ``modulus``: Unleash's ``normalized(identifier, group_id)``.

    ``group_id`` is the flag key for rollouts. The text is hashed as UTF-8 and
    the hash read unsigned, as the SDKs do; the same arguments always give the
    same number, in any process or language.
    """
    return mmh3.hash(f"{group_id}:{identifier}", seed, signed=False) % modulus + 1


def rollout_includes(percentage: int, group_id: str, identifier: str) -> bool:
    """Whether ``identifier`` is in the first ``percentage`` percent of ``group_id``'s rollout.

    Nobody at 0 (or below), everybody at 100 (or above); in between, the
    cohort at a lower percentage is always part of the cohort at a higher one.
    """
    return _within(percentage, bucket(group_id, identifier))


def _within(percentage: int, number: int) -> bool:
    return percentage > 0 and number <= percentage


@dataclass(frozen=True)
class FlagSpec:
    """One rollout flag as the evaluation needs it, read from the database elsewhere.

    ``percentage`` outside 0..100 behaves as its nearest end. A ``stickiness``
    other than :data:`STICKINESS_USER` or :data:`STICKINESS_SESSION` has no
    value for any subject, so only overrides can turn the flag on.
    """

    key: str
    kill_switch: bool = False  # True = off for everyone, overrides included
    percentage: int = 0  # 0..100
    stickiness: str = STICKINESS_USER
    user_overrides: Mapping[str, bool] = field(default_factory=dict)  # user id -> on/off
    tenant_overrides: Mapping[str, bool] = field(default_factory=dict)  # tenant slug -> on/off


@dataclass(frozen=True)
class FlagEvaluation:
    """The answer for one flag and one subject, with the evidence for it (kept in ``metadata.flags``).

    ``bucket`` is filled whenever the subject has a stickiness value, also when
    an override or the kill switch decided: it tells where the subject would
    land once the override is removed. ``stickiness_value`` is the value as it
    may be shown (the pseudonym :func:`flag_evaluate` was given), never the
    value itself.
    """

    flag: str
    enabled: bool
    reason: str
    percentage: int
    stickiness: str
    stickiness_value: str = ""
    bucket: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: strings, a bool, ints and ``None`` only. Written out (every message's turn asks for it):
        ``dataclasses.asdict`` deep-copies each plain value, about ten times the cost."""
        return {
            "flag": self.flag,
            "enabled": self.enabled,
            "reason": self.reason,
            "percentage": self.percentage,
            "stickiness": self.stickiness,
            "stickiness_value": self.stickiness_value,
            "bucket": self.bucket,
        }


def flag_evaluate(
    flag: FlagSpec | None,
    *,
    key: str,
    user_id: str = "",
    session_id: str = "",
    tenant: str = "",
    pseudonym: Callable[[str], str] | None = None,
) -> FlagEvaluation:
    """Whether ``flag`` is on for this subject, and why (see the module docstring for the order).

    ``key`` is the flag asked for, reported as :attr:`FlagEvaluation.flag`;
    ``flag`` is ``None`` when no flag has that key. The bucket is hashed from
    ``flag.key`` and the raw stickiness value; the evaluation keeps only
    ``pseudonym(value)`` of it, or ``""`` without ``pseudonym``. Empty
    ``user_id``, ``session_id`` or ``tenant`` mean the subject has none, and
    never match an override.
    """
    if flag is None:
        return FlagEvaluation(flag=key, enabled=False, reason=REASON_UNKNOWN_FLAG, percentage=0, stickiness="")

    value = {STICKINESS_USER: user_id, STICKINESS_SESSION: session_id}.get(flag.stickiness, "")
    found = bucket(flag.key, value) if value else None
    shown = pseudonym(value) if value and pseudonym is not None else ""

    def answer(enabled: bool, reason: str) -> FlagEvaluation:
        return FlagEvaluation(
            flag=key,
            enabled=enabled,
            reason=reason,
            percentage=flag.percentage,
            stickiness=flag.stickiness,
            stickiness_value=shown,
            bucket=found,
        )

    if flag.kill_switch:
        return answer(False, REASON_KILL_SWITCH)
    if user_id and user_id in flag.user_overrides:
        return answer(bool(flag.user_overrides[user_id]), REASON_USER_OVERRIDE)
    if tenant and tenant in flag.tenant_overrides:
        return answer(bool(flag.tenant_overrides[tenant]), REASON_TENANT_OVERRIDE)
    if found is None:
        return answer(False, REASON_NO_STICKINESS)
    return answer(_within(flag.percentage, found), REASON_BUCKET)
