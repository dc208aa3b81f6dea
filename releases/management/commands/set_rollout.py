"""``set_rollout``: show or change a rollout flag from a shell — the rollback that needs no deploy."""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from django.utils.timezone import localtime

from routing.models import RolloutFlag, RolloutFlagChange, Stickiness
from routing.public import (
    ERROR_FLAG_UNKNOWN,
    RolloutError,
    RolloutFlagUnknown,
    rollout_flag_changes,
    rollout_flag_get,
    rollout_flag_set,
    rollout_flag_validate,
    rollout_tenant_override_set,
    rollout_user_override_set,
)

SWITCHES = {"on": True, "off": False, "clear": None}


def _actor() -> str:
    try:
        who = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (some containers)
        who = "unknown user"
    return f"manage.py set_rollout ({who})"


def _unknown(key: str) -> str:
    return ERROR_FLAG_UNKNOWN.format(key=key) + " Create it with --create (or in the admin)."


@contextmanager
def _refused_as(option: str, *, key: str) -> Iterator[None]:
    """A refused write becomes a :class:`CommandError` naming the option (or the unknown flag)."""
    try:
        yield
    except RolloutFlagUnknown:
        raise CommandError(_unknown(key)) from None
    except RolloutError as exc:
        raise CommandError(f"{option}: {exc}") from None


def _on_off(value: bool) -> str:
    return "on" if value else "off"


def _switch(option: str, subject: str, value: str) -> bool | None:
    try:
        return SWITCHES[value.lower()]
    except KeyError:
        raise CommandError(f"{option} {subject!r}: expected on, off or clear, got {value!r}.") from None


class Command(BaseCommand):
    help = (
        "Show or change a rollout flag; with no option, print its state. Examples: "
        "`set_rollout multi_agent --override-user ADMIN_ID on --percentage 0` (admin only), "
        "`set_rollout multi_agent --percentage 10`, `set_rollout multi_agent --percentage 100`; "
        "`set_rollout multi_agent --kill` is the instant rollback: everyone on the single-agent path from their "
        "next message, in every process, without a deploy (--revive undoes it). Every change is recorded in the "
        "flag's history (who, when, old -> new), shown in the admin. Nothing is written if any option is invalid."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key", help="The flag, e.g. multi_agent.")
        parser.add_argument("--percentage", type=int, metavar="N", help="Share of users that get the flag, 0–100.")
        kill = parser.add_mutually_exclusive_group()
        kill.add_argument("--kill", action="store_true", help="Kill switch on: off for everyone, overrides included.")
        kill.add_argument("--revive", action="store_true", help="Kill switch off: percentage and overrides apply.")
        parser.add_argument("--stickiness", choices=Stickiness.values, help="What a user's bucket is hashed from.")
        parser.add_argument(
            "--override-user",
            nargs=2,
            action="append",
            default=[],
            metavar=("USER_ID", "on|off|clear"),
            help="Always on or off for this user id, or clear the override. Repeatable.",
        )
        parser.add_argument(
            "--override-tenant",
            nargs=2,
            action="append",
            default=[],
            metavar=("TENANT", "on|off|clear"),
            help="Always on or off for every user of this tenant (slug), or clear the override. Repeatable.",
        )
        parser.add_argument("--description", help="What the flag switches.")
        parser.add_argument("--create", action="store_true", help="Create the flag if it does not exist.")

    def handle(self, *args, **options) -> None:
        key: str = options["key"]
        percentage: int | None = options["percentage"]
        try:
            rollout_flag_validate(percentage=percentage)
        except RolloutError as exc:
            raise CommandError(f"--percentage: {exc}") from None
        users = [(user_id, _switch("--override-user", user_id, value)) for user_id, value in options["override_user"]]
        tenants = [(slug, _switch("--override-tenant", slug, value)) for slug, value in options["override_tenant"]]
        kill_switch = True if options["kill"] else False if options["revive"] else None
        flag_fields = {
            "percentage": percentage,
            "kill_switch": kill_switch,
            "stickiness": options["stickiness"],
            "description": options["description"],
        }
        changing = options["create"] or users or tenants or any(v is not None for v in flag_fields.values())
        if not changing:
            self._show(key, written=None)
            return

        actor = _actor()
        written: list[RolloutFlagChange] = []
        with transaction.atomic():  # all or nothing: an invalid override undoes the flag's changes too
            if options["create"] or any(value is not None for value in flag_fields.values()):
                with _refused_as("--create", key=key):  # the only refusal left here: a key that is not a slug
                    written += rollout_flag_set(key=key, actor=actor, create=options["create"], **flag_fields)
            for user_id, enabled in users:
                with _refused_as(f"--override-user {user_id!r}", key=key):
                    written += rollout_user_override_set(key=key, user_id=user_id, enabled=enabled, actor=actor)
            for slug, enabled in tenants:
                with _refused_as(f"--override-tenant {slug!r}", key=key):
                    written += rollout_tenant_override_set(key=key, tenant_slug=slug, enabled=enabled, actor=actor)
        self._show(key, written=written)

    def _show(self, key: str, *, written: list[RolloutFlagChange] | None) -> None:
        flag = rollout_flag_get(key=key)
        if flag is None:
            raise CommandError(_unknown(key))
        self.stdout.write(self._state(flag))
        if written is None:
            recent = rollout_flag_changes(key=key, limit=5)
            if recent:
                self.stdout.write("recent changes (newest first):")
                self.stdout.write("\n".join(self._change_line(change) for change in recent))
            return
        if not written:
            self.stdout.write("No change: the flag already had these values; no history written.")
            return
        self.stdout.write(f"history written ({len(written)}):")
        self.stdout.write("\n".join(self._change_line(change) for change in written))
        self.stdout.write("Every process uses the new values from its next message.")

    @staticmethod
    def _state(flag: RolloutFlag) -> str:
        users = ", ".join(f"{override.user_id} {_on_off(override.enabled)}" for override in flag.user_overrides.all())
        tenants = ", ".join(
            f"{override.tenant.slug} {_on_off(override.enabled)}" for override in flag.tenant_overrides.all()
        )
        lines = [
            f"{flag.key}" + (f" — {flag.description}" if flag.description else ""),
            f"  kill switch (everyone off): {_on_off(flag.kill_switch)}",
            f"  percentage: {flag.percentage}",
            f"  stickiness: {flag.stickiness}",
            f"  user overrides: {users or 'none'}",
            f"  tenant overrides: {tenants or 'none'}",
        ]
        return "\n".join(lines)

    @staticmethod
    def _change_line(change: RolloutFlagChange) -> str:
        when = localtime(change.changed_at).strftime("%Y-%m-%d %H:%M:%S %Z")
        return f"  {when}  {change.what}: {change.old_value} → {change.new_value}  by {change.actor}"
