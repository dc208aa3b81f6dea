import gc
import logging
import os
import subprocess
import sys
import weakref
from pathlib import Path

from common.infra.heap import heap_settle


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_what_the_start_loaded_leaves_the_full_passes_and_what_comes_after_is_still_collected(caplog):
    loaded = {"routing": [Node()]}
    try:
        with caplog.at_level(logging.INFO, logger="common.infra.heap"):
            frozen = heap_settle()
        assert frozen > 1000
        assert not any(tracked is loaded for tracked in gc.get_objects())  # a full pass no longer walks it
        assert f"Start-up heap frozen: {frozen} objects" in caplog.text

        first, second = Node(), Node()  # a message's garbage: a cycle only the collector frees
        first.other, second.other = second, first
        gone = weakref.ref(first)
        del first, second
        gc.collect()
        assert gone() is None
    finally:
        gc.unfreeze()
    assert any(tracked is loaded for tracked in gc.get_objects())


# Run in a process of its own: how much a long-lived test worker's heap gives back depends on everything the earlier
# tests left on it (a whole run's worker once kept it), not on heap_trim.
FREED_AND_TRIMMED = """
from common.infra.heap import heap_trim

def resident_kib():
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

temporaries = [bytes(512) for _ in range(200_000)]  # about 100 MiB in blocks malloc keeps on its heap
temporaries.append(bytes(1))  # and one block at the top, so the heap cannot simply shrink by itself
del temporaries[:-1]
before = resident_kib()
trimmed = heap_trim()
print(trimmed, before, resident_kib())
"""


def test_freed_heap_memory_goes_back_to_the_system():
    """A start's temporaries (many small blocks, freed) leave the process holding less once trimmed."""
    result = subprocess.run(
        [sys.executable, "-c", FREED_AND_TRIMMED],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    trimmed, before, after = result.stdout.split()

    assert trimmed == "True"
    assert int(after) < int(before) - 50 * 1024
