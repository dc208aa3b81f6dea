"""Rollout guard benchmark: one beat tick evaluating 50 running plans over about 1,000,000 stored messages.

    PYTHONPATH=. DJANGO_SETTINGS_MODULE=platform.settings .venv/bin/python scripts/services.py --scratch \
        --postgres -- .venv/bin/python bench/rollout_bench.py [--handoffs 200000] [--plans 50] [--runs 5]

(Figures in the docs/benchmarks.md; the target: under 2 s per tick.)

Migrates the database the settings point at (a throwaway PostgreSQL with the command above), loads the demo and
fills it with ``bench_data_generate`` (``bench/benchdata.py``, the analytics' simulator: every turn's rows as the
graph writes them) — ``--handoffs 200000`` over 7 days gives about a million messages. The conversations are then
dealt out to ``--plans`` profiles (the three demo profiles and copies), each published as version 1 with a
version 2 stored as a candidate, and each conversation's rows marked as served by version 1 or 2 (one in five
by the candidate); then ``--plans`` rollout plans run, one per profile, their first stage started a day ago.
``releases.rollout.guard.plans_evaluate`` — what Celery beat's task runs — is timed ``--runs`` times, each in
a transaction rolled back afterwards so that every run meets the same running plans: median and range, the
queries a tick makes, and what the ticks decided.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8")  # the demo's MCP servers listen on loopback here

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

CANDIDATE_SHARE = 5  # one conversation in five is served by the candidate


def prepare(handoffs: int, plans: int) -> tuple[int, float]:
    """The data and the running plans; returns the messages stored and the seconds it took."""
    from agents.models import AgentProfile
    from bench.benchdata import bench_data_generate
    from conversations.models import Message
    from releases.models import RolloutPlan, RolloutPlanStatus
    from routing.models import ProfileRelease, RoutingVersion
    from routing.rollout_plans import plan_fingerprint

    started = time.perf_counter()
    call_command("migrate", "--noinput", verbosity=0)
    call_command("seed_demo", verbosity=0)
    bench_data_generate(count=handoffs, tenants=3, days=7, seed=1)
    demo = list(AgentProfile.objects.order_by("pk"))
    profiles = list(demo)
    for n in range(len(demo), plans):
        template = demo[n % len(demo)]
        profiles.append(AgentProfile.objects.create(agent_id=f"bench_rollout_{n:02d}", name=f"{template.name} ({n})"))
    profiles = profiles[:plans]
    ids = [profile.pk for profile in profiles]
    with connection.cursor() as cursor:
        # Deal the conversations out to the profiles, and mark each one's rows with the version serving it.
        cursor.execute("UPDATE routing_conversation SET profile_id = (%s::bigint[])[1 + id %% %s]", [ids, len(ids)])
        for table in ("routing_message", "agent_handoffs", "routing_routedecisionrecord", "routing_toolcall"):
            cursor.execute(
                f"UPDATE {table} AS t SET profile_id = c.profile_id, "  # noqa: S608 (table names from the list above)
                f"routing_version = CASE WHEN c.id %% %s = 0 THEN 2 ELSE 1 END "
                "FROM routing_conversation AS c WHERE c.id = t.conversation_id",
                [CANDIDATE_SHARE],
            )
        cursor.execute("VACUUM (ANALYZE)")
    stage_started = timezone.now() - timedelta(days=1)
    for profile in profiles:
        ProfileRelease.objects.filter(profile=profile).delete()
        RoutingVersion.objects.filter(profile=profile).delete()
        control = RoutingVersion.objects.create(profile=profile, number=1, document={"schema": 1}, note="bench")
        candidate = RoutingVersion.objects.create(profile=profile, number=2, document={"schema": 1}, note="bench")
        ProfileRelease.objects.update_or_create(profile=profile, defaults={"version": control})
        plan = RolloutPlan.objects.create(
            name=f"bench {profile.agent_id}",
            profile=profile,
            candidate=candidate,
            control=control,
            status=RolloutPlanStatus.RUNNING,
            stage=0,
            stage_started_at=stage_started,
            started_at=stage_started,
            history=[[stage_started.isoformat(), 5]],
        )
        plan.started_as = plan_fingerprint(plan)  # as plan_start keeps it: the guard judges only what started
        plan.save(update_fields=["started_as"])
    return Message.objects.count(), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--handoffs", type=int, default=200_000, help="the simulator's size (~5 messages each)")
    parser.add_argument("--plans", type=int, default=50)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--show-queries", action="store_true", help="the last tick's three slowest queries")
    parser.add_argument("--profile", action="store_true", help="cProfile the last tick: its 25 costliest functions")
    args = parser.parse_args()

    from releases.rollout.guard import plans_evaluate

    messages, seconds = prepare(args.handoffs, args.plans)
    print(f"{messages:,} messages stored, {args.plans} plans running, prepared in {seconds:.0f} s")
    timings, in_database, decided, queries, slowest = [], [], Counter[str](), 0, []
    profiler = cProfile.Profile()
    for run in range(args.runs):
        profiling = args.profile and run == args.runs - 1
        with transaction.atomic(), CaptureQueriesContext(connection) as captured:
            if profiling:
                profiler.enable()
            started = time.perf_counter()
            decisions = plans_evaluate(interval=0)
            timings.append(time.perf_counter() - started)
            if profiling:
                profiler.disable()
            transaction.set_rollback(True)
        queries = len(captured.captured_queries)
        in_database.append(sum(float(query["time"]) for query in captured.captured_queries))
        slowest = sorted(captured.captured_queries, key=lambda q: -float(q["time"]))[:3]
        decided.update(decision.action for decision in decisions)
    print(
        f"one tick, {args.plans} plans: median {statistics.median(timings):.2f} s "
        f"(range {min(timings):.2f}–{max(timings):.2f} s over {args.runs} runs), {queries} queries "
        f"(median {statistics.median(in_database):.2f} s waiting for them); decisions {dict(decided)}"
    )
    if args.profile:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)
    if args.show_queries:
        for query in slowest:
            print(f"{float(query['time']) * 1000:.1f} ms: {query['sql'][:400]}")


if __name__ == "__main__":
    main()
