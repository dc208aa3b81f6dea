"""The start-up heap set aside from the garbage collector's full passes.

A served process holds about 350,000 objects once Django, langchain, the language model and the compiled routing
are loaded, and almost none of them ever become garbage. CPython's full (oldest-generation) collection walks all
of them: about 220 ms of one core, every few thousand messages, during which the worker answers nobody — the
longest stalls of a message under load (docs/benchmarks.md, CPU per message). :func:`heap_settle` collects once and
freezes what is left (:func:`gc.freeze`): the full passes after it walk only what the process made since, about 25 ms.
Nothing frozen is ever freed, so it is called once, after the start's loading and before the first request; in a
process that forks (Celery's prefork pool) it also keeps the children from copying the pages the collector would
have written to.

Then the C heap's free pages go back to the system (glibc's ``malloc_trim``): the start's temporaries (the routing's
compilation, the models' loading) leave freed memory resident otherwise, 12 MiB of a served worker's 344 MiB
(docs/benchmarks.md, "Memory per process").
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import logging

logger = logging.getLogger(__name__)


def heap_settle() -> int:
    """Collect, then freeze every object still alive, and give the heap's free pages back; returns how many objects
    are frozen."""
    gc.collect()
    gc.freeze()
    heap_trim()
    frozen = gc.get_freeze_count()
    logger.info("Start-up heap frozen: %d objects outside the collector's full passes", frozen)
    return frozen


def heap_trim() -> bool:
    """glibc's ``malloc_trim(0)``: free pages of the C heap returned to the system. ``False`` where the C library
    has none (musl, macOS)."""
    library = ctypes.util.find_library("c")
    with contextlib.suppress(OSError, AttributeError):
        if library is not None:
            ctypes.CDLL(library).malloc_trim(0)
            return True
    return False
