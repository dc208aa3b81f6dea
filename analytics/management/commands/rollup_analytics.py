"""``manage.py rollup_analytics``: sum the closed days into the analytics' daily totals ahead of the first read."""

from __future__ import annotations

import datetime as dt
import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from analytics.filters import MAX_DAYS
from analytics.rollups import DAY, FACTS, day_start
from analytics.services import rollup_build, rollup_closed_before, rollup_hours_build, rollup_live_hours


class Command(BaseCommand):
    help = (
        "Sum the closed UTC days of the last --days (default 90) into the analytics' daily totals and seal them. "
        "Days already sealed are left alone unless --rebuild. Then the closed hours of the day not closed yet that "
        "are not summed. Reads do this themselves for the days and hours they need; run it from cron after midnight "
        "(and each hour) to keep that work off the first read of the day (or hour)."
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
        summed = rollup_build(first=first, last=last, rebuild=options["rebuild"])
        seconds = time.perf_counter() - started
        self.stdout.write(
            f"Summed {len(summed)} of the {days} closed days {first} … {last} in {seconds:.1f} s "
            f"({days - len(summed)} already sealed)."
        )
        live_day = day_start(rollup_closed_before())
        hours = rollup_live_hours(live_day, live_day + DAY)
        started = time.perf_counter()
        built = rollup_hours_build(hours)
        seconds = time.perf_counter() - started
        self.stdout.write(
            f"Summed the {len(hours)} closed hours of {live_day.date()} in {seconds:.1f} s ({len(built)} of the "
            f"{len(hours) * len(FACTS)} hours of a table not summed before)."
        )
