"""Realistic conversations for the analytics benchmark, down to exactly ``--count`` agent_handoffs rows.

    PYTHONPATH=. .venv/bin/python bench/generate_handoffs.py --count 1000000 [--tenants 3] [--days 90] [--seed 1]
        [--batch 20000] [--pool 10000] [--until 2025-06-01T00:00] [--clear] [--bulk]

Conversations of the demo profiles for the tenants ``bench_tenant_1..N``, with their messages, route decisions and tool
calls, the hand-overs to people and what the desk's people (``bench_person_1..6``) wrote, the customers' ratings and how
each conversation ended, spread over ``--days`` back from ``--until`` (simulated by :mod:`bench.benchdata`, the rows
built by :mod:`conversations.records`, :mod:`conversations.desk.escalations` and :mod:`conversations.outcomes` as the
platform builds them). Once a few hundred conversations of a kind (profile, cohort) were simulated, most of the next
ones are those replayed for another customer and moment under new ids (``--pool``, :class:`bench.benchdata.Replayer`;
on PostgreSQL by the database itself, ``INSERT … SELECT`` from the kept ones' rows): several times faster, the same
mix. Deterministic for a ``--seed`` and ``--until``. ``--clear`` first deletes the bench tenants' conversations.
``--bulk`` (PostgreSQL) loads as a restore does, the same rows: the tables' secondary indexes built after the rows,
each batch written by a thread of its own while the next is drawn. The database is the one the settings point at
(``DATABASE_URL``); ``bench/analytics_bench.py`` runs this inside a throwaway PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # bench.benchdata needs Django set up: imported in main()
    from bench.benchdata import GenerateReport, Progress

ROOT = Path(__file__).resolve().parent.parent


def _moment(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _shares(counter: Counter, total: int) -> str:
    return ", ".join(f"{name} {count / total:.1%}" for name, count in counter.most_common()) if total else "-"


def _parser(tenant_prefix: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bench/generate_handoffs.py",
        description=(
            "Generate conversations of the demo profiles for tenants bench_tenant_1..N until exactly --count "
            "agent_handoffs rows were written, with their messages, route decisions and tool calls, spread over "
            "--days. Deterministic for a --seed and --until. --clear first deletes the bench tenants' conversations."
        ),
    )
    parser.add_argument("--count", type=int, help="Handoff rows to write (e.g. 1000000).")
    parser.add_argument("--tenants", type=int, default=3, help="Bench tenants (default 3).")
    parser.add_argument("--days", type=int, default=90, help="Days back from --until (default 90).")
    parser.add_argument("--seed", type=int, default=1, help="Random seed (default 1).")
    parser.add_argument("--batch", type=int, default=20_000, help="Handoff rows per transaction (default 20000).")
    parser.add_argument(
        "--pool",
        type=int,
        default=10_000,
        help="Simulated conversations kept to be replayed for other customers and moments (default 10000; 0: every "
        "conversation simulated turn by turn, several times slower).",
    )
    parser.add_argument("--until", type=_moment, help="End of the range, ISO 8601 (default: now; UTC if naive).")
    parser.add_argument(
        "--clear", action="store_true", help=f"Delete the conversations of the {tenant_prefix}* tenants first."
    )
    parser.add_argument(
        "--bulk",
        action="store_true",
        help="PostgreSQL: load as a restore does, the same rows (the tables' secondary indexes dropped and built "
        "after the rows; each batch written while the next is drawn). For a database no one else writes to meanwhile.",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run with ``argv`` (default: the command line); Django must be set up. Returns the exit status."""
    from bench.benchdata import BENCH_TENANT_PREFIX, BenchDataError, bench_data_clear, bench_data_generate

    parser = _parser(BENCH_TENANT_PREFIX)
    args = parser.parse_args(argv)
    if args.count is None and not args.clear:
        parser.error("give --count (handoff rows to generate), --clear, or both.")
    if args.clear:
        deleted = bench_data_clear()
        summary = ", ".join(f"{label} {count:,}" for label, count in deleted.items()) or "nothing"
        print(f"Cleared bench data: {summary}.")
    if not args.count:
        return 0
    try:
        report = bench_data_generate(
            count=args.count,
            tenants=args.tenants,
            days=args.days,
            seed=args.seed,
            batch=args.batch,
            until=args.until,
            progress=_progress,
            pool=args.pool,
            bulk=args.bulk,
        )
    except BenchDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    _summary(report)
    return 0


def _progress(progress: Progress) -> None:
    rate = progress.handoffs / progress.seconds if progress.seconds else 0.0
    left = (progress.target - progress.handoffs) / rate if rate else 0.0
    print(
        f"{progress.handoffs:>12,} / {progress.target:,} handoffs ({progress.handoffs / progress.target:6.1%})"
        f"  {progress.conversations:,} conversations, {progress.messages:,} messages"
        f"  {progress.seconds:7.1f} s, {rate:,.0f} handoffs/s, ~{left:,.0f} s left",
        flush=True,
    )


def _summary(report: GenerateReport) -> None:
    minutes, seconds = divmod(report.seconds, 60)
    print(
        f"Generated {report.handoffs:,} handoffs in {report.conversations:,} conversations "
        f"({report.messages:,} messages, {report.decisions:,} route decisions, {report.tool_calls:,} tool "
        f"calls) in {int(minutes)} min {seconds:.1f} s."
    )
    print(f"  kinds: {_shares(report.kinds, report.handoffs)}")
    print(f"  outcomes: {', '.join(f'{k} {v:,}' for k, v in report.outcomes.most_common())}")
    print(f"  route methods: {_shares(report.methods, report.decisions)}")
    print(f"  conversations by cohort: {_shares(report.cohorts, report.conversations)}")
    endings = Counter({outcome or "open": count for outcome, count in report.endings.items()})
    print(f"  conversations by outcome: {_shares(endings, report.conversations)}")
    escalations = sum(report.escalations.values())
    print(
        f"  handed to people: {escalations:,} ({_shares(report.escalations, escalations)}); "
        f"now {_shares(report.escalation_statuses, escalations)}; the desk wrote "
        f"{report.desk_messages['human']:,} replies and {report.desk_messages['note']:,} notes"
    )
    print(f"  ratings: {sum(report.ratings.values()):,} ({_shares(report.ratings, sum(report.ratings.values()))})")
    rate = report.handoffs / report.writing_seconds if report.writing_seconds else 0.0
    print(
        f"  drawn and written in {report.writing_seconds:.1f} s ({rate:,.0f} handoffs/s: drawing "
        f"{report.drawing_seconds:.1f} s, writing {report.loading_seconds:.1f} s); indexes built again in "
        f"{report.index_seconds:.1f} s; daily totals: {report.days_summed} closed days summed in "
        f"{report.rollup_seconds:.1f} s (included above)"
    )
    print(f"  tool calls: {_shares(report.tool_statuses, report.tool_calls)}", flush=True)


def _django_setup() -> None:
    """Run as a script: the project root first on ``sys.path`` — its ``platform`` package must shadow the standard
    library's (see ``conftest.py``) — then Django, with the project's settings."""
    if sys.path[0] != str(ROOT):
        sys.path.insert(0, str(ROOT))
    if not hasattr(sys.modules.get("platform"), "__path__"):
        sys.modules.pop("platform", None)  # the standard library's, imported before the path was set
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")
    os.environ.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8")  # the demo's MCP servers listen on loopback (seed_demo)
    import django

    django.setup()


if __name__ == "__main__":
    _django_setup()
    raise SystemExit(main())
