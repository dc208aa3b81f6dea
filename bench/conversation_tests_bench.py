"""Conversation tests benchmark: 1,000 deterministic tests against the demo's ``telecom_contas``, offline.

    PYTHONPATH=. DJANGO_SETTINGS_MODULE=platform.settings .venv/bin/python scripts/services.py --scratch \
        --postgres -- .venv/bin/python bench/conversation_tests_bench.py [--tests 1000] [--runs 3] [--profile 25] \
        [--profile-file F] [--processes N]

(Figures in docs/benchmarks.md.) Migrates the database the settings point at (a throwaway PostgreSQL with the
command above) and loads the demo (``seed_demo``), then writes ``--tests`` conversation tests in pt, en and es: an
invoice explained with its recorded tool answers (its total asserted in the answer, the tool and its argument), an
order question, a thank-you after either (two turns, no state left), a message of two requests answered together;
each names its own number, so no two are the same text. The tests are written as a YAML file and read back through
the parser, then played by ``releases.evals.run.conversation_tests_run`` — the real turn, each test in a transaction
rolled back — ``--runs`` times: total, per test and per turn, median and range, and the CPU of this process and of
the processes it started. ``--processes`` (default: one a core) plays each run in that many new processes, whose
start is part of the run's time. ``--profile N`` prints the N functions of one run, played in this process, with the
most time of their own (cProfile). No model is configured: the specialists and the judge are the offline ones. The
target: under 10 s.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from services import bench_server_env  # noqa: E402

# The production settings the served benchmarks run with (Django's debug mode keeps every statement of the process in
# memory and times it), no model configured; the demo's MCP servers are on loopback, which they allow (none is
# called here: every tool a test reaches has a recorded answer, but the demo's configuration is checked on load).
for name, value in {**bench_server_env(ROOT), "OPENAI_BASE_URL": ""}.items():
    os.environ.setdefault(name, value)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from agents.models import AgentProfile  # noqa: E402
from releases.evals import conversation_tests_parse, conversation_tests_text  # noqa: E402
from releases.evals.run import conversation_tests_run  # noqa: E402
from releases.routing_tests import DRAFT, routing_tests_spec  # noqa: E402
from routing.conversation_tests.cases import CaseTurn, ConversationCase  # noqa: E402

PROFILE = "telecom_contas"
INVOICE = {
    "pt": ("minha fatura veio alta este mês, conta {n}", "obrigado, era isso"),
    "en": ("my invoice is too high this month, account {n}", "thanks, that was it"),
    "es": ("mi factura vino muy alta este mes, cuenta {n}", "gracias, era eso"),
}
ORDER = {"pt": "cadê meu pedido P{n}?", "en": "where is my order P{n}?", "es": "¿dónde está mi pedido P{n}?"}
TOOLS = ("consultar_fatura", "consultar_pagamentos", "consultar_pedido", "consultar_entrega")


def suite(count: int) -> list[ConversationCase]:
    cases = []
    for n in range(count):
        language = ("pt", "en", "es")[n % 3]
        msisdn = f"55119{n:08d}"
        total = f"{100 + n % 900},{n % 100:02d}"
        answers = {
            "consultar_fatura": {"valor_total": f"R$ {total}", "vencimento": "2025-06-10"},
            "consultar_pagamentos": {"pagamentos": []},
            "consultar_pedido": {"pedido": f"P{n}", "status": "em trânsito"},
            "consultar_entrega": {"previsao": "2025-06-12"},
        }
        kind = n % 4
        if kind in (0, 1):
            ask, thanks = INVOICE[language]
            turns = [
                CaseTurn(
                    user=ask.format(n=n),
                    expect={
                        "agent": "billing_agent",
                        "intent": "billing_invoice_explanation",
                        "tools_called": {"consultar_fatura": {"msisdn": msisdn}},
                        "answer_contains": [total],
                        "answer_not_contains": ["Subject:"],
                    },
                )
            ]
            if kind == 1:
                turns.append(CaseTurn(user=thanks, expect={"no_state": True}))
        elif kind == 2:
            turns = [CaseTurn(user=ORDER[language].format(n=n), expect={"agent": "orders_agent"})]
        else:
            turns = [
                CaseTurn(
                    user=f"minha fatura veio alta e cadê meu pedido P{n}?",
                    expect={"intent": "multi_intent", "topics": ["billing_invoice_explanation"]},
                )
            ]
        cases.append(
            ConversationCase(
                name=f"bench {n}",
                turns=tuple(turns),
                language=language if kind != 3 else "pt",
                context={"msisdn": msisdn, "order_id": f"P{n}"},
                tool_answers=answers,
            )
        )
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, help="print the N functions of most own time (one run)")
    parser.add_argument("--profile-file", default="", help="with --profile: also save the profile there (pstats)")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="play each run in N processes")
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    if not AgentProfile.objects.filter(agent_id=PROFILE).exists():
        call_command("seed_demo", stdout=io.StringIO())
    profile = AgentProfile.objects.get(agent_id=PROFILE)
    spec = routing_tests_spec(profile, DRAFT)
    started = time.perf_counter()
    _, cases = conversation_tests_parse(conversation_tests_text(PROFILE, suite(args.tests)), name="bench.yaml")
    print(f"{len(cases)} tests written and read back in {time.perf_counter() - started:.2f} s")
    turns = sum(len(case.turns) for case in cases)

    conversation_tests_run(spec, cases[:20])  # warm-up: the first turn loads models and compiles
    seconds, cpu, children = [], [], []
    run = None
    for _ in range(args.runs):
        started, used, theirs = time.perf_counter(), time.process_time(), _children_cpu()
        run = conversation_tests_run(spec, cases, processes=args.processes)
        seconds.append(time.perf_counter() - started)
        cpu.append(time.process_time() - used)
        children.append(_children_cpu() - theirs)
    assert run is not None
    median = statistics.median(seconds)
    print(
        f"{run.total} tests ({turns} turns) in {args.processes} process(es): {run.passed} passed, {run.failed} failed; "
        f"median {median:.2f} s (range {min(seconds):.2f}–{max(seconds):.2f} s over {args.runs} runs), "
        f"{median / run.total * 1000:.1f} ms a test, {median / turns * 1000:.1f} ms a turn; "
        f"CPU a test (median): this process {statistics.median(cpu) / run.total * 1000:.1f} ms, the processes it "
        f"started {statistics.median(children) / run.total * 1000:.1f} ms; load average {os.getloadavg()[0]:.1f}"
    )
    for result in run.failures[:5]:
        print("  FAIL", result.failure_text())
    if args.profile:
        profiled(args.profile, lambda: conversation_tests_run(spec, cases), saved=args.profile_file)


def profiled(shown: int, play: Callable[[], object], *, saved: str = "") -> None:
    """Print the ``shown`` functions of most own CPU in ``play``, in every thread it starts (the tests are played in
    threads of their own): a profiler for each thread, started by its first call, timed by the thread's CPU (a wall
    clock would give each function the time its thread waited for the interpreter lock), the profiles added up."""
    profilers: list[cProfile.Profile] = []

    def started(*_: object) -> None:
        profiler = cProfile.Profile(time.thread_time)
        profilers.append(profiler)
        profiler.enable()  # replaces this hook in the thread

    threading.setprofile(started)
    try:
        mine = cProfile.Profile(time.thread_time)
        mine.runcall(play)
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    for profiler in profilers:
        profiler.create_stats()
    stats = pstats.Stats(mine, *profilers, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(shown)
    if saved:
        stats.dump_stats(saved)


def _children_cpu() -> float:
    """The CPU seconds of this process's children that ended (the processes a run started, once it is over)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


if __name__ == "__main__":
    main()
