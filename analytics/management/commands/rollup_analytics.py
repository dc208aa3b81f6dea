"""``manage.py rollup_analytics``: sum the closed days and the live day's closed hours into the analytics' daily totals
ahead of the first read (the periodic task ``analytics.rollup`` does it every five minutes)."""

from __future__ import annotations

import datetime as dt
import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from analytics.filters import MAX_DAYS
from analytics.rollups import FACTS
from analytics.services import rollup_ahead, rollup_closed_before, rollup_hour_closed_before


class Command(BaseCommand):
    help = (
        "Sum the closed UTC days of the last --days (default 90) into the analytics' daily totals and seal them. "
        "Days already sealed are left alone unless --rebuild. Then the closed hours of the day not closed yet that "
        "are not summed. Reads do this themselves for the days and hours they need, and the periodic task "
        "analytics.rollup every five minutes; run it by hand after a --rebuild or to sum many days at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=90, help=f"Closed days back to sum, 1 to {MAX_DAYS}.")
        parser.add_argument("--rebuild", action="store_true", help="Sum sealed days again too.")

    def handle(self, *args, **options):
        days = options["days"]
        if not 1 <= days <= MAX_DAYS:
            raise CommandError(f"--days must be a whole number from 1 to {MAX_DAYS}.")
        last = rollup_closed_before() - dt.timedelta(days=1)
        first = last - dt.timedelta(days=days - 1)
        started = time.perf_counter()
        summed, built = rollup_ahead(days=days, rebuild=options["rebuild"])
        seconds = time.perf_counter() - started
        hours = rollup_hour_closed_before().hour  # of the live day, the day after the last closed one
        self.stdout.write(
            f"Summed {len(summed)} of the {days} closed days {first} … {last} ({days - len(summed)} already sealed), "
            f"then the {hours} closed hours of {last + dt.timedelta(days=1)} ({len(built)} of the "
            f"{hours * len(FACTS)} hours of a table not summed before), in {seconds:.1f} s."
        )
