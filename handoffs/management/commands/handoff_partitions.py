"""``manage.py handoff_partitions [--ahead N]``: make the ``agent_handoffs`` partitions of this month and the months
ahead, and of the rows the DEFAULT partition holds (handoffs/partitions.py) — what the periodic task does — and print
the partitions made. Idempotent; on SQLite (no partitioning) it says so and does nothing."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from handoffs.partitions import MONTHS_AHEAD, handoffs_partitioned, partitions_ensure


class Command(BaseCommand):
    help = "Make the agent_handoffs partitions of this month and the months ahead (PostgreSQL)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--ahead", type=int, default=MONTHS_AHEAD, help=f"Months after this one (default {MONTHS_AHEAD})."
        )

    def handle(self, *args, **options) -> None:
        if not handoffs_partitioned():
            self.stdout.write("agent_handoffs is not partitioned on this database: nothing to make.")
            return
        made = partitions_ensure(ahead=max(options["ahead"], 0))
        if not made:
            self.stdout.write("Every month's partition is there: nothing to make.")
        for name in made:
            self.stdout.write(f"Made {name}.")
