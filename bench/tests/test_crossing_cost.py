"""bench/crossing_cost.py: a crossing to the request's thread timed each way, alternated, one row a way."""

from __future__ import annotations

import re

from bench.crossing_cost import ASGIREF, BARE, PLAIN, main
from platform.middleware import request_threads


def test_every_way_is_timed_in_each_block_and_the_request_thread_goes_back(capsys):
    free = len(request_threads._free)

    assert main(["--calls", "5", "--blocks", "2", "--context-vars", "3"]) == 0

    rows = [line for line in capsys.readouterr().out.splitlines() if re.match(r"\| [^-w]", line)]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows[:3]] == [ASGIREF, BARE, PLAIN]
    assert len(rows) == 7 and all(re.search(r"\| [0-9.]+ µs \| 2 \(", row) for row in rows)
    assert len(request_threads._free) == max(free, 1)  # the thread it took was given back
