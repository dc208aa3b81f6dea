"""Retention bench: the message path's p99 while a tenant's retention purge deletes a month of history, against the
same load with the purge held still.

    PYTHONPATH=. .venv/bin/python bench/retention_bench.py [--count 1000000] [--window 60] [--pairs 3] [--dry-run]
        [--clients 64] [--duration 30] [--latency-ms 0[,1000…]] [--rate R] [--quiet LOAD] [--finish]

Starts a throwaway PostgreSQL (``scripts/services.py``), migrates, seeds the demo, fills the bench tenants with
``bench/generate_handoffs.py --count N --days 90`` (conversations with their messages, route decisions, tool calls,
hand-overs, ratings), then gives the bench tenants a retention window of ``--window`` days: the oldest
``90 - window`` days expire (the default: a month, about a third of the rows). ``manage.py purge_expired`` starts in
a process of its own, with the settings' batches, pause and share (``--env RETENTION_PURGE_BATCH=…`` to vary them).
``--quiet L`` waits, before the purge starts, for a one-minute load average of at most L: the generation may run
beside other work, the pairs then on a quiet machine.

Then ``--pairs`` pairs of ``bench/chat_load.py`` rounds at each ``--latency-ms`` in turn (each a fresh server, the
same load, new sessions): in one round of a pair the purge is held still (SIGSTOP; a batch it was in stays open, its
locks are on old conversations only), in the other it runs (SIGCONT) — held first in odd pairs, running first in even
ones. Reports each round's msg/s and p99 (as chat_load.py prints them), the medians of the two kinds, their ratio
(target: the purge's p99 within 10 % of the held one's) and the median of the pairs' own ratios, and the rows the
purge deleted while it ran. ``--waits`` samples PostgreSQL's sessions (``pg_stat_activity``) every 50 ms through each
round and prints, per round, how many samples found a session of the message path waiting and on what (a lock, the
WAL, I/O, a client), and the purge's own. A purge that ends before the last pair is said, and the pairs after it are
not counted. ``--finish`` lets the purge run to its end afterwards and prints its record (rows per model, seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg

from bench import chat_load
from bench.chat_load import ROOT, TENANT, _manage, services

DAYS = 90
TABLE_ROW = re.compile(r"^\| ([\d.]+) \| [^|]+ \| [^|]+ \| ([\d,.]+) ms \|")
PURGED = (
    "from tenants.models import RetentionPurge as R; "
    "print('purged', sum(sum(r.counts.values()) for r in R.objects.all()), R.objects.filter(finished_at=None).count())"
)
RECORDS = (
    "from tenants.models import RetentionPurge as R\n"
    "for r in R.objects.order_by('tenant__slug'):\n"
    "    print(r.tenant.slug, r.cutoff.date(), r.batches, 'batches', round(r.seconds or 0, 1), 's', r.counts)"
)


def _generate(env: dict[str, str], count: int) -> None:
    subprocess.run(
        [sys.executable, "bench/generate_handoffs.py", "--count", str(count), "--days", str(DAYS)],
        cwd=ROOT,
        env=env,
        check=True,
    )


def _purged(env: dict[str, str]) -> tuple[int, int]:
    """Rows the purges recorded as deleted so far, and how many purges are still running."""
    line = next(line for line in _manage(env, "shell", "-c", PURGED).splitlines() if line.startswith("purged "))
    _, rows, running = line.split()
    return int(rows), int(running)


WAITS = """
SELECT application_name = 'purge', state, wait_event_type, wait_event
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'
"""


@contextlib.contextmanager
def _waits_sampled(env: dict[str, str], on: bool):
    """With ``on``: sample the database's sessions every 50 ms until the block ends, then print what they waited on:
    per kind of session (the purge's, the others'), samples by state and wait event."""
    if not on:
        yield
        return
    seen: Counter[tuple[str, str]] = Counter()
    samples = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal samples
        with psycopg.connect(env["DATABASE_URL"], autocommit=True) as connection:
            while not stop.wait(0.05):
                samples += 1
                for purge, state, kind, event in connection.execute(WAITS):
                    seen["purge" if purge else "others", f"{state}: {kind or 'cpu'}/{event or '-'}"] += 1

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield
    finally:
        stop.set()
        sampler.join()
        print(
            f"sessions over {samples} samples (state: wait type/event): "
            + "; ".join(
                f"{who} {what} {count}" for (who, what), count in sorted(seen.items(), key=lambda item: -item[1])
            )
        )


def _load_round(args: argparse.Namespace, env: dict[str, str], key: str) -> tuple[float, float]:
    """One chat_load.py round (its report printed as it is); returns (msg/s, p99 in ms)."""
    printed = io.StringIO()
    with _waits_sampled(env, args.waits), contextlib.redirect_stdout(printed):
        chat_load.run_once(args, env, key, {}, traced=False)
    report = printed.getvalue()
    print(report)
    for line in report.splitlines():
        match = TABLE_ROW.match(line)
        if match:
            return float(match.group(1)), float(match.group(2).replace(",", ""))
    raise SystemExit("chat_load.py printed no table row")


def _quiet_awaited(load: float | None) -> None:
    """With ``--quiet L``: wait until the machine's one-minute load average is at most L (other work ended)."""
    if load is None:
        return
    print(f"waiting for a load average of at most {load} (now {os.getloadavg()[0]:.2f})", flush=True)
    while os.getloadavg()[0] > load:
        time.sleep(10)
    print(f"load average {os.getloadavg()[0]:.2f}: the pairs begin", flush=True)


def _summary(latency_ms: int, held: list[tuple[float, float]], running: list[tuple[float, float]]) -> bool:
    """Print one model latency's medians and ratio; whether the target is met."""
    if not held or not running:
        print(f"model latency {latency_ms} ms: no pair with the purge running throughout (a larger --count)")
        return False
    p99_held = statistics.median(p99 for _, p99 in held)
    p99_running = statistics.median(p99 for _, p99 in running)
    print(f"\nmodel latency {latency_ms} ms\n\n| purge | rounds | msg/s (median) | p99 (median) |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| held still | {len(held)} | {statistics.median(r for r, _ in held):.1f} | {p99_held:,.1f} ms |")
    print(f"| running | {len(running)} | {statistics.median(r for r, _ in running):.1f} | {p99_running:,.1f} ms |")
    ratio = p99_running / p99_held
    pairs = [run[1] / hold[1] for hold, run in zip(held, running, strict=True)]
    print(f"p99 with the purge / without: {ratio:.2f} (target ≤ 1.10: {'met' if ratio <= 1.10 else 'NOT met'})")
    each = ", ".join(f"{pair:.2f}" for pair in pairs)
    print(f"each pair's p99 running / held: {each} → median {statistics.median(pairs):.2f}")
    return ratio <= 1.10


def _pairs(
    args: argparse.Namespace, env: dict[str, str], key: str, purge: subprocess.Popen[bytes]
) -> tuple[list[tuple[float, float]], list[tuple[float, float]], bool]:
    """``--pairs`` pairs at ``args.latency_ms``: (held rounds, running rounds, whether the purge is still going)."""
    held: list[tuple[float, float]] = []
    running: list[tuple[float, float]] = []
    served = {**env, "OFFLINE_LLM_LATENCY_MS": str(args.latency_ms)}  # the server of each round
    for pair in range(1, args.pairs + 1):
        # The order alternates (held first in odd pairs, running first in even ones): a round's place in its pair,
        # right after a new server's start or not, weighs on neither kind.
        purge.send_signal(signal.SIGSTOP)
        kinds = ("held", "running") if pair % 2 else ("running", "held")
        rounds: dict[str, tuple[float, float]] = {}
        deleted = 0
        for kind in kinds:
            before = _purged(env)[0]  # read while it is held: a batch may commit the moment it runs again
            if kind == "held":
                print(f"\n## model {args.latency_ms} ms, pair {pair} of {args.pairs}: the purge held still")
                rounds[kind] = _load_round(args, served, key)
                assert _purged(env)[0] == before, "the purge deleted rows while held still"
                continue
            purge.send_signal(signal.SIGCONT)
            print(f"\n## model {args.latency_ms} ms, pair {pair} of {args.pairs}: the purge running")
            rounds[kind] = _load_round(args, served, key)
            purge.send_signal(signal.SIGSTOP)
            after, still = _purged(env)
            if purge.poll() is not None or not still:
                print(f"the purge ended during pair {pair}: that pair is not counted")
                return held, running, False
            deleted = after - before
        held.append(rounds["held"])
        running.append(rounds["running"])
        print(f"the purge deleted {deleted:,} rows during its round")
        purge.send_signal(signal.SIGCONT)
    return held, running, True


def run(args: argparse.Namespace) -> int:
    rounds: dict[int, tuple[list[tuple[float, float]], list[tuple[float, float]]]] = {}
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env.update(stack.enter_context(services.scratch()))
        env.update(stack.enter_context(services.postgres()))
        env.update(services.bench_server_env(ROOT))
        env.update(dict(item.split("=", 1) for item in args.env))
        _manage(env, "migrate", "--noinput")
        _manage(env, "seed_demo")
        key = _manage(env, "create_api_key", "--tenant", TENANT).strip().splitlines()[-1]
        _generate(env, args.count)
        _manage(
            env,
            "shell",
            "-c",
            f"from tenants.models import Tenant; print(Tenant.objects.filter("
            f"slug__startswith='bench_tenant_').update(retention_days={args.window}))",
        )
        if args.dry_run:  # counts every batch without deleting: about as long as the purge itself
            print(_manage(env, "purge_expired", "--dry-run"))
        _quiet_awaited(args.quiet)
        log = (Path(env["VAR_DIR"]) / "purge.log").open("w")
        purge = subprocess.Popen(
            [sys.executable, "manage.py", "purge_expired"],
            cwd=ROOT,
            env={**env, "PGAPPNAME": "purge"},  # libpq's: its sessions are told apart in --waits
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        stack.callback(services.stop_process, purge)
        going = True
        for latency_ms in args.latency_ms:
            held, running, going = _pairs(
                argparse.Namespace(**{**vars(args), "latency_ms": latency_ms}), env, key, purge
            )
            rounds[latency_ms] = (held, running)
            if not going:
                break
        if args.finish and purge.poll() is None:
            purge.send_signal(signal.SIGCONT)
            purge.wait()
        log.close()
        print(_manage(env, "shell", "-c", RECORDS))
    met = [_summary(latency_ms, *rounds.get(latency_ms, ([], []))) for latency_ms in args.latency_ms]
    return 0 if all(met) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="handoff rows to generate over 90 days")
    parser.add_argument("--window", type=int, default=60, help="the bench tenants' retention window, in days")
    parser.add_argument("--pairs", type=int, default=3, help="pairs of rounds: purge held still, purge running")
    parser.add_argument("--finish", action="store_true", help="let the purge end afterwards and print its record")
    parser.add_argument("--dry-run", action="store_true", help="first count what the purge will delete (slow)")
    parser.add_argument("--waits", action="store_true", help="sample the database's sessions' waits in each round")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="server and purge env")
    # chat_load.py's round, as its own options name it.
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--duration", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument(
        "--latency-ms",
        type=lambda value: [int(part) for part in value.split(",")],
        default=[0],
        help="the offline model's latency; several, comma-separated: pairs at each in turn (e.g. 0,1000)",
    )
    parser.add_argument("--quiet", type=float, help="before the pairs, wait for a one-minute load average this low")
    parser.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1))
    parser.add_argument("--client-procs", type=int, default=1)
    parser.add_argument("--ramp", type=float, default=1)
    parser.add_argument("--rate", type=float, help="messages/s offered at a steady pace (default: closed loop)")
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args(argv)
    # What chat_load.run_once reads besides: the stock server, no extra option, no profiler.
    args.server, args.server_arg, args.profile, args.target = "serve", [], None, 0.75
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
