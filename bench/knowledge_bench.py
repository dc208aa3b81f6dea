"""Knowledge search at scale: 100,000 passages, retrieval latency, and the time to index 10,000 passages.

    PYTHONPATH=. .venv/bin/python bench/knowledge_bench.py [--passages 100000] [--queries 400] [--explain]
    PYTHONPATH=. python3 scripts/services.py --scratch --postgres -- .venv/bin/python bench/knowledge_bench.py

(Figures in docs/benchmarks.md; the targets: retrieval p95 ≤ 50 ms on PostgreSQL and ≤ 100 ms on SQLite over
100,000 passages, indexing 10,000 passages ≤ 60 s.)

Runs on a throwaway SQLite database, or on the database of ``DATABASE_URL`` (migrated first), in a throwaway profile
deleted at the end. The text is generated, in the three languages, from one ``random.Random(seed)``: each language's
words are those of the demo help centre (``config/demo/knowledge/``, most frequent first) followed by a long tail of
made-up words built from the language's syllables, drawn with a Zipf law, so that common words hit many passages
and rare ones few, as in a real help centre; sentences of 6 to 24 words, passages of about 150 to 1,200 characters
under headings, 100 passages to a document.

1. **Load**: ``--passages`` passages in documents of 100 through :func:`knowledge.services.document_ingest` (the
   upload's path: reading, cutting, writing, indexing), in three sources (pt, en, es); the time is reported.
2. **Index 10,000 passages**: 100 more documents of 100 passages uploaded into a fourth source, on top of the
   load, timed (the target's figure); then deleted.
3. **Retrieval**: ``--queries`` queries, in turn the demo question set's (``bench/knowledge/questions.yaml``) and
   generated ones of 2 to 8 words, each searched twice with :func:`knowledge.search.knowledge_search` — in its
   language (as the turn searches) and in every language — after a warm-up; p50, p95 and the maximum of each.

``--keep``: the loaded profile is kept at the end, and a later run with the same ``--passages`` and ``--seed`` on the
same database (``DATABASE_URL``, e.g. a PostgreSQL server that outlives one run) reads it again instead of loading
(the documents are still generated, so that the queries are the same); its load time is then the first run's.

``--explain``: PostgreSQL's plan (``EXPLAIN (ANALYZE, BUFFERS)``) of the ranking query for the slowest query of each
kind. The machine is shared: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if not os.environ.get("DATABASE_URL"):
    _DB = tempfile.NamedTemporaryFile(prefix="knowledge-bench-", suffix=".sqlite3", delete=False)  # noqa: SIM115
    os.environ["DATABASE_URL"] = f"sqlite:///{_DB.name}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")

import django  # noqa: E402
import yaml  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from agents.models import AgentProfile  # noqa: E402
from knowledge.models import KnowledgePassage, KnowledgeSource  # noqa: E402
from knowledge.search import knowledge_search  # noqa: E402
from knowledge.services import document_ingest  # noqa: E402

LANGUAGES = ("pt", "en", "es")
PASSAGES_PER_DOCUMENT = 100
INDEX_PASSAGES = 10_000  # the target: indexing this many ≤ 60 s
WARM_UP = 20
_COMMON = "ba be bi bo ca co da de di do fa fe fi fo ga go la le li lo ma me mi mo na ne ni no pa pe pi po ra re ri ro"
SYLLABLES = {
    "pt": tuple(f"{_COMMON} bu cu du gu lu mu nu pu ru su tu ta te ti to va ve vi vo ção ões nha lho".split()),
    "en": tuple(f"{_COMMON} sa se si so ta te ti to th sh ck ng er ing ed ly ous ent".split()),
    "es": tuple(f"{_COMMON} bu cu du gu lu mu nu pu ru su tu ta te ti to ción ñ llo rr".split()),
}
TAIL_WORDS = 20_000  # made-up words per language, after the help centre's own
_WORD = re.compile(r"[^\W\d_]+")


def vocabulary(language: str, rng: random.Random) -> list[str]:
    """The language's words, most frequent first: the demo help centre's, then a made-up tail."""
    counts: Counter[str] = Counter()
    for path in sorted((ROOT / "config" / "demo" / "knowledge").glob(f"*/{language}/*.md")):
        counts.update(word.casefold() for word in _WORD.findall(path.read_text(encoding="utf-8")))
    words = [word for word, _ in counts.most_common()]
    known, wanted = set(words), len(words) + TAIL_WORDS
    while len(words) < wanted:
        word = "".join(rng.choice(SYLLABLES[language]) for _ in range(rng.randint(2, 4)))
        if word not in known:
            known.add(word)
            words.append(word)
    return words


class Writer:
    """Sentences, headings and queries of one language, words drawn with a Zipf law (exponent about 1)."""

    def __init__(self, language: str, rng: random.Random) -> None:
        self.rng = rng
        self.words = vocabulary(language, rng)
        weights = [1 / (rank + 2) for rank in range(len(self.words))]
        self.cumulative: list[float] = []
        total = 0.0
        for weight in weights:
            total += weight
            self.cumulative.append(total)

    def word(self) -> str:
        return self.rng.choices(self.words, cum_weights=self.cumulative, k=1)[0]

    def sentence(self) -> str:
        text = " ".join(self.word() for _ in range(self.rng.randint(6, 24)))
        return text[0].upper() + text[1:] + "."

    def passage(self) -> str:
        target = self.rng.choice((150, 300, 500, 700, 900, 1100))
        sentences = [self.sentence()]
        while len(" ".join(sentences)) < target:
            sentences.append(self.sentence())
        return " ".join(sentences)[:1150]

    def heading(self) -> str:
        return " ".join(self.word() for _ in range(self.rng.randint(1, 4))).capitalize()

    def query(self) -> str:
        return " ".join(self.word() for _ in range(self.rng.randint(2, 8)))


def document(writer: Writer, number: int) -> bytes:
    """A Markdown article of :data:`PASSAGES_PER_DOCUMENT` sections, each one passage long."""
    lines = [f"# {writer.heading()} {number}", ""]
    for _ in range(PASSAGES_PER_DOCUMENT):
        lines += [f"## {writer.heading()}", "", writer.passage(), ""]
    return "\n".join(lines).encode()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


Timings = dict[str, list[tuple[float, str, str | None]]]
KINDS = ("in its language", "in every language")


def load(profile: Any, writers: dict[str, Writer], passages: int, *, loaded: bool = False) -> tuple[int, float]:
    """``passages`` passages into a source per language, through the upload's service: (documents, seconds).
    ``loaded``: the profile holds them already; they are generated (the queries drawn after them stay the same) but
    not written."""
    sources = {
        language: KnowledgeSource.objects.get_or_create(profile=profile, name=f"bench {language}", language=language)[0]
        for language in LANGUAGES
    }
    documents = -(-passages // PASSAGES_PER_DOCUMENT)
    started = time.perf_counter()
    for number in range(documents):
        language = LANGUAGES[number % 3]
        data = document(writers[language], number)
        if not loaded:
            document_ingest(source=sources[language], file_name=f"article-{number}.md", data=data)
        if (number + 1) % 100 == 0:
            print(f"  loaded {number + 1} of {documents} documents", file=sys.stderr, flush=True)
    return documents, time.perf_counter() - started


def index_on_top(profile: Any, writers: dict[str, Writer], passages: int) -> float:
    """Seconds to upload ``passages`` more passages (documents made beforehand) into a source deleted afterwards."""
    extra = KnowledgeSource.objects.create(profile=profile, name="bench index", language="pt")
    articles = [document(writers[LANGUAGES[n % 3]], n) for n in range(passages // PASSAGES_PER_DOCUMENT)]
    started = time.perf_counter()
    for number, data in enumerate(articles):
        document_ingest(source=extra, file_name=f"index-{number}.md", data=data)
    seconds = time.perf_counter() - started
    extra.delete()
    return seconds


def queries_make(writers: dict[str, Writer], count: int) -> list[tuple[str, str]]:
    """``count`` (query, language): the demo questions and generated queries, in turn."""
    questions = yaml.safe_load((ROOT / "bench" / "knowledge" / "questions.yaml").read_text(encoding="utf-8"))
    asked = [(q["text"], q["lang"]) for q in questions["questions"]]
    out = []
    for number in range(count):
        if number % 2 == 0:
            out.append(asked[(number // 2) % len(asked)])
        else:
            language = LANGUAGES[number % 3]
            out.append((writers[language].query(), language))
    return out


def retrieve(profile: Any, queries: list[tuple[str, str]]) -> tuple[Timings, int]:
    """Each query searched in its language and in every language, timed (ms); and how many searches found one."""
    for text, language in queries[:WARM_UP]:
        knowledge_search(profile=profile, query=text, language=language)
    timings: Timings = {kind: [] for kind in KINDS}
    found = 0
    for text, language in queries:
        for kind, searched in zip(KINDS, (language, None), strict=True):
            started = time.perf_counter()
            hits = knowledge_search(profile=profile, query=text, language=searched)
            timings[kind].append(((time.perf_counter() - started) * 1000, text, searched))
            found += bool(hits)
    return timings, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=100_000, help="Passages loaded (default %(default)s).")
    parser.add_argument("--queries", type=int, default=400, help="Queries searched (default %(default)s).")
    parser.add_argument("--index", type=int, default=INDEX_PASSAGES, help="Passages indexed on top (%(default)s).")
    parser.add_argument("--repeat", type=int, default=3, help="Runs of indexing and retrieval (default %(default)s).")
    parser.add_argument("--seed", type=int, default=58, help="The generator's seed.")
    parser.add_argument("--explain", action="store_true", help="PostgreSQL: the plan of the slowest queries.")
    parser.add_argument("--keep", action="store_true", help="Keep the loaded profile; reuse one kept before.")
    args = parser.parse_args(argv)
    call_command("migrate", "--noinput", verbosity=0)
    rng = random.Random(args.seed)
    writers = {language: Writer(language, rng) for language in LANGUAGES}
    profile, loaded = kept_profile(args.passages, args.seed) if args.keep else (None, False)
    if profile is None:
        profile = AgentProfile.objects.create(agent_id=f"kbench_{uuid.uuid4().hex[:8]}", name="Knowledge bench")
    runs: list[tuple[float, dict[str, float], int]] = []
    try:
        documents, load_seconds = load(profile, writers, args.passages, loaded=loaded)
        if loaded:
            load_seconds = float(profile.description.rsplit(" ", 1)[-1])
        elif args.keep:
            profile.description = f"loaded in {load_seconds:.1f}"
            profile.save(update_fields=["description"])
        held = KnowledgePassage.objects.filter(document__source__profile=profile).count()
        queries = queries_make(writers, args.queries)
        for run in range(args.repeat):
            index_seconds = index_on_top(profile, writers, args.index)
            timings, found = retrieve(profile, queries)
            p95 = {kind: percentile([ms for ms, _, _ in rows], 0.95) for kind, rows in timings.items()}
            median = {kind: statistics.median(ms for ms, _, _ in rows) for kind, rows in timings.items()}
            runs.append((index_seconds, p95, found))
            print(
                f"run {run + 1}: index {args.index:,} passages {index_seconds:.1f} s; retrieval p50/p95 ms "
                + "; ".join(f"{kind} {median[kind]:.1f}/{p95[kind]:.1f}" for kind in KINDS)
                + f"; max {max(ms for rows in timings.values() for ms, _, _ in rows):.1f}"
                + f"; load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        if args.explain and connection.vendor == "postgresql":
            for kind, rows in timings.items():
                ms, text, searched = max(rows)
                print(f"The slowest search {kind} ({ms:.1f} ms): {text!r}")
                explain(profile, text, searched)
    finally:
        if not args.keep:
            profile.delete()
    target = 50 if connection.vendor == "postgresql" else 100
    print(f"{connection.vendor}: {held:,} passages in {documents:,} documents; {len(queries)} queries, each twice")
    print(f"load: {load_seconds:.1f} s ({held / load_seconds:,.0f} passages/s)")
    index_median = statistics.median(r[0] for r in runs)
    print(f"median of {len(runs)} runs: index {args.index:,} passages {index_median:.1f} s (target ≤ 60 s)")
    for kind in KINDS:
        print(f"  retrieval {kind}: p95 {statistics.median(r[1][kind] for r in runs):.1f} ms (target ≤ {target} ms)")
    print(f"searches that found a passage: {runs[-1][2]} of {2 * len(queries)}")
    return 0


def kept_profile(passages: int, seed: int) -> tuple[Any, bool]:
    """The profile a ``--keep`` run left with these passages, and whether its load finished (else it is loaded
    again from the start)."""
    profile = AgentProfile.objects.filter(agent_id=f"kbench_kept_{passages}_{seed}").first()
    if profile is None:
        return AgentProfile.objects.create(agent_id=f"kbench_kept_{passages}_{seed}", name="Knowledge bench"), False
    if not profile.description.startswith("loaded in "):
        KnowledgeSource.objects.filter(profile=profile).delete()
        return profile, False
    return profile, True


def explain(profile: Any, text: str, language: str | None) -> None:
    """PostgreSQL's plan of the ranking query of one search (the query holding ``ts_rank``), run again."""
    # A full log (9,000 queries, as after a run) keeps its length, and a capture reads the queries by their count.
    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as captured:
        knowledge_search(profile=profile, query=text, language=language)
    ranking = next(query["sql"] for query in captured.captured_queries if "ts_rank" in query["sql"])
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + ranking)
        print("\n".join(row[0] for row in cursor.fetchall()))


if __name__ == "__main__":
    sys.exit(main())
