"""A question's misspelt words read as the words the knowledge writes, on PostgreSQL and SQLite: a word the knowledge
does not hold, one edit from one it does, never on its first letter; a word it holds, or one general language
uses often, never changed."""

from __future__ import annotations

import pytest

from knowledge.models import KnowledgeSource
from knowledge.retrieval import knowledge_retrieve
from knowledge.search import query_spelled
from knowledge.services import document_ingest
from knowledge.spelling import edits, edits_allowed, respelt, spelling_of

ROAMING = """# Roaming internacional

## Sem pacote

Sem pacote, o roaming cobra cada megabyte usado fora do país. Para não pagar a mais, desligue o roaming de dados no
celular antes de viajar.

## Passaporte

O pacote Passaporte inclui 5 GB por semana na Europa. O chip é a única peça a trocar.
""".encode()


def test_an_edit_is_a_letter_added_dropped_changed_or_two_neighbours_swapped():
    assert edits("roming", "roaming", 2) == 1  # added
    assert edits("roaaming", "roaming", 2) == 1  # dropped
    assert edits("rouming", "roaming", 2) == 1  # changed
    assert edits("raoming", "roaming", 2) == 1  # swapped
    assert edits("password", "passport", 2) == 2
    assert edits("fatura", "roaming", 1) == 2  # past the most asked: the most plus one


def test_a_word_is_read_as_the_one_word_nearest_it_within_its_edits_and_never_across_its_first_letter():
    assert [edits_allowed(word) for word in ("pix", "roam", "roming", "internacinal")] == [0, 1, 1, 1]
    assert spelling_of("roming", ["roaming", "pacote"]) == "roaming"
    assert spelling_of("password", ["passport"]) is None  # two edits: a word, not a typo of it
    assert spelling_of("toaming", ["roaming"]) is None  # its first letter is never an edit
    assert spelling_of("pena", ["peca", "pela"]) is None  # two as near: a reading would be a guess
    assert respelt("Como desligo o Roming?", {"roming": "roaming"}) == "Como desligo o roaming?"


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_a_misspelt_word_of_a_question_is_read_as_the_knowledges_and_reaches_the_bar_on_either_engine(profile):
    source = KnowledgeSource.objects.create(profile=profile, name="Central de ajuda", language="pt")
    document_ingest(source=source, file_name="roaming.md", data=ROAMING)
    question = "como desligo o roming pra nao pagar uma fortuna?"

    used = knowledge_retrieve(
        profile_pk=profile.pk, tenant_pk=None, query=question, language="pt", tags=(), min_score=0.5
    ).used

    assert query_spelled(profile=profile.pk, query=question) == "como desligo o roaming pra nao pagar uma fortuna?"
    assert [passage.hit.heading for passage in used][:1] == ["Roaming internacional › Sem pacote"]
    # A word the knowledge holds, by its first letters or a stem, is never read as another: "passaportes" is held.
    assert query_spelled(profile=profile.pk, query="passaportes de dados") == "passaportes de dados"
    # A word the general language uses often is a word, not a typo: "pena" stays, though one edit from "peça".
    assert query_spelled(profile=profile.pk, query="vale a pena o passaporte?") == "vale a pena o passaporte?"
