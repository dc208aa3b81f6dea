"""Supervisor fan-out benchmark: four specialists through real Celery workers.

    PYTHONPATH=. .venv/bin/python bench/fanout_bench.py [--runs 20] [--latency-ms 500] [--concurrency 4]

Starts a throwaway PostgreSQL and Redis (``scripts/services.py``), migrates,
loads the demo, switches ``telecom_contas`` to supervisor mode and starts a
Celery worker (prefork, ``--concurrency``) whose offline model takes
``--latency-ms`` per call. Then it sends, one after the other, a message that
hits all four demo specialists ("Minha fatura e meu pedido, quero saber do plano
e fazer uma troca") through the routing graph with the Celery executor, and
reports the wall time of each turn against the slowest single specialist and
against the sequential sum of the four. Target: wall ≤ 1.5 × the slowest.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MESSAGE = "Minha fatura e meu pedido, quero saber do plano e fazer uma troca"


def outer(args: argparse.Namespace) -> int:
    """Re-run this script inside the throwaway services."""
    command = [
        sys.executable,
        str(ROOT / "scripts" / "services.py"),
        "--scratch",
        "--postgres",
        "--redis",
        "--",
        sys.executable,
        __file__,
        "--inner",
        *sys.argv[1:],
    ]
    return subprocess.call(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def inner(args: argparse.Namespace) -> int:
    # The project root before this script's folder, whose tests/ (bench/tests) would hide the project's tests/.
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")
    os.environ.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8")  # the demo's MCP servers listen on loopback here
    import django

    django.setup()
    from asgiref.sync import async_to_sync
    from django.conf import settings
    from django.core.management import call_command

    from agents.models import AgentProfile
    from conversations.graph import run_turn
    from conversations.turn import TurnInput
    from routing import snapshot
    from tenants.services import tenant_get_or_create
    from tests.celery_processes import CeleryWorkerProcess

    call_command("migrate", verbosity=0)
    call_command("seed_demo", verbosity=0, stdout=open(os.devnull, "w"))  # noqa: SIM115
    AgentProfile.objects.filter(agent_id="telecom_contas").update(routing_mode="supervisor")
    from releases.models import RoutingTestCase
    from releases.versions import NothingToPublish, version_publish

    # The demo is published: the edit reaches customers once published (it bumps the configuration version).
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    # The demo's saved routing tests describe router mode (two intents hit are one intent there, a plan here).
    RoutingTestCase.objects.filter(profile=profile).update(enabled=False)
    with contextlib.suppress(NothingToPublish):  # published by an earlier run on this database
        version_publish(profile=profile, note="supervisor mode (bench)")
    tenant, _ = tenant_get_or_create(slug="bench")
    settings.SUPERVISOR_EXECUTOR = "celery"

    worker = CeleryWorkerProcess(
        concurrency=args.concurrency,
        log_dir=Path(os.environ["VAR_DIR"]),
        env={**os.environ, "OFFLINE_LLM_LATENCY_MS": str(args.latency_ms), "CELERY_SKIP_CHECKS": "1"},
    ).start()
    try:
        walls, slowest, sums = [], [], []
        for run in range(args.runs + 1):
            current = snapshot.current()
            profile = current.profiles["telecom_contas"]
            started = time.perf_counter()
            result = async_to_sync(run_turn)(
                TurnInput(
                    tenant_pk=tenant.pk,
                    tenant_slug=tenant.slug,
                    profile=profile,
                    text=MESSAGE,
                    session_id=f"bench-{run}",
                    snapshot=current,
                )
            )
            wall = (time.perf_counter() - started) * 1000
            parts = result.metadata["supervisor"] or []
            if run == 0:
                print(f"plan: {[p['agent'] for p in parts]}  statuses: {[p['status'] for p in parts]}")
                continue  # warm-up: worker children import and connect
            if [p["status"] for p in parts] != ["ok"] * 4:
                print(f"run {run}: not every specialist answered: {parts}")
                return 1
            walls.append(wall)
            slowest.append(max(p["latency_ms"] for p in parts))
            sums.append(sum(p["latency_ms"] for p in parts))
    finally:
        worker.stop()

    wall, slow, total = statistics.median(walls), statistics.median(slowest), statistics.median(sums)
    print(
        f"\nSupervisor fan-out: 4 specialists, offline model {args.latency_ms} ms per call, "
        f"{args.concurrency} worker processes, Redis, {args.runs} turns (after 1 warm-up)\n"
    )
    print(
        "| turn wall time (median) | p90 | slowest specialist (median) | sequential sum (median) "
        "| wall / slowest | wall / sum |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    p90 = sorted(walls)[int(len(walls) * 0.9) - 1]
    print(
        f"| {wall:,.0f} ms | {p90:,.0f} ms | {slow:,.0f} ms | {total:,.0f} ms "
        f"| {wall / slow:.2f}× | {wall / total:.2f}× |"
    )
    verdict = wall <= 1.5 * slow
    print(f"\ntarget wall ≤ 1.5 × slowest: {'met' if verdict else 'NOT met'}")
    return 0 if verdict else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--latency-ms", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    return inner(args) if args.inner else outer(args)


if __name__ == "__main__":
    raise SystemExit(main())
