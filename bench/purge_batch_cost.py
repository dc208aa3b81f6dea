"""What one batch of a retention purge costs: statements, its own CPU and its PostgreSQL backend's, per batch.

    DATABASE_URL=postgres://… PYTHONPATH=. .venv/bin/python bench/purge_batch_cost.py [--size 7] [--batches 20]
        [--window 60] [--tenant SLUG]

Reads a database filled by ``bench/generate_handoffs.py`` (the bench tenants' conversations over 90 days; the
backend's CPU is read from ``/proc``, so PostgreSQL must run on this machine). Each batch is the purge's own
(:func:`conversations.customer_data.retention._batch`, ``--size`` conversations, expired at ``--window`` days), run in
a transaction rolled back after it: the rows stay, and the next batch takes the next conversations. Prints the means
a batch: rows it deleted, statements, the purge's CPU (its process) and the backend's, in ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")
django.setup()

from django.db import connection, transaction  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from conversations.customer_data import retention  # noqa: E402
from tenants.models import Tenant  # noqa: E402


class RolledBack(Exception):
    """Ends a batch's transaction without keeping what it did."""


def backend_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=7, help="conversations a batch")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--window", type=int, default=60, help="days: conversations older are expired")
    parser.add_argument("--tenant", default="", help="a tenant's slug (default: the first bench tenant)")
    args = parser.parse_args()
    named = {"slug": args.tenant} if args.tenant else {"slug__startswith": "bench"}
    tenant = Tenant.objects.filter(**named).order_by("slug").first()
    assert tenant is not None, "no bench tenant: fill the database with bench/generate_handoffs.py first"
    cutoff = retention.retention_cutoff(window_days=args.window)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    after, rows, statements, own, theirs = 0, [], [], [], []
    for _ in range(args.batches):
        backend_before, own_before = backend_cpu_seconds(backend), time.process_time()
        with CaptureQueriesContext(connection) as queries:
            try:
                with transaction.atomic():
                    last, done = retention._batch(
                        tenant_id=tenant.pk, cutoff=cutoff, after=after, size=args.size, dry_run=False
                    )
                    raise RolledBack
            except RolledBack:
                pass
        own.append(1000 * (time.process_time() - own_before))
        theirs.append(1000 * (backend_cpu_seconds(backend) - backend_before))
        if not last:
            break
        after = last
        rows.append(sum(done.values()))
        statements.append(len(queries) - 2)  # the transaction's BEGIN and ROLLBACK aside
    print(
        f"{len(rows)} batches of {args.size} conversations of {tenant.slug}: a batch {statistics.mean(rows):.0f} rows, "
        f"{statistics.mean(statements):.0f} statements, CPU {statistics.mean(own):.1f} ms the purge's and "
        f"{statistics.mean(theirs):.1f} ms its backend's"
    )


if __name__ == "__main__":
    main()
