"""Writes of routing data: the keyword rule and rollout flags (with their history)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction

from common.history.registry import user_id_pseudonym
from routing.models import (
    Intent,
    RolloutFlag,
    RolloutFlagChange,
    RolloutTenantOverride,
    RolloutUserOverride,
    Stickiness,
)
from routing.selectors import keyword_conflicts
from tenants.models import Tenant

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # settings.AUTH_USER_MODEL: RolloutFlagChange.changed_by

ERROR_KEYWORD_TAKEN = "Keyword {keyword!r} is already used by the enabled intent {intent!r} of this profile."


def keywords_validate_unique(*, intent: Intent, texts: list[str]) -> None:
    """Refuse keywords that another enabled intent of the same profile already uses.

    Raises :class:`ValidationError` whose message names the other intent. A
    disabled intent may share keywords (it does not route); enabling it runs
    this check again.
    """
    if not intent.enabled:
        return
    conflicts = keyword_conflicts(profile_id=intent.profile_id, texts=texts, exclude_intent_id=intent.pk)
    if conflicts:
        raise ValidationError(
            [ERROR_KEYWORD_TAKEN.format(keyword=keyword, intent=other) for keyword, other in conflicts.items()],
            code="keyword_taken",
        )


# -- rollout flags -------------------------------------------------------------------
# Every writer (admin, set_rollout, a shell) goes through these functions: they hold the flag's row lock while
# they compare and write, and record one RolloutFlagChange per value that actually changed. The saves fire the
# configuration-version signals, so every process sees the change on its next message (routing/apps.py).

ERROR_FLAG_UNKNOWN = "There is no rollout flag {key!r}."
ERROR_FLAG_KEY = "A rollout flag key is a slug (letters, digits, _ and -), got {key!r}."
ERROR_PERCENTAGE = "The percentage must be a whole number from 0 to 100, got {value!r}."
ERROR_STICKINESS = "Stickiness must be one of {choices}, got {value!r}."
ERROR_USER_ID = "A user id is 1 to 200 characters, got {value!r}."
ERROR_TENANT_UNKNOWN = "There is no tenant {slug!r}."

ABSENT = "none"  # the old value of something new, the new value of something removed


class RolloutError(ValueError):
    """A rollout write was refused (unknown flag or tenant, a value out of range); nothing was written."""


class RolloutFlagUnknown(RolloutError):
    pass


def rollout_actor_admin(*, user: AbstractBaseUser) -> str:
    """The ``actor`` of a change made in the admin."""
    return f"admin: {user.get_username()}"


ACTOR_ADMIN = "admin: "
ACTOR_COMMAND = "manage.py "
ACTOR_MIGRATION = "migration "
# What the rollout guard's periodic check and the old ``rollout watch`` (which recorded its own name) wrote.
ACTOR_WORDS = {"beat": "the automatic check", "watch": "the command line (rollout watch)"}


def rollout_actor_words(actor: str, *, user: AbstractBaseUser | None = None) -> str:
    """Who made a rollout change (a flag's, or a plan's decision), as people say it: the user's name when known;
    else the admin user the actor names, "the automatic check", "the command line (who ran it)", "the platform's
    set-up" (a migration), or the actor as recorded."""
    if user is not None:
        return user.get_username()
    if actor.startswith(ACTOR_ADMIN):
        return actor.removeprefix(ACTOR_ADMIN)
    if actor.startswith(ACTOR_COMMAND):
        who = actor.partition("(")[2].rstrip(")")
        return f"the command line ({who})" if who else "the command line"
    if actor.startswith(ACTOR_MIGRATION):
        return "the platform's set-up"
    return ACTOR_WORDS.get(actor, actor)


def _on_off(value: bool) -> str:
    return "on" if value else "off"


def _override_value(override: RolloutUserOverride | RolloutTenantOverride | None) -> str:
    if override is None:
        return ABSENT
    value = _on_off(override.enabled)
    return f"{value} ({override.note})" if override.note else value


def _flag_summary(flag: RolloutFlag) -> str:
    return f"kill_switch={_on_off(flag.kill_switch)}, percentage={flag.percentage}, stickiness={flag.stickiness}"


def _flag_locked(key: str) -> RolloutFlag:
    """The flag's row, locked until the surrounding transaction ends; raises :class:`RolloutFlagUnknown`."""
    flag = RolloutFlag.objects.select_for_update().filter(key=key).first()
    if flag is None:
        raise RolloutFlagUnknown(ERROR_FLAG_UNKNOWN.format(key=key))
    return flag


def _record(
    *, flag: RolloutFlag, what: str, old: str, new: str, actor: str, user: User | None
) -> RolloutFlagChange | None:
    if old == new:
        return None
    return RolloutFlagChange.objects.create(
        flag=flag, flag_key=flag.key, what=what, old_value=old, new_value=new, actor=actor, changed_by=user
    )


def _override_write(
    *,
    model: type[RolloutUserOverride | RolloutTenantOverride],
    flag: RolloutFlag,
    lookup: dict[str, object],
    enabled: bool | None,
    note: str | None,
) -> tuple[str, str]:
    """Create, change or (``enabled`` None) delete the flag's override found by ``lookup``; its old and new value."""
    override = model.objects.filter(flag=flag, **lookup).first()
    old = _override_value(override)
    if enabled is None:
        if override is not None:
            override.delete()
        return old, ABSENT
    if override is None:
        override = model.objects.create(flag=flag, **lookup, enabled=enabled, note=note or "")
        return old, _override_value(override)
    note = override.note if note is None else note
    if (enabled, note) != (override.enabled, override.note):
        override.enabled, override.note = enabled, note
        override.save(update_fields=["enabled", "note"])
    return old, _override_value(override)


def _override_recorded(
    *, flag: RolloutFlag, what: str, old: str, new: str, actor: str, user: User | None
) -> list[RolloutFlagChange]:
    change = _record(flag=flag, what=what, old=old, new=new, actor=actor, user=user)
    if change is None:
        return []
    # The flag's "updated" column says when anything about it last changed, its overrides included.
    flag.save(update_fields=["updated_at"])
    return [change]


def rollout_flag_validate(*, percentage: int | None = None, stickiness: str | None = None) -> None:
    """Raise :class:`RolloutError` for a percentage outside 0–100 or an unknown stickiness (``None``: not given)."""
    if percentage is not None and (isinstance(percentage, bool) or not isinstance(percentage, int)):
        raise RolloutError(ERROR_PERCENTAGE.format(value=percentage))
    if percentage is not None and not 0 <= percentage <= 100:
        raise RolloutError(ERROR_PERCENTAGE.format(value=percentage))
    if stickiness is not None and stickiness not in Stickiness.values:
        raise RolloutError(ERROR_STICKINESS.format(choices=", ".join(Stickiness.values), value=stickiness))


@transaction.atomic
def rollout_flag_set(
    *,
    key: str,
    actor: str,
    user: User | None = None,
    percentage: int | None = None,
    kill_switch: bool | None = None,
    stickiness: str | None = None,
    description: str | None = None,
    create: bool = False,
) -> list[RolloutFlagChange]:
    """Set the given fields of flag ``key`` (``None`` leaves a field alone); return the history rows written.

    One row per field whose value changed (``description``, ``kill_switch``, ``percentage``, ``stickiness``),
    none when nothing did. With ``create`` a missing flag is made from the given values (percentage 0, no kill
    switch, user-id stickiness otherwise) and recorded as one ``created`` row; two concurrent creations of one
    key leave one flag and an ``IntegrityError`` for the other. Holds the flag's row lock
    (``select_for_update``) from the read to the writes, so concurrent writers apply one after the other and
    each row's old value is what it replaced. Raises :class:`RolloutFlagUnknown` for a missing flag without
    ``create`` and :class:`RolloutError` for a value out of range.
    """
    rollout_flag_validate(percentage=percentage, stickiness=stickiness)
    try:
        flag = _flag_locked(key)
    except RolloutFlagUnknown:
        if not create:
            raise
        try:
            validate_slug(key)
        except ValidationError:
            raise RolloutError(ERROR_FLAG_KEY.format(key=key)) from None
        flag = RolloutFlag.objects.create(
            key=key,
            description=description or "",
            kill_switch=bool(kill_switch),
            percentage=percentage or 0,
            stickiness=stickiness or Stickiness.USER_ID,
        )
        change = _record(flag=flag, what="created", old=ABSENT, new=_flag_summary(flag), actor=actor, user=user)
        return [change] if change else []

    wanted: dict[str, Any] = {  # a value of each field's own type; None: leave it as it is
        "description": description,
        "kill_switch": kill_switch,
        "percentage": percentage,
        "stickiness": stickiness,
    }
    changed: list[tuple[str, str, str]] = []
    for field, value in wanted.items():
        old = getattr(flag, field)
        if value is None or value == old:
            continue
        setattr(flag, field, value)
        shown = _on_off if field == "kill_switch" else str
        changed.append((field, shown(old), shown(value)))
    if not changed:
        return []
    flag.save(update_fields=[field for field, _, _ in changed] + ["updated_at"])
    return [
        change
        for field, old, new in changed
        if (change := _record(flag=flag, what=field, old=old, new=new, actor=actor, user=user))
    ]


@transaction.atomic
def rollout_flag_untouched_set(*, key: str, percentage: int, actor: str) -> list[RolloutFlagChange]:
    """Set flag ``key`` to ``percentage`` if nobody has changed it since it was made at 0 %: its history holds its
    creation alone, its kill switch is off. What loading the demo does to the ``multi_agent`` flag the migration
    makes, so that a demo install routes as its profiles say while a restart never undoes an operator's choice.

    Returns the history row written (``percentage``, by ``actor``), none when the flag is missing or was changed.
    Holds the flag's row lock, as :func:`rollout_flag_set`.
    """
    try:
        flag = _flag_locked(key)
    except RolloutFlagUnknown:
        return []
    if flag.percentage or flag.kill_switch or flag.changes.exclude(what="created").exists():
        return []
    return rollout_flag_set(key=key, actor=actor, percentage=percentage)


@transaction.atomic
def rollout_user_override_set(
    *,
    key: str,
    user_id: str,
    enabled: bool | None,
    actor: str,
    user: User | None = None,
    note: str | None = None,
) -> list[RolloutFlagChange]:
    """Turn flag ``key`` on (``True``) or off (``False``) for one user whatever the percentage, or remove the
    override (``None``); ``note`` ``None`` keeps the current note. Returns the history row written
    (``user_override:<user_id>``, the id as :func:`common.history.registry.user_id_pseudonym` shows it), none when
    nothing changed. Holds the flag's row lock; raises
    :class:`RolloutFlagUnknown` or :class:`RolloutError` (an empty or over-long user id).
    """
    if not user_id or len(user_id) > 200:
        raise RolloutError(ERROR_USER_ID.format(value=user_id))
    flag = _flag_locked(key)
    old, new = _override_write(
        model=RolloutUserOverride, flag=flag, lookup={"user_id": user_id}, enabled=enabled, note=note
    )
    return _override_recorded(
        flag=flag, what=f"user_override:{user_id_pseudonym(user_id)}", old=old, new=new, actor=actor, user=user
    )


@transaction.atomic
def rollout_tenant_override_set(
    *,
    key: str,
    tenant_slug: str,
    enabled: bool | None,
    actor: str,
    user: User | None = None,
    note: str | None = None,
) -> list[RolloutFlagChange]:
    """As :func:`rollout_user_override_set`, for every user of one tenant (``tenant_override:<slug>``); a user
    override wins over a tenant override. Raises :class:`RolloutError` for an unknown tenant.
    """
    tenant = Tenant.objects.filter(slug=tenant_slug).first()
    if tenant is None:
        raise RolloutError(ERROR_TENANT_UNKNOWN.format(slug=tenant_slug))
    flag = _flag_locked(key)
    old, new = _override_write(
        model=RolloutTenantOverride, flag=flag, lookup={"tenant": tenant}, enabled=enabled, note=note
    )
    return _override_recorded(
        flag=flag, what=f"tenant_override:{tenant.slug}", old=old, new=new, actor=actor, user=user
    )


@transaction.atomic
def rollout_flag_delete(*, key: str, actor: str, user: User | None = None) -> RolloutFlagChange:
    """Delete flag ``key`` with its overrides, recording a ``deleted`` row; its history stays (by ``flag_key``).

    The kill switch, not deletion, is the rollback: it keeps the percentage and overrides for a revive.
    Holds the flag's row lock; raises :class:`RolloutFlagUnknown`.
    """
    flag = _flag_locked(key)
    users = flag.user_overrides.count()
    tenants = flag.tenant_overrides.count()
    change = RolloutFlagChange.objects.create(
        flag=flag,
        flag_key=flag.key,
        what="deleted",
        old_value=f"{_flag_summary(flag)}, user overrides={users}, tenant overrides={tenants}",
        new_value=ABSENT,
        actor=actor,
        changed_by=user,
    )
    flag.delete()
    change.refresh_from_db()
    return change
