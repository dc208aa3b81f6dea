"""A help centre's synonyms, on PostgreSQL and SQLite: a group finds an article by its other term, in the search and
in the relevance bar; another tenant's never apply; a draft's serve once published; the admin edits them with the
edit-knowledge permission only, within the tenant's bound."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.core.exceptions import ValidationError

from agents.passages import asked_words, holds
from knowledge import synonym_reading
from knowledge.answer_kinds import TIME, asked_with_kinds
from knowledge.models import KnowledgeSource
from knowledge.retrieval import knowledge_retrieve
from knowledge.search import knowledge_search
from knowledge.services import document_ingest
from knowledge.synonym_reading import passage_words, question_read, question_stems, words_held_with
from knowledge.synonyms import synonyms_cleaned, synonyms_parsed, synonyms_written
from releases.versions import version_publish
from routing import snapshot
from routing.documents import profile_documents
from tests.factories import TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

EXCHANGES = """# Trocas

## O que não tem troca

Roupas íntimas e moda praia sem o lacre de higiene não podem ser trocadas, a não ser por defeito.
""".encode()
QUESTION = "biquini tem troca?"
BEACHWEAR = [["moda praia", "biquíni", "maiô"]]


@pytest.fixture
def exchanges(profile) -> KnowledgeSource:
    source = KnowledgeSource.objects.create(profile=profile, name="Central de ajuda", language="pt")
    document_ingest(source=source, file_name="trocas.md", data=EXCHANGES)
    return source


def used(profile_pk: int, text: str, **kwargs) -> list[str]:
    retrieved = knowledge_retrieve(
        profile_pk=profile_pk, query=text, language="pt", tags=(), min_score=0.5, **{"tenant_pk": None, **kwargs}
    )
    return [passage.hit.file_name for passage in retrieved.used]


def with_synonyms(source: KnowledgeSource, groups: list[list[str]]) -> None:
    source.synonyms = groups
    source.full_clean()
    source.save()


def test_a_synonym_group_finds_an_article_by_its_other_term_in_the_search_and_at_the_bar(exchanges, profile):
    assert knowledge_search(profile=profile, query="biquíni") == []
    assert used(profile.pk, QUESTION) == []  # "troca" alone: one word of two

    with_synonyms(exchanges, BEACHWEAR)

    assert [hit.file_name for hit in knowledge_search(profile=profile, query="biquíni")] == ["trocas.md"]
    assert used(profile.pk, QUESTION) == ["trocas.md"]  # biquini held as "moda praia", and troca


def test_a_word_a_held_term_covers_is_held_by_a_passage_holding_another_term_of_the_group_the_question_holds_too():

    question = "ja reclamei 3 vezes e ninguem resolve, tem ouvidoria?"  # "reclamação" and "ouvidoria" both held
    asked = asked_words(question)
    reading = question_read(asked, question, (("ouvidoria", "reclamação"),))
    passage = passage_words("Ouvidoria", "Se o seu problema não foi resolvido, fale com a Ouvidoria.")

    assert words_held_with(asked, passage, reading) == ["reclamei", "resolve", "ouvidoria"]
    assert reading.extra == ()  # nothing the question does not say already to search for


def test_a_question_asking_for_a_kind_of_answer_holds_a_term_naming_the_kind_beside_its_own_word():
    question = "a bolsa abre que horas?"  # "que horas" asks for a horário: the term "horário da bolsa" is held
    asked = asked_with_kinds(asked_words(question), question)
    reading = question_read(asked, question, (("pregão", "horário de negociação", "horário da bolsa"),))
    passage = passage_words("Horário de negociação", "O pregão regular funciona de segunda a sexta, das 10h às 17h55.")

    assert asked == ["bolsa", TIME]  # "abre" asks for the time with "que horas"
    assert words_held_with(asked, passage, reading) == ["bolsa", TIME]


def test_another_tenants_synonyms_never_apply(exchanges, profile):
    acme, other = TenantFactory(slug="acme"), TenantFactory(slug="other")
    own = KnowledgeSource.objects.create(profile=profile, tenant=acme, name="Acme", language="pt")
    document_ingest(source=own, file_name="acme.md", data="# Acme\n\n## Lojas\n\nAs lojas abrem às 10h.\n".encode())
    with_synonyms(own, BEACHWEAR)

    assert used(profile.pk, QUESTION, tenant_pk=acme.pk) == ["trocas.md"]
    assert used(profile.pk, QUESTION, tenant_pk=other.pk) == []
    assert used(profile.pk, QUESTION) == []


@pytest.mark.usefixtures("multi_agent_for_everyone")
def test_a_drafts_synonyms_do_not_serve_until_the_profile_is_published(telecom):
    source = KnowledgeSource.objects.create(profile=telecom, name="Central de ajuda", language="pt")
    document_ingest(source=source, file_name="trocas.md", data=EXCHANGES)
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="help centre")

    with_synonyms(source, BEACHWEAR)

    def served(*, draft: bool) -> list[str]:
        spec = snapshot.current().profile("telecom_contas", draft=draft)
        versioned = {"documents": spec.knowledge_documents, "synonyms": spec.knowledge_synonyms}
        return used(spec.pk, QUESTION, **versioned)

    assert (served(draft=False), served(draft=True)) == ([], ["trocas.md"])
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="synonyms")
    assert served(draft=False) == ["trocas.md"]


def test_synonyms_are_stored_cleaned_and_refused_past_their_bounds(exchanges, settings):
    written = "moda praia,  biquíni , maiô\nbiquini\n\nfrete, Frete, taxa de entrega"
    assert synonyms_cleaned(synonyms_parsed(written)) == [
        ["moda praia", "biquíni", "maiô"],
        ["frete", "taxa de entrega"],
    ]
    assert synonyms_written([["moda praia", "biquíni"], ["frete", "taxa de entrega"]]) == (
        "moda praia, biquíni\nfrete, taxa de entrega"
    )
    with pytest.raises(ValidationError, match="at most 4 words"):
        synonyms_cleaned([["one two three four five", "six"]])
    settings.KNOWLEDGE_MAX_SYNONYM_TERMS = 4
    other = KnowledgeSource.objects.create(profile=exchanges.profile, name="Outra", language="pt")
    with_synonyms(other, [["frete", "taxa de entrega"]])
    with pytest.raises(ValidationError, match="at most 4 synonyms"):
        with_synonyms(exchanges, BEACHWEAR)  # 2 + 3 in the shared sources


def change_form(source: KnowledgeSource, synonyms: str) -> dict[str, str]:
    return {
        "profile": str(source.profile_id),
        "name": source.name,
        "language": source.language,
        "tags": "[]",
        "enabled": "on",
        "synonyms": synonyms,
        "documents-TOTAL_FORMS": "1",
        "documents-INITIAL_FORMS": "1",
        "documents-0-id": str(source.documents.get().pk),
        "documents-0-source": str(source.pk),
        "uploads-TOTAL_FORMS": "0",
        "uploads-INITIAL_FORMS": "0",
    }


def test_an_editor_writes_a_sources_synonyms_in_the_admin_and_staff_without_the_permission_is_refused(
    client, editor, django_user_model, exchanges
):
    page = f"/admin/knowledge/knowledgesource/{exchanges.pk}/change/"
    plain = django_user_model.objects.create_user("plain", "plain@example.com", "plain-password", is_staff=True)
    client.force_login(plain)
    assert client.post(page, change_form(exchanges, "moda praia, biquíni")).status_code == 403
    client.force_login(editor)

    saved = client.post(page, change_form(exchanges, "moda praia, biquíni, maiô\nfrete, taxa de entrega"))
    refused = client.post(page, change_form(exchanges, "one two three four five, six"))

    assert saved.status_code == 302, saved.content.decode()[:2000]
    exchanges.refresh_from_db()
    assert exchanges.synonyms == [["moda praia", "biquíni", "maiô"], ["frete", "taxa de entrega"]]
    assert refused.status_code == 200 and "at most 4 words" in refused.content.decode()
    assert "moda praia, biquíni, maiô\nfrete, taxa de entrega" in client.get(page).content.decode()


def _read_group_by_group(asked: tuple[str, ...], question: str, groups: tuple[tuple[str, ...], ...]):
    """A question's reading as it was made before its groups were indexed: every term of every group held against it."""
    stems = question_stems(question)
    alternatives: dict[str, list[tuple[str, ...]]] = {}
    extra: list[str] = []
    for group in groups:
        held = [term for term in group if synonym_reading._holds(term, stems)]
        if not held:
            continue
        for word in asked:
            covering = [term for term in held if holds(word, synonym_reading._term_stems(term))]
            if covering:
                others = [term for term in group if term not in covering]
                alternatives.setdefault(word, []).extend(synonym_reading._term_words(term) for term in others)
        extra.extend(term for term in group if term not in held)
    return {word: tuple(dict.fromkeys(terms)) for word, terms in alternatives.items()}, tuple(dict.fromkeys(extra))


def test_a_question_reads_only_the_groups_whose_terms_first_words_it_holds_and_reads_them_as_every_group_was_read(
    monkeypatch,
):
    root = Path(__file__).resolve().parents[2]
    groups = tuple(
        tuple(group)
        for path in sorted((root / "config" / "demo" / "knowledge").rglob("synonyms.yaml"))
        for group in yaml.safe_load(path.read_text())["synonyms"]
    )
    questions = [
        row["text"] for row in yaml.safe_load((root / "bench/knowledge/questions.yaml").read_text())["questions"]
    ]
    questions += ["biquini tem troca?", "o wi fi caiu", "mi factura electrónica", "¿hay permanencia mínima?"]
    read: list[str] = []
    _holds = synonym_reading._holds
    monkeypatch.setattr(synonym_reading, "_holds", lambda term, stems: read.append(term) or _holds(term, stems))

    reads: list[int] = []
    for question in questions:
        asked = tuple(asked_words(question))
        if not asked:
            continue
        read.clear()
        synonym_reading._read.cache_clear()  # a question asked twice is read once
        reading = synonym_reading.question_read(asked, question, groups)
        held_read = list(read)
        expected = _read_group_by_group(asked, question, groups)

        assert (dict(reading.alternatives), reading.extra) == expected, question
        stems = question_stems(question)
        firsts = [words[0] for group in groups for term in group if (words := synonym_reading._term_words(term))]
        may_hold = [
            group
            for group in groups
            if any((words := synonym_reading._term_words(term)) and holds(words[0], stems) for term in group)
        ]
        assert sorted(held_read) == sorted(term for group in may_hold for term in group), question
        reads.append(len(held_read))
    assert len(groups) > 80 and len(firsts) > 250
    assert sorted(reads)[len(reads) // 2] < len(firsts) / 5  # most questions hold few groups' first words
