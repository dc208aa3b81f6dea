"""Knowledge accuracy: the demo help centres' questions searched, and what a relevance bar keeps and refuses; or
asked at a turn, and what the customer got.

    PYTHONPATH=. .venv/bin/python bench/knowledge_accuracy.py [--bar B] [--relevance search|coverage|idf]
        [--questions PATH] [--list]
    PYTHONPATH=. .venv/bin/python bench/knowledge_accuracy.py --turns [--questions PATH [--articles DIR]] [--list]
    PYTHONPATH=. .venv/bin/python bench/knowledge_accuracy.py --follow-ups [PATH] [--list]
    KNOWLEDGE_EMBEDDINGS_BASE_URL=… KNOWLEDGE_EMBEDDINGS_MODEL=… PYTHONPATH=. .venv/bin/python \
        bench/knowledge_accuracy.py [--turns | --relevance turn] --vectors BAR [BAR …] [--cosines]

(Figures in docs/benchmarks.md; the targets: the right article cited first for ≥ 90 % of the answerable questions,
"I don't know" for ≥ 95 % of the unanswerable ones.)

Loads the demo's help centres (``config/demo/knowledge/``, through seed_demo's :func:`help_centre_load`) into
throwaway profiles, one per demo folder, and asks each question of ``bench/knowledge/questions.yaml`` — written
from the articles as customers write, a third of them with no answer in the articles — of its profile's knowledge
with :func:`knowledge.search.knowledge_search`, in the question's language (the language the turn detects). The
throwaway profiles are deleted at the end.

Per language, then for all three:

* **rank 1**: answerable questions whose article is the first passage's document, whatever its score;
* at the relevance bar ``--bar`` (a passage counts when its score is above it): answerable questions **cited**
  right (the first passage is above the bar and from their article), answerable ones **kept** (some passage above
  the bar), and unanswerable ones **refused** (no passage above it: "I don't know");
* a sweep of bars, the same three shares at each.

Scores are the engine's (:mod:`knowledge.search`): a bar fitted on one engine does not carry over to the other.
``--relevance coverage`` holds the bar to the turn's measure instead (the share of the question's content words a
passage holds, the same on both engines), ``--relevance idf`` to that share with each word weighted by its rarity in
the profile's knowledge (:func:`idf_coverage`).
Runs on a throwaway SQLite database, or on the database of ``DATABASE_URL`` (migrated first; PostgreSQL:
``scripts/services.py --scratch --postgres -- .venv/bin/python bench/knowledge_accuracy.py``).

The scoring is :func:`accuracy` over :class:`Answer`: what the customer got, the cited articles best first. This
module's :func:`retrieval_answers` makes them from the search alone.

``--turns`` scores the answer instead (:func:`turn_answers`): the demo seeded as ``seed_demo --sync`` seeds it (its
help centres, its MCP servers running; :func:`bench.conversation_accuracy.demo_running`, a throwaway SQLite database
unless ``DATABASE_URL`` names one), each question sent as a customer's first message to its profile through
``POST /api/gateway/message`` (a session of its own, no context: the customer's line and orders unknown), the
offline model answering. An answerable question is **cited right** when the answer's first citation
(``metadata.knowledge.citations[0]``) is from its article; an unanswerable one is **refused** when the answer cites
nothing (and **said "I don't know"** when ``metadata.knowledge.unknown`` is set). Reported per language and per
profile, and with ``--list`` each miss with where it went: the answering specialist and intent, whether the run
searched (``metadata.knowledge``), the MCP tools called, the article cited; then each question cited right with the
heading of the section its answer quotes (:func:`turn_sections`), which the scoring by article does not judge.
``--questions`` with ``--articles DIR`` asks a help centre of one's own: ``DIR``'s ``pt``, ``en`` and ``es`` folders
imported into the questions' profile beside the demo's (:func:`articles_import`), as
``bench/unseen/knowledge/README.md`` imports the held-out one.

``--follow-ups`` asks conversations instead (``bench/knowledge/follow_ups.yaml``: a first question, then what a
customer sends after its answer — a follow-up leaning on it, one the help centre does not answer, a new subject,
thanks), each conversation one session of the seeded demo, as ``--turns`` asks a question (:func:`follow_ups_run`).
Every turn after the first is scored by its kind: one naming an article is right when the answer's first citation
is from it, one naming none when the answer cites nothing; and each answer's language is read against the
conversation's, as the conversation bench reads it (:func:`bench.conversation_accuracy.answer_language`).

``--vectors BAR …`` searches with vectors too (docs/knowledge.md, "Vectors"): the questions' profiles get ``vectors:
true``, their passages embedded by the endpoint of ``KNOWLEDGE_EMBEDDINGS_*`` (an operator's; nothing in the
repository serves a real model: docs/benchmarks.md says how multilingual-e5-small was served), and the figures are
given once per ``vector_min_score`` of the list — at a turn, the profiles published with each bar in turn and every
question asked again (:func:`vectors_on`); with ``--relevance turn``, the turn's retrieval run at the words' bar
with each cosine bar. ``--cosines`` prints, per language, how the best cosine of a question's language's passages
spreads over the answerable questions and over the unanswerable ones (:func:`best_cosines`): whether a cosine bar
can tell them apart.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "bench" / "knowledge" / "questions.yaml"
FOLLOW_UPS = ROOT / "bench" / "knowledge" / "follow_ups.yaml"
FOLLOW_UP_KINDS = ("first", "follow_up", "unanswerable", "topic_change", "thanks")
LANGUAGES = ("pt", "en", "es")
SWEEP = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8)
DEFAULT_BAR = 0.2


@dataclass(frozen=True)
class Question:
    """A customer's question to a profile, in a language, and the article (file name) answering it, if any."""

    profile: str
    lang: str
    text: str
    article: str | None


@dataclass(frozen=True)
class Answer:
    """What the customer got: the cited articles' file names, best first, each with its score (none: "I don't
    know")."""

    cited: tuple[tuple[str, float], ...]

    def above(self, bar: float) -> tuple[str, ...]:
        """The cited articles whose score is above ``bar``: what an answer at that bar cites."""
        return tuple(name for name, score in self.cited if score > bar)


@dataclass(frozen=True)
class Figures:
    """One language's (or all languages') shares at one bar."""

    answerable: int
    unanswerable: int
    rank_1: int
    cited: int
    kept: int
    refused: int

    @staticmethod
    def share(part: int, whole: int) -> str:
        return f"{100 * part / whole:5.1f} %" if whole else "    — "


def questions_load(path: Path) -> list[Question]:
    """The question set; raises ``SystemExit`` naming a malformed entry. A file may name its ``profile`` once at the
    top (the held-out set's shape), and an article by its path under an articles folder (``pt/portabilidade.md``):
    its file name is what a hit names."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for number, entry in enumerate(data.get("questions") or [], 1):
        if isinstance(entry, dict) and "profile" not in entry and data.get("profile"):
            entry = {**entry, "profile": data["profile"]}
        if not isinstance(entry, dict) or entry.get("lang") not in LANGUAGES or not entry.get("text"):
            raise SystemExit(f"{path}: question {number}: needs profile, lang (pt, en or es) and text.")
        article = Path(entry["article"]).name if entry.get("article") else None
        out.append(Question(str(entry["profile"]), entry["lang"], str(entry["text"]), article))
    return out


def accuracy(questions: Sequence[Question], answers: Sequence[Answer], *, bar: float) -> Figures:
    """The shares of ``questions`` (answered by ``answers``, in the same order) at ``bar``: answerable ones cited
    right first, answerable ones with a citation at all, unanswerable ones with none."""
    answerable = unanswerable = rank_1 = cited = kept = refused = 0
    for question, answer in zip(questions, answers, strict=True):
        first = answer.cited[0][0] if answer.cited else None
        kept_names = answer.above(bar)
        if question.article:
            answerable += 1
            rank_1 += first == question.article
            cited += bool(kept_names) and kept_names[0] == question.article
            kept += bool(kept_names)
        else:
            unanswerable += 1
            refused += not kept_names
    return Figures(answerable, unanswerable, rank_1, cited, kept, refused)


def turn_retrieval_answers(
    questions: Iterable[Question],
    *,
    profiles: dict[str, Any],
    bar: float,
    limit: int = 5,
    vector_bar: float | None = None,
) -> list[Answer]:
    """Each question retrieved as a run offered no MCP tool retrieves it (:func:`knowledge.public.knowledge_retrieve`
    at ``bar``: the question's language, then every language; the relevance bar's share of the question's words and
    two of them held; ``vector_bar``: with vectors, a passage the vectors ranked at that cosine used too): the articles
    of the passages it uses, most relevant first, each scored 1 (the bar is the retrieval's own); none when nothing
    reaches the bar."""
    from knowledge.public import knowledge_retrieve

    out = []
    for question in questions:
        found = knowledge_retrieve(
            profile_pk=profiles[question.profile].pk,
            tenant_pk=None,
            query=question.text,
            language=question.lang,
            tags=(),
            min_score=bar,
            limit=limit,
            vector_bar=vector_bar,
        )
        out.append(Answer(tuple((passage.hit.file_name, 1.0) for passage in found.used)))
    return out


def retrieval_answers(
    questions: Iterable[Question], *, profiles: dict[str, object], limit: int = 5, relevance: str = "search"
) -> list[Answer]:
    """Each question searched in its profile's knowledge (``profiles``: the question's profile name → the profile
    searched), in its language: the passages' articles, best first. ``relevance`` scores each passage: ``search``,
    the engine's score, in the search's order; ``coverage``, the relevance bar's measure at a turn
    (:func:`agents.passages.coverage`), most relevant first; ``idf``, the same share with each content word weighted
    by its rarity in the profile's knowledge (:func:`idf_coverage`)."""
    from agents.passages import coverage
    from knowledge.search import knowledge_search

    weights = {name: word_counts(profile) for name, profile in profiles.items()} if relevance == "idf" else {}
    out = []
    for question in questions:
        hits = knowledge_search(
            profile=profiles[question.profile], query=question.text, language=question.lang, limit=limit
        )
        if relevance == "search":
            out.append(Answer(tuple((hit.file_name, hit.score) for hit in hits)))
            continue
        scored = [
            (
                hit.file_name,
                coverage(question.text, f"{hit.heading}\n{hit.text}")
                if relevance == "coverage"
                else idf_coverage(question.text, f"{hit.heading}\n{hit.text}", *weights[question.profile]),
            )
            for hit in hits
        ]
        out.append(Answer(tuple(sorted(scored, key=lambda pair: -pair[1]))))
    return out


def word_counts(profile: Any) -> tuple[dict[str, int], int]:
    """How many of ``profile``'s passages hold each word stem (the sources' :class:`knowledge.models.KnowledgeWord`),
    and how many passages it holds."""
    from django.db.models import Sum

    from knowledge.models import KnowledgePassage, KnowledgeWord

    rows = KnowledgeWord.objects.filter(source__profile=profile).values_list("stem").annotate(total=Sum("passages"))
    return dict(rows.order_by()), KnowledgePassage.objects.filter(document__source__profile=profile).count()


def idf_coverage(question: str, text: str, stems: dict[str, int], passages: int) -> float:
    """The share of ``question``'s content words ``text`` holds, each word weighted by its inverse document frequency
    in the knowledge, log((N + 1) / (n + 0.5)) (n: the passages holding a word of its stem; a word no passage holds
    weighs the most)."""
    import math

    from agents.passages import STEM_CHARS, content_words

    asked = content_words(question)
    weights = [math.log((passages + 1) / (stems.get(word[:STEM_CHARS], 0) + 0.5)) for word in asked]
    total = sum(weights)
    held = [coverage_one(word, text) for word in asked]
    return sum(weight for weight, hit in zip(weights, held, strict=True) if hit) / total if total else 0.0


def coverage_one(word: str, text: str) -> bool:
    """Whether ``text`` holds the content word ``word`` as the relevance bar counts it."""
    from agents.passages import coverage

    return coverage(word, text) > 0


def report(
    questions: Sequence[Question],
    answers: Sequence[Answer],
    *,
    bar: float,
    write: Callable[[str], None],
    at_bar: Callable[[float], Sequence[Answer]] | None = None,
) -> dict[str, Figures]:
    """Print the per-language table at ``bar`` and the sweep; returns the figures at ``bar`` by language (and
    ``all``). ``at_bar``: what is cited at a bar when it is not ``answers`` above it (the turn's retrieval, whose
    bar decides what it searches), rank 1 still read from ``answers``."""
    groups = {language: [i for i, q in enumerate(questions) if q.lang == language] for language in LANGUAGES}
    groups["all"] = list(range(len(questions)))

    def figures(indexes: list[int], at: float) -> Figures:
        asked = [questions[i] for i in indexes]
        searched = accuracy(asked, [answers[i] for i in indexes], bar=at)
        if at_bar is None:
            return searched
        cited = at_bar(at)
        return replace(accuracy(asked, [cited[i] for i in indexes], bar=-1.0), rank_1=searched.rank_1)

    figures_at = {name: figures(indexes, bar) for name, indexes in groups.items()}
    write(f"At the bar {bar}:")
    write("language  answerable  rank 1     cited      kept       unanswerable  refused")
    for name, f in figures_at.items():
        write(
            f"{name:8}  {f.answerable:10}  {f.share(f.rank_1, f.answerable)}  {f.share(f.cited, f.answerable)}  "
            f"{f.share(f.kept, f.answerable)}  {f.unanswerable:12}  {f.share(f.refused, f.unanswerable)}"
        )
    write("")
    write("Sweep (cited right / refused), per language:")
    write("bar    " + "  ".join(f"{name:>17}" for name in groups))
    for at in SWEEP:
        cells = []
        for indexes in groups.values():
            f = figures(indexes, at)
            cells.append(f"{f.share(f.cited, f.answerable)} / {f.share(f.refused, f.unanswerable)}")
        write(f"{at:<5}  " + "  ".join(f"{cell:>17}" for cell in cells))
    return figures_at


@dataclass(frozen=True)
class TurnSeen:
    """Where a question went at a turn: the answering specialist, the decision's intent, whether the run searched,
    the tools it called, whether it said it does not know, and the answer's start."""

    agent: str
    intent: str
    searched: bool
    tools: tuple[str, ...]
    unknown: bool
    answer: str
    grounded: bool | None = None  # None: the answer cites nothing
    section: str = ""  # the heading of the passage the answer cites first (its quote): none when it cites nothing

    def describe(self) -> str:
        tools = ", ".join(self.tools) or "no tool"
        searched = "searched" if self.searched else "did not search"
        return f"{self.agent} ({self.intent or 'no intent'}), {searched}, {tools}"


def turn_answers(
    questions: Iterable[Question], *, client: Any, sessions: str = "kbench"
) -> list[tuple[Answer, TurnSeen]]:
    """Each question sent through the gateway as a customer's first message to its profile (``client``: an API
    client holding a key of the demo's tenant; ``sessions``: the sessions' prefix, one session a question): the
    articles its answer cites, in the answer's order, each with its relevance, and where it went."""
    from knowledge.models import KnowledgeDocument, KnowledgePassage
    from releases.evals.checks import answer_framing, grounding
    from releases.evals.run import cited_passages
    from routing import snapshot

    names = dict(KnowledgeDocument.objects.values_list("pk", "file_name"))
    headings = dict(KnowledgePassage.objects.values_list("pk", "heading"))
    profiles = snapshot.current().profiles
    out = []
    for number, question in enumerate(questions):
        response = client.post(
            "/api/gateway/message",
            {
                "channel": "api",
                "agent_id": question.profile,
                "payload": {"text": question.text, "session_id": f"{sessions}-{number}"},
            },
            format="json",
        )
        body = response.json() if response.status_code == 200 else {}
        metadata = body.get("metadata") or {}
        knowledge = metadata.get("knowledge") or {}
        citations = knowledge.get("citations") or ()
        cited = tuple(
            (names.get(citation["document"], f"#{citation['document']}"), float(citation["score"]))
            for citation in citations
        )
        passages = cited_passages(knowledge)
        framing = answer_framing(profiles[question.profile], str(body.get("agent")), metadata.get("language"))
        grounded = not grounding(str(body.get("answer") or ""), question.text, passages, framing=framing)
        seen = TurnSeen(
            agent=str(body.get("agent") or f"HTTP {response.status_code}"),
            intent=str((metadata.get("route_decision") or {}).get("intent") or ""),
            searched=bool(metadata.get("knowledge")),
            tools=tuple(str(result.get("tool")) for result in metadata.get("mcp_results") or ()),
            unknown=bool(knowledge.get("unknown")),
            answer=str(body.get("answer") or ""),
            grounded=grounded if passages else None,
            section=headings.get(citations[0]["passage"], "") if citations else "",
        )
        out.append((Answer(cited), seen))
    return out


def turn_report(
    questions: Sequence[Question], seen: Sequence[tuple[Answer, TurnSeen]], *, write: Callable[[str], None]
) -> dict[str, Figures]:
    """Print what the customers got, per language and per profile; returns the figures by language (and ``all``)."""
    answers = [answer for answer, _ in seen]
    groups: dict[str, list[int]] = {language: [] for language in LANGUAGES}
    profiles: dict[str, list[int]] = {}
    for i, question in enumerate(questions):
        groups[question.lang].append(i)
        profiles.setdefault(question.profile, []).append(i)
    groups["all"] = list(range(len(questions)))
    out = {}
    for title, table in (("language", groups), ("profile", {**dict(sorted(profiles.items())), "all": groups["all"]})):
        write(
            f'{title:20}  answerable  cited right  cited any  unanswerable  refused    said "I don\'t know"'
            "  grounded (of cited)"
        )
        for name, indexes in table.items():
            f = accuracy([questions[i] for i in indexes], [answers[i] for i in indexes], bar=-1.0)
            unknown = sum(seen[i][1].unknown for i in indexes if not questions[i].article)
            cited = [seen[i][1].grounded for i in indexes if seen[i][1].grounded is not None]
            write(
                f"{name:20}  {f.answerable:10}  {f.share(f.cited, f.answerable):>11}  {f.share(f.kept, f.answerable)}"
                f"  {f.unanswerable:12}  {f.share(f.refused, f.unanswerable)}  {f.share(unknown, f.unanswerable)}"
                f"  {f.share(sum(cited), len(cited)):>19}"
            )
            if title == "language":
                out[name] = f
        write("")
    return out


def turn_misses(questions: Sequence[Question], seen: Sequence[tuple[Answer, TurnSeen]]) -> list[str]:
    """One line per question the customer got wrong: what it wanted, where it went, what it cited."""
    lines = []
    for question, (answer, turn) in zip(questions, seen, strict=True):
        first = answer.cited[0][0] if answer.cited else None
        if (first == question.article) if question.article else first is None:
            continue
        cited = ", ".join(f"{name} {score:.2f}" for name, score in answer.cited) or "nothing"
        if turn.grounded is False:
            cited += " (not grounded)"
        lines.append(
            f"  [{question.lang} {question.profile}] {question.text!r}: want {question.article or 'no answer'}; "
            f"cited {cited}; {turn.describe()}; {turn.answer[:90]!r}"
        )
    return lines


def turn_sections(questions: Sequence[Question], seen: Sequence[tuple[Answer, TurnSeen]]) -> list[str]:
    """One line per answerable question cited right: the heading of the section its answer quotes, to be read against
    the question (the article is right; whether the section is the one that answers, the scoring does not say)."""
    return [
        f"  [{question.lang} {question.profile}] {question.text!r}: {turn.section}"
        for question, (answer, turn) in zip(questions, seen, strict=True)
        if question.article and answer.cited and answer.cited[0][0] == question.article
    ]


def vectors_on(profile: Any, *, bar: float) -> None:
    """``profile``'s draft searching with vectors, a passage only they found used at a cosine of ``bar``
    (``vector_min_score``), and its documents not embedded by the configured model embedded. Raises ``SystemExit``
    when no endpoint is configured or a document could not be embedded."""
    from knowledge.vectors import embedding_model, profile_embed

    if not embedding_model():
        raise SystemExit("--vectors: no embeddings endpoint (KNOWLEDGE_EMBEDDINGS_BASE_URL and _MODEL).")
    profile.knowledge = {**(profile.knowledge or {}), "vectors": True, "vector_min_score": bar}
    profile.save(update_fields=["knowledge"])
    _, failed = profile_embed(profile.pk)
    if failed:
        raise SystemExit(f"--vectors: {failed} documents of {profile.agent_id} could not be embedded (see the log).")


def best_cosines(questions: Sequence[Question], *, profiles: dict[str, Any]) -> list[tuple[float, str]]:
    """Each question's best cosine among the passages of its profile in its language (embedded by the configured
    model), and the article of that passage."""
    import numpy as np

    from common.embeddings import KNOWLEDGE, embeddings_vectoriser
    from knowledge.models import KnowledgePassage
    from knowledge.vectors import embedding_model

    vectoriser = embeddings_vectoriser(KNOWLEDGE)
    assert vectoriser is not None  # vectors_on said so
    matrices: dict[tuple[str, str], tuple[Any, list[str]]] = {}
    out = []
    for question in questions:
        key = (question.profile, question.lang)
        if key not in matrices:
            rows = KnowledgePassage.objects.filter(
                document__source__profile=profiles[question.profile],
                document__language=question.lang,
                document__embedding_model=embedding_model(),
                embedding__isnull=False,
            ).values_list("embedding", "document__file_name")
            matrices[key] = (
                np.stack([np.frombuffer(bytes(vector or b""), dtype=np.float32) for vector, _ in rows]),
                [name for _, name in rows],
            )
        matrix, articles = matrices[key]
        cosines = matrix @ vectoriser.vector(question.text)
        best = int(cosines.argmax())
        out.append((float(cosines[best]), articles[best]))
    return out


def cosines_report(
    questions: Sequence[Question], best: Sequence[tuple[float, str]], *, write: Callable[[str], None]
) -> None:
    """Per language asked, the spread of the best cosine (:func:`best_cosines`) over the answerable questions and over
    the unanswerable ones, how often the best passage is of the answerable one's article, and at each hundredth
    between the lowest and the highest the share of each side at or above it."""
    import math

    import numpy as np

    write("Best cosine in the question's language (min / p10 / p25 / median / p75 / p90 / max):")
    sides: dict[str, tuple[list[float], list[float]]] = {}
    for language in (*LANGUAGES, "all"):
        asked = [(q, b) for q, b in zip(questions, best, strict=True) if language in ("all", q.lang)]
        if not asked:
            continue
        answerable = [cosine for q, (cosine, _) in asked if q.article]
        unanswerable = [cosine for q, (cosine, _) in asked if not q.article]
        right = sum(name == q.article for q, (_, name) in asked if q.article)
        sides[language] = (answerable, unanswerable)
        for title, values in (("answerable", answerable), ("unanswerable", unanswerable)):
            quantiles = np.quantile(values, (0, 0.1, 0.25, 0.5, 0.75, 0.9, 1)) if values else ()
            write(f"  {language:4} {title:12} ({len(values):3}): {' / '.join(f'{v:.3f}' for v in quantiles)}")
        write(
            f"  {language:4} the best passage of the answerable one's article: {Figures.share(right, len(answerable))}"
        )
    cosines = [cosine for cosine, _ in best]
    write("Answerable / unanswerable questions whose best cosine reaches the bar:")
    write("bar    " + "  ".join(f"{name:>17}" for name in sides))
    for hundredths in range(math.floor(min(cosines, default=0) * 100), math.ceil(max(cosines, default=0) * 100) + 1):
        at = hundredths / 100
        cells = [
            f"{Figures.share(sum(c >= at for c in a), len(a))} / {Figures.share(sum(c >= at for c in u), len(u))}"
            for a, u in sides.values()
        ]
        write(f"{at:<5.2f}  " + "  ".join(f"{cell:>17}" for cell in cells))


def articles_import(folder: Path, *, profile: str) -> None:
    """A help centre of one's own into the demo's ``profile``, beside its own, as docs/knowledge.md says a business
    imports one: each language folder of ``folder`` (``pt``, ``en``, ``es``) with ``manage.py import_knowledge`` into
    a source of that language (``Imported pt`` …), then the profile published, so that its customers are answered
    from them. Raises ``SystemExit`` when the import refuses a file."""
    from io import StringIO

    from django.core.management import CommandError, call_command

    from agents.models import AgentProfile
    from releases.versions import version_publish

    for language in LANGUAGES:
        if (folder / language).is_dir():
            out = StringIO()
            try:
                call_command(
                    "import_knowledge",
                    str(folder / language),
                    profile=profile,
                    source=f"Imported {language}",
                    language=language,
                    stdout=out,
                )
            except CommandError as exc:
                raise SystemExit(f"{folder / language}: {exc}\n{out.getvalue()}") from exc
    version_publish(profile=AgentProfile.objects.get(agent_id=profile), note="the bench's imported help centre")


def _turns_main(
    questions: list[Question],
    *,
    listed: bool,
    articles: Path | None = None,
    vectors: Sequence[float] = (),
    cosines: bool = False,
) -> int:
    from django.db import connection

    from bench.conversation_accuracy import demo_running

    os.environ.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8")  # the demo's MCP servers listen on loopback
    _setup_django(migrate=False)
    from agents.models import AgentProfile
    from releases.versions import version_publish

    for name in ("httpx", "httpx2"):  # a line per MCP call otherwise
        logging.getLogger(name).setLevel(logging.WARNING)
    agent_ids = sorted({question.profile for question in questions})
    passes: list[tuple[str, list[tuple[Answer, TurnSeen]]]] = []
    with demo_running() as client:
        if articles is not None:
            for agent_id in agent_ids:
                articles_import(articles, profile=agent_id)
        profiles = {agent_id: AgentProfile.objects.get(agent_id=agent_id) for agent_id in agent_ids}
        for number, bar in enumerate(vectors or [None]):
            if bar is not None:
                for profile in profiles.values():
                    vectors_on(profile, bar=bar)
                    version_publish(profile=profile, note=f"the bench's vectors at {bar}")
            title = "words alone" if bar is None else f"vectors, vector_min_score {bar}"
            passes.append((title, turn_answers(questions, client=client, sessions=f"kbench{number}")))
        best = best_cosines(questions, profiles=profiles) if cosines and vectors else None
    for title, seen in passes:
        print(f"{len(questions)} questions, {connection.vendor}, at a turn (POST /api/gateway/message, offline model),")
        print(f"{title}.")
        print()
        turn_report(questions, seen, write=print)
        if listed:
            print("Missed:")
            print("\n".join(turn_misses(questions, seen)))
            print()
            print("Cited right, the section quoted:")
            print("\n".join(turn_sections(questions, seen)))
            print()
    if best is not None:
        cosines_report(questions, best, write=print)
    return 0


@dataclass(frozen=True)
class Thread:
    """A customer's conversation with a profile, in a language: its turns, each ``(kind, text, article or None)``."""

    profile: str
    lang: str
    turns: tuple[tuple[str, str, str | None], ...]


def follow_ups_load(path: Path) -> list[Thread]:
    """The follow-up conversations; raises ``SystemExit`` naming a malformed one."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    out = []
    for number, entry in enumerate(data.get("conversations") or [], 1):
        turns = entry.get("turns") if isinstance(entry, dict) else None
        if not turns or entry.get("lang") not in LANGUAGES or not entry.get("profile"):
            raise SystemExit(f"{path}: conversation {number}: needs profile, lang (pt, en or es) and turns.")
        read = []
        for turn in turns:
            if not isinstance(turn, dict) or turn.get("kind") not in FOLLOW_UP_KINDS or not turn.get("say"):
                raise SystemExit(f"{path}: conversation {number}: each turn needs say and a kind of {FOLLOW_UP_KINDS}.")
            read.append((turn["kind"], str(turn["say"]), turn.get("article") or None))
        out.append(Thread(str(entry["profile"]), entry["lang"], tuple(read)))
    return out


@dataclass(frozen=True)
class ThreadTurn:
    """One turn of a follow-up conversation as the customer got it: right (the article cited first, or nothing cited
    when none answers it), in the conversation's language, and what was cited."""

    thread: Thread
    index: int
    right: bool
    in_language: bool
    cited: str
    answer: str


def follow_ups_run(threads: Sequence[Thread], *, client: Any) -> list[ThreadTurn]:
    """Every turn of every conversation through the gateway, one session a conversation (``client``: as for
    :func:`turn_answers`)."""
    from bench.conversation_accuracy import answer_language, fixed_read
    from knowledge.models import KnowledgeDocument

    names = dict(KnowledgeDocument.objects.values_list("pk", "file_name"))
    fixed = fixed_read()
    out = []
    for number, thread in enumerate(threads):
        for index, (_, text, article) in enumerate(thread.turns):
            response = client.post(
                "/api/gateway/message",
                {
                    "channel": "api",
                    "agent_id": thread.profile,
                    "payload": {"text": text, "session_id": f"kfollow-{number}"},
                },
                format="json",
            )
            body = response.json() if response.status_code == 200 else {}
            citations = ((body.get("metadata") or {}).get("knowledge") or {}).get("citations") or ()
            first = names.get(citations[0]["document"]) if citations else None
            answer = str(body.get("answer") or f"HTTP {response.status_code}")
            in_language = answer_language(answer, thread.lang, fixed).fits(thread.lang)
            out.append(ThreadTurn(thread, index, first == article, in_language, first or "nothing", answer))
    return out


def follow_ups_report(turns: Sequence[ThreadTurn], *, write: Callable[[str], None], listed: bool) -> None:
    """Per kind of turn and language: the turns right and the answers in the conversation's language; with
    ``listed``, each turn wrong."""
    write("kind           " + "  ".join(f"{name:>15}" for name in (*LANGUAGES, "all")) + "   in language (all)")
    for kind in FOLLOW_UP_KINDS:
        of_kind = [turn for turn in turns if turn.thread.turns[turn.index][0] == kind]
        cells = []
        for language in (*LANGUAGES, "all"):
            chosen = [turn for turn in of_kind if language in ("all", turn.thread.lang)]
            right = sum(turn.right for turn in chosen)
            cells.append(f"{right:3} / {len(chosen):3} {Figures.share(right, len(chosen))}")
        spoken = sum(turn.in_language for turn in of_kind)
        write(f"{kind:13}  " + "  ".join(f"{cell:>15}" for cell in cells) + f"   {spoken} / {len(of_kind)}")
    if listed:
        write("")
        write("Wrong, or not in the conversation's language:")
        for turn in turns:
            if turn.right and turn.in_language:
                continue
            kind, text, article = turn.thread.turns[turn.index]
            write(
                f"  [{turn.thread.lang} {turn.thread.profile} {kind}] {text!r}: want {article or 'nothing'}; cited "
                f"{turn.cited}{'' if turn.in_language else ' (another language)'}; {turn.answer[:90]!r}"
            )


def _follow_ups_main(path: Path, *, listed: bool) -> int:
    from django.db import connection

    from bench.conversation_accuracy import demo_running

    os.environ.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8")  # the demo's MCP servers listen on loopback
    _setup_django(migrate=False)
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).setLevel(logging.WARNING)
    threads = follow_ups_load(path)
    with demo_running() as client:
        turns = follow_ups_run(threads, client=client)
    print(f"{len(threads)} conversations, {len(turns)} turns, {connection.vendor}, at a turn (offline model).")
    print()
    follow_ups_report(turns, write=print, listed=listed)
    return 0


def scratch_removed(path: Path) -> None:
    """The run's own SQLite database, and its journal files, gone when the run ends."""
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm", f"{path.name}-journal"):
        (path.parent / name).unlink(missing_ok=True)


def _setup_django(*, migrate: bool = True) -> None:
    sys.path.insert(0, str(ROOT))
    if not os.environ.get("DATABASE_URL"):
        database = tempfile.NamedTemporaryFile(prefix="knowledge-accuracy-", suffix=".sqlite3", delete=False)  # noqa: SIM115
        os.environ["DATABASE_URL"] = f"sqlite:///{database.name}"
        atexit.register(scratch_removed, Path(database.name))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")
    import django

    django.setup()
    from django.core.management import call_command

    if migrate:
        call_command("migrate", "--noinput", verbosity=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bar", type=float, default=DEFAULT_BAR, help="The relevance bar (default %(default)s).")
    parser.add_argument("--questions", type=Path, default=QUESTIONS, help="The question set (YAML).")
    parser.add_argument("--list", action="store_true", help="List each question missed at the bar.")
    parser.add_argument("--turns", action="store_true", help="Ask each question at a turn and score the answer.")
    parser.add_argument(
        "--relevance",
        choices=("search", "coverage", "idf", "turn"),
        default="search",
        help="What a passage's score is, held to the bar: the engine's, the turn's coverage, or IDF-weighted coverage;"
        " turn: what the turn's retrieval uses at the bar (knowledge_retrieve).",
    )
    parser.add_argument(
        "--articles",
        type=Path,
        help="A folder of articles (<language>/*.md) beside the demo's in every profile of the questions: loaded"
        " for the search alone, imported with import_knowledge and published with --turns (the held-out help centre:"
        " bench/unseen/knowledge/articles with --questions bench/unseen/knowledge/questions.yaml).",
    )
    parser.add_argument(
        "--vectors",
        type=float,
        nargs="+",
        default=[],
        metavar="BAR",
        help="Search with vectors too (the endpoint of KNOWLEDGE_EMBEDDINGS_*), a passage only they found used at each"
        " of these cosines in turn (vector_min_score): at a turn, or with --relevance turn.",
    )
    parser.add_argument(
        "--cosines", action="store_true", help="With --vectors: the best cosines of answerable and unanswerable ones."
    )
    parser.add_argument(
        "--follow-ups",
        type=Path,
        nargs="?",
        const=FOLLOW_UPS,
        help="Ask follow-up conversations at a turn (default %(const)s) and score every turn by its kind.",
    )
    args = parser.parse_args(argv)
    if args.follow_ups:
        return _follow_ups_main(args.follow_ups, listed=args.list)
    questions = questions_load(args.questions)
    if args.vectors and not args.turns and args.relevance != "turn":
        parser.error("--vectors needs --turns or --relevance turn.")
    if args.turns:
        return _turns_main(
            questions, listed=args.list, articles=args.articles, vectors=args.vectors, cosines=args.cosines
        )
    _setup_django()
    from django.db import connection

    from agents.models import AgentProfile
    from releases.management.commands.seed_demo import help_centre_folder, help_centre_load

    run = uuid.uuid4().hex[:8]
    profiles: dict[str, object] = {}
    try:
        for name in sorted({q.profile for q in questions}):
            profile = AgentProfile.objects.create(agent_id=f"kbench_{run}_{name}"[:50], name=f"Knowledge bench {name}")
            help_centre_load(profile=profile, folder=help_centre_folder(name))
            if args.articles:
                help_centre_load(profile=profile, folder=args.articles)
            if args.vectors:
                vectors_on(profile, bar=args.vectors[0])
            profiles[name] = profile
        searched = "search" if args.relevance == "turn" else args.relevance
        answers = retrieval_answers(questions, profiles=profiles, relevance=searched)
        cited: dict[float, list[Answer]] = {}
        by_vector_bar: dict[float, list[Answer]] = {}
        if args.relevance == "turn":
            for at in sorted({*SWEEP, args.bar}):
                cited[at] = turn_retrieval_answers(questions, profiles=profiles, bar=at)
            for vector_bar in args.vectors:
                by_vector_bar[vector_bar] = turn_retrieval_answers(
                    questions, profiles=profiles, bar=args.bar, vector_bar=vector_bar
                )
        best = best_cosines(questions, profiles=profiles) if args.cosines and args.vectors else None
    finally:
        AgentProfile.objects.filter(pk__in=[p.pk for p in profiles.values()]).delete()  # type: ignore[attr-defined]
    print(
        f"{len(questions)} questions, {connection.vendor}, search only (knowledge_search, the question's language), "
        f"relevance: {args.relevance}."
    )
    print()
    report(questions, answers, bar=args.bar, write=print, at_bar=cited.__getitem__ if cited else None)
    if by_vector_bar:
        print()
        print(f"With vectors, at the bar {args.bar} (cited right / refused), per cosine bar:")
        print("cosine " + "  ".join(f"{name:>17}" for name in (*LANGUAGES, "all")))
        for vector_bar, at_vector_bar in by_vector_bar.items():
            cells = []
            for language in (*LANGUAGES, "all"):
                indexes = [i for i, q in enumerate(questions) if language in ("all", q.lang)]
                f = accuracy([questions[i] for i in indexes], [at_vector_bar[i] for i in indexes], bar=-1.0)
                cells.append(f"{f.share(f.cited, f.answerable)} / {f.share(f.refused, f.unanswerable)}")
            print(f"{vector_bar:<5}  " + "  ".join(f"{cell:>17}" for cell in cells))
    if best is not None:
        print()
        cosines_report(questions, best, write=print)
    if args.list:
        print()
        print(f"Missed at the bar {args.bar}:")
        for question, answer, first in zip(questions, cited.get(args.bar, answers), answers, strict=True):
            cited_names = answer.above(args.bar)
            right = (cited_names[:1] == (question.article,)) if question.article else not cited_names
            if not right:
                top = ", ".join(f"{name} {score:.3f}" for name, score in answer.cited[:3]) or "nothing"
                searched = f"; searched first {first.cited[0][0]}" if cited and first.cited else ""
                print(
                    f"  [{question.lang}] {question.text!r}: want {question.article or 'no answer'}; got {top}"
                    f"{searched}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
