"""Routing accuracy benchmark: the demo profiles' paraphrase sets routed by keywords, + examples, + a classifier.

    PYTHONPATH=. DJANGO_SETTINGS_MODULE=platform.settings .venv/bin/python bench/routing_accuracy.py \
        [--matrix] [--set unseen] [--open-set]

(Figures in the docs/benchmarks.md; the targets: ≥ 85 % top-1 with the offline default, wrong-intent rate ≤ 5 %.)

Loads the demo (``config/demo``) into a throwaway SQLite database, calibrates each profile's examples tier on its
saved routing tests and its examples (:mod:`releases.calibration`, as an editor's "Calibrate" does — the paraphrases
are never shown to it), and routes every message of ``bench/paraphrases/<profile>.yaml`` — written apart from the
examples, with none of the profile's keywords — three ways:

* ``keywords``: state → keywords → fallback (the examples tier off, no classifier);
* ``+ examples``: the examples tier with the calibrated threshold and margin (the offline default);
* ``+ classifier``: then the LLM classifier for what the examples left — the real path (routing.classifier's
  ``llm_classifier``: langchain-openai, structured output, one call per message, the profile's confidence
  threshold) to the scripted OpenAI-compatible server (``tests/llm_server.py``) on a local port. No model is
  reachable here, so the scripted model answers as the offline classifier would (routing.classifier's bag of words,
  what a profile with the classifier on and no endpoint gets): the figures are the cascade's with that stand-in, and
  the count of model calls is what the examples tier spares a real model.

A coordinator profile (telecom_assistente) routes every message to its coordinator, which delegates on the
router's candidates: its messages are scored on the router-mode decision, the intent the coordinator is offered.

Every profile also routes the shared held-out out-of-scope set (``bench/out_of_scope.yaml``: small talk, other
businesses' questions, general knowledge, in the three languages), which none of them should route.

For each: **top-1 accuracy** over the messages that have an intent (routed to it), the **fallback rate** (left
to the fallback), the **wrong-intent rate** (routed, but to another intent) and, over the out-of-scope messages,
how many were rightly left alone — to the fallback, or answered as small talk — and how many would have **set a
conversation state** (each one listed at the end); per profile and per language, then all three profiles per
language; ``--matrix`` prints the confusion matrices.

``--set unseen`` routes ``bench/unseen/`` instead: in-scope and out-of-scope messages written from the intents'
descriptions by someone who saw no example, keyword or other set, kept for reporting only (never read while the
tier was designed or tuned).

``--open-set`` compares ways for the examples tier to leave alone what it does not recognise, each calibrated on the
profile's own samples as an editor's "Calibrate" does: the closed tier (the posterior among intents alone), one
"none of these" class of the shipped corpus, a class per kind of the corpus, and a class per kind with the profile's
out-of-scope examples (the product).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
_DB = tempfile.NamedTemporaryFile(prefix="routing-accuracy-", suffix=".sqlite3", delete=False)  # noqa: SIM115
os.environ["DATABASE_URL"] = f"sqlite:///{_DB.name}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")
os.environ.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8")  # the demo's MCP servers listen on loopback here

import django  # noqa: E402
import yaml  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from tests.llm_server import Reply, ScriptedLLMServer, tool_call_reply  # noqa: E402

PROFILES = ("telecom_contas", "retail_orders", "telecom_assistente")
OUT_OF_SCOPE = ROOT / "bench" / "out_of_scope.yaml"  # held out, every profile's: none of them should route these
UNSEEN = ROOT / "bench" / "unseen"  # held out for reporting only: in_scope.yaml and out_of_scope.yaml
OPEN_SET = (
    "closed (posterior among intents)",
    "one none-of-these class",
    "a class per kind",
    "per kind + profile's out of scope",
)
FALLBACK = "fallback"
LEFT_ALONE = ("fallback", "small_talk")  # what leaves a message to the fallback
MODES = ("keywords", "+ examples", "+ classifier")


def _load(profile: str, which: str = "paraphrases") -> list[dict[str, str]]:
    """The profile's in-scope set, then the shared out-of-scope set (labelled ``fallback``, with its ``kind``)."""
    if which == "unseen":
        inside = yaml.safe_load((UNSEEN / "in_scope.yaml").read_text(encoding="utf-8"))["profiles"][profile]
        shared = yaml.safe_load((UNSEEN / "out_of_scope.yaml").read_text(encoding="utf-8"))["messages"]
    else:
        data = yaml.safe_load((ROOT / "bench" / "paraphrases" / f"{profile}.yaml").read_text(encoding="utf-8"))
        assert data["profile"] == profile
        inside = data["messages"]
        shared = yaml.safe_load(OUT_OF_SCOPE.read_text(encoding="utf-8"))["messages"]
    return [*inside, *({**message, "intent": FALLBACK} for message in shared)]


def _scripted_model(intents) -> Callable[[dict[str, Any]], Reply | None]:
    """The scripted model's answer to the LLM classifier's request: the offline classifier's choice among
    ``intents`` for the request's message, as the ``IntentChoice`` call a model makes."""
    from routing.classifier import IntentChoice, offline_classify

    def answer(body: dict[str, Any]) -> Reply | None:
        if IntentChoice.__name__ not in [tool["function"]["name"] for tool in body.get("tools", ())]:
            return None
        text = next(message["content"] for message in reversed(body["messages"]) if message["role"] == "user")
        choice = asyncio.run(offline_classify(text, intents))
        arguments = {"intent": "", "confidence": 0.0} if choice is None else choice.__dict__
        return tool_call_reply(IntentChoice.__name__, dict(arguments))

    return answer


def _routers(agent_id: str, model: ScriptedLLMServer):
    """The profile's draft router three ways (see the module docstring), after calibrating its examples tier; the
    classifier's calls go to ``model``, answering for this profile's intents."""
    from agents.models import AgentProfile
    from releases.calibration import calibrate, calibration_save
    from releases.routing_tests import DRAFT, routing_tests_saved, routing_tests_spec
    from routing.classifier import llm_classifier

    profile = AgentProfile.objects.get(agent_id=agent_id)
    result = calibrate(routing_tests_spec(profile, DRAFT), routing_tests_saved(profile))
    calibration_save(profile, result)
    spec = routing_tests_spec(AgentProfile.objects.get(pk=profile.pk), DRAFT)
    router = spec.router
    keywords_only = type(router)(
        intents=router.intents,
        state_policies=tuple(router.state_policies.values()),
        fallback_agent=router.fallback_agent,
    )
    with_examples = router
    with_classifier = type(router)(
        intents=router.intents,
        state_policies=tuple(router.state_policies.values()),
        fallback_agent=router.fallback_agent,
        llm_enabled=True,
        llm_threshold=spec.llm_router_threshold,
        examples=router.examples,
        examples_threshold=router.examples_threshold,
        examples_margin=router.examples_margin,
        examples_state_threshold=router.examples_state_threshold,
    )
    model.respond_with(_scripted_model(router.intents))
    return result, {
        "keywords": (keywords_only, None),
        "+ examples": (with_examples, None),
        "+ classifier": (with_classifier, llm_classifier(spec)),
    }


async def _route(router, classifier, text: str) -> tuple[str, str]:
    """The intent routed to (``fallback`` when none) and the state the decision would set (``""`` when none)."""
    decision = await router.route(text, classifier=classifier, mode="router")
    return (FALLBACK if decision.method in LEFT_ALONE else decision.intent), decision.next_state or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--matrix", action="store_true", help="print each confusion matrix (+ examples)")
    parser.add_argument(
        "--open-set", action="store_true",
        help="compare ways for the examples tier to leave alone what it does not recognise (instead of the modes)",
    )  # fmt: skip
    parser.add_argument(
        "--set", choices=("paraphrases", "unseen"), default="paraphrases",
        help="the messages routed: the paraphrase and out-of-scope sets (default), or bench/unseen",
    )  # fmt: skip
    args = parser.parse_args()
    call_command("migrate", "--noinput", verbosity=0)
    call_command("seed_demo", verbosity=0)
    from django.conf import settings

    settings.OFFLINE_LLM_LATENCY_MS = 0
    for client in ("httpx", "httpx2"):  # a line per model call otherwise
        logging.getLogger(client).setLevel(logging.WARNING)
    model = ScriptedLLMServer().start()
    settings.ROUTER_LLM_BASE_URL, settings.ROUTER_LLM_MODEL = model.base_url, "scripted-router"
    settings.ROUTER_LLM_API_KEY = "bench"
    totals: dict[str, Counter[str]] = defaultdict(Counter)
    totals_by_language: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    states: dict[str, list[str]] = defaultdict(list)  # out-of-scope messages whose decision sets a state
    print(
        f"{'profile':20} {'mode':14} {'top-1':>7} {'fallback':>9} {'wrong':>7} {'out of scope left':>18} "
        f"{'sets a state':>13}  (n)"
    )
    if args.open_set:
        _open_set_compare(model, args.set)
        return
    for agent_id in PROFILES:
        messages = _load(agent_id, args.set)
        calibration, routers = _routers(agent_id, model)
        chosen = calibration.chosen
        print(
            f"{agent_id}: examples tier calibrated to threshold {chosen.threshold:.2f}, margin {chosen.margin:.2f} "
            f"({calibration.from_tests} saved tests, {calibration.from_examples} examples)"
        )
        for mode in MODES:
            router, classifier = routers[mode]
            calls = len(model.requests)
            counts: Counter[str] = Counter()
            by_language: dict[str, Counter[str]] = defaultdict(Counter)
            matrix: dict[str, Counter[str]] = defaultdict(Counter)
            for message in messages:
                got, state = asyncio.run(_route(router, classifier, message["text"]))
                want = message["intent"]
                matrix[want][got] += 1
                for figures in (counts, by_language[message["lang"]]):
                    _count(figures, want, got, state)
                if want == FALLBACK and state:
                    states[mode].append(f"{agent_id}: {message['text']!r} → {got} sets {state}")
            counts["calls"] = len(model.requests) - calls
            totals[mode].update(counts)
            for lang, figures in by_language.items():
                totals_by_language[mode, lang].update(figures)
            print(_line(agent_id, mode, counts))
            for lang, figures in sorted(by_language.items()):
                print(_line(f"  {lang}", mode, figures))
            if args.matrix and mode == "+ examples":
                _matrix(matrix)
    print()
    for mode in MODES:
        print(_line("all three", mode, totals[mode]))
        for lang in sorted({lang for _, lang in totals_by_language}):
            print(_line(f"  {lang}", mode, totals_by_language[mode, lang]))
    for mode in MODES:
        for line in states[mode]:
            print(f"{mode}: {line}")


def _open_set_compare(model: ScriptedLLMServer, which: str) -> None:
    """Each profile's examples tier built four ways (see the module docstring), each calibrated on the profile's own
    samples by releases.calibration and routed as the product routes (small talk and keywords first)."""
    from dataclasses import replace

    from agents.models import AgentProfile
    from releases.calibration import calibrate
    from releases.routing_tests import DRAFT, routing_tests_saved, routing_tests_spec
    from routing.background import PREFIX, background_of, corpus
    from routing.examples import ExampleIndex
    from routing.tfidf import TfidfVectoriser

    totals: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for agent_id in PROFILES:
        _, routers = _routers(agent_id, model)
        router, _ = routers["+ examples"]
        profile = AgentProfile.objects.get(agent_id=agent_id)
        spec = routing_tests_spec(profile, DRAFT)
        intents = [(name, router.examples.texts[start:end]) for name, start, end in _intent_rows(router.examples)]
        own = list(profile.out_of_scope_examples or ())
        every = tuple(text for _, texts in corpus() for text in texts)
        backgrounds = {
            OPEN_SET[0]: (),
            OPEN_SET[1]: ((PREFIX + "none", every),),
            OPEN_SET[2]: corpus(),
            OPEN_SET[3]: background_of(own),
        }
        for method, background in backgrounds.items():
            index = ExampleIndex.build(intents, TfidfVectoriser(), background)
            variant = _router_with(router, index, 1.0, 0.0, 1.0, 1.0)
            result = calibrate(replace(spec, router=variant), routing_tests_saved(profile))
            rule = (result.chosen.threshold, result.chosen.margin, result.state_threshold, result.keyword_check)
            variant = _router_with(router, index, *rule)
            for message in _load(agent_id, which):
                got, state = asyncio.run(_route(variant, None, message["text"]))
                _count(totals[method, message["lang"]], message["intent"], got, state)
    print(
        f"\n{'all three, calibrated each':34} {'top-1':>7} {'wrong':>7} {'out of scope left':>18} {'sets a state':>13}"
    )
    for method in OPEN_SET:
        for language in ("", "pt", "en", "es"):
            counts = sum((c for (m, lang), c in totals.items() if m == method and language in ("", lang)), Counter())
            n, out = max(1, counts["in"]), max(1, counts["out"])
            name = f"  {language}" if language else method
            print(
                f"{name:34} {counts['right'] / n:7.1%} {counts['wrong'] / n:7.1%} {counts['out_left'] / out:18.1%} "
                f"{counts['out_state']:13d}"
            )


def _intent_rows(index) -> list[tuple[str, int, int]]:
    """Each intent of ``index`` with its examples' rows (start, end)."""
    return [(name, int(index.starts[k]), int(index._ends[k])) for k, name in enumerate(index.intents)]


def _router_with(router, index, threshold: float, margin: float, state_threshold: float, keyword_check: float):
    """``router`` with another examples index and its rule (the keyword check only where the index has a
    background: without one nothing reads as none of these)."""
    return type(router)(
        intents=router.intents,
        state_policies=tuple(router.state_policies.values()),
        fallback_agent=router.fallback_agent,
        examples=index,
        examples_threshold=threshold,
        examples_margin=margin,
        examples_state_threshold=state_threshold,
        keyword_check=keyword_check,
    )


def _count(counts: Counter[str], want: str, got: str, state: str = "") -> None:
    """One message's outcome: routed right, left to the fallback or routed wrong; out of scope, left alone or not,
    and whether its decision would set a state."""
    if want == FALLBACK:
        counts["out"] += 1
        counts["out_left"] += got == FALLBACK
        counts["out_state"] += bool(state)
    else:
        counts["in"] += 1
        counts["right" if got == want else "fell" if got == FALLBACK else "wrong"] += 1


def _line(name: str, mode: str, counts: Counter[str]) -> str:
    n = max(1, counts["in"])
    out = max(1, counts["out"])
    return (
        f"{name:20} {mode:14} {counts['right'] / n:7.1%} {counts['fell'] / n:9.1%} {counts['wrong'] / n:7.1%} "
        f"{counts['out_left'] / out:18.1%} {counts['out_state']:13d}  ({counts['in']} + {counts['out']} out of scope"
        + (f"; {counts['calls']} model calls)" if counts["calls"] else ")")
    )


def _matrix(matrix: dict[str, Counter[str]]) -> None:
    columns = sorted({got for row in matrix.values() for got in row})
    width = max(len(name) for name in [*matrix, *columns])
    print("      expected \\ got: " + " ".join(f"{c[:12]:>12}" for c in columns))
    for want in sorted(matrix):
        print(f"      {want:{width}} " + " ".join(f"{matrix[want][c]:12d}" for c in columns))


if __name__ == "__main__":
    try:
        main()
    finally:
        for suffix in ("", "-wal", "-shm"):
            Path(_DB.name + suffix).unlink(missing_ok=True)
