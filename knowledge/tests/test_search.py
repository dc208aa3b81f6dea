"""knowledge_search on both engines: the right passage first, filters by language and tag, tenants kept apart."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge import search
from knowledge.models import KnowledgeSource
from knowledge.search import knowledge_search
from knowledge.services import document_ingest
from knowledge.tests.conftest import HELP_EN, HELP_ES, HELP_PT
from tests.factories import AgentProfileFactory, TenantFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]


@pytest.fixture
def three_languages(source):
    document_ingest(source=source, file_name="help.md", data=HELP_EN)
    document_ingest(source=source, file_name="ajuda.md", data=HELP_PT, language="pt", tags=["billing"])
    document_ingest(source=source, file_name="ayuda.md", data=HELP_ES, language="es")
    return source


def headings(hits) -> list[str]:
    return [hit.heading for hit in hits]


def test_the_passage_that_answers_comes_first_with_its_document_and_heading(three_languages, profile):
    hits = knowledge_search(profile=profile, query="How do I reset my password?")

    assert hits[0].heading == "Help centre › Passwords"
    assert (hits[0].document_title, hits[0].file_name, hits[0].language) == ("Help centre", "help.md", "en")
    assert 0 < hits[0].score < 1 and "Reset password" in hits[0].text
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)


def test_each_language_finds_its_own_passages(three_languages, profile):
    assert headings(knowledge_search(profile=profile, query="segunda via da fatura", limit=1)) == [
        "Central de ajuda › Fatura"
    ]
    assert headings(knowledge_search(profile=profile, query="¿cuánto tardan los envíos?", limit=1)) == [
        "Centro de ayuda › Envíos"
    ]


def test_filters_by_language_and_by_tag_keep_to_the_documents_that_match(three_languages, profile):
    in_english = knowledge_search(profile=profile, query="fatura refunds envíos", language="en")
    tagged = knowledge_search(profile=profile, query="fatura refunds envíos", tags=["billing"])
    by_source_tag = knowledge_search(profile=profile, query="refunds", tags=["help"])

    assert {hit.language for hit in in_english} == {"en"}
    assert headings(tagged) == ["Central de ajuda › Fatura"]
    assert headings(by_source_tag) == ["Help centre › Refunds"]


def test_another_tenants_source_is_never_searched_and_a_disabled_one_neither(source, profile):
    acme, other = TenantFactory(slug="acme"), TenantFactory(slug="other")
    private = KnowledgeSource.objects.create(profile=profile, tenant=acme, name="Acme only", language="en")
    document_ingest(source=private, file_name="acme.md", data=b"# Acme\n\n## Discount\n\nAcme staff get a discount.\n")
    off = KnowledgeSource.objects.create(profile=profile, name="Old", language="en", enabled=False)
    document_ingest(source=off, file_name="old.md", data=b"# Old\n\n## Discount\n\nThe old discount.\n")

    assert headings(knowledge_search(profile=profile, query="discount", tenant=acme)) == ["Acme › Discount"]
    assert knowledge_search(profile=profile, query="discount", tenant=other) == []
    assert knowledge_search(profile=profile, query="discount") == []


def test_another_profiles_knowledge_is_never_searched(three_languages):
    stranger = AgentProfileFactory(agent_id="stranger")

    assert knowledge_search(profile=stranger, query="password") == []


def test_a_replaced_document_is_found_by_its_new_words_only(source, profile):
    document_ingest(source=source, file_name="help.md", data=HELP_EN)
    document_ingest(source=source, file_name="help.md", data=HELP_EN.replace(b"email", b"carrier pigeon"))

    assert knowledge_search(profile=profile, query="email") == []
    assert headings(knowledge_search(profile=profile, query="pigeon")) == ["Help centre › Passwords"]


def test_deleting_a_source_leaves_nothing_to_find(three_languages, profile):
    three_languages.delete()

    assert knowledge_search(profile=profile, query="password refunds fatura") == []


def test_a_query_with_no_word_finds_nothing(three_languages, profile):
    assert knowledge_search(profile=profile, query="?! ...") == []
    assert knowledge_search(profile=profile, query="password", limit=0) == []


def test_a_misspelt_word_still_finds_its_passage_on_postgresql(three_languages, profile):
    if connection.vendor != "postgresql":
        pytest.skip("trigram similarity is PostgreSQL's; SQLite's FTS5 matches words and prefixes only")

    assert headings(knowledge_search(profile=profile, query="pasword", limit=1)) == ["Help centre › Passwords"]


def test_a_search_filters_on_the_rarer_words_within_its_budget_and_ranks_by_every_word(source, profile, monkeypatch):
    common = "\n\n".join(f"## Part {n}\n\nYour account and your order number {n}." for n in range(6))
    article = f"# Orders\n\n{common}\n\n## Gift\n\nGift wrap."
    document_ingest(source=source, file_name="common.md", data=article.encode())
    sources = [source.pk]
    monkeypatch.setattr(search, "CANDIDATE_BUDGET", 4)

    rare = search.search_plan(query="gift wrap for my order account", sources=sources)
    all_common = search.search_plan(query="order account", sources=sources)

    assert [term.folded for term in rare.filtered] == ["gift", "wrap"] and not rare.both
    assert {"order", "account"} <= set(rare.ranked)
    # Each common word alone brings more passages than the budget: the passages must hold both.
    assert sorted(term.folded for term in all_common.filtered) == ["account", "order"] and all_common.both
    assert headings(knowledge_search(profile=profile, query="gift wrap for my order account", limit=1)) == [
        "Orders › Gift"
    ]


def test_the_postgresql_search_filters_on_full_text_alone_and_the_trigram_only_reranks(source, profile):
    """A trigram condition OR-ed into the filter kept the planner off both GIN indexes: a sequential scan computing
    the trigram similarity of every passage (5-14 s over 100,000). The filter is the full-text match alone."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's plan")
    document_ingest(source=source, file_name="help.md", data=HELP_EN)
    with CaptureQueriesContext(connection) as captured:
        knowledge_search(profile=profile, query="How do I reset my pasword?", language="en")
    ranking = next(query["sql"] for query in captured.captured_queries if "ts_rank" in query["sql"])

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (VERBOSE) " + ranking)
        plan = [row[0].strip() for row in cursor.fetchall()]
    filters = [line for line in plan if line.startswith(("Filter:", "Recheck Cond:", "Index Cond:"))]

    assert any("search_vector @@" in line for line in filters)
    assert not any("%" in line or "similarity" in line for line in filters)
    assert sum("word_similarity" in line for line in plan) >= 1  # it re-ranks the candidates


def test_an_unaccented_word_finds_the_accented_one_on_postgresql(three_languages, profile):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's FTS5 folds accents itself")

    assert headings(knowledge_search(profile=profile, query="numero", limit=1)) == ["Central de ajuda › Portabilidade"]
    assert headings(knowledge_search(profile=profile, query="envios", language="es", limit=1)) == [
        "Centro de ayuda › Envíos"
    ]
