"""Routing decision benchmark: the compiled matcher against a per-keyword loop.

    PYTHONPATH=. .venv/bin/python bench/router_bench.py [--intents 1000] [--keywords 20] [--messages 2000]
        [--exclusions 2]

Builds ``intents × keywords`` synthetic keywords (words and two-word phrases,
some with accents), messages of about 300 characters (most hit a few
keywords, some hit none), checks that both matchers return the same hits, then
times each over the same messages and prints decisions/s, p50/p99 latency and
the ratio. Pure Python, no database: the router decides without one.

``--exclusions N`` gives N keywords of every intent two exclusions each (a phrase that contains the keyword, and a
context word) and puts one of those in about a third of the messages that hit a keyword: the cost of the exclusions,
with the same comparison (the cancelled keywords must agree too).

``--languages N`` limits N keywords of every intent to one language each (pt, es or en, at random): a message that
holds one has its language read (:func:`common.language.detect_language`), once. Timed: the same router with and
without the limits, alternately (``--rounds``, the median reported), and the comparison with the loop.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import time

from routing.keywords import KeywordLoopMatcher
from routing.router import CompiledRouter, IntentSpec

ACCENTED = "áéíóúãõçâê"


def synthetic_word(rng: random.Random) -> str:
    letters = string.ascii_lowercase + ACCENTED
    return "".join(rng.choice(letters) for _ in range(rng.randint(4, 10)))


def build_intents(rng: random.Random, count: int, per_intent: int) -> tuple[IntentSpec, ...]:
    seen: set[str] = set()
    intents = []
    for n in range(count):
        keywords: list[str] = []
        while len(keywords) < per_intent:
            word = synthetic_word(rng)
            keyword = f"{word} {synthetic_word(rng)}" if rng.random() < 0.25 else word
            if keyword not in seen:
                seen.add(keyword)
                keywords.append(keyword)
        intents.append(
            IntentSpec(
                name=f"intent_{n:04d}", agent=f"agent_{n % 25}", priority=rng.randint(1, 100), keywords=tuple(keywords)
            )
        )
    return tuple(intents)


def with_exclusions(rng: random.Random, intents: tuple[IntentSpec, ...], per_intent: int) -> tuple[IntentSpec, ...]:
    """``per_intent`` keywords of each intent excluded inside "<keyword> <word>" and with a context word."""
    from dataclasses import replace

    return tuple(
        replace(
            intent,
            keyword_exclusions=tuple(
                (keyword, (f"{keyword} {synthetic_word(rng)}", synthetic_word(rng)))
                for keyword in intent.keywords[:per_intent]
            ),
        )
        for intent in intents
    )


def with_languages(rng: random.Random, intents: tuple[IntentSpec, ...], per_intent: int) -> tuple[IntentSpec, ...]:
    """``per_intent`` keywords of each intent limited to one language each."""
    from dataclasses import replace

    return tuple(
        replace(
            intent,
            keyword_languages=tuple(
                (keyword, (rng.choice(("pt", "es", "en")),)) for keyword in intent.keywords[:per_intent]
            ),
        )
        for intent in intents
    )


def build_messages(rng: random.Random, intents: tuple[IntentSpec, ...], count: int, length: int) -> list[str]:
    messages = []
    for _ in range(count):
        words: list[str] = []
        hits = 0 if rng.random() < 0.2 else rng.randint(1, 3)
        for _ in range(hits):
            words.append(
                rng.choice(rng.choice(intents).keywords).upper()
                if rng.random() < 0.3
                else rng.choice(rng.choice(intents).keywords)
            )
        excluded = [intent for intent in intents if intent.keyword_exclusions]
        if hits and excluded and rng.random() < 0.33:
            _keyword, phrases = rng.choice(rng.choice(excluded).keyword_exclusions)
            words.append(rng.choice(phrases))
        while len(" ".join(words)) < length:
            words.append(synthetic_word(rng) + rng.choice(["", ",", ".", "!", "?"]))
        rng.shuffle(words)
        messages.append(" ".join(words)[: length + 20])
    return messages


def measure(label: str, decide, messages: list[str]) -> tuple[float, float, float]:
    latencies = []
    started = time.perf_counter()
    for text in messages:
        t0 = time.perf_counter()
        decide(text)
        latencies.append((time.perf_counter() - t0) * 1e6)
    elapsed = time.perf_counter() - started
    latencies.sort()
    rate = len(messages) / elapsed
    p50 = statistics.median(latencies)
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(f"{label:<28} {rate:>12,.0f} decisions/s   p50 {p50:>10,.1f} µs   p99 {p99:>10,.1f} µs")
    return rate, p50, p99


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--intents", type=int, default=1000)
    parser.add_argument("--keywords", type=int, default=20)
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--length", type=int, default=300)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--examples", type=int, default=0, help="examples per intent: also time the examples tier")
    parser.add_argument(
        "--rounds", type=int, default=3, help="examples tier: timed passes without and with it, alternately"
    )
    parser.add_argument(
        "--exclusions", type=int, default=0, help="keywords per intent with two exclusions each (default none)"
    )
    parser.add_argument(
        "--languages", type=int, default=0, help="keywords per intent limited to one language (default none)"
    )
    args = parser.parse_args()

    rng = random.Random(args.seed)
    intents = build_intents(rng, args.intents, args.keywords)
    if args.exclusions:
        intents = with_exclusions(rng, intents, args.exclusions)
    messages = build_messages(rng, intents, args.messages, args.length)
    unlimited = intents
    if args.languages:
        intents = with_languages(rng, intents, args.languages)

    t0 = time.perf_counter()
    compiled = CompiledRouter(intents=intents, fallback_agent="agent_0")
    build_ms = (time.perf_counter() - t0) * 1000
    loop = KeywordLoopMatcher(intents)

    mismatches = sum(compiled.keyword_match(m) != loop.keyword_match(m) for m in messages)
    hitting = sum(bool(compiled.match(m)) for m in messages)
    cancelled = sum(bool(compiled.keyword_match(m).excluded) for m in messages)
    print(
        f"{args.intents} intents × {args.keywords} keywords = {args.intents * args.keywords:,} keywords; "
        f"{len(messages)} messages of ~{args.length} chars ({hitting} hit a keyword"
        + (f", {cancelled} had one cancelled by an exclusion" if args.exclusions else "")
        + f"); compiled in {build_ms:.0f} ms; disagreements: {mismatches}"
    )
    compiled_rate, _, _ = measure("compiled (Aho-Corasick)", lambda text: compiled.route_sync(text), messages)
    loop_rate, _, _ = measure("per-keyword loop", loop.match, messages)
    print(f"ratio compiled / loop: {compiled_rate / loop_rate:,.1f}×")
    if mismatches:
        raise SystemExit("the matchers disagree")
    if args.languages:
        languages_cost(unlimited, compiled, messages, args.rounds)
    if args.examples:
        examples_tier(rng, intents, args.examples, args.messages, args.rounds)


def languages_cost(
    unlimited: tuple[IntentSpec, ...], limited: CompiledRouter, messages: list[str], rounds: int
) -> None:
    """The same decisions without and with the language limits, ``rounds`` times alternately: the medians."""
    plain = CompiledRouter(intents=unlimited, fallback_agent="agent_0")
    reading = sum(bool(limited.keyword_match(m).off_language) for m in messages)
    print(f"language limits: {reading} of {len(messages)} messages had a limited keyword left out")
    timings: dict[str, list[float]] = {"without limits": [], "with limits": []}
    for _ in range(rounds):
        for label, router in (("without limits", plain), ("with limits", limited)):
            timings[label].append(measure(f"  {label}", router.route_sync, messages)[1])
    medians = {label: statistics.median(p50s) for label, p50s in timings.items()}
    print(
        f"median p50: without limits {medians['without limits']:,.1f} µs, with limits {medians['with limits']:,.1f} µs"
    )


def examples_tier(
    rng: random.Random, intents: tuple[IntentSpec, ...], per_intent: int, count: int, rounds: int = 3
) -> None:
    """The examples tier's cost on a decision: each intent gets ``per_intent`` examples of 4–12 words drawn from a
    vocabulary of its own (30 words) and a shared one (400 words); the messages — one in five a customer's length
    (~300 characters), the rest 5–20 words — use an intent's words and the shared ones but none of its keywords, so
    every one reaches the tier. Timed: the same decision with and without the tier (the difference is what the
    tier adds), ``rounds`` times alternately (the median of the rounds is reported), and compiling the tier. The
    intents compete with the product's "none of these" background (the shipped corpus, routing.background), as every
    profile's do."""
    from dataclasses import replace

    from routing.background import background_of
    from routing.examples import ExampleIndex
    from routing.tfidf import TfidfVectoriser

    shared = [synthetic_word(rng) for _ in range(400)]
    own = [[synthetic_word(rng) for _ in range(30)] for _ in intents]

    def sentence(words: list[str], low: int, high: int) -> str:
        return " ".join(rng.choice(words if rng.random() < 0.6 else shared) for _ in range(rng.randint(low, high)))

    with_examples = tuple(
        replace(intent, examples=tuple(sentence(own[n], 4, 12) for _ in range(per_intent)))
        for n, intent in enumerate(intents)
    )
    messages = []
    for _ in range(count):
        n = rng.randrange(len(intents))
        messages.append(sentence(own[n], 40, 50) if rng.random() < 0.2 else sentence(own[n], 5, 20))
    background = background_of([])
    corpus_size = sum(len(texts) for _, texts in background)
    t0 = time.perf_counter()
    index = ExampleIndex.build([(i.name, i.examples) for i in with_examples], TfidfVectoriser(), background)
    first_s = time.perf_counter() - t0
    # Again, as a running server compiles a published version: scikit-learn, SciPy and numba already loaded.
    t0 = time.perf_counter()
    index = ExampleIndex.build([(i.name, i.examples) for i in with_examples], TfidfVectoriser(), background)
    compile_s = time.perf_counter() - t0
    plain = CompiledRouter(intents=with_examples, fallback_agent="agent_0")
    tier = CompiledRouter(
        intents=with_examples, fallback_agent="agent_0", examples=index, examples_threshold=0.3, examples_margin=0.05
    )
    reached = sum(not plain.match(m) for m in messages)
    for text in messages[:200]:  # warm: the vectoriser memoises words, as a serving process does
        tier.route_sync(text)
    print(
        f"examples tier: {len(intents)} intents × {per_intent} examples = {len(index.texts) - corpus_size:,} examples "
        f"and a background of {corpus_size:,}, compiled in "
        f"{compile_s:.2f} s ({first_s:.2f} s the first time in a process, loading the libraries); {reached} of "
        f"{len(messages)} messages reach it"
    )
    added = []
    for _ in range(rounds):  # alternately, so that a burst of other work on the machine spoils one round, not all
        _, base50, base99 = measure("without the tier", lambda text: plain.route_sync(text), messages)
        _, tier50, tier99 = measure("with the examples tier", lambda text: tier.route_sync(text), messages)
        added.append((tier50 - base50, tier99 - base99))
    decided = sum(tier.route_sync(m).method == "examples" for m in messages)
    p50, p99 = (statistics.median(figures) for figures in zip(*added, strict=True))
    each = " / ".join(f"{figure:,.1f}" for _, figure in added)
    print(
        f"the tier adds p50 {p50:,.1f} µs, p99 {p99:,.1f} µs (median of {rounds} rounds; p99 by round: {each} µs); "
        f"it decided {decided}"
    )


if __name__ == "__main__":
    main()
