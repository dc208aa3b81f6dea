"""The start-up heap set aside from the garbage collector's full passes.

A served process holds about 350,000 objects once Django, langchain, the language model and the compiled routing
are loaded, and almost none of them ever become garbage. CPython's full (oldest-generation) collection walks all
of them: about 220 ms of one core, every few thousand messages, during which the worker answers nobody — the
longest stalls of a message under load (README, CPU per message). :func:`heap_settle` collects once and freezes
what is left (:func:`gc.freeze`): the full passes after it walk only what the process made since, about 25 ms.
Nothing frozen is ever freed, so it is called once, after the start's loading and before the first request; in a
process that forks (Celery's prefork pool) it also keeps the children from copying the pages the collector would
have written to.
"""

from __future__ import annotations

import gc
import logging

logger = logging.getLogger(__name__)


def heap_settle() -> int:
    """Collect, then freeze every object still alive; returns how many are frozen."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    logger.info("Start-up heap frozen: %d objects outside the collector's full passes", frozen)
    return frozen
