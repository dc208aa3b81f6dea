"""Rollout flags in the admin and in the services behind it: the history of every change, staff-only access,
the migration's ``multi_agent`` flag, and a change reaching the compiled snapshot at once.

The command-line side is ``test_set_rollout.py``; the evaluation itself is ``test_rollout.py``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from common.config_version import config_version
from common.personal_data import customer_pseudonym
from routing import snapshot
from routing.admin import CONFIRMED, Exposure, exposure_change_words
from routing.models import RolloutFlag, RolloutFlagChange, RolloutTenantOverride, RolloutUserOverride
from routing.services import (
    ERROR_FLAG_UNKNOWN,
    ERROR_PERCENTAGE,
    RolloutError,
    RolloutFlagUnknown,
    rollout_actor_words,
    rollout_flag_set,
    rollout_tenant_override_set,
    rollout_user_override_set,
)
from tenants.models import ApiKey, Tenant
from tests.adminkit import add_url, change_url, changelist_url, delete_url, error_messages, form_data

pytestmark = pytest.mark.django_db

USERS = "user_overrides"  # the inline formsets' prefixes


def pseudonym(user_id: str) -> str:
    """A user override's customer id as the flag's change history records it."""
    return customer_pseudonym(user_id, key=settings.SECRET_KEY)


TENANTS = "tenant_overrides"


@pytest.fixture
def flag() -> RolloutFlag:
    """``multi_agent`` as the migration leaves it (percentage 0), with its history cleared."""
    rollout_flag_set(key="multi_agent", actor="test", create=True)
    flag = RolloutFlag.objects.get(key="multi_agent")
    RolloutFlagChange.objects.all().delete()
    return flag


def changes(**lookup: Any) -> list[tuple[str, str, str, str]]:
    """The history rows as (what, old, new, actor), oldest first."""
    rows = RolloutFlagChange.objects.filter(**lookup).order_by("changed_at", "id")
    return list(rows.values_list("what", "old_value", "new_value", "actor"))


def flag_page(client, flag: RolloutFlag | None = None) -> dict[str, Any]:
    """The flag's change page (or the add page) as a browser would post it back."""
    return form_data(client.get(change_url(flag) if flag else add_url(RolloutFlag)))


def set_row(data: dict[str, Any], prefix: str, index: int, **values: Any) -> None:
    """Fill inline row ``index`` of ``prefix``; True/False tick or untick a box."""
    for name, value in values.items():
        field = f"{prefix}-{index}-{name}"
        if value is False:
            data.pop(field, None)
        elif value is True:
            data[field] = "on"
        else:
            data[field] = str(value)


def confirmed(data: dict[str, Any]) -> dict[str, Any]:
    """The form as the confirmation page's "Yes" posts it again."""
    return {**data, CONFIRMED: "1"}


def save(client, flag: RolloutFlag, data: dict[str, Any]) -> None:
    """Post the flag's page, and say yes when asked to confirm who gets it."""
    response = client.post(change_url(flag), data)
    if response.status_code == 200 and "words" in (response.context or {}):
        response = client.post(change_url(flag), confirmed(data))
    assert response.status_code == 302, error_messages(response)


# -- history of admin edits ----------------------------------------------------------------


def test_changing_the_percentage_in_the_admin_records_who_and_the_old_and_new_value(staff_client, staff_user, flag):
    data = flag_page(staff_client, flag)
    data["percentage"] = "10"
    save(staff_client, flag, data)

    flag.refresh_from_db()
    assert flag.percentage == 10
    change = RolloutFlagChange.objects.get()
    assert (change.what, change.old_value, change.new_value) == ("percentage", "0", "10")
    assert change.actor == "admin: analyst"
    assert change.changed_by == staff_user
    assert change.flag == flag and change.flag_key == "multi_agent"


def test_a_new_percentage_asks_first_saying_what_changes_for_customers_and_saves_on_yes(staff_client, flag):
    data = flag_page(staff_client, flag)
    data["percentage"] = "50"

    asked = staff_client.post(change_url(flag), data)

    assert asked.status_code == 200
    page = asked.content.decode()
    assert "50 % of customers will get multi_agent, was 0 %." in page
    assert "50 % more of customers get it; those who had it keep it." in page
    assert f'name="{CONFIRMED}"' in page and 'value="Yes, save it"' in page
    flag.refresh_from_db()
    assert flag.percentage == 0 and changes() == []  # nothing saved yet

    response = staff_client.post(change_url(flag), confirmed(data))  # what the page's "Yes" posts

    assert response.status_code == 302, error_messages(response)
    flag.refresh_from_db()
    assert flag.percentage == 50
    assert [(what, old, new) for what, old, new, _ in changes()] == [("percentage", "0", "50")]


def test_the_confirmation_page_posts_back_every_field_it_was_given(staff_client, flag):
    data = flag_page(staff_client, flag)
    data.update(percentage="20", description="Two lines.\nOf text.")
    set_row(data, USERS, 0, user_id="alice", enabled=True)

    page = staff_client.post(change_url(flag), data)

    posted = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', page.content.decode()))
    assert posted[CONFIRMED] == "1"
    assert {name: posted.get(name) for name in ("percentage", "description", f"{USERS}-0-user_id")} == {
        "percentage": "20",
        "description": "Two lines.\nOf text.",
        f"{USERS}-0-user_id": "alice",
    }


def test_the_kill_switch_asks_first_and_says_everyone_loses_the_flag(staff_client, flag):
    rollout_flag_set(key="multi_agent", actor="test", percentage=10)
    data = flag_page(staff_client, flag)
    data["kill_switch"] = "on"

    page = staff_client.post(change_url(flag), data).content.decode()

    assert "The kill switch turns multi_agent off for everyone, overrides included." in page
    assert "0 % of customers will get multi_agent, was 10 %." in page
    assert "10 % of customers who had it lose it." in page
    assert RolloutFlag.objects.get(key="multi_agent").kill_switch is False


def test_a_description_change_or_a_percentage_behind_the_kill_switch_saves_without_asking(staff_client, flag):
    data = flag_page(staff_client, flag)
    data["description"] = "The multi-agent graph."
    assert staff_client.post(change_url(flag), data).status_code == 302
    rollout_flag_set(key="multi_agent", actor="test", kill_switch=True)
    data = flag_page(staff_client, flag)
    data["percentage"] = "30"  # nobody gets it while the kill switch is on

    assert staff_client.post(change_url(flag), data).status_code == 302
    assert RolloutFlag.objects.get(key="multi_agent").percentage == 30


def test_a_new_flag_given_a_percentage_asks_first(staff_client):
    data = flag_page(staff_client)
    data.update(key="new_checkout", percentage="5")

    page = staff_client.post(add_url(RolloutFlag), data).content.decode()

    assert "5 % of customers will get new_checkout, was 0 % (a new flag)." in page
    assert not RolloutFlag.objects.filter(key="new_checkout").exists()


def test_an_invalid_percentage_shows_the_forms_error_without_asking(staff_client, flag):
    data = flag_page(staff_client, flag)
    data["percentage"] = "101"

    response = staff_client.post(change_url(flag), data)

    assert "words" not in response.context
    assert any("100" in message for message in error_messages(response))


def test_who_gets_a_flag_by_session_and_redrawn_by_a_new_stickiness_is_said():
    before = Exposure(20, False, "user_id")

    assert exposure_change_words("multi_agent", before, Exposure(20, False, "session_id")) == [
        "20 % of sessions will get multi_agent, was 20 %.",
        "Who gets it is drawn again, by session id instead of user id: some who had it lose it and others get it.",
    ]
    assert exposure_change_words("multi_agent", Exposure(0, True, "user_id"), Exposure(40, False, "user_id")) == [
        "The kill switch is released: multi_agent is on again for the share below and the overrides.",
        "40 % of customers will get multi_agent, was 0 %.",
        "40 % more of customers get it; those who had it keep it.",
    ]
    assert exposure_change_words("multi_agent", before, before) == []


def test_turning_the_kill_switch_on_and_off_in_the_admin_records_both(staff_client, flag):
    data = flag_page(staff_client, flag)
    data["kill_switch"] = "on"
    save(staff_client, flag, data)
    data = flag_page(staff_client, flag)
    del data["kill_switch"]
    save(staff_client, flag, data)

    assert changes() == [
        ("kill_switch", "off", "on", "admin: analyst"),
        ("kill_switch", "on", "off", "admin: analyst"),
    ]


def test_changing_several_fields_at_once_records_one_row_each(staff_client, flag):
    data = flag_page(staff_client, flag)
    data.update(percentage="25", stickiness="session_id", description="The multi-agent graph.")
    save(staff_client, flag, data)

    assert {(what, old, new) for what, old, new, _ in changes()} == {
        ("percentage", "0", "25"),
        ("stickiness", "user_id", "session_id"),
        ("description", flag.description, "The multi-agent graph."),
    }


def test_saving_the_flag_page_unchanged_records_nothing(staff_client, flag):
    rollout_user_override_set(key="multi_agent", user_id="alice", enabled=True, actor="test")
    RolloutFlagChange.objects.all().delete()

    save(staff_client, flag, flag_page(staff_client, flag))

    assert changes() == []


def test_adding_changing_and_removing_a_user_override_in_the_admin_records_each_step(staff_client, flag):
    data = flag_page(staff_client, flag)
    set_row(data, USERS, 0, user_id="alice", enabled=True, note="alpha tester")
    save(staff_client, flag, data)
    assert flag.user_overrides.get().enabled is True

    data = flag_page(staff_client, flag)
    set_row(data, USERS, 0, enabled=False)
    save(staff_client, flag, data)
    assert flag.user_overrides.get().enabled is False

    data = flag_page(staff_client, flag)
    set_row(data, USERS, 0, DELETE=True)
    save(staff_client, flag, data)
    assert not flag.user_overrides.exists()

    assert changes() == [
        (f"user_override:{pseudonym('alice')}", "none", "on (alpha tester)", "admin: analyst"),
        (f"user_override:{pseudonym('alice')}", "on (alpha tester)", "off (alpha tester)", "admin: analyst"),
        (f"user_override:{pseudonym('alice')}", "off (alpha tester)", "none", "admin: analyst"),
    ]


def test_giving_an_override_row_to_another_user_records_a_removal_and_an_addition(staff_client, flag):
    rollout_user_override_set(key="multi_agent", user_id="alice", enabled=True, actor="test")
    RolloutFlagChange.objects.all().delete()

    data = flag_page(staff_client, flag)
    set_row(data, USERS, 0, user_id="bob")
    save(staff_client, flag, data)

    assert list(flag.user_overrides.values_list("user_id", "enabled")) == [("bob", True)]
    assert [(what, old, new) for what, old, new, _ in changes()] == [
        (f"user_override:{pseudonym('alice')}", "on", "none"),
        (f"user_override:{pseudonym('bob')}", "none", "on"),
    ]


def test_adding_changing_and_removing_a_tenant_override_in_the_admin_records_each_step(staff_client, flag, tenant):
    data = flag_page(staff_client, flag)
    set_row(data, TENANTS, 0, tenant=tenant.pk, enabled=True)
    save(staff_client, flag, data)

    data = flag_page(staff_client, flag)
    set_row(data, TENANTS, 0, enabled=False)
    save(staff_client, flag, data)
    assert flag.tenant_overrides.get().enabled is False

    data = flag_page(staff_client, flag)
    set_row(data, TENANTS, 0, DELETE=True)
    save(staff_client, flag, data)
    assert not flag.tenant_overrides.exists()

    assert changes() == [
        ("tenant_override:tenant_a", "none", "on", "admin: analyst"),
        ("tenant_override:tenant_a", "on", "off", "admin: analyst"),
        ("tenant_override:tenant_a", "off", "none", "admin: analyst"),
    ]


def test_adding_a_flag_with_an_override_records_its_creation_and_the_override(staff_client):
    data = flag_page(staff_client)
    data.update(key="new_checkout", percentage="5")
    set_row(data, USERS, 0, user_id="alice", enabled=True)
    response = staff_client.post(add_url(RolloutFlag), confirmed(data))
    assert response.status_code == 302, error_messages(response)

    assert RolloutFlag.objects.get(key="new_checkout").percentage == 5
    assert changes(flag_key="new_checkout") == [
        ("created", "none", "kill_switch=off, percentage=5, stickiness=user_id", "admin: analyst"),
        (f"user_override:{pseudonym('alice')}", "none", "on", "admin: analyst"),
    ]


def test_the_key_of_an_existing_flag_is_read_only(staff_client, flag):
    data = flag_page(staff_client, flag)
    data["key"] = "renamed"
    save(staff_client, flag, data)

    assert RolloutFlag.objects.filter(key="multi_agent").exists()
    assert not RolloutFlag.objects.filter(key="renamed").exists()


def test_a_percentage_over_100_is_refused_on_the_field_and_nothing_is_recorded(staff_client, flag):
    data = flag_page(staff_client, flag)
    data["percentage"] = "101"
    response = staff_client.post(change_url(flag), data)

    assert response.status_code == 200
    assert "percentage" in response.context["adminform"].form.errors
    assert changes() == []


def test_deleting_a_flag_records_it_and_keeps_its_history(staff_client, flag):
    rollout_flag_set(key="multi_agent", actor="test", percentage=10)

    assert staff_client.post(delete_url(flag), {"post": "yes"}).status_code == 302

    assert not RolloutFlag.objects.filter(key="multi_agent").exists()
    assert [(what, actor) for what, _, _, actor in changes(flag_key="multi_agent")] == [
        ("percentage", "test"),
        ("deleted", "admin: analyst"),
    ]
    assert not RolloutFlagChange.objects.filter(flag__isnull=False).exists()


# -- what the admin shows ----------------------------------------------------------------------


def test_the_flag_page_lists_its_history_newest_first(staff_client, flag):
    rollout_flag_set(key="multi_agent", actor="manage.py set_rollout (ops)", percentage=10)
    rollout_flag_set(key="multi_agent", actor="manage.py set_rollout (ops)", percentage=100)

    page = staff_client.get(change_url(flag)).content.decode()

    assert page.index("10 → 100") < page.index("0 → 10")
    assert "<td>the command line (ops)</td>" in page


def test_the_flag_history_names_who_changed_it_as_people_say_it(staff_client, flag):
    save(staff_client, flag, {**flag_page(staff_client, flag), "percentage": "10"})
    rollout_flag_set(key="multi_agent", actor="migration routing.0007_rollout_flags", percentage=20)

    page = staff_client.get(change_url(flag)).content.decode()
    listing = staff_client.get(changelist_url(RolloutFlagChange)).content.decode()

    assert "<td>analyst</td>" in page and "<td>the platform&#x27;s set-up</td>" in page
    assert "admin: analyst" not in page and "admin: analyst" not in listing
    assert "the platform&#x27;s set-up" in listing


@pytest.mark.parametrize(
    ("actor", "words"),
    [
        ("admin: ana", "ana"),
        ("beat", "the automatic check"),
        ("manage.py rollout (root)", "the command line (root)"),
        ("watch", "the command line (rollout watch)"),
        ("migration routing.0007_rollout_flags", "the platform's set-up"),
        ("test", "test"),
    ],
)
def test_a_rollout_actor_reads_as_people_say_it(actor, words):
    assert rollout_actor_words(actor) == words


def test_the_flag_list_shows_the_kill_switch_labelled_and_the_override_counts(
    staff_client, flag, tenant, django_assert_max_num_queries
):
    rollout_user_override_set(key="multi_agent", user_id="alice", enabled=True, actor="test")
    rollout_user_override_set(key="multi_agent", user_id="bob", enabled=False, actor="test")
    rollout_tenant_override_set(key="multi_agent", tenant_slug="tenant_a", enabled=True, actor="test")
    rollout_flag_set(key="other_flag", actor="test", create=True)

    with django_assert_max_num_queries(12):
        response = staff_client.get(changelist_url(RolloutFlag))

    assert "Kill switch (everyone off)" in response.content.decode()
    listed = {
        row.key: (row.user_override_total, row.tenant_override_total) for row in response.context["cl"].result_list
    }
    assert listed == {"multi_agent": (2, 1), "other_flag": (0, 0)}


def test_the_change_history_has_a_read_only_page_filtered_by_flag_actor_and_date(staff_client, flag):
    rollout_flag_set(key="multi_agent", actor="manage.py set_rollout (ops)", percentage=10)
    rollout_flag_set(key="other_flag", actor="admin: analyst", create=True)

    response = staff_client.get(changelist_url(RolloutFlagChange), {"flag_key": "multi_agent"})
    assert [change.what for change in response.context["cl"].result_list] == ["percentage"]
    response = staff_client.get(changelist_url(RolloutFlagChange), {"actor": "admin: analyst"})
    assert [change.flag_key for change in response.context["cl"].result_list] == ["other_flag"]
    assert {spec.title for spec in response.context["cl"].filter_specs} >= {"flag key", "by", "changed at"}

    change = RolloutFlagChange.objects.get(flag_key="multi_agent")
    assert staff_client.get(add_url(RolloutFlagChange)).status_code == 403
    assert staff_client.post(change_url(change), {"new_value": "99"}).status_code == 403
    assert staff_client.post(delete_url(change), {"post": "yes"}).status_code == 403


def test_ticking_can_preview_on_an_api_keys_page_saves_it(staff_client, tenant_key):
    data = form_data(staff_client.get(change_url(tenant_key)))
    data["can_preview"] = "on"
    response = staff_client.post(change_url(tenant_key), data)

    assert response.status_code == 302, error_messages(response)
    assert ApiKey.objects.get(pk=tenant_key.pk).can_preview


# -- who may see flags -------------------------------------------------------------------------


def test_a_routing_editor_reads_flags_and_their_history_but_changes_nothing(editor_client, flag):
    rollout_flag_set(key="multi_agent", actor="test", percentage=10)
    change = RolloutFlagChange.objects.get()

    for url in (changelist_url(RolloutFlag), change_url(flag), changelist_url(RolloutFlagChange), change_url(change)):
        assert editor_client.get(url).status_code == 200, url
    for url in (add_url(RolloutFlag), delete_url(flag)):
        assert editor_client.get(url).status_code == 403, url
    page = editor_client.get(change_url(flag)).content.decode()
    assert 'name="percentage"' not in page and 'name="_save"' not in page
    data = {"percentage": "100", "stickiness": "user_id"}
    assert editor_client.post(change_url(flag), data).status_code == 403
    assert RolloutFlag.objects.get(pk=flag.pk).percentage == 10


def test_a_staff_user_without_flag_permissions_is_refused(client, django_user_model, flag):
    user = django_user_model.objects.create_user("ops", password="ops-password", is_staff=True)
    client.force_login(user)

    assert client.get(changelist_url(RolloutFlag)).status_code == 403


def test_a_staff_user_given_the_flag_permissions_explicitly_may_change_a_flag(client, django_user_model, flag):
    user = django_user_model.objects.create_user("ops", password="ops-password", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="routing",
            codename__in=[
                "view_rolloutflag",
                "change_rolloutflag",
                "add_rolloutuseroverride",
                "change_rolloutuseroverride",
                "delete_rolloutuseroverride",
                "view_rolloutuseroverride",
            ],
        )
    )
    client.force_login(user)
    data = form_data(client.get(change_url(flag)))
    data["percentage"] = "10"
    response = client.post(change_url(flag), confirmed(data))

    assert response.status_code == 302, error_messages(response)
    assert changes() == [("percentage", "0", "10", "admin: ops")]


# -- propagation -------------------------------------------------------------------------------


def test_an_admin_change_is_seen_by_the_snapshot_right_after(
    staff_client, flag, tenant, django_capture_on_commit_callbacks
):
    assert snapshot.current().flags["multi_agent"].percentage == 0
    version = config_version()

    data = flag_page(staff_client, flag)
    data.update(percentage="10", kill_switch="on")
    set_row(data, USERS, 0, user_id="alice", enabled=True)
    set_row(data, TENANTS, 0, tenant=tenant.pk, enabled=False)
    with django_capture_on_commit_callbacks(execute=True):  # the new version is published on commit
        save(staff_client, flag, data)

    assert config_version() > version
    spec = snapshot.current().flags["multi_agent"]
    assert (spec.percentage, spec.kill_switch, spec.stickiness) == (10, True, "user_id")
    assert dict(spec.user_overrides) == {"alice": True}
    assert dict(spec.tenant_overrides) == {"tenant_a": False}


def test_the_snapshot_reads_flags_and_overrides_in_three_queries(flag, tenant):
    for user_id in ("alice", "bob", "carol"):
        rollout_user_override_set(key="multi_agent", user_id=user_id, enabled=True, actor="test")
    rollout_tenant_override_set(key="multi_agent", tenant_slug="tenant_a", enabled=True, actor="test")
    for key in ("one", "two"):
        rollout_flag_set(key=key, actor="test", create=True, percentage=50)
        rollout_user_override_set(key=key, user_id="alice", enabled=False, actor="test")

    with CaptureQueriesContext(connection) as queries:
        flags = snapshot.build(version=0, generation=0).flags
    flag_queries = [
        query["sql"]
        for query in queries.captured_queries
        if "rolloutflag" in query["sql"] or "override" in query["sql"]
    ]

    assert len(flag_queries) == 3  # flags, user overrides, tenant overrides (the rollout plans are one more, apart)
    assert set(flags) == {"multi_agent", "one", "two"}
    assert dict(flags["one"].user_overrides) == {"alice": False}
    assert dict(flags["multi_agent"].tenant_overrides) == {"tenant_a": True}


def test_the_migration_creates_the_multi_agent_flag_at_percentage_0_with_user_stickiness():
    # Migrations ran on this test database; a flush by a transactional test comes after this one.
    flag = RolloutFlag.objects.get(key="multi_agent")

    assert (flag.percentage, flag.kill_switch, flag.stickiness) == (0, False, "user_id")
    assert "multi-agent graph" in flag.description
    assert changes(flag_key="multi_agent", what="created")[0][3] == "migration routing.0007_rollout_flags"


# -- the services --------------------------------------------------------------------------------


def test_setting_a_flag_to_its_current_values_writes_no_row(flag):
    assert rollout_flag_set(key="multi_agent", actor="test", percentage=0, kill_switch=False) == []
    assert rollout_user_override_set(key="multi_agent", user_id="nobody", enabled=None, actor="test") == []
    assert changes() == []


def test_an_unknown_flag_is_refused_with_its_key_and_nothing_is_created(db):
    with pytest.raises(RolloutFlagUnknown, match="ghost"):
        rollout_flag_set(key="ghost", actor="test", percentage=10)
    with pytest.raises(RolloutFlagUnknown) as refused:
        rollout_user_override_set(key="ghost", user_id="alice", enabled=True, actor="test")

    assert str(refused.value) == ERROR_FLAG_UNKNOWN.format(key="ghost")
    assert not RolloutFlag.objects.filter(key="ghost").exists()


@pytest.mark.parametrize("percentage", [-1, 101])
def test_a_percentage_outside_0_to_100_is_refused_by_the_service(flag, percentage):
    with pytest.raises(RolloutError) as refused:
        rollout_flag_set(key="multi_agent", actor="test", percentage=percentage)

    assert str(refused.value) == ERROR_PERCENTAGE.format(value=percentage)
    assert RolloutFlag.objects.get(pk=flag.pk).percentage == 0


def test_a_tenant_override_for_an_unknown_tenant_is_refused(flag):
    with pytest.raises(RolloutError, match="ghost"):
        rollout_tenant_override_set(key="multi_agent", tenant_slug="ghost", enabled=True, actor="test")
    assert not RolloutTenantOverride.objects.exists()
    assert not Tenant.objects.filter(slug="ghost").exists()


def test_changing_only_an_overrides_note_is_a_change_too(flag):
    rollout_user_override_set(key="multi_agent", user_id="alice", enabled=True, actor="test")
    rollout_user_override_set(key="multi_agent", user_id="alice", enabled=True, actor="test", note="QA")

    assert [(old, new) for _, old, new, _ in changes()] == [("none", "on"), ("on", "on (QA)")]
    assert RolloutUserOverride.objects.get().note == "QA"
