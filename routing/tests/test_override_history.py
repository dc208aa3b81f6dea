"""A rollout flag's user override names a customer by the id the chat API receives — often an e-mail, a phone or a
CPF. The histories that record it — the field history ("Routing changes": its list, an entry's page, the flag's
History page) and the flag's own change history — keep it as its keyed pseudonym (an e-mail as the conversation store
keeps it, ``email:3f9a…``; an opaque id such as ``cust-42``, a number or a UUID as ``user:…``), so the editors who
read them never read the customer's id; the same id reads as the same pseudonym, so one customer's entries still read
as one. Editors, who may only view a flag, read its overrides so and cannot search a flag by a raw id; operators, who
may change overrides, read, search and edit the ids as written. Entries recorded before are rewritten by data
migrations."""

from __future__ import annotations

import uuid

import pytest
from auditlog.models import LogEntry
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse

from common.personal_data import customer_pseudonym, identifier_pseudonym
from routing.models import RolloutFlag, RolloutFlagChange, RolloutUserOverride
from routing.services import rollout_flag_set, rollout_user_override_set
from tests.adminkit import change_url, changelist_url

pytestmark = pytest.mark.django_db

CUSTOMER = "ana.souza@example.com"
OTHER = "+55 11 99876-5432"
OPAQUE = ("cust-42", "8812734", str(uuid.UUID("6f1c2a3e-93b4-4c8e-9a51-0d7e5b2f4c19")))  # no personal data in them


def pseudonym(user_id: str) -> str:
    return customer_pseudonym(user_id, key=settings.SECRET_KEY)


@pytest.fixture
def overridden() -> RolloutFlag:
    """``multi_agent`` with the customer switched on, then off, and another customer on."""
    rollout_flag_set(key="multi_agent", actor="test", create=True)
    rollout_user_override_set(key="multi_agent", user_id=CUSTOMER, enabled=True, actor="test", note="piloto")
    rollout_user_override_set(key="multi_agent", user_id=CUSTOMER, enabled=False, actor="test")
    rollout_user_override_set(key="multi_agent", user_id=OTHER, enabled=True, actor="test")
    return RolloutFlag.objects.get(key="multi_agent")


@pytest.fixture
def opaque() -> RolloutFlag:
    """``multi_agent`` with three customers named by opaque ids, one switched on then off; ``zeta`` has none."""
    rollout_flag_set(key="zeta", actor="test", create=True)
    rollout_flag_set(key="multi_agent", actor="test", create=True)
    for user_id in OPAQUE:
        rollout_user_override_set(key="multi_agent", user_id=user_id, enabled=True, actor="test")
    rollout_user_override_set(key="multi_agent", user_id=OPAQUE[0], enabled=False, actor="test")
    return RolloutFlag.objects.get(key="multi_agent")


def pages(client, flag: RolloutFlag) -> list[str]:
    """Every history page an editor may open: the "Routing changes" list (also searched), each entry of a user
    override, the flag's History page and change page, the flag's change history."""
    overrides = LogEntry.objects.filter(content_type=ContentType.objects.get_for_model(RolloutUserOverride))
    urls = [
        changelist_url(LogEntry),
        changelist_url(LogEntry) + "?q=override",
        *(change_url(entry) for entry in overrides),
        reverse("admin:routing_rolloutflag_history", args=[flag.pk]),
        change_url(flag),
        changelist_url(RolloutFlagChange),
    ]
    answers = [client.get(url) for url in urls]
    assert [answer.status_code for answer in answers] == [200] * len(urls), urls
    return [answer.content.decode() for answer in answers]


@pytest.mark.sqlite_too
def test_an_editor_reads_no_customer_id_in_any_history_only_its_pseudonym(editor_client, overridden):
    entries = LogEntry.objects.filter(content_type=ContentType.objects.get_for_model(RolloutUserOverride))
    assert entries.count() == 3  # two creations and a change

    html = pages(editor_client, overridden)

    for page in html:
        assert CUSTOMER not in page and "ana.souza" not in page
        assert "99876" not in page
    everything = "".join(html)
    assert pseudonym(CUSTOMER) in everything and pseudonym(OTHER) in everything


@pytest.mark.sqlite_too
def test_an_editor_reads_no_opaque_customer_id_in_any_history_only_its_user_pseudonym(editor_client, opaque):
    html = pages(editor_client, opaque)

    for page in html:
        for user_id in OPAQUE:
            assert user_id not in page
    everything = "".join(html)
    for user_id in OPAQUE:
        assert pseudonym(user_id).startswith("user:") and pseudonym(user_id) in everything
    entries = LogEntry.objects.filter(content_type=ContentType.objects.get_for_model(RolloutUserOverride))
    assert [entry.object_repr for entry in entries.order_by("pk")][-1] == f"{pseudonym(OPAQUE[0])}: off"


@pytest.mark.sqlite_too
def test_an_operator_reads_and_edits_the_overrides_ids_as_written(staff_client, opaque):
    page = staff_client.get(change_url(opaque)).content.decode()

    for user_id in OPAQUE:
        assert f'value="{user_id}"' in page


def found(client, term: str) -> list[str]:
    """The keys of the flags the flag list's search finds for ``term``."""
    response = client.get(changelist_url(RolloutFlag), {"q": term})
    assert response.status_code == 200
    return sorted(flag.key for flag in response.context["cl"].result_list)


@pytest.mark.sqlite_too
def test_an_editor_cannot_learn_by_searching_whether_a_raw_customer_id_has_an_override(editor_client, opaque):
    for user_id in OPAQUE:
        assert found(editor_client, user_id) == []
        assert found(editor_client, pseudonym(user_id)) == ["multi_agent"]
        assert found(editor_client, f"multi {pseudonym(user_id)}") == ["multi_agent"]
        assert found(editor_client, f"zeta {pseudonym(user_id)}") == []
        # Nor by filtering the list on the field: the admin refuses a lookup it does not offer, override or not.
        for lookup in ("user_overrides__user_id", "user_overrides__user_id__startswith"):
            for value in (user_id, "nobody-has-this-id"):
                assert editor_client.get(changelist_url(RolloutFlag), {lookup: value}).status_code == 400
    assert found(editor_client, pseudonym("nobody-has-this-id")) == []
    assert found(editor_client, "multi") == ["multi_agent"]


@pytest.mark.sqlite_too
def test_an_operator_finds_a_flag_by_a_customers_raw_id(staff_client, opaque):
    for user_id in OPAQUE:
        assert found(staff_client, user_id) == ["multi_agent"]
    assert found(staff_client, "nobody-has-this-id") == []


def test_the_same_customer_reads_as_the_same_pseudonym_and_another_as_another(overridden):
    recorded = [
        (entry.object_repr, entry.changes_dict.get("user_id"))
        for entry in LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(RolloutUserOverride)
        ).order_by("pk")
    ]

    assert recorded == [
        (f"{pseudonym(CUSTOMER)}: on", ["None", pseudonym(CUSTOMER)]),
        (f"{pseudonym(CUSTOMER)}: off", None),  # the change was the switch
        (f"{pseudonym(OTHER)}: on", ["None", pseudonym(OTHER)]),
    ]
    assert pseudonym(CUSTOMER) != pseudonym(OTHER)
    assert list(RolloutFlagChange.objects.order_by("id").values_list("what", flat=True)[1:]) == [
        f"user_override:{pseudonym(CUSTOMER)}",
        f"user_override:{pseudonym(CUSTOMER)}",
        f"user_override:{pseudonym(OTHER)}",
    ]


def test_the_override_itself_keeps_the_id_the_chat_api_receives(overridden):
    assert set(RolloutUserOverride.objects.values_list("user_id", flat=True)) == {CUSTOMER, OTHER}


def entry_recorded(pk: int, name: str, changes: dict, action: int = LogEntry.Action.CREATE) -> LogEntry:
    """A field history entry of the user override ``pk``, as an earlier version recorded it."""
    return LogEntry.objects.create(
        content_type=ContentType.objects.get_for_model(RolloutUserOverride),
        object_pk=str(pk),
        object_id=pk,
        object_repr=name,
        action=action,
        changes=changes,
    )


@pytest.mark.django_db(transaction=True)
def test_entries_recorded_with_raw_ids_before_the_migration_are_rewritten(migrations):
    apps = migrations.installed_at(("routing", "0031_multi_agent_flag_description_in_plain_words"))
    entry = entry_recorded(
        7,
        f"{CUSTOMER}: on",
        {"user_id": ["None", CUSTOMER], "enabled": ["None", "True"], "note": ["None", "ana: piloto"]},
    )
    Change = apps.get_model("routing", "RolloutFlagChange")
    change = Change.objects.create(flag_key="multi_agent", what=f"user_override:{CUSTOMER}", actor="test")
    tenant_change = Change.objects.create(flag_key="multi_agent", what="tenant_override:acme", actor="test")

    changed = migrations.forward_to(("routing", "0032_history_user_ids_pseudonymised")).get_model(
        "routing", "RolloutFlagChange"
    )

    entry.refresh_from_db()
    assert entry.object_repr == f"{pseudonym(CUSTOMER)}: on"
    assert entry.changes == {
        "user_id": ["None", pseudonym(CUSTOMER)],
        "enabled": ["None", "True"],
        "note": ["None", "ana: piloto"],
    }
    assert changed.objects.get(pk=change.pk).what == f"user_override:{pseudonym(CUSTOMER)}"
    assert changed.objects.get(pk=tenant_change.pk).what == "tenant_override:acme"


@pytest.mark.django_db(transaction=True)
def test_opaque_ids_the_first_rewrite_kept_are_rewritten_and_pseudonyms_are_kept(migrations):
    apps = migrations.installed_at(("routing", "0032_history_user_ids_pseudonymised"))
    # As the first rewrite left them: an e-mail as its pseudonym, an opaque id as written.
    kept = identifier_pseudonym(CUSTOMER, key=settings.SECRET_KEY)
    recorded = [
        entry_recorded(pk, f"{user_id}: on", {"user_id": ["None", user_id], "enabled": ["None", "True"]})
        for pk, user_id in enumerate((kept, *OPAQUE), start=7)
    ]
    deleted_changes = {"user_id": [OPAQUE[1], "None"], "enabled": ["False", "None"]}
    deleted = entry_recorded(20, f"{OPAQUE[1]}: off", deleted_changes, LogEntry.Action.DELETE)
    Change = apps.get_model("routing", "RolloutFlagChange")
    changes = [
        Change.objects.create(flag_key="multi_agent", what=f"user_override:{user_id}", actor="test")
        for user_id in (kept, *OPAQUE)
    ]
    tenant_change = Change.objects.create(flag_key="multi_agent", what="tenant_override:acme", actor="test")

    changed = migrations.forward_to(("routing", "0035_history_opaque_user_ids_pseudonymised")).get_model(
        "routing", "RolloutFlagChange"
    )

    names = [
        (entry.object_repr, entry.changes["user_id"])
        for entry in LogEntry.objects.filter(pk__in=[entry.pk for entry in recorded]).order_by("pk")
    ]
    assert names == [(f"{pseudonym(user_id)}: on", ["None", pseudonym(user_id)]) for user_id in (CUSTOMER, *OPAQUE)]
    deleted.refresh_from_db()
    assert (deleted.object_repr, deleted.changes) == (
        f"{pseudonym(OPAQUE[1])}: off",
        {"user_id": [pseudonym(OPAQUE[1]), "None"], "enabled": ["False", "None"]},
    )
    whats = changed.objects.filter(pk__in=[change.pk for change in changes]).order_by("pk")
    assert list(whats.values_list("what", flat=True)) == [
        f"user_override:{pseudonym(user_id)}" for user_id in (CUSTOMER, *OPAQUE)
    ]
    assert changed.objects.get(pk=tenant_change.pk).what == "tenant_override:acme"
