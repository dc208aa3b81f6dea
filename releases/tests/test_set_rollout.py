"""``python manage.py set_rollout``: a rollout's phases and rollback from a shell, with history, all or nothing."""

from __future__ import annotations

import getpass
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from common.personal_data import customer_pseudonym
from routing import snapshot
from routing.models import RolloutFlag, RolloutFlagChange
from routing.services import rollout_flag_set, rollout_flag_untouched_set

pytestmark = pytest.mark.django_db

ACTOR = f"manage.py set_rollout ({getpass.getuser()})"


def pseudonym(user_id: str) -> str:
    """A user override's customer id as the flag's change history records it."""
    return customer_pseudonym(user_id, key=settings.SECRET_KEY)


@pytest.fixture
def flag() -> RolloutFlag:
    """``multi_agent`` as the migration leaves it (percentage 0), with its history cleared."""
    rollout_flag_set(key="multi_agent", actor="test", create=True)
    RolloutFlagChange.objects.all().delete()
    return RolloutFlag.objects.get(key="multi_agent")


def set_rollout(*args: str) -> str:
    out = StringIO()
    call_command("set_rollout", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def refused(*args: str) -> str:
    with pytest.raises(CommandError) as error:
        set_rollout(*args)
    return str(error.value)


def changes() -> list[tuple[str, str, str, str]]:
    rows = RolloutFlagChange.objects.order_by("changed_at", "id")
    return list(rows.values_list("what", "old_value", "new_value", "actor"))


def test_with_no_option_it_prints_the_flags_state_and_writes_nothing(flag):
    out = set_rollout("multi_agent")

    assert "kill switch (everyone off): off" in out
    assert "percentage: 0" in out
    assert "stickiness: user_id" in out
    assert "user overrides: none" in out
    assert changes() == []


def test_setting_the_percentage_records_the_old_and_new_value_and_the_os_user(flag):
    out = set_rollout("multi_agent", "--percentage", "10")

    assert RolloutFlag.objects.get(pk=flag.pk).percentage == 10
    assert changes() == [("percentage", "0", "10", ACTOR)]
    assert RolloutFlagChange.objects.get().changed_by is None
    assert "percentage: 10" in out
    assert "percentage: 0 → 10" in out  # the history rows written are printed


def test_a_user_override_can_be_turned_on_off_and_cleared(flag):
    set_rollout("multi_agent", "--override-user", "alice", "on")
    set_rollout("multi_agent", "--override-user", "alice", "off")
    out = set_rollout("multi_agent", "--override-user", "alice", "clear")

    assert not flag.user_overrides.exists()
    assert changes() == [
        (f"user_override:{pseudonym('alice')}", "none", "on", ACTOR),
        (f"user_override:{pseudonym('alice')}", "on", "off", ACTOR),
        (f"user_override:{pseudonym('alice')}", "off", "none", ACTOR),
    ]
    assert "user overrides: none" in out


def test_overrides_are_repeatable_and_tenants_are_named_by_slug(flag, tenant):
    out = set_rollout(
        "multi_agent",
        "--override-user",
        "alice",
        "on",
        "--override-user",
        "bob",
        "OFF",
        "--override-tenant",
        "tenant_a",
        "on",
    )

    assert dict(flag.user_overrides.values_list("user_id", "enabled")) == {"alice": True, "bob": False}
    assert flag.tenant_overrides.get().tenant == tenant
    assert "user overrides: alice on, bob off" in out
    assert "tenant overrides: tenant_a on" in out
    assert [what for what, *_ in changes()] == [
        f"user_override:{pseudonym('alice')}",
        f"user_override:{pseudonym('bob')}",
        "tenant_override:tenant_a",
    ]


def test_kill_is_the_instant_rollback_and_revive_undoes_it(flag):
    set_rollout("multi_agent", "--percentage", "100")
    set_rollout("multi_agent", "--kill")

    spec = snapshot.current().flags["multi_agent"]
    assert spec.kill_switch and spec.percentage == 100  # the percentage is kept for the revive

    set_rollout("multi_agent", "--revive")
    assert not snapshot.current().flags["multi_agent"].kill_switch
    assert changes() == [
        ("percentage", "0", "100", ACTOR),
        ("kill_switch", "off", "on", ACTOR),
        ("kill_switch", "on", "off", ACTOR),
    ]


def test_repeating_a_change_writes_no_history_and_says_so(flag):
    set_rollout("multi_agent", "--percentage", "10", "--override-user", "alice", "on")
    out = set_rollout("multi_agent", "--percentage", "10", "--override-user", "alice", "on")

    assert len(changes()) == 2
    assert "No change" in out


def test_seed_003s_phases_and_rollback_run_as_documented(flag):
    set_rollout("multi_agent", "--override-user", "admin_user", "on", "--percentage", "0")
    set_rollout("multi_agent", "--percentage", "10")
    set_rollout("multi_agent", "--percentage", "100")
    set_rollout("multi_agent", "--kill")

    flag.refresh_from_db()
    assert (flag.percentage, flag.kill_switch) == (100, True)
    assert [(what, new) for what, _, new, _ in changes()] == [
        (f"user_override:{pseudonym('admin_user')}", "on"),
        ("percentage", "10"),
        ("percentage", "100"),
        ("kill_switch", "on"),
    ]


def test_create_makes_a_new_flag_and_records_it(db):
    out = set_rollout("new_checkout", "--create", "--percentage", "5", "--description", "The new checkout.")

    flag = RolloutFlag.objects.get(key="new_checkout")
    assert (flag.percentage, flag.description) == (5, "The new checkout.")
    assert changes()[-1] == ("created", "none", "kill_switch=off, percentage=5, stickiness=user_id", ACTOR)
    assert "new_checkout — The new checkout." in out


# -- refusals: the message names the option, nothing is written -----------------------------------


@pytest.mark.parametrize("value", ["101", "-1"])
def test_a_percentage_outside_0_to_100_is_refused_naming_the_option(flag, value):
    assert "--percentage" in refused("multi_agent", "--percentage", value)
    assert RolloutFlag.objects.get(pk=flag.pk).percentage == 0
    assert changes() == []


def test_a_percentage_that_is_not_a_number_is_refused_naming_the_option(flag):
    assert "--percentage" in refused("multi_agent", "--percentage", "ten")


def test_an_override_that_is_not_on_off_or_clear_is_refused_naming_the_option_and_nothing_is_written(flag):
    message = refused("multi_agent", "--percentage", "10", "--override-user", "alice", "yes")

    assert "--override-user 'alice'" in message
    assert "on, off or clear" in message
    assert changes() == []
    assert RolloutFlag.objects.get(pk=flag.pk).percentage == 0


def test_an_unknown_tenant_undoes_the_other_changes_of_the_same_command(flag):
    message = refused("multi_agent", "--percentage", "50", "--override-tenant", "ghost", "on")

    assert "--override-tenant 'ghost'" in message
    assert RolloutFlag.objects.get(pk=flag.pk).percentage == 0
    assert changes() == []


def test_an_unknown_flag_is_refused_and_not_created(db):
    message = refused("ghost", "--percentage", "10")

    assert "'ghost'" in message and "--create" in message
    assert not RolloutFlag.objects.filter(key="ghost").exists()
    assert "'ghost'" in refused("ghost")


def test_kill_and_revive_together_are_refused(flag):
    assert "--revive" in refused("multi_agent", "--kill", "--revive")


def test_an_unknown_stickiness_is_refused_naming_the_option(flag):
    assert "--stickiness" in refused("multi_agent", "--stickiness", "device_id")


# -- the demo's rollout (seed_demo --multi-agent-for-everyone) -----------------------------------------------------


def test_an_untouched_flag_is_set_once_with_a_history_row_naming_who(flag):
    actor = "manage.py seed_demo (the demo)"

    written = rollout_flag_untouched_set(key="multi_agent", percentage=100, actor=actor)

    assert [(row.what, row.old_value, row.new_value, row.actor) for row in written] == [
        ("percentage", "0", "100", actor)
    ]
    assert RolloutFlag.objects.get(pk=flag.pk).percentage == 100
    assert rollout_flag_untouched_set(key="multi_agent", percentage=100, actor=actor) == []
    assert len(changes()) == 1


@pytest.mark.parametrize(
    "change",
    [
        ("--percentage", "10"),
        ("--kill",),
        ("--override-user", "u1", "on"),
        ("--override-tenant", "tenant_a", "off"),
    ],
)
def test_a_flag_someone_changed_is_never_set_by_the_demo(flag, tenant, change):
    set_rollout("multi_agent", *change)
    set_rollout("multi_agent", "--percentage", "0")  # and back: still a choice someone made
    before = changes()

    assert rollout_flag_untouched_set(key="multi_agent", percentage=100, actor="demo") == []
    assert RolloutFlag.objects.get(pk=flag.pk).percentage == 0
    assert changes() == before


def test_a_missing_flag_is_not_made_by_the_demo(flag):
    flag.delete()
    assert rollout_flag_untouched_set(key="multi_agent", percentage=100, actor="demo") == []
    assert not RolloutFlag.objects.exists()
