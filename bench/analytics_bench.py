"""Analytics API benchmark: every /api/analytics/ endpoint over real HTTP at 1,000,000 handoffs on PostgreSQL.

    PYTHONPATH=. .venv/bin/python bench/analytics_bench.py [--count 1000000] [--days 90] [--runs 5] [--reuse] [--sliced]

Starts a throwaway PostgreSQL and scratch VAR_DIR (``scripts/services.py``), migrates, fills the bench
tenants with ``bench/generate_handoffs.py --bulk --count N --days D`` (realistic conversations of the demo profiles over
``--days`` days, 90 by default, ending now), runs ``VACUUM (ANALYZE)``, then serves the project as in production
(``python -m platform.serve``, ``DJANGO_DEBUG=false``, one worker: the requests are sequential).

Each endpoint is asked for ``days=30`` and ``days=90``, each with and without ``profile=telecom_contas``,
by two callers: an API key of ``bench_tenant_1`` (its own tenant, about half the data) and a staff
session with ``analytics.view_analytics`` (every tenant). Every URL is fetched once to warm up, then
``--runs`` times, the URLs interleaved so the shared machine's noise spreads over all of them; the table
shows the median and the slowest of the runs, client-side, in ms. Target: every median under 300 ms.
For every URL over it, the endpoint's queries are captured in-process and shown with
``EXPLAIN (ANALYZE, BUFFERS)``. Exits non-zero when a target is missed.

``--sliced``: also ask each endpoint for 30 days of one cohort (``cohort=single_agent``) and of one routing
version (``version=draft``: the generated rows record none, so every turn is the draft's; conversations of a
version are read from the rows, not the daily totals, so this is the slow case), by both callers.

``--days``: fewer days make each day denser. A window's closed days are read from the daily totals, whose size
grows with the groups and the days, not the rows; the live day is read from the rows. So 1,000,000 handoffs over
9 days gives each day, and the live day, the rows of 10,000,000 over 90 days (about 111,000 handoffs a day).

``--reuse``: when ``DATABASE_URL`` points at a PostgreSQL server that keeps its data (scripts/services.py
then starts none), data already generated there (the bench tenants holding ``--count`` handoffs) is used as
it is.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import services  # noqa: E402  (scripts/services.py: the throwaway PostgreSQL)

ENDPOINTS = (
    "handoffs",
    "handoffs/timeline",
    "handoffs/recent",
    "agents",
    "routing-methods",
    "loop-stops",
    "delegations",
    "tools",
    "cohorts",
    "languages",
    "outcomes",
    "outcomes/timeline",
    "quality",
)
WINDOWS = ("days=30", "days=90", "days=30&profile=telecom_contas", "days=90&profile=telecom_contas")
SLICED_WINDOWS = ("days=30&cohort=single_agent", "days=30&version=draft")
CALLERS = ("key", "staff")
TENANT = "bench_tenant_1"
TARGET_MS = 300.0
SLOW_QUERY_MS = 20.0  # queries of a slow endpoint worth an EXPLAIN


def _env(stack: contextlib.ExitStack) -> dict[str, str]:
    env = dict(os.environ)
    env.update(stack.enter_context(services.scratch()))
    env.update(stack.enter_context(services.postgres()))
    env.update(
        {
            **services.bench_server_env(ROOT),
        }
    )
    if not env.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        raise SystemExit("the benchmark needs PostgreSQL: scripts/services.py did not provide DATABASE_URL")
    return env


def _django(env: dict[str, str]) -> None:
    os.environ.update(env)
    import django

    django.setup()


def _generate(args: argparse.Namespace, env: dict[str, str]) -> float | None:
    """Generate the data unless ``--reuse`` finds it; returns the seconds it took (None when reused)."""
    from handoffs.models import Handoff

    stored = Handoff.objects.filter(tenant__slug__startswith="bench_tenant_").count()
    if args.reuse and stored >= args.count:
        print(f"reusing the {stored:,} bench handoffs already stored")
        return None
    started = time.perf_counter()
    command = [sys.executable, str(ROOT / "bench" / "generate_handoffs.py"), "--clear", "--bulk"]
    command += ["--count", str(args.count)]
    command += ["--tenants", str(args.tenants), "--days", str(args.days), "--seed", str(args.seed)]
    sys.stdout.flush()
    subprocess.run(command, cwd=ROOT, env=env, check=True)
    return time.perf_counter() - started


def _vacuum_analyze() -> float:
    """VACUUM (ANALYZE): fresh statistics and visibility maps, as autovacuum leaves a table after a bulk load
    (left to autovacuum, it would run in the middle of the timings)."""
    from django.db import connection

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE)")
    return time.perf_counter() - started


def _sizes() -> list[tuple[str, int, int, int]]:
    """Per table the generator fills: its rows, and its bytes on disk with its indexes (a partitioned table's
    partitions summed), and of those its indexes'."""
    from django.db import connection

    from conversations.models import ConversationOutcome, Escalation, MessageFeedback

    tables = ("agent_handoffs", "routing_conversation", "routing_message", "routing_routedecisionrecord")
    tables += (
        "routing_toolcall",
        *(model._meta.db_table for model in (Escalation, MessageFeedback, ConversationOutcome)),
    )
    rows = []
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608
            count = cursor.fetchone()[0]
            cursor.execute(  # a plain table's partition tree is empty
                "SELECT sum(pg_total_relation_size(oid)), sum(pg_indexes_size(oid)) FROM pg_class "
                "WHERE oid = to_regclass(%s) OR oid IN (SELECT relid FROM pg_partition_tree(%s))",
                [table, table],
            )
            total, indexes = cursor.fetchone()
            rows.append((table, count, int(total), int(indexes)))
    return rows


def _mb(size: int) -> str:
    return f"{size / 2**20:,.0f} MB"


def _span() -> tuple[datetime, datetime, float]:
    """When the bench handoffs start and end (a reused data set ages), and TENANT's share of them."""
    from django.db.models import Count, Max, Min, Q

    from handoffs.models import Handoff

    found = Handoff.objects.filter(tenant__slug__startswith="bench_tenant_").aggregate(
        first=Min("created_at"), last=Max("created_at"), n=Count("id"), own=Count("id", filter=Q(tenant__slug=TENANT))
    )
    return found["first"], found["last"], found["own"] / max(found["n"], 1)


@dataclass
class Callers:
    key: str  # a raw API key of TENANT
    session: str  # a staff session's cookie value
    client: Any  # django.test.Client logged in as that staff user, for the in-process EXPLAIN

    def http(self, caller: str) -> dict[str, dict[str, str]]:
        if caller == "key":
            return {"headers": {"Authorization": f"Bearer {self.key}"}}
        return {"cookies": {"sessionid": self.session}}


def _callers() -> Callers:
    """An API key of TENANT and a staff user with analytics.view_analytics, logged in."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission
    from django.test import Client

    from tenants.services import api_key_create

    _, raw = api_key_create(tenant_slug=TENANT, name="analytics bench")
    user, _ = get_user_model().objects.get_or_create(username="analytics-bench", defaults={"is_staff": True})
    user.user_permissions.add(Permission.objects.get(codename="view_analytics", content_type__app_label="analytics"))
    client = Client()
    client.force_login(user)
    return Callers(key=raw, session=client.cookies["sessionid"].value, client=client)


def _serve(env: dict[str, str], stack: contextlib.ExitStack) -> str:
    port = services.free_port()
    base_url = f"http://127.0.0.1:{port}"
    log = Path(env["VAR_DIR"]) / "server.log"
    command = ["platform.serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1", "--no-access-log"]
    with log.open("w") as log_file:
        server = subprocess.Popen(
            [sys.executable, "-m", *command], cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT
        )
    stack.callback(services.stop_process, server)
    services.wait_healthy(base_url, server, log)
    return base_url


def _measure(
    base_url: str, callers: Callers, runs: int, windows: tuple[str, ...]
) -> dict[tuple[str, str, str], list[float]]:
    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)  # Django's logging shows each request at INFO
    clients = {  # one kept-alive connection each
        name: httpx.Client(base_url=base_url, timeout=120, **callers.http(name)) for name in CALLERS
    }
    cells = [(endpoint, window, caller) for endpoint in ENDPOINTS for window in windows for caller in CALLERS]
    timings: dict[tuple[str, str, str], list[float]] = {cell: [] for cell in cells}
    try:
        for round_ in range(runs + 1):  # round 0 warms up
            for endpoint, window, caller in cells:
                began = time.perf_counter()
                response = clients[caller].get(f"/api/analytics/{endpoint}?{window}")
                elapsed = (time.perf_counter() - began) * 1000
                if response.status_code != 200:
                    raise SystemExit(f"{caller} GET {endpoint}?{window}: HTTP {response.status_code} {response.text}")
                if round_:
                    timings[(endpoint, window, caller)].append(elapsed)
            print(f"round {round_}/{runs} done" + (" (warm-up)" if not round_ else ""), flush=True)
    finally:
        for client in clients.values():
            client.close()
    return timings


def _explain(callers: Callers, endpoint: str, window: str, caller: str) -> None:
    """The endpoint's queries, captured in-process, with EXPLAIN (ANALYZE, BUFFERS) for the slow ones."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    warnings.filterwarnings("ignore", message="No directory at")  # WhiteNoise: no collectstatic in the scratch VAR_DIR
    client, headers = callers.client, {}
    if caller == "key":  # no session: the key alone
        client, headers = Client(), {"HTTP_AUTHORIZATION": f"Bearer {callers.key}"}
    with CaptureQueriesContext(connection) as captured:
        client.get(f"/api/analytics/{endpoint}?{window}", **headers)
    print(f"\n#### {caller} GET /api/analytics/{endpoint}?{window}\n")
    for query in captured.captured_queries:
        # A statement that reads nothing (the live reads' SET LOCAL jit = off, slow only while the machine is) has no
        # plan to show.
        reads = query["sql"].lstrip().upper().startswith(("SELECT", "WITH"))
        if float(query["time"]) * 1000 < SLOW_QUERY_MS or not reads:
            continue
        print(f"-- {float(query['time']) * 1000:,.0f} ms in the request\n{query['sql']}\n")
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {query['sql']}")
            print("\n".join(row[0] for row in cursor.fetchall()))
        print()


def run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        env = _env(stack)
        _django(env)
        from django.core.management import call_command

        call_command("migrate", "--noinput", verbosity=0)
        generation = _generate(args, env)
        vacuum = _vacuum_analyze()
        sizes = _sizes()
        first, last, tenant_share = _span()
        callers = _callers()
        base_url = _serve(env, stack)
        windows = WINDOWS + (SLICED_WINDOWS if args.sliced else ())
        timings = _measure(base_url, callers, args.runs, windows)

        print(
            f"\nAnalytics API at {args.count:,} handoffs ({args.tenants} bench tenants, {args.days} days: "
            f"{args.count / args.days:,.0f} handoffs a day), PostgreSQL"
        )
        if generation is not None:
            minutes, seconds = divmod(generation, 60)
            command = f"bench/generate_handoffs.py --count {args.count} --days {args.days}"
            print(f"{command}: {int(minutes)} min {seconds:.0f} s")
        print(f"VACUUM (ANALYZE): {vacuum:.0f} s")
        print(
            f"handoffs from {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC; {tenant_share:.0%} of them {TENANT}'s"
        )
        for table, count, size, indexes in sizes:
            print(f"  {table}: {count:,} rows, {_mb(size)} ({_mb(indexes)} of it indexes)")
        everything = sum(size for _, _, size, _ in sizes)
        handoffs = next(count for table, count, _, _ in sizes if table == "agent_handoffs")
        print(f"  in all {_mb(everything)}, {everything / max(handoffs, 1):,.0f} bytes a handoff")
        print(
            f"\nmedian / slowest of {args.runs} warm runs, ms, client-side over HTTP (platform.serve, 1 worker); "
            f"key = an API key of {TENANT}, staff = a staff session over every tenant; "
            f"profile = profile=telecom_contas\n"
        )
        header = [
            f"{window.replace('&profile=telecom_contas', ' + profile').replace('&', ' ')} {caller}"
            for window in windows
            for caller in CALLERS
        ]
        print("| endpoint | " + " | ".join(header) + " |")
        print("| --- |" + " ---: |" * len(header))
        slow = []
        for endpoint in ENDPOINTS:
            cells = []
            for window in windows:
                for caller in CALLERS:
                    values = timings[(endpoint, window, caller)]
                    median = statistics.median(values)
                    if median > TARGET_MS:
                        slow.append((median, endpoint, window, caller))
                    mark = "**" if median > TARGET_MS else ""
                    cells.append(f"{mark}{median:,.0f}{mark} / {max(values):,.0f}")
            print(f"| `{endpoint}` | " + " | ".join(cells) + " |")
        every = [value for values in timings.values() for value in values]
        print(
            f"\nall {len(every):,} requests: median {statistics.median(every):,.0f} ms, slowest {max(every):,.0f} ms; "
            f"{len(timings) - len(slow)} of {len(timings)} URLs under {TARGET_MS:.0f} ms (median)"
        )
        if slow:
            print(f"\n### Over {TARGET_MS:.0f} ms: the queries, with EXPLAIN (ANALYZE, BUFFERS)")
            for _, endpoint, window, caller in sorted(slow, reverse=True):
                _explain(callers, endpoint, window, caller)
    return 1 if slow else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="handoff rows to generate")
    parser.add_argument("--tenants", type=int, default=3)
    parser.add_argument("--days", type=int, default=90, help="days the handoffs are spread over, ending now")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5, help="measured requests per URL, after one warm-up")
    parser.add_argument("--reuse", action="store_true", help="keep data already generated (see the docstring)")
    parser.add_argument("--sliced", action="store_true", help="also one cohort's and one version's 30 days")
    return run(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
