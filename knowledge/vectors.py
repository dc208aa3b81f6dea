"""The vector search beside the words': passages embedded when indexed, a question's nearest passages by cosine, and
the two rankings fused by reciprocal rank fusion (docs/knowledge.md, "Vectors").

A profile turns it on (``vectors`` in its knowledge settings, :class:`agents.knowledge_settings.KnowledgeSettings`);
the endpoint is the operator's, ``KNOWLEDGE_EMBEDDINGS_*`` (the router's unless set apart), through the vectoriser
of :mod:`common.embeddings`.

* **Indexing** (:func:`document_embed`, called by :func:`knowledge.services.document_ingest` once the document's
  passages are committed — on a Celery worker for an upload queued there, in the request otherwise): the passages'
  heading and text (after ``KNOWLEDGE_EMBEDDINGS_DOCUMENT_PREFIX``), in batches of
  :data:`common.embeddings.BATCH_SIZE`, each vector stored on its passage as float32 bytes and the document stamped
  with what made them (``embedding_model``: the model, and the document prefix when one is set,
  :func:`embedding_stamp`; vectors made after another prefix are no more comparable than another model's). A failure
  of the endpoint leaves the document's passages read by their words alone, and says why (``embedding_error``, shown
  in the admin); the upload stands. A document embedded by another model or prefix than the one configured is read
  by its words until ``manage.py embed_knowledge`` or the sources' admin action (:func:`profile_embed`,
  :func:`embed_queue`: a Celery worker where a broker exists, in the request otherwise) embeds it again.
* **Searching** (:func:`nearest`): the question embedded after ``KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX`` (cached per
  process, :data:`QUESTIONS`), and the scope's passages — the documents a published version holds, in one language
  and within the tags, of the tenant's and the shared sources: :class:`knowledge.search.Scope` — held as one float32
  matrix per process, read once per set of documents and kept in :data:`MATRICES` (at most :data:`MATRIX_BYTES`, the
  least recently used forgotten); a scope whose matrix would be larger is searched by its words alone. The cosine is
  one product in NumPy.
* **Fusing** (:func:`fused`): reciprocal rank fusion, each list giving a passage 1 / (:data:`RRF_K` + its rank), with
  k = 60, the constant of Cormack, Clarke and Büttcher (SIGIR 2009) that most engines use.

The endpoint down, slow (``KNOWLEDGE_EMBEDDINGS_TIMEOUT``) or answering nonsense: the words' ranking alone, logged.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from django.conf import settings
from django.db import transaction

from agents.public import KnowledgeSettings
from common.embeddings import (
    KNOWLEDGE,
    BytesBounded,
    EmbeddingsCache,
    EmbeddingsUnavailable,
    EmbeddingsVectoriser,
    Endpoint,
)
from common.embeddings import embeddings_vectoriser as configured_vectoriser
from knowledge.models import KnowledgeDocument, KnowledgePassage, KnowledgeSource
from platform.celery import app

logger = logging.getLogger(__name__)

RRF_K = 60
LEXICAL, VECTORS = "lexical", "vectors"  # which ranking found a passage (metadata.knowledge.retrieved's found_by)
MATRIX_BYTES = 256 * 2**20  # per process: about 43,000 passages of 1,536 dimensions
QUESTIONS = EmbeddingsCache(8 * 2**20)  # the questions' embeddings, apart from the routing's cache
NO_CACHE = EmbeddingsCache(0)  # the passages': embedded once, stored on their rows
WRITE_BATCH = 500
EMBED_TASK = "knowledge.profile_embed"

STAMP_LENGTH = KnowledgeDocument._meta.get_field("embedding_model").max_length or 200

Stamp = tuple[int, str, str]  # a document: pk, SHA-256 of its bytes, what its passages are embedded with


def _endpoint() -> Endpoint | None:
    configured = configured_vectoriser(KNOWLEDGE)
    return None if configured is None else configured.endpoint


@lru_cache(maxsize=8)
def _vectoriser(endpoint: Endpoint, questions: bool) -> EmbeddingsVectoriser:
    """One vectoriser (and so one HTTP client) per endpoint: questions cached, passages not."""
    return EmbeddingsVectoriser.of(endpoint, cache=QUESTIONS if questions else NO_CACHE)


def embedding_stamp(model: str, document_prefix: str) -> str:
    """What a document's ``embedding_model`` says made its vectors: the model alone, or the model and its document
    prefix quoted (``multilingual-e5-small "passage: "``); past the column's length, cut and closed by a digest of
    the whole, so that two configurations never share a stamp."""
    stamp = f"{model} {json.dumps(document_prefix, ensure_ascii=False)}" if document_prefix else model
    if len(stamp) <= STAMP_LENGTH:
        return stamp
    digest = hashlib.sha256(stamp.encode()).hexdigest()[:16]
    return f"{stamp[: STAMP_LENGTH - len(digest) - 1]} {digest}"


def embedding_model() -> str:
    """What passages are embedded with now, as documents are stamped (:func:`embedding_stamp`; ``""``: no endpoint
    configured)."""
    endpoint = _endpoint()
    return embedding_stamp(endpoint.model, endpoint.document_prefix) if endpoint else ""


# -- indexing -------------------------------------------------------------------------------------------------------


def vectors_wanted(source: KnowledgeSource) -> bool:
    """The source's profile turns the vector search on (its draft's settings) and an endpoint is configured."""
    if _endpoint() is None:
        return False
    return KnowledgeSettings.from_json(source.profile.knowledge).vectors


def _passage_text(heading: str, text: str) -> str:
    return f"{heading}\n{text}" if heading else text


def document_embed(document: KnowledgeDocument) -> str:
    """Embed ``document``'s passages (see the module's docstring) and say what happened, as the admin shows it:
    ``""`` when no endpoint is configured. Writes nothing if the document was replaced in place meanwhile."""
    endpoint = _endpoint()
    if endpoint is None:
        return ""
    rows = list(
        KnowledgePassage.objects.filter(document=document).order_by("position").values_list("pk", "heading", "text")
    )
    try:
        matrix = _vectoriser(endpoint, False).fit([_passage_text(heading, text) for _, heading, text in rows])
    except EmbeddingsUnavailable as error:
        logger.warning("knowledge document %s: its passages are searched by their words alone: %s", document.pk, error)
        KnowledgeDocument.objects.filter(pk=document.pk, content_hash=document.content_hash).update(
            embedding_model="", embedding_error=str(error)[:2000]
        )
        return document_vectors_state(KnowledgeDocument(embedding_error=str(error)))
    with transaction.atomic():
        KnowledgeSource.objects.select_for_update().filter(pk=document.source_id).first()  # as an upload takes it
        current = KnowledgeDocument.objects.filter(pk=document.pk, content_hash=document.content_hash).first()
        if current is None:
            return ""
        vectors = zip(rows, matrix, strict=True)
        passages = [KnowledgePassage(pk=pk, embedding=row.tobytes()) for (pk, _, _), row in vectors]
        KnowledgePassage.objects.bulk_update(passages, ["embedding"], batch_size=WRITE_BATCH)
        current.embedding_model, current.embedding_error = embedding_stamp(endpoint.model, endpoint.document_prefix), ""
        current.save(update_fields=["embedding_model", "embedding_error"])  # the configuration version moves
    return document_vectors_state(current)


def profile_embed(profile_pk: int, *, every: bool = False) -> tuple[int, int]:
    """Embed the documents of the profile not embedded by the configured model and document prefix (``every``: all of
    them): a change of either, documents uploaded before the profile turned vectors on, or an endpoint that failed
    then. (embedded, failed)."""
    model = embedding_model()
    documents = KnowledgeDocument.objects.filter(source__profile_id=profile_pk)
    if not every:
        documents = documents.exclude(embedding_model=model)
    done = failed = 0
    for document in documents.order_by("pk"):
        document_embed(document)
        document.refresh_from_db(fields=["embedding_model"])
        done, failed = (done + 1, failed) if document.embedding_model == model else (done, failed + 1)
    return done, failed


def embed_queue(profile_pks: Iterable[int]) -> str:
    """Have :func:`profile_embed` run for each profile: on a Celery worker once the request commits where a broker is
    configured (``REDIS_URL``), here otherwise. What happened, for the admin's message."""
    pks = sorted(set(profile_pks))
    if not embedding_model():
        return "No embeddings endpoint is configured (KNOWLEDGE_EMBEDDINGS_BASE_URL, else ROUTER_EMBEDDINGS_BASE_URL)."
    if settings.REDIS_URL:
        for pk in pks:
            transaction.on_commit(lambda pk=pk: app.send_task(EMBED_TASK, args=(pk,)))
        return f"Queued: {len(pks)} profiles' documents are embedded by a worker; each document's page says when."
    done = failed = 0
    for pk in pks:
        embedded, missed = profile_embed(pk)
        done, failed = done + embedded, failed + missed
    return f"{done} documents embedded, {failed} not (their pages say why)."


def document_vectors_state(document: KnowledgeDocument) -> str:
    """What the vector search reads of a document, for the admin."""
    if document.embedding_model:
        return f"embedded ({document.embedding_model})"
    if document.embedding_error:
        return f"words only: {document.embedding_error}"
    return "words only"


# -- searching ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Matrix:
    """The embedded passages of a set of documents: their pks and their vectors, one row each."""

    passages: np.ndarray
    vectors: np.ndarray

    @property
    def nbytes(self) -> int:
        return int(self.passages.nbytes + self.vectors.nbytes)


class Matrices(BytesBounded[tuple[str, tuple[Stamp, ...]], Matrix]):
    """:class:`Matrix` by (model, documents' stamps), at most ``max_bytes``, the least recently used forgotten first;
    ``built`` counts those read from the database (the tests, the bench)."""

    def __init__(self, max_bytes: int = MATRIX_BYTES) -> None:
        super().__init__(max_bytes)
        self.built = 0

    def put(self, key: tuple[str, tuple[Stamp, ...]], value: Matrix) -> None:
        self.built += 1
        super().put(key, value)

    def clear(self) -> None:
        super().clear()
        self.built = 0


MATRICES = Matrices()


def vectors_forget() -> None:
    """Forget the matrices and the questions' embeddings (tests; the bench)."""
    MATRICES.clear()
    QUESTIONS.clear()


def _matrix(model: str, documents: tuple[Stamp, ...], dimensions: int) -> Matrix:
    """The passages of ``documents`` embedded by ``model`` as one matrix: kept, or read in one query."""
    key = (model, documents)
    matrix = MATRICES.get(key)
    if matrix is not None:
        return matrix
    rows = KnowledgePassage.objects.filter(document_id__in=[pk for pk, *_ in documents], embedding__isnull=False)
    read = [(pk, bytes(blob)) for pk, blob in rows.values_list("pk", "embedding").order_by("pk")]
    size = dimensions * 4
    kept = [(pk, blob) for pk, blob in read if len(blob) == size]  # another dimension: another model's, left out
    vectors = np.frombuffer(b"".join(blob for _, blob in kept), dtype=np.float32).reshape(len(kept), dimensions)
    matrix = Matrix(np.array([pk for pk, _ in kept], dtype=np.int64), vectors)
    MATRICES.put(key, matrix)
    return matrix


def nearest(*, documents: Iterable[Stamp], passages: int, query: str, limit: int) -> list[tuple[int, float]] | None:
    """The ``limit`` passages of ``documents`` (a search's scope, counting ``passages``) nearest ``query`` by cosine,
    nearest first, as (pk, cosine); ``None`` when the vectors cannot say — no endpoint, the endpoint failing (logged),
    or a matrix past :data:`MATRIX_BYTES`. Only documents embedded by the configured model and document prefix are
    read."""
    endpoint = _endpoint()
    if endpoint is None:
        return None
    model = embedding_stamp(endpoint.model, endpoint.document_prefix)
    embedded = tuple(sorted(stamp for stamp in documents if stamp[2] == model))
    if not embedded:
        return []
    try:
        question = _vectoriser(endpoint, True).vector(query)
    except EmbeddingsUnavailable as error:
        logger.warning("knowledge search by words alone: %s", error)
        return None
    if passages * (question.nbytes + 8) > MATRIX_BYTES:
        logger.warning("knowledge search by words alone: %s passages' vectors exceed %s bytes", passages, MATRIX_BYTES)
        return None
    matrix = _matrix(model, embedded, len(question))
    if not len(matrix.passages) or not question.any():
        return []
    # NumPy's own loop, one thread: BLAS's threads fight the served process's for the cores (3,334 x 1,536 took 9 ms
    # through BLAS on two busy cores, 4 ms so).
    cosines = np.einsum("ij,j->i", matrix.vectors, question)
    count = min(limit, len(cosines))
    best = np.argpartition(-cosines, count - 1)[:count]
    best = best[np.lexsort((matrix.passages[best], -cosines[best]))]
    return [(int(matrix.passages[i]), round(float(cosines[i]), 6)) for i in best]


def fused(rankings: Sequence[tuple[str, Sequence[int]]], limit: int) -> list[tuple[int, float, tuple[str, ...]]]:
    """Reciprocal rank fusion of ``rankings`` (each a name and passage pks, best first): the ``limit`` best passages
    by the sum over the rankings holding them of 1 / (:data:`RRF_K` + rank), rank 1 the best, each with that sum
    scaled into [0, 1) (times ``RRF_K`` / the rankings' count: first in every ranking scores 60 / 61) and the names
    of the rankings that found it. Ties: the first ranking's order."""
    scores: dict[int, float] = {}
    found: dict[int, list[str]] = {}
    for name, ranking in rankings:
        for rank, pk in enumerate(ranking, 1):
            scores[pk] = scores.get(pk, 0.0) + 1.0 / (RRF_K + rank)
            found.setdefault(pk, []).append(name)
    order = sorted(scores, key=lambda pk: -scores[pk])  # stable: first seen first among equals
    scale = RRF_K / max(1, len(rankings))
    return [(pk, round(scores[pk] * scale, 6), tuple(found[pk])) for pk in order[:limit]]
