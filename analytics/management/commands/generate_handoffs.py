"""``manage.py generate_handoffs --count N``: realistic conversations for the analytics benchmark."""

from __future__ import annotations

from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError, CommandParser

from analytics.benchdata import (
    BENCH_TENANT_PREFIX,
    BenchDataError,
    GenerateReport,
    Progress,
    bench_data_clear,
    bench_data_generate,
)


def _moment(value: str) -> datetime:
    moment = datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _shares(counter, total: int) -> str:
    return ", ".join(f"{name} {count / total:.1%}" for name, count in counter.most_common()) if total else "-"


class Command(BaseCommand):
    help = (
        "Generate conversations of the demo profiles for tenants bench_tenant_1..N until exactly --count "
        "agent_handoffs rows were written, with their messages, route decisions and tool calls, spread over "
        "--days. Deterministic for a --seed and --until. --clear first deletes the bench tenants' conversations."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--count", type=int, help="Handoff rows to write (e.g. 1000000).")
        parser.add_argument("--tenants", type=int, default=3, help="Bench tenants (default 3).")
        parser.add_argument("--days", type=int, default=90, help="Days back from --until (default 90).")
        parser.add_argument("--seed", type=int, default=1, help="Random seed (default 1).")
        parser.add_argument("--batch", type=int, default=20_000, help="Handoff rows per transaction (default 20000).")
        parser.add_argument("--until", type=_moment, help="End of the range, ISO 8601 (default: now; UTC if naive).")
        parser.add_argument(
            "--clear",
            action="store_true",
            help=f"Delete the conversations of the {BENCH_TENANT_PREFIX}* tenants first.",
        )

    def handle(self, *args, **options):
        if options["count"] is None and not options["clear"]:
            raise CommandError("Give --count (handoff rows to generate), --clear, or both.")
        if options["clear"]:
            deleted = bench_data_clear()
            summary = ", ".join(f"{label} {count:,}" for label, count in deleted.items()) or "nothing"
            self.stdout.write(f"Cleared bench data: {summary}.")
        if not options["count"]:
            return
        try:
            report = bench_data_generate(
                count=options["count"],
                tenants=options["tenants"],
                days=options["days"],
                seed=options["seed"],
                batch=options["batch"],
                until=options["until"],
                progress=self._progress,
            )
        except BenchDataError as exc:
            raise CommandError(str(exc)) from exc
        self._summary(report)

    def _progress(self, progress: Progress) -> None:
        rate = progress.handoffs / progress.seconds if progress.seconds else 0.0
        left = (progress.target - progress.handoffs) / rate if rate else 0.0
        self.stdout.write(
            f"{progress.handoffs:>12,} / {progress.target:,} handoffs ({progress.handoffs / progress.target:6.1%})"
            f"  {progress.conversations:,} conversations, {progress.messages:,} messages"
            f"  {progress.seconds:7.1f} s, {rate:,.0f} handoffs/s, ~{left:,.0f} s left"
        )
        self.stdout.flush()

    def _summary(self, report: GenerateReport) -> None:
        minutes, seconds = divmod(report.seconds, 60)
        self.stdout.write(
            self.style.SUCCESS(
                f"Generated {report.handoffs:,} handoffs in {report.conversations:,} conversations "
                f"({report.messages:,} messages, {report.decisions:,} route decisions, {report.tool_calls:,} tool "
                f"calls) in {int(minutes)} min {seconds:.1f} s."
            )
        )
        self.stdout.write(f"  kinds: {_shares(report.kinds, report.handoffs)}")
        self.stdout.write(f"  outcomes: {', '.join(f'{k} {v:,}' for k, v in report.outcomes.most_common())}")
        self.stdout.write(f"  route methods: {_shares(report.methods, report.decisions)}")
        self.stdout.write(f"  conversations by cohort: {_shares(report.cohorts, report.conversations)}")
        self.stdout.write(
            f"  daily totals: {report.days_summed} closed days summed in {report.rollup_seconds:.1f} s (included above)"
        )
        self.stdout.write(f"  tool calls: {_shares(report.tool_statuses, report.tool_calls)}")
