"""A rollout flag's user override names a customer by the id the chat API receives — often an e-mail, a phone or a
CPF. The histories that record it — the field history ("Routing changes": its list, an entry's page, the flag's
History page) and the flag's own change history — keep it as the conversation store does, its keyed pseudonym, so
the editors who read them never read the customer's id; the same id reads as the same pseudonym, so one customer's
entries still read as one. Entries recorded before are rewritten by a data migration."""

from __future__ import annotations

import pytest
from auditlog.models import LogEntry
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse

from common.personal_data import identifier_pseudonym
from routing.models import RolloutFlag, RolloutFlagChange, RolloutUserOverride
from routing.services import rollout_flag_set, rollout_user_override_set
from tests.adminkit import change_url, changelist_url

pytestmark = pytest.mark.django_db

CUSTOMER = "ana.souza@example.com"
OTHER = "+55 11 99876-5432"


def pseudonym(user_id: str) -> str:
    return identifier_pseudonym(user_id, key=settings.SECRET_KEY)


@pytest.fixture
def overridden() -> RolloutFlag:
    """``multi_agent`` with the customer switched on, then off, and another customer on."""
    rollout_flag_set(key="multi_agent", actor="test", create=True)
    rollout_user_override_set(key="multi_agent", user_id=CUSTOMER, enabled=True, actor="test", note="piloto")
    rollout_user_override_set(key="multi_agent", user_id=CUSTOMER, enabled=False, actor="test")
    rollout_user_override_set(key="multi_agent", user_id=OTHER, enabled=True, actor="test")
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


@pytest.mark.django_db(transaction=True)
def test_entries_recorded_with_raw_ids_before_the_migration_are_rewritten(migrations):
    apps = migrations.back_to(("routing", "0031_multi_agent_flag_description_in_plain_words"))
    content_type = ContentType.objects.get_for_model(RolloutUserOverride)
    entry = LogEntry.objects.create(
        content_type=content_type,
        object_pk="7",
        object_id=7,
        object_repr=f"{CUSTOMER}: on",
        action=LogEntry.Action.CREATE,
        changes={"user_id": ["None", CUSTOMER], "enabled": ["None", "True"], "note": ["None", "ana: piloto"]},
    )
    Change = apps.get_model("routing", "RolloutFlagChange")
    change = Change.objects.create(flag_key="multi_agent", what=f"user_override:{CUSTOMER}", actor="test")
    tenant_change = Change.objects.create(flag_key="multi_agent", what="tenant_override:acme", actor="test")

    migrations.forward()

    entry.refresh_from_db()
    assert entry.object_repr == f"{pseudonym(CUSTOMER)}: on"
    assert entry.changes == {
        "user_id": ["None", pseudonym(CUSTOMER)],
        "enabled": ["None", "True"],
        "note": ["None", "ana: piloto"],
    }
    assert RolloutFlagChange.objects.get(pk=change.pk).what == f"user_override:{pseudonym(CUSTOMER)}"
    assert RolloutFlagChange.objects.get(pk=tenant_change.pk).what == "tenant_override:acme"
