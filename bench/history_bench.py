"""What the field-level history (django-auditlog) costs a big import: ``seed_demo`` into an empty database, with
the history recorded and without it.

    PYTHONPATH=. DJANGO_SETTINGS_MODULE=platform.settings .venv/bin/python bench/history_bench.py [--runs 5] \
        [--intents 1000 --keywords 20]

Needs a migrated, empty database (e.g. ``scripts/services.py --scratch --postgres --redis -- sh -c
".venv/bin/python manage.py migrate && .venv/bin/python bench/history_bench.py"``). Each run loads the whole demo
(four profiles with their specialists, prompts, intents, keywords, tools, goals and saved tests; each profile
published) inside a transaction that is then rolled back, alternately with the history on and off (auditlog's
``disable_auditlog``), after one warm-up of each; prints the median and range of each, the ratio, and how many
entries one load writes.
With ``--intents N`` a run loads the demo with the history off, then times ``import_config`` of a routing file
adding N intents of ``--keywords`` keywords each to telecom_contas (the big import).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OUTBOUND_ALLOWED", "127.0.0.0/8")  # the demo's MCP servers listen on loopback here

import django

django.setup()

from auditlog.context import disable_auditlog  # noqa: E402
from auditlog.models import LogEntry  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402


class Rollback(Exception):
    pass


def big_routing(path: Path, *, intents: int, keywords: int) -> None:
    lines = ["agent_id: telecom_contas", "intents:"]
    for i in range(intents):
        words = ", ".join(f"bench{i}palavra{j}" for j in range(keywords))
        lines += [
            f"  - name: bench_intent_{i}",
            "    domain: telecom",
            "    agent: billing_agent",
            f"    priority: {100 + i}",
            f"    keywords: [{words}]",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run(command: list[str], *, history: bool) -> None:
    if history:
        call_command(*command, stdout=StringIO(), stderr=StringIO())
    else:
        with disable_auditlog():
            call_command(*command, stdout=StringIO(), stderr=StringIO())


def load(*, history: bool, big: Path | None = None) -> tuple[float, int]:
    """Seconds one ``seed_demo`` (or, with ``big``, one import of it after the demo) took, and the entries it
    wrote; nothing stays."""
    entries = 0
    try:
        with transaction.atomic():
            if big is not None:
                run(["seed_demo"], history=False)
            before = LogEntry.objects.count()
            started = time.perf_counter()
            run(["import_config", str(big)] if big is not None else ["seed_demo"], history=history)
            seconds = time.perf_counter() - started
            entries = LogEntry.objects.count() - before
            raise Rollback
    except Rollback:
        pass
    return seconds, entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--intents", type=int, default=0)
    parser.add_argument("--keywords", type=int, default=20)
    args = parser.parse_args()
    big = None
    if args.intents:
        big = Path(tempfile.mkdtemp()) / "routing.telecom_contas.yaml"
        big_routing(big, intents=args.intents, keywords=args.keywords)
    load(history=True, big=big)
    load(history=False, big=big)
    times: dict[bool, list[float]] = {True: [], False: []}
    entries = 0
    for _ in range(args.runs):
        for history in (True, False):
            seconds, written = load(history=history, big=big)
            times[history].append(seconds)
            entries = written if history else entries
    for history in (True, False):
        runs = times[history]
        label = "history on " if history else "history off"
        print(f"{label}: median {statistics.median(runs):.2f} s (range {min(runs):.2f}–{max(runs):.2f} s)")
    ratio = statistics.median(times[True]) / statistics.median(times[False])
    what = f"import of {args.intents} intents × {args.keywords} keywords" if big else "seed_demo"
    print(f"{what}: ratio {ratio:.2f}; one load writes {entries} history entries")


if __name__ == "__main__":
    main()
