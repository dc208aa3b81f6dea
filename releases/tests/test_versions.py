"""Versions of a profile: publishing is atomic and refuses a stale review; a revert publishes an old
document under a new number; versions never change; what changed is said in words."""

from __future__ import annotations

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from agents.models import AgentProfile
from releases.versions import (
    NothingToPublish,
    VersionConflict,
    document_diff,
    version_publish,
    version_revert,
)
from routing.models import ProfileRelease, RoutingVersion
from routing.selectors import live_version

BEFORE = {
    "schema": 1,
    "profile": {"routing_mode": "router", "llm_router_threshold": 0.6, "guardrails": {"max_input_chars": 4000}},
    "intents": {
        "portabilidade_numero": {
            "specialist": "support_agent",
            "priority": 15,
            "enabled": True,
            "keywords": ["portabilidade"],
        },
        "billing_invoice_explanation": {"specialist": "billing_agent", "priority": 10, "enabled": True},
    },
    "specialists": {"billing_agent": {"prompt": "Você é o especialista de faturas.\nSeja breve.\n", "enabled": True}},
}
AFTER = {
    "schema": 1,
    "profile": {"routing_mode": "hybrid", "llm_router_threshold": 0.6, "guardrails": {"max_input_chars": 2000}},
    "intents": {
        "portabilidade_numero": {
            "specialist": "support_agent",
            "priority": 10,
            "enabled": True,
            "keywords": ["portabilidade", "número próprio"],
        },
        "billing_invoice_explanation": {"specialist": "billing_agent", "priority": 10, "enabled": False},
        "plano_upgrade": {"specialist": "product_agent", "priority": 20, "enabled": True},
    },
    "specialists": {"billing_agent": {"prompt": "Você é o especialista de faturas.\nSeja cordial.\n", "enabled": True}},
}


def test_the_diff_says_what_changed_in_words_a_business_user_reads():
    texts = [change.text for change in document_diff(BEFORE, AFTER)]

    assert texts == [
        "profile: routing mode 'router' → 'hybrid'",
        "profile, guardrails: max input chars 4000 → 2000",
        "intent portabilidade_numero: priority 15 → 10",
        "keyword 'número próprio' added to intent portabilidade_numero",
        "intent billing_invoice_explanation disabled",
        "intent plano_upgrade added",
        "specialist billing_agent: prompt changed",
    ]


def test_a_prompt_change_carries_a_text_diff():
    (prompt,) = [change for change in document_diff(BEFORE, AFTER) if change.field == "prompt"]

    assert "-Seja breve.\n" in prompt.detail and "+Seja cordial.\n" in prompt.detail


def test_a_removed_entry_and_a_removed_list_item_are_said_too():
    texts = [change.text for change in document_diff(AFTER, BEFORE)]

    assert "intent plano_upgrade removed" in texts
    assert "keyword 'número próprio' removed from intent portabilidade_numero" in texts


def test_the_same_document_has_no_differences():
    assert document_diff(AFTER, dict(AFTER)) == []


@pytest.fixture
def profile(db):
    return AgentProfile.objects.create(agent_id="versioned", name="Versioned")


def test_publishing_numbers_versions_and_points_the_release_at_the_newest(profile, admin_user):
    first = version_publish(profile=profile, user=admin_user, note="first", document=BEFORE, based_on=None)
    second = version_publish(profile=profile, user=admin_user, note="second", document=AFTER, based_on=1)

    assert (first.number, second.number) == (1, 2)
    assert live_version(profile) == second
    release = ProfileRelease.objects.get(profile=profile)
    assert (release.version_id, release.published_by) == (second.pk, admin_user)
    assert second.created_by == admin_user and second.note == "second"


def test_publishing_from_a_stale_review_is_refused_and_changes_nothing(profile):
    version_publish(profile=profile, document=BEFORE, based_on=None)
    version_publish(profile=profile, document=AFTER, based_on=1)

    with pytest.raises(VersionConflict) as refused:
        version_publish(profile=profile, document=BEFORE, based_on=1)

    assert "Version 2 of versioned was published meanwhile" in refused.value.message
    assert refused.value.fields == {"based_on": ["The live version is 2."]}
    assert RoutingVersion.objects.filter(profile=profile).count() == 2


def test_publishing_what_is_live_is_refused(profile):
    version_publish(profile=profile, document=BEFORE)

    with pytest.raises(NothingToPublish):
        version_publish(profile=profile, document=dict(BEFORE))


def test_a_revert_publishes_the_old_document_as_a_new_number(profile):
    version_publish(profile=profile, document=BEFORE)
    version_publish(profile=profile, document=AFTER)

    reverted = version_revert(profile=profile, to=1)

    assert reverted.number == 3 and reverted.reverted_from == 1
    assert reverted.document == BEFORE and live_version(profile) == reverted
    assert reverted.note == "Revert to version 1"


def test_a_version_cannot_be_changed_once_published(profile):
    version = version_publish(profile=profile, document=BEFORE)
    version.note = "rewritten"

    with pytest.raises(ValidationError):
        version.save()


@pytest.mark.django_db(transaction=True)
def test_two_editors_publishing_at_once_one_wins_and_the_other_gets_a_conflict():
    profile = AgentProfile.objects.create(agent_id="raced", name="Raced")
    version_publish(profile=profile, document=BEFORE)
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def publish(document):
        start.wait()
        try:
            version_publish(profile=profile, document=document, based_on=1)
            outcomes.append("published")
        except VersionConflict:
            outcomes.append("conflict")
        finally:
            connection.close()

    editors = [
        threading.Thread(target=publish, args=({**AFTER, "note": "a"},)),
        threading.Thread(target=publish, args=({**AFTER, "note": "b"},)),
    ]
    for editor in editors:
        editor.start()
    for editor in editors:
        editor.join(timeout=30)

    assert sorted(outcomes) == ["conflict", "published"]
    assert list(RoutingVersion.objects.filter(profile=profile).values_list("number", flat=True)) == [2, 1]


def test_the_revert_command_publishes_an_old_version_and_says_what_changed(profile):
    from io import StringIO

    from django.core.management import call_command

    version_publish(profile=profile, document=BEFORE)
    version_publish(profile=profile, document=AFTER)
    out = StringIO()

    call_command("routing_revert", "--profile", "versioned", "--to", "1", stdout=out)

    assert "intent plano_upgrade removed" in out.getvalue()
    assert out.getvalue().strip().endswith("versioned: version 3 published (version 1 again).")
    assert live_version(profile).document == BEFORE


def test_the_revert_command_names_a_missing_version(profile):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="versioned has no version 7"):
        call_command("routing_revert", "--profile", "versioned", "--to", "7")


def test_the_first_publish_of_a_real_document_is_described_against_nothing(telecom):
    from routing.documents import profile_documents

    document = profile_documents(["telecom_contas"])["telecom_contas"]

    texts = [change.text for change in document_diff(None, document)]

    assert "intent billing_invoice_explanation added" in texts
    assert "specialist billing_agent added" in texts
    assert any(text.startswith("profile: ") for text in texts)


@pytest.mark.django_db(transaction=True)
def test_versions_stored_before_where_was_recorded_say_it_when_their_note_does(migrations):
    # Back, not installed_at, and forward to the latest again: the suite's run of the reverse of every migration after
    # it and of their forwards on the schema the reverses left (the other tests of later routing migrations start
    # from a database installed at theirs, and migrate no further than their own).
    old = migrations.back_to(("routing", "0022_help_texts_without_docs_paths"))
    profile = AgentProfile.objects.create(agent_id="notes", name="Notes")  # agents' tables stay as they are
    for number, note in enumerate(["Demo import (config/demo)", "Imported from agents.yaml", "by hand"], start=1):
        old.get_model("routing", "RoutingVersion").objects.create(
            profile_id=profile.pk, number=number, note=note, document={}
        )

    migrations.forward()

    stored = RoutingVersion.objects.filter(profile__agent_id="notes").order_by("number")
    assert list(stored.values_list("published_from", flat=True)) == ["demo", "import", ""]
