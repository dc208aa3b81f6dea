"""The vector search beside the words': passages embedded at upload over HTTP (the scripted server's ``/v1/embeddings``,
tests/llm_server.py: a hashed bag of words and character trigrams, so the texts below are written to share trigrams
where they share no word), the two rankings fused, and the words' ranking alone whenever the vectors cannot say."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from agents.knowledge_settings import validate_knowledge_settings
from knowledge.admin import report_words
from knowledge.models import KnowledgeDocument, KnowledgePassage, KnowledgeSource
from knowledge.retrieval import knowledge_retrieve
from knowledge.search import knowledge_search
from knowledge.services import document_ingest
from knowledge.vectors import (
    LEXICAL,
    MATRICES,
    RRF_K,
    STAMP_LENGTH,
    VECTORS,
    embedding_stamp,
    fused,
    nearest,
    vectors_forget,
)
from tests.factories import TenantFactory
from tests.llm_server import ScriptedLLMServer, embed_text

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

HELP = """# Central de ajuda

## Fatura

A segunda via da fatura fica em Minha conta, na aba Faturas, e pode ser baixada em PDF.

## Portabilidade

Para levar seu número para outra operadora, peça o código de portabilidade ao atendimento.

## Reconexão

A reconexão é automática: o aparelho reconecta quando o sinal volta, sem desligar nada.
""".encode()

# No word of it is in the documents (nor, on PostgreSQL, near one of theirs): "desconexões" shares trigrams with
# "reconexão", and the scripted embeddings put the two close.
NO_SHARED_WORD = "desconexões frequentes"
VECTOR_BAR = 0.25  # the scripted embeddings' cosines: 0.32 for the question above and its passage, 0.08-0.11 else


@pytest.fixture
def server():
    vectors_forget()
    running = ScriptedLLMServer().start()
    yield running
    running.stop()
    vectors_forget()


@pytest.fixture
def endpoint(settings, server):
    settings.KNOWLEDGE_EMBEDDINGS_BASE_URL = server.base_url
    settings.KNOWLEDGE_EMBEDDINGS_MODEL = "embed-small"
    settings.KNOWLEDGE_EMBEDDINGS_API_KEY = "knowledge-key"
    settings.KNOWLEDGE_EMBEDDINGS_TIMEOUT = 2.0
    return server


@pytest.fixture
def vectors_on(profile):
    profile.knowledge = {"vectors": True, "vector_min_score": VECTOR_BAR}
    profile.save()
    return profile


def pt_source(profile, **fields) -> KnowledgeSource:
    return KnowledgeSource.objects.create(profile=profile, name=fields.pop("name", "Central"), language="pt", **fields)


def search(profile, query: str, *, vectors: bool = True, **options):
    return knowledge_search(profile=profile, query=query, language="pt", vectors=vectors, **options)


def retrieved_without_a_shared_word(profile):
    """What a turn retrieves of :data:`NO_SHARED_WORD` in ``profile``'s knowledge, with the vectors' bar."""
    return knowledge_retrieve(
        profile_pk=profile.pk,
        tenant_pk=None,
        query=NO_SHARED_WORD,
        language="pt",
        tags=(),
        min_score=0.5,
        vector_bar=VECTOR_BAR,
    )


def test_passages_are_embedded_in_one_batch_when_indexed_and_the_model_named(endpoint, vectors_on):
    report = document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)

    document = KnowledgeDocument.objects.get(pk=report.document_id)
    passages = list(document.passages.order_by("position"))
    (request,) = endpoint.embedding_requests
    assert request.model == "embed-small" and request.authorization == "Bearer knowledge-key"
    assert request.inputs == [f"{passage.heading}\n{passage.text}" for passage in passages]
    assert (document.embedding_model, document.embedding_error) == ("embed-small", "")
    stored = np.frombuffer(bytes(passages[0].embedding), dtype=np.float32)
    assert np.allclose(stored, embed_text(request.inputs[0]), atol=1e-6)
    assert report.vectors == "embedded (embed-small)" and "Vectors: embedded (embed-small)." in report_words(report)


def test_a_question_sharing_no_word_with_its_article_is_found_through_the_vectors(endpoint, vectors_on):
    document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)

    by_words = search(vectors_on, NO_SHARED_WORD, vectors=False)
    retrieved = retrieved_without_a_shared_word(vectors_on)

    assert all("Reconexão" not in hit.heading for hit in by_words)
    (used,) = retrieved.used
    assert used.hit.heading.endswith("Reconexão") and used.hit.found_by == (VECTORS,)
    assert used.held == 0 and used.hit.cosine is not None and used.hit.cosine >= VECTOR_BAR
    assert NO_SHARED_WORD in endpoint.embedding_inputs  # the question went over HTTP


def test_a_passage_only_the_vectors_found_below_the_cosine_bar_is_not_used(endpoint, vectors_on):
    document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)

    retrieved = knowledge_retrieve(
        profile_pk=vectors_on.pk,
        tenant_pk=None,
        query="tem loja física?",  # the documents do not say (cosines 0.12-0.15)
        language="pt",
        tags=(),
        min_score=0.5,
        vector_bar=VECTOR_BAR,
    )

    assert retrieved.considered and all(VECTORS in passage.hit.found_by for passage in retrieved.considered)
    assert retrieved.used == ()


def test_the_two_rankings_are_fused_by_reciprocal_rank_with_k_60():
    # Second in both lists beats first in one (2 / 62 > 1 / 61); equals keep the first list's order.
    order = fused([(LEXICAL, [1, 2, 3]), (VECTORS, [4, 2, 5])], limit=5)

    assert [pk for pk, _, _ in order] == [2, 1, 4, 3, 5]
    assert order[0] == (2, round(2 / (RRF_K + 2) * RRF_K / 2, 6), (LEXICAL, VECTORS))
    assert order[1] == (1, round(1 / 61 * 30, 6), (LEXICAL,)) and order[2] == (4, round(1 / 61 * 30, 6), (VECTORS,))
    # Third in one list and first in the other beats second in both: 1 / 61 + 1 / 63 > 2 / 62.
    assert [pk for pk, _, _ in fused([(LEXICAL, [1, 2]), (VECTORS, [3, 2, 1])], limit=3)] == [1, 2, 3]
    assert fused([(LEXICAL, [7]), (VECTORS, [7])], limit=1)[0][1] == round(60 / 61, 6)  # below 1


def test_a_search_with_vectors_orders_its_passages_as_the_fusion_of_its_two_rankings(endpoint, vectors_on):
    document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)
    query = "segunda via da fatura e reconexão"

    by_words = [hit.passage_id for hit in search(vectors_on, query, vectors=False, limit=20)]
    stamps = KnowledgeDocument.objects.values_list("pk", "content_hash", "embedding_model")
    by_vectors = [pk for pk, _ in nearest(documents=list(stamps), passages=3, query=query, limit=20) or []]
    hits = search(vectors_on, query)

    expected = fused([(LEXICAL, by_words), (VECTORS, by_vectors)], limit=5)
    assert [(hit.passage_id, hit.score, hit.found_by) for hit in hits] == expected
    assert len(by_words) >= 1 and len(by_vectors) == 3
    assert hits[0].found_by == (LEXICAL, VECTORS)


def test_the_endpoint_failing_at_a_search_leaves_the_words_ranking_alone(endpoint, vectors_on):
    document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)
    by_words = search(vectors_on, "segunda via da fatura", vectors=False)
    calls = len(endpoint.embedding_requests)
    endpoint.embeddings_error(500)

    hits = search(vectors_on, "segunda via da fatura")

    assert [(hit.passage_id, hit.score) for hit in hits] == [(hit.passage_id, hit.score) for hit in by_words]
    assert all(hit.found_by == (LEXICAL,) and hit.cosine is None for hit in hits)
    assert len(endpoint.embedding_requests) == calls + 1  # tried once, no retry
    assert search(vectors_on, "segunda via da fatura")[0].found_by == (LEXICAL, VECTORS)  # a failure is not kept


def test_a_slow_endpoint_leaves_the_words_ranking_alone_after_its_timeout(settings, endpoint, vectors_on):
    document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)
    settings.KNOWLEDGE_EMBEDDINGS_TIMEOUT = 0.2
    endpoint.embeddings_slowly(2.0)

    hits = search(vectors_on, "segunda via da fatura")

    assert hits and all(hit.found_by == (LEXICAL,) for hit in hits)


def test_an_upload_the_endpoint_fails_stands_searched_by_its_words_and_the_admin_says_why(endpoint, vectors_on):
    endpoint.embeddings_error(500)

    report = document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)

    document = KnowledgeDocument.objects.get(pk=report.document_id)
    assert report.outcome == "created" and report.passages == 3
    assert document.embedding_model == "" and "embed-small" in document.embedding_error
    assert report.vectors.startswith("words only: The embeddings endpoint")
    assert not KnowledgePassage.objects.filter(embedding__isnull=False).exists()
    assert search(vectors_on, "segunda via da fatura")[0].found_by == (LEXICAL,)


def test_the_document_page_and_the_source_page_say_whether_a_document_is_embedded(admin_client, endpoint, vectors_on):
    source = pt_source(vectors_on)
    endpoint.embeddings_error(500)
    report = document_ingest(source=source, file_name="ajuda.md", data=HELP)

    page = admin_client.get(f"/admin/knowledge/knowledgedocument/{report.document_id}/change/")
    listing = admin_client.get(f"/admin/knowledge/knowledgesource/{source.pk}/change/")

    assert page.status_code == 200 and "words only: The embeddings endpoint" in page.content.decode()
    assert "words only: The embeddings endpoint" in listing.content.decode()


def test_a_change_of_model_re_embeds_the_documents_and_the_old_vectors_are_not_read(settings, endpoint, vectors_on):
    document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)
    settings.KNOWLEDGE_EMBEDDINGS_MODEL = "embed-large"

    before = search(vectors_on, NO_SHARED_WORD)
    call_command("embed_knowledge", profile=vectors_on.agent_id)
    after = search(vectors_on, NO_SHARED_WORD)

    assert all(VECTORS not in hit.found_by for hit in before)  # embed-small's vectors are not embed-large's
    assert [request.model for request in endpoint.embedding_requests] == [
        "embed-small",  # the upload
        "embed-large",  # the re-embedding: the three passages in one batch
        "embed-large",  # the question
    ]
    assert KnowledgeDocument.objects.get().embedding_model == "embed-large"
    assert after[0].heading.endswith("Reconexão") and after[0].found_by == (VECTORS,)
    call_command("embed_knowledge", profile=vectors_on.agent_id)  # nothing stale: no call
    assert len(endpoint.embedding_requests) == 3


def test_a_passage_and_a_question_reach_the_endpoint_after_their_prefixes_and_the_document_names_both(
    settings, endpoint, vectors_on
):
    settings.KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX, settings.KNOWLEDGE_EMBEDDINGS_DOCUMENT_PREFIX = "query: ", "passage: "

    report = document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)
    hits = search(vectors_on, NO_SHARED_WORD)

    document = KnowledgeDocument.objects.get(pk=report.document_id)
    passages, question = endpoint.embedding_requests
    assert passages.inputs == [f"passage: {p.heading}\n{p.text}" for p in document.passages.order_by("position")]
    assert question.inputs == [f"query: {NO_SHARED_WORD}"]
    assert document.embedding_model == 'embed-small "passage: "'
    assert report.vectors == 'embedded (embed-small "passage: ")'
    assert hits[0].heading.endswith("Reconexão") and hits[0].found_by == (VECTORS,)


def test_a_change_of_document_prefix_leaves_the_documents_to_their_words_until_embedded_again(
    settings, endpoint, vectors_on
):
    document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)  # no prefix
    settings.KNOWLEDGE_EMBEDDINGS_DOCUMENT_PREFIX = "passage: "

    before = search(vectors_on, NO_SHARED_WORD)
    call_command("embed_knowledge", profile=vectors_on.agent_id)
    after = search(vectors_on, NO_SHARED_WORD)

    assert all(VECTORS not in hit.found_by for hit in before)  # vectors made without the prefix are not read
    assert after[0].heading.endswith("Reconexão") and after[0].found_by == (VECTORS,)
    upload, again, question = endpoint.embedding_requests
    assert not any(text.startswith("passage: ") for text in upload.inputs)
    assert all(text.startswith("passage: ") for text in again.inputs) and len(again.inputs) == 3
    assert question.inputs == [NO_SHARED_WORD]  # the question's prefix is its own setting, unset
    assert KnowledgeDocument.objects.get().embedding_model == 'embed-small "passage: "'
    settings.KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX = "query: "  # what documents are stamped with did not change
    call_command("embed_knowledge", profile=vectors_on.agent_id)
    assert len(endpoint.embedding_requests) == 3


def test_a_question_asked_after_a_prefix_is_embedded_again_without_it(settings, endpoint, vectors_on):
    document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)
    settings.KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX = "query: "
    search(vectors_on, NO_SHARED_WORD)

    settings.KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX = ""
    search(vectors_on, NO_SHARED_WORD)
    search(vectors_on, NO_SHARED_WORD)  # now cached

    assert endpoint.embedding_inputs[-2:] == [f"query: {NO_SHARED_WORD}", NO_SHARED_WORD]
    assert len(endpoint.embedding_requests) == 3


def test_a_stamp_past_its_column_is_cut_and_closed_by_a_digest_of_the_whole():
    long_prefix = "Represent this sentence for searching relevant passages: " * 4

    stamp, other = (embedding_stamp("bge-small", prefix) for prefix in (long_prefix, long_prefix + "x"))

    assert len(stamp) == len(other) == STAMP_LENGTH and stamp != other
    assert stamp.startswith('bge-small "Represent this sentence') and embedding_stamp("bge-small", "") == "bge-small"


def test_the_command_says_which_documents_the_endpoint_failed(endpoint, vectors_on):
    document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)
    endpoint.embeddings_error(500)

    with pytest.raises(CommandError, match="1 documents could not be embedded"):
        call_command("embed_knowledge", profile=vectors_on.agent_id, every=True)


def test_another_tenants_passages_are_never_in_the_matrix(endpoint, vectors_on):
    ours, theirs = TenantFactory(), TenantFactory()
    document_ingest(source=pt_source(vectors_on), file_name="ajuda.md", data=HELP)
    document_ingest(source=pt_source(vectors_on, name="Nossa", tenant=ours), file_name="nossa.md", data=HELP)
    document_ingest(source=pt_source(vectors_on, name="Deles", tenant=theirs), file_name="deles.md", data=HELP)

    hits = search(vectors_on, NO_SHARED_WORD, tenant=ours, limit=10)

    theirs_pks = set(KnowledgePassage.objects.filter(document__source__tenant=theirs).values_list("pk", flat=True))
    readable = set(KnowledgePassage.objects.exclude(document__source__tenant=theirs).values_list("pk", flat=True))
    (matrix,) = MATRICES.values()
    assert set(matrix.passages.tolist()) == readable
    assert not theirs_pks & {hit.passage_id for hit in hits}
    assert {hit.file_name for hit in hits if VECTORS in hit.found_by} == {"ajuda.md", "nossa.md"}


def test_the_matrix_is_read_once_per_set_of_documents_and_again_after_an_upload(endpoint, vectors_on):
    source = pt_source(vectors_on)
    document_ingest(source=source, file_name="ajuda.md", data=HELP)

    search(vectors_on, NO_SHARED_WORD)
    search(vectors_on, "segunda via da fatura")
    built = MATRICES.built
    document_ingest(source=source, file_name="mais.md", data=b"# Mais\n\nOutro texto sobre a reconexao.")
    search(vectors_on, NO_SHARED_WORD)

    assert built == 1 and MATRICES.built == 2


def test_with_the_setting_off_nothing_is_embedded_and_no_call_is_made(endpoint, profile):
    document_ingest(source=pt_source(profile), file_name="ajuda.md", data=HELP)

    retrieved = knowledge_retrieve(
        profile_pk=profile.pk, tenant_pk=None, query=NO_SHARED_WORD, language="pt", tags=(), min_score=0.5
    )

    assert endpoint.embedding_requests == [] and len(MATRICES) == 0
    assert retrieved.used == () and all(passage.hit.found_by == (LEXICAL,) for passage in retrieved.considered)
    assert KnowledgeDocument.objects.get().embedding_model == ""


def test_the_vector_settings_are_checked():
    validate_knowledge_settings({"vectors": True, "vector_min_score": 0.4})
    with pytest.raises(ValidationError, match="vectors is true or false"):
        validate_knowledge_settings({"vectors": "yes"})
    with pytest.raises(ValidationError, match="vector_min_score is a number"):
        validate_knowledge_settings({"vector_min_score": 1.5})


@pytest.mark.usefixtures("multi_agent_for_everyone")
def test_a_turn_cites_a_passage_only_the_vectors_found_and_its_metadata_says_so(api, telecom, endpoint):
    from releases.versions import version_publish
    from routing.documents import profile_documents

    telecom.knowledge = {"vectors": True, "vector_min_score": VECTOR_BAR}
    telecom.save(update_fields=["knowledge"])
    document_ingest(source=pt_source(telecom), file_name="ajuda.md", data=HELP)
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="vectors")

    response = api.post(
        "/api/chat/message",
        {"agent_id": "telecom_contas", "payload": {"text": NO_SHARED_WORD, "user_id": "u-vectors", "language": "pt"}},
        format="json",
    )

    assert response.status_code == 200, response.content
    knowledge = response.json()["metadata"]["knowledge"]
    (row,) = [row for row in knowledge["retrieved"] if row["used"]]
    assert row["found_by"] == [VECTORS] and row["cosine"] >= VECTOR_BAR and row["score"] == 0
    assert all(row["found_by"] == [VECTORS] for row in knowledge["retrieved"])  # no word of it in the documents
    assert [citation["passage"] for citation in knowledge["citations"]] == [row["passage"]]


@pytest.mark.usefixtures("multi_agent_for_everyone")
def test_a_version_published_with_vectors_embeds_the_documents_uploaded_while_the_drafts_search_used_none(
    telecom, settings, endpoint, django_capture_on_commit_callbacks
):
    from releases.versions import version_publish
    from routing.documents import profile_documents

    settings.REDIS_URL = ""  # no broker: embedded once the publish commits, in its request
    report = document_ingest(source=pt_source(telecom), file_name="ajuda.md", data=HELP)
    with django_capture_on_commit_callbacks(execute=True):
        version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="words only")
    assert endpoint.embedding_requests == []  # neither the draft's search nor the version's uses vectors

    telecom.knowledge = {"vectors": True, "vector_min_score": VECTOR_BAR}
    telecom.save(update_fields=["knowledge"])
    with django_capture_on_commit_callbacks(execute=True):
        version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="vectors")

    assert KnowledgeDocument.objects.get(pk=report.document_id).embedding_model == "embed-small"
    used = retrieved_without_a_shared_word(telecom).used
    assert [passage.hit.heading for passage in used] == ["Central de ajuda › Reconexão"]


def test_the_sources_admin_action_embeds_what_the_configured_model_did_not(
    admin_client, settings, endpoint, vectors_on
):
    settings.REDIS_URL = ""  # no broker: in the request
    source = pt_source(vectors_on)
    endpoint.embeddings_error(500)
    report = document_ingest(source=source, file_name="ajuda.md", data=HELP)

    response = admin_client.post(
        "/admin/knowledge/knowledgesource/", {"action": "embed_again", "_selected_action": [source.pk]}, follow=True
    )

    assert "1 documents embedded, 0 not" in response.content.decode()
    assert KnowledgeDocument.objects.get(pk=report.document_id).embedding_model == "embed-small"
    page = admin_client.get(f"/admin/knowledge/knowledgedocument/{report.document_id}/change/")
    assert "embedded (embed-small)" in page.content.decode()
