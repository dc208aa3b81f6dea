"""Work spread over processes of their own, each with Django set up on this process's database.

A process runs Python under one interpreter lock: work that is mostly this process's own CPU (a suite of
conversation tests, offline) goes no faster on more threads, only on more processes. :func:`process_pool` starts
them:

* **spawned** (a new interpreter that imports what it needs), never forked: a fork would copy this process's database
  connections, whose sockets both would then write to, and the locks its other threads hold at that instant. A
  process's start costs its imports: about 3 s of CPU for the whole platform.
* Each sets Django up with this process's settings module (the rest of its settings come from the environment, as
  this process's did) and connects to the database this process is connected to (under the test runner, its test
  database), on connections of its own; then it calls the pool's ``ready`` once — what every piece of work it will
  be given needs, sent once rather than with each piece.
* What a piece raised comes back as the piece's exception; the end of a process (killed, out of memory, a ``ready``
  that raised) as :class:`concurrent.futures.process.BrokenProcessPool` for every piece not yet done.

:func:`processes_usable` says how many processes can share this process's database for work that writes in
transactions of its own: one where they cannot (SQLite, inside a transaction, in a daemonic process).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import django
from django.conf import settings
from django.db import connection, connections


def processes_usable(asked: int) -> int:
    """``asked`` (at least 1), or 1 where other processes cannot share this process's database work:

    * on SQLite, which takes one writer at a time: a transaction holds the others back until it ends, so processes
      each in a transaction would wait on one another (and time out) rather than run side by side;
    * inside a transaction, whose rows other connections cannot see;
    * in a daemonic process (a worker of a pool), which may start none."""
    if asked <= 1 or connection.vendor == "sqlite" or connection.in_atomic_block:
        return 1
    if multiprocessing.current_process().daemon:
        return 1
    return asked


def process_pool(
    processes: int, *, ready: Callable[..., None], ready_args: tuple[Any, ...] = ()
) -> ProcessPoolExecutor:
    """A pool of ``processes`` spawned processes (see the module), each calling ``ready(*ready_args)`` once Django
    is set up in it. ``ready``, its arguments and the work given to the pool must be picklable: functions at a
    module's top level, plain data."""
    names = {alias: connections[alias].settings_dict["NAME"] for alias in settings.DATABASES}
    # Pickled here, read once Django is set up there: unpickling them may import models.
    sent = pickle.dumps((ready, ready_args))
    return ProcessPoolExecutor(
        max_workers=processes,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_django_ready,
        initargs=(os.environ.get("DJANGO_SETTINGS_MODULE", ""), names, sent),
    )


def _django_ready(settings_module: str, names: dict[str, str], sent: bytes) -> None:
    """A new process's start: Django set up, each database alias on the database its parent uses, then ``ready``."""
    if settings_module:
        os.environ["DJANGO_SETTINGS_MODULE"] = settings_module
    django.setup()
    for alias, name in names.items():
        settings.DATABASES[alias]["NAME"] = name
        connections[alias].close()
        connections[alias].settings_dict["NAME"] = name
    ready, ready_args = pickle.loads(sent)  # noqa: S301 — this process's parent's own bytes
    ready(*ready_args)
