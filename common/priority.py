"""Background work at a lower CPU priority than the message path's.

A purge of old conversations costs the turns beside it CPU, not locks or I/O (docs/benchmarks.md, the retention
bench's waits): on a busy machine its Python competes with the turns' for the cores. :func:`run_lowered` runs such
work in a thread of its own whose niceness is raised by ``steps`` first, so the kernel gives the turns' threads the
cores first and the work what is left.

* **A thread, not the caller:** on Linux a thread's niceness is its own. An unprivileged process may lower its
  priority but never raise it again, so a Celery worker that lowered its own would serve every later task — a turn's
  fan-out too — at that priority; the thread's niceness ends with the thread, and the caller's threads keep theirs.
* **Connections of its own:** Django's database connections are a thread's, so the work connects again and closes
  what it opened when it ends.
* **In the caller's thread, as it is,** where that cannot be: ``steps`` 0, a system without a thread's own niceness,
  inside an open transaction (a thread of its own would not see that transaction's rows), or on an in-memory SQLite
  database (another connection would be another database).

What the work returns is returned, and what it raises raised, to the caller, which waits for it. The thread is a
daemon: a process stopped meanwhile does not wait for it (its open transaction is rolled back by the database).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import connection, connections

T = TypeVar("T")

NICEST = 19  # the lowest priority a niceness gives


def lowered_here_possible() -> bool:
    """Whether a thread's niceness is its own on this system (Linux's scheduler: a thread is a task)."""
    return sys.platform == "linux" and hasattr(os, "setpriority")


def thread_niceness() -> int:
    """The calling thread's niceness (Linux), or the process's elsewhere."""
    who = threading.get_native_id() if lowered_here_possible() else 0
    return os.getpriority(os.PRIO_PROCESS, who)


def run_lowered(work: Callable[[], T], *, steps: int) -> T:
    """``work()`` in a thread of its own ``steps`` nicer than the caller's, on connections of its own; in the caller's
    thread where that cannot be (see the module). Returns what it returns; raises what it raises."""
    in_memory = getattr(connection, "is_in_memory_db", lambda: False)()  # SQLite's wrapper alone has it
    if steps <= 0 or not lowered_here_possible() or connection.in_atomic_block or in_memory:
        return work()
    outcome: dict[str, T] = {}
    failure: list[BaseException] = []
    niceness = min(thread_niceness() + steps, NICEST)

    def lowered() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
            outcome["value"] = work()
        except BaseException as error:  # noqa: BLE001 — handed to the caller, which raises it
            failure.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=lowered, name="lowered-priority", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return outcome["value"]
