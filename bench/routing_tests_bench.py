"""Saved routing tests benchmark: 1,000 cases on a profile of 1,000 intents, through the runner.

    PYTHONPATH=. DJANGO_SETTINGS_MODULE=platform.settings .venv/bin/python bench/routing_tests_bench.py \
        [--intents 1000] [--keywords 20] [--cases 1000] [--runs 7] [--classifier]

Builds a profile document (the shape ``routing.documents`` reads and a version stores; the profile's settings
are the model's defaults) with ``--intents`` intents of ``--keywords`` synthetic keywords each (the words of
``bench/router_bench.py``) over 25 specialists, compiles it with ``routing.documents.profile_compile`` as a
publish does, and generates ``--cases`` routing tests: most name one or two keywords of one intent among
filler words and expect that intent, its specialist and ``keyword``; one in ten hits nothing and expects the
fallback; one in twenty expects the wrong intent (so the run has failures, a confusion matrix with
off-diagonal cells and precision below 1; a few more fail where a filler word happens to be another intent's
keyword). Then times ``releases.routing_tests.routing_tests_run`` over them
``--runs`` times after a warm-up and prints the median and range, and the run's figures. ``--classifier`` turns
the profile's classifier on (the offline one: no endpoint is configured here), which reads every intent for
each case no keyword decides. No database: the runner decides without one. The target: under 1 s.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import django

django.setup()

from agents.models import AgentProfile  # noqa: E402
from bench.router_bench import build_intents, synthetic_word  # noqa: E402
from releases.routing_tests import Case, routing_tests_run  # noqa: E402
from routing.documents import INTENT_DEFAULTS, PROFILE_FIELDS, SCHEMA, SPECIALIST_DEFAULTS, profile_compile  # noqa: E402
from routing.examples import OFFLINE_SCORE  # noqa: E402

SPECIALISTS = 25


def profile_document(rng: random.Random, intents: int, keywords: int, *, classifier: bool) -> dict[str, Any]:
    # The examples tier off: its synthetic examples are two keywords each, and its cost is router_bench's to time.
    defaults = AgentProfile(
        agent_id="bench_tests",
        name="Bench tests",
        llm_router_enabled=classifier,
        examples_enabled=False,
        release_needs_approval=False,  # its default asks the database whether other profiles are reviewed
    )
    profile = {name: getattr(defaults, name) for name in PROFILE_FIELDS}
    profile.update(fallback_specialist="agent_0", coordinator="", goal_domains=[], examples_score=OFFLINE_SCORE)
    specialists = {
        f"agent_{n}": {
            "display_name": "",
            "description": f"Specialist {n}",
            "enabled": True,
            "step_limit": 10,
            "prompt": "",
            "prompt_version": None,
            "allowed_tools": [],
            "handoff_targets": [],
            **SPECIALIST_DEFAULTS,  # what a document's specialists carry that the bench leaves as it is by default
        }
        for n in range(SPECIALISTS)
    }
    document_intents = {
        spec.name: {
            **INTENT_DEFAULTS,  # what a document's intents carry that the bench leaves as it is by default
            "specialist": spec.agent,
            "domain": "bench",
            "description": f"{spec.name.replace('_', ' ')} {' '.join(spec.keywords[:3])}",
            "priority": spec.priority,
            "enabled": True,
            "keywords": sorted(spec.keywords),
            "examples": [f"{spec.keywords[0]} {spec.keywords[1]}"],
            "mcp_tools": [],
            "next_state": "",
        }
        for spec in build_intents(rng, intents, keywords)
    }
    return {
        "schema": SCHEMA,
        "profile": profile,
        "specialists": specialists,
        "intents": document_intents,
        "state_policies": {},
        "goals": {},
        "capabilities": {},
        "tools": {},
        "knowledge": {},
        "knowledge_synonyms": {},
    }


def build_cases(rng: random.Random, document: dict[str, Any], count: int) -> list[Case]:
    names = sorted(document["intents"])
    cases = []
    for n in range(count):
        filler = [synthetic_word(rng) for _ in range(rng.randint(4, 12))]
        roll = rng.random()
        if roll < 0.10:  # no keyword: the fallback answers
            cases.append(Case(name=f"case {n}", message=" ".join(filler), expect={"agent": "agent_0"}))
            continue
        name = rng.choice(names)
        intent = document["intents"][name]
        words = filler + rng.sample(intent["keywords"], k=rng.randint(1, 2))
        rng.shuffle(words)
        expected = rng.choice(names) if roll > 0.95 else name  # one in twenty is mislabelled
        expect = {"intent": expected, "agent": document["intents"][expected]["specialist"], "method": "keyword"}
        cases.append(Case(name=f"case {n}", message=" ".join(words), expect=expect))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--intents", type=int, default=1000)
    parser.add_argument("--keywords", type=int, default=20)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--classifier", action="store_true", help="Turn the profile's (offline) classifier on.")
    args = parser.parse_args()

    rng = random.Random(args.seed)
    document = profile_document(rng, args.intents, args.keywords, classifier=args.classifier)
    t0 = time.perf_counter()
    spec = profile_compile(document, pk=1)
    compile_ms = (time.perf_counter() - t0) * 1000
    cases = build_cases(rng, document, args.cases)

    run = routing_tests_run(spec, cases)  # warm-up
    timings = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        run = routing_tests_run(spec, cases)
        timings.append(time.perf_counter() - t0)
    worst = sorted(run.scores.values(), key=lambda score: (score.precision is None, score.precision or 0))
    print(
        f"{args.intents} intents × {args.keywords} keywords (compiled in {compile_ms:.0f} ms), {args.cases} cases, "
        f"classifier {'on' if args.classifier else 'off'}: {run.passed} passed, {run.failed} failed; "
        f"{len(run.confusion)} expected intents in the confusion matrix; lowest precision "
        f"{worst[0].precision if worst else None}"
    )
    median = statistics.median(timings)
    print(
        f"routing_tests_run: median {median * 1000:.0f} ms (range {min(timings) * 1000:.0f}–{max(timings) * 1000:.0f} "
        f"ms over {args.runs} runs), {args.cases / median:,.0f} cases/s — target under 1 s: "
        f"{'met' if median < 1 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
