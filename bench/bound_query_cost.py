"""What finding a statement's placeholders costs psycopg, in µs a statement: its own conversion (a statement of
more than 50 values or 4 kB is scanned anew on every run) against the bound cursor's
(``common/infra/postgresql/base.py``: each shape scanned once), for a statement the size of a turn's joined write
(60 values), median of several rounds.

    PYTHONPATH=. DJANGO_SETTINGS_MODULE=platform.settings .venv/bin/python bench/bound_query_cost.py [--values 60]

No database: the conversion is psycopg's work in Python before it sends anything.
"""

from __future__ import annotations

import argparse
import statistics
import timeit

import django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--values", type=int, default=60)
    parser.add_argument("--number", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    django.setup()

    from psycopg import _queries
    from psycopg.adapt import Transformer

    from common.infra.postgresql.base import BoundQuery

    columns = ", ".join(f"c{i}" for i in range(options.values))
    marks = ", ".join(["%s"] * options.values)
    statement = f"WITH a AS (INSERT INTO t ({columns}) VALUES ({marks}) RETURNING id) SELECT id FROM a"  # noqa: S608
    values = list(range(options.values))

    def stock() -> None:
        _queries.PostgresQuery(Transformer()).convert(statement, values)

    def bound() -> None:
        BoundQuery(Transformer()).convert(statement, values)

    for name, work in (("psycopg's PostgresQuery", stock), ("the bound cursor's BoundQuery", bound)):
        rounds = timeit.repeat(work, number=options.number, repeat=options.rounds)
        print(f"{name}: {statistics.median(rounds) / options.number * 1e6:.1f} µs a statement")


if __name__ == "__main__":
    main()
