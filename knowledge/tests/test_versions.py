"""A profile's knowledge in its versions: a published version answers from the documents it was published with, a
replaced or deleted one kept for it until the next publish, while the draft (and its preview) reads the new ones; the
words counted over every row kept; a version published before documents were versioned reads the current ones."""

from __future__ import annotations

import pytest

from knowledge.models import KnowledgeDocument, KnowledgeSource, KnowledgeWord
from knowledge.retrieval import knowledge_retrieve
from knowledge.services import document_delete, document_ingest
from knowledge.versions import rows_chosen
from knowledge.words import words_counted
from releases.models import RolloutPlan
from releases.rollout.commands import plan_command, plan_start
from releases.versions import document_diff, version_publish, version_revert
from routing import snapshot
from routing.documents import profile_documents

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too, pytest.mark.usefixtures("multi_agent_for_everyone")]

QUESTION = "How fast is the internet on the fibre plan?"
PLANS = b"""# Plans and internet

## Internet speed

The fibre plan delivers up to 500 megabits per second. Speed tests should be run over a cable, not over Wi-Fi.
"""
PLANS_NEW = b"""# Plans and internet

## Internet speed

The fibre plan delivers up to 900 megabits per second. Speed tests should be run over a cable, not over Wi-Fi.
"""
PLANS_THIRD = PLANS_NEW.replace(b"900", b"1000")
OLD_ANSWER, NEW_ANSWER = "up to 500 megabits per second", "up to 900 megabits per second"


def ask(client, text: str) -> dict:
    response = client.post(
        "/api/chat/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "user_id": "u-versions"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def cited(body: dict) -> int:
    (citation,) = body["metadata"]["knowledge"]["citations"]
    return citation["document"]


@pytest.fixture
def source(telecom) -> KnowledgeSource:
    return KnowledgeSource.objects.create(profile=telecom, name="Help centre", language="en")


def publish(profile, note: str = "knowledge"):
    return version_publish(profile=profile, document=profile_documents()[profile.agent_id], note=note)


def draft_finds(text: str) -> list[int]:
    """The documents whose passages at the bar the draft (the chat page's draft preview) is given for ``text``: the
    draft's compiled profile searched as its turn searches it."""
    spec = snapshot.current().profile("telecom_contas", draft=True)
    retrieved = knowledge_retrieve(
        profile_pk=spec.pk,
        tenant_pk=None,
        query=text,
        language="en",
        tags=(),
        min_score=spec.knowledge.min_score,
        documents=spec.knowledge_documents,
    )
    return [passage.hit.document_id for passage in retrieved.used]


def words_kept(source: KnowledgeSource) -> dict[str, int]:
    return dict(KnowledgeWord.objects.filter(source=source).values_list("word", "passages"))


def words_of_rows(source: KnowledgeSource) -> dict[str, int]:
    rows = KnowledgeDocument.objects.filter(source=source).values_list("passages__heading", "passages__text")
    return dict(words_counted(rows))


def test_a_published_version_answers_from_the_document_it_was_published_with_until_the_next_publish(
    api, telecom, source
):
    first = document_ingest(source=source, file_name="plans.md", data=PLANS)
    publish(telecom)
    assert OLD_ANSWER in ask(api, QUESTION)["answer"]

    second = document_ingest(source=source, file_name="plans.md", data=PLANS_NEW)

    live = ask(api, QUESTION)
    assert second.document_id != first.document_id  # the published one is kept: a new row for the draft
    assert (OLD_ANSWER in live["answer"], cited(live)) == (True, first.document_id)
    assert draft_finds(QUESTION) == [second.document_id]
    old = KnowledgeDocument.objects.get(pk=first.document_id)
    assert old.replaced_at is not None and old.held_by == [1]
    assert words_kept(source) == words_of_rows(source)  # both rows' words: the version still searches the old one

    publish(telecom, "the new speed")

    live = ask(api, QUESTION)
    assert (NEW_ANSWER in live["answer"], cited(live)) == (True, second.document_id)
    assert list(KnowledgeDocument.objects.filter(source=source).values_list("pk", flat=True)) == [second.document_id]
    assert words_kept(source) == words_of_rows(source)  # the old row's words counted out with it
    assert words_kept(source)["megabits"] == 1


def test_a_document_deleted_from_the_draft_is_answered_from_until_the_next_publish(api, telecom, source):
    plans = document_ingest(source=source, file_name="plans.md", data=PLANS)
    publish(telecom)

    document_delete(document=KnowledgeDocument.objects.get(pk=plans.document_id))

    assert cited(ask(api, QUESTION)) == plans.document_id
    assert draft_finds(QUESTION) == []
    publish(telecom, "no plans")
    assert not KnowledgeDocument.objects.filter(source=source).exists()
    assert ask(api, QUESTION)["metadata"]["knowledge"] is None  # the profile holds no knowledge any more


def test_a_document_no_version_served_holds_is_replaced_in_place(telecom, source):
    first = document_ingest(source=source, file_name="plans.md", data=PLANS)
    second = document_ingest(source=source, file_name="plans.md", data=PLANS_NEW)

    assert second.document_id == first.document_id
    assert KnowledgeDocument.objects.filter(source=source).count() == 1
    assert words_kept(source) == words_of_rows(source)


def test_a_version_published_before_documents_were_versioned_reads_the_current_ones(api, telecom, source):
    document_ingest(source=source, file_name="plans.md", data=PLANS)
    before = profile_documents()["telecom_contas"]
    del before["knowledge"]
    version_publish(profile=telecom, document=before, note="published before")

    replaced = document_ingest(source=source, file_name="plans.md", data=PLANS_NEW)

    assert (cited(body := ask(api, QUESTION)), NEW_ANSWER in body["answer"]) == (replaced.document_id, True)
    assert KnowledgeDocument.objects.filter(source=source).count() == 1  # no version held the old one


def test_what_changed_names_the_replaced_document(telecom, source):
    document_ingest(source=source, file_name="plans.md", data=PLANS)
    live = publish(telecom)
    document_ingest(source=source, file_name="plans.md", data=PLANS_NEW)

    changes = document_diff(live.document, profile_documents()["telecom_contas"])

    assert [change.text for change in changes] == ["knowledge source Help centre: document 'plans.md' replaced"]


def test_a_revert_answers_from_the_current_document_of_a_file_whose_row_is_gone(api, telecom, source):
    first = document_ingest(source=source, file_name="plans.md", data=PLANS)
    publish(telecom)
    second = document_ingest(source=source, file_name="plans.md", data=PLANS_NEW)
    publish(telecom, "the new speed")  # the first row deleted: no version served holds it

    version_revert(profile=telecom, to=1)

    assert not KnowledgeDocument.objects.filter(pk=first.document_id).exists()
    assert cited(ask(api, QUESTION)) == second.document_id


def test_a_rollout_candidates_document_is_kept_while_its_plan_runs_and_goes_at_the_first_publish_after_it_ends(
    telecom, source
):
    first = document_ingest(source=source, file_name="plans.md", data=PLANS)
    publish(telecom)
    second = document_ingest(source=source, file_name="plans.md", data=PLANS_NEW)
    candidate = version_publish(profile=telecom, document=profile_documents()["telecom_contas"], release=False)
    plan = RolloutPlan.objects.create(name="speed", profile=telecom, candidate=candidate, stages=[10, 50, 100])
    plan_start(plan, actor="test")

    third = document_ingest(source=source, file_name="plans.md", data=PLANS_THIRD)
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], release=False)  # held anew

    held = dict(KnowledgeDocument.objects.filter(source=source).values_list("pk", "held_by"))
    assert held == {first.document_id: [1], second.document_id: [2], third.document_id: [3]}
    assert words_kept(source) == words_of_rows(source)

    plan_command(plan, "abort", actor="test")
    publish(telecom, "the third speed")

    assert list(KnowledgeDocument.objects.filter(source=source).values_list("pk", flat=True)) == [third.document_id]
    assert words_kept(source) == words_of_rows(source)


def test_the_rows_a_versions_keys_name_are_the_exact_ones_else_the_current_of_their_file():
    rows = [
        (1, "Help", "a.md", "h1", False),
        (2, "Help", "a.md", "h2", True),
        (3, "Help", "b.md", "h3", False),
        (4, "Help", "b.md", "h3", True),
        (5, "Help", "c.md", "h5", True),
    ]

    assert rows_chosen(rows, None) == {2, 4, 5}
    assert rows_chosen(rows, frozenset({("Help", "a.md", "h1"), ("Help", "b.md", "h3")})) == {1, 4}
    assert rows_chosen(rows, frozenset({("Help", "a.md", "gone"), ("Help", "z.md", "h9")})) == {2}


def test_the_admin_says_which_versions_hold_a_document_and_that_a_replaced_one_is_replaced(
    client, editor, telecom, source
):
    first = document_ingest(source=source, file_name="plans.md", data=PLANS)
    publish(telecom)
    second = document_ingest(source=source, file_name="plans.md", data=PLANS_NEW)
    client.force_login(editor)

    old = client.get(f"/admin/knowledge/knowledgedocument/{first.document_id}/change/").content.decode()
    new = client.get(f"/admin/knowledge/knowledgedocument/{second.document_id}/change/").content.decode()
    listed = client.get("/admin/knowledge/knowledgesource/").content.decode()

    assert "replaced " in old and "held by version 1" in old
    assert "the draft&#x27;s; in no version served" in new
    assert 'class="field-documents_count">1<' in listed  # the draft's documents; the replaced one is the version's
