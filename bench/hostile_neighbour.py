"""What a hostile MCP server costs another tenant: its p95 latency while every hostile flow runs, against alone.

    PYTHONPATH=. .venv/bin/python bench/hostile_neighbour.py [--runs 5] [--rounds 3] [--messages 30]
        [--rate 20 | --rate 0] [--executor inprocess | --executor celery]

The target: another tenant's p95 while a hostile server is used stays within twice its p95 alone. Measured the way
the suite's test of the hostile server runs it (``neighbours_run`` in ``tests/hostile_mcp.py``), with real parts: a
throwaway PostgreSQL and Redis (``scripts/services.py``), production settings without rate limits, the platform's
ASGI application in this process and one event loop (a web worker's), the hostile server in a process of its own,
registered and synced as an operator does. Plan steps run in that event loop too (``--executor inprocess``, the
embedded default's way and the hardest case), or in a Celery worker of four processes (``--executor celery``,
production's with ``REDIS_URL``).

The other tenant (a router-mode profile, the offline model) chats in two conversations: alone, then for as long as
one hostile client takes to send every hostile flow one after another (a 3 MB tool output, a 1,000-way fan-out, a
server that hangs, instructions in results, a ``${…}`` in the user's text, the 3 MB output in router mode). Its
pace: ``--rate`` messages a second on a steady schedule, each latency counted from when the message was due; or
``--rate 0``, each conversation sending its next message as soon as it is answered (the process saturated: a
latency is then the conversations' share of the process as much as its speed). Each run alternates ``--rounds``
rounds of both phases, so the machine's own ups and downs fall on both; the runs' median ratio is the figure. The
run stops if a hostile flow is not bounded as the suite expects (every limit reported).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import services  # noqa: E402  (scripts/services.py: the throwaway PostgreSQL and Redis)

from bench.chat_load import _manage  # noqa: E402
from tests.hostile_mcp import (  # noqa: E402
    HOSTILE_FLOWS,
    LIMITS_BITTEN,
    hostile_profile_create,
    neighbours_run,
    p95,
    quiet_profile_create,
)

HOSTILE_TENANT = "hostile"
QUIET_TENANT = "quiet"


def run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env.update(stack.enter_context(services.scratch()))
        env.update(stack.enter_context(services.postgres()))
        env.update(stack.enter_context(services.redis()))
        # inprocess: every plan step in the web worker's event loop, as the embedded default runs them, the hardest
        # case for the other tenant; celery: as production runs them (REDIS_URL), a step's call in a worker.
        env.update({**services.bench_server_env(ROOT), "SUPERVISOR_EXECUTOR": args.executor})
        _manage(env, "migrate", "--noinput")
        os.environ.update(env)

        import django

        django.setup()
        import asyncio

        from asgiref.sync import sync_to_async
        from django.db import connections

        from platform.asgi import application
        from tenants.services import api_key_create
        from tests.celery_processes import CeleryWorkerProcess
        from tests.mcp_processes import MCPServerProcess

        server = MCPServerProcess("hostile", module="tests.hostile_mcp").start()  # a process of its own
        stack.callback(server.stop)
        if args.executor == "celery":
            worker = CeleryWorkerProcess(env={**os.environ, "CELERY_SKIP_CHECKS": "1"}, log_dir=Path(env["VAR_DIR"]))
            stack.callback(worker.start().stop)
        hostile_profile_create(server.url)
        quiet_profile_create()
        _, hostile_key = api_key_create(tenant_slug=HOSTILE_TENANT, name="hostile")
        _, quiet_key = api_key_create(tenant_slug=QUIET_TENANT, name="quiet")

        from django.conf import settings

        # With MCP_RESPONSE_MAX_BYTES=0 (the SDK's own client), the 6 MB answer is read whole and cut instead.
        expected = LIMITS_BITTEN - (set() if settings.MCP_RESPONSE_MAX_BYTES else {"tool_response"})

        async def measure() -> list[Any]:
            runs = []
            for _ in range(args.runs):
                seen = await neighbours_run(
                    application, hostile_key=hostile_key, quiet_key=quiet_key, rounds=args.rounds,
                    messages=args.messages, rate=args.rate,
                )  # fmt: skip
                missed = expected - seen.limits_bitten()
                if missed:
                    raise SystemExit(f"the hostile flows did not bite {sorted(missed)}: not the benchmark's flows")
                runs.append(seen)
            await sync_to_async(connections.close_all)()
            return runs

        runs = asyncio.run(measure())

    pace = f"{args.rate:g} messages a second" if args.rate else "each conversation's next message once answered"
    print(
        f"\nAnother tenant's latency ({pace}), alone and while every hostile flow runs ({args.rounds} rounds a run, "
        f"plan steps {args.executor})\n"
    )
    print("| run | alone: messages, p50, p95 | attacked: messages, p50, p95 | p95 ratio |")
    print("| ---: | ---: | ---: | ---: |")
    ratios = []
    for number, seen in enumerate(runs, 1):
        ratios.append(p95(seen.attacked) / p95(seen.alone))
        print(f"| {number} | {_figures(seen.alone)} | {_figures(seen.attacked)} | {ratios[-1]:.2f}× |")
    print("\nEach hostile flow (every run's rounds): how long it took, and the other tenant's messages meanwhile\n")
    print("| hostile flow | its answer, median | the other tenant's messages meanwhile: count, p50, p95 |")
    print("| --- | ---: | ---: |")
    for flow, text in enumerate(HOSTILE_FLOWS):
        seconds = [latency for seen in runs for _, latency in seen.hostile_timeline[flow :: len(HOSTILE_FLOWS)]]
        during = [latency for seen in runs for latency in seen.attacked_during(flow)]
        shown = f"`{text[:40]}{'…' if len(text) > 40 else ''}`"
        print(f"| {shown} | {statistics.median(seconds):.3f} s | {_figures(during) if len(during) > 1 else '—'} |")
    median = statistics.median(ratios)
    print(f"\nmedian p95 ratio: {median:.2f}× (target ≤ 2×: {'met' if median <= 2 else 'not met'})")
    return 0


def _figures(latencies: list[float]) -> str:
    """``messages, p50, p95`` of latencies in seconds, in milliseconds."""
    return f"{len(latencies)}, {statistics.median(latencies) * 1000:.1f} ms, {p95(latencies) * 1000:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs (the median ratio is reported)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both phases a run")
    parser.add_argument("--messages", type=int, default=30, help="messages per conversation alone, each round")
    parser.add_argument(
        "--executor", choices=("inprocess", "celery"), default="inprocess",
        help="where plan steps run: the web worker's event loop (the embedded default, the hardest case) or a Celery "
        "worker of 4 processes (production's, with REDIS_URL)",
    )  # fmt: skip
    parser.add_argument(
        "--rate", type=float, default=20.0,
        help="the other tenant's messages a second, on a steady schedule (0: each conversation sends its next "
        "message as soon as it is answered)",
    )  # fmt: skip
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
