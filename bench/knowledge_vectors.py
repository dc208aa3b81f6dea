"""The knowledge's vector search: what it adds to indexing and to a search, on 10,000 passages.

    PYTHONPATH=. .venv/bin/python bench/knowledge_vectors.py [--passages 10000] [--dimensions 1536] [--queries 200]
    PYTHONPATH=. python3 scripts/services.py --scratch --postgres -- .venv/bin/python bench/knowledge_vectors.py

The endpoint is the tests' scripted OpenAI-compatible server (tests/llm_server.py: hashed words and trigrams, in
``--dimensions`` dimensions, 1,536 as OpenAI's text-embedding-3-small), on this machine: its time is not a real
endpoint's, so the figures that matter are the platform's own — the matrix read once per set of documents, the cosine,
the fusion and the extra query —, measured with every question's embedding cached (the second pass of the same
questions), against the same searches without vectors. Passages are generated as ``bench/knowledge_bench.py`` does
(its writers, seed 58), in one source per language, through the upload's service.

1. **Load**: ``--passages`` passages, the profile's ``vectors`` on: uploaded and embedded (the seconds of each).
2. **The matrix**: the first search in each language reads its matrix (timed, with its bytes).
3. **Searches**: ``--queries`` questions (the demo's and generated ones, in turn) in their language, each searched
   without vectors and with them (its embedding fetched first, then cached): p50 and p95 of each, and their
   difference.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bench.knowledge_bench as words_bench  # noqa: E402, I001  (sets Django up: a throwaway SQLite without DATABASE_URL)

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from agents.models import AgentProfile  # noqa: E402
from knowledge.models import KnowledgePassage, KnowledgeSource  # noqa: E402
from knowledge.search import knowledge_search  # noqa: E402
from knowledge.services import document_ingest  # noqa: E402
from knowledge.vectors import MATRICES, profile_embed, vectors_forget  # noqa: E402
from tests.llm_server import ScriptedLLMServer  # noqa: E402

LANGUAGES = words_bench.LANGUAGES


def load(profile: Any, writers: dict[str, Any], passages: int) -> tuple[float, float]:
    """``passages`` passages uploaded, then embedded by the step an upload with vectors on runs (the profile's
    ``vectors`` turned on in between): (seconds to upload, seconds to embed)."""
    sources = {
        language: KnowledgeSource.objects.create(profile=profile, name=f"bench {language}", language=language)
        for language in LANGUAGES
    }
    started = time.perf_counter()
    for number in range(-(-passages // words_bench.PASSAGES_PER_DOCUMENT)):
        language = LANGUAGES[number % 3]
        data = words_bench.document(writers[language], number)
        document_ingest(source=sources[language], file_name=f"a-{number}.md", data=data)
    uploaded = time.perf_counter() - started
    profile.knowledge = {"vectors": True}
    profile.save(update_fields=["knowledge"])
    started = time.perf_counter()
    profile_embed(profile.pk)
    return uploaded, time.perf_counter() - started


def timed_searches(profile: Any, queries: list[tuple[str, str]], vectors: bool) -> list[float]:
    out = []
    for text, language in queries:
        started = time.perf_counter()
        knowledge_search(profile=profile, query=text, language=language, vectors=vectors)
        out.append((time.perf_counter() - started) * 1000)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=10_000, help="Passages loaded (default %(default)s).")
    parser.add_argument("--dimensions", type=int, default=1536, help="The vectors' size (default %(default)s).")
    parser.add_argument("--queries", type=int, default=200, help="Questions searched (default %(default)s).")
    parser.add_argument("--seed", type=int, default=58, help="The generator's seed.")
    args = parser.parse_args(argv)
    call_command("migrate", "--noinput", verbosity=0)
    server = ScriptedLLMServer(embedding_dimensions=args.dimensions).start()
    settings.KNOWLEDGE_EMBEDDINGS_BASE_URL = server.base_url
    settings.KNOWLEDGE_EMBEDDINGS_MODEL = "bench-embeddings"
    settings.KNOWLEDGE_EMBEDDINGS_TIMEOUT = 30.0
    vectors_forget()
    rng = random.Random(args.seed)
    writers = {language: words_bench.Writer(language, rng) for language in LANGUAGES}
    profile = AgentProfile.objects.create(agent_id=f"kvbench_{uuid.uuid4().hex[:8]}", name="Vectors bench")
    try:
        seconds, embedding = load(profile, writers, args.passages)
        held = KnowledgePassage.objects.filter(document__source__profile=profile, embedding__isnull=False).count()
        print(f"{connection.vendor}: {held:,} passages embedded ({args.dimensions} dimensions)")
        print(f"upload: {seconds:.1f} s; then the embeddings step: {embedding:.1f} s (the scripted server's included)")
        queries = words_bench.queries_make(writers, args.queries)
        for language in LANGUAGES:
            built = time.perf_counter()
            knowledge_search(profile=profile, query="warm", language=language, vectors=True)
            ms = (time.perf_counter() - built) * 1000
            print(f"first search in {language}, its matrix read: {ms:.0f} ms")
        print(f"matrices kept: {len(MATRICES)}, {MATRICES.size_bytes / 2**20:.1f} MiB")
        timed_searches(profile, queries, vectors=False)  # warm-up of the words' caches
        words = timed_searches(profile, queries, vectors=False)
        requests = len(server.embedding_requests)
        fetched = timed_searches(profile, queries, vectors=True)
        cached = timed_searches(profile, queries, vectors=True)
        calls = len(server.embedding_requests) - requests
        for name, values in (("words alone", words), ("vectors, question fetched", fetched), ("vectors", cached)):
            p95 = words_bench.percentile(values, 0.95)
            print(f"  {name}: p50 {statistics.median(values):.1f} ms, p95 {p95:.1f} ms")
        added = [with_vectors - alone for with_vectors, alone in zip(cached, words, strict=True)]
        print(
            f"added by the vectors (question cached): p50 {statistics.median(added):.1f} ms, "
            f"p95 {words_bench.percentile(added, 0.95):.1f} ms; "
            f"{calls} embeddings calls for {len(queries)} questions searched twice; "
            f"load average {os.getloadavg()[0]:.1f}"
        )
    finally:
        profile.delete()
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
