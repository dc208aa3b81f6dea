"""Loading millions of rows into PostgreSQL the way a restore does: the secondary indexes built after the rows, and
the rows written by a thread of their own while the caller makes the next ones.

:func:`indexes_deferred` drops a set of tables' indexes that no load reads and builds them again at the end (as
``pg_restore`` does: one sort per index instead of an index entry placed per row); :class:`BackgroundWriter` runs a
function over each item given to it on a thread with its own database connection, one item at a time, in order.
``bench/benchdata.py`` uses both for ``bench/generate_handoffs.py --bulk``.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

# Memory for each index build's sort: an index of 5 million rows sorts in memory (the default, 64 MB, spills to disk).
BUILD_MEMORY = "1GB"
BUILDERS = 2  # indexes built at once, each by a connection of its own (one a core of the machine the bench runs on)
ERROR_IN_TRANSACTION = "a bulk load writes from connections of its own: it cannot run inside a transaction."


@dataclass(frozen=True)
class Index:
    table: str
    name: str
    definition: str  # CREATE INDEX …, as pg_get_indexdef gives it (ON ONLY for a partitioned table: indexes_build)
    pages: int  # the table's pages when the load began (its partitions' summed), to build the largest first


def deferrable_indexes(keep: dict[str, str]) -> list[Index]:
    """The indexes of the tables ``keep`` names that a load can do without: all but the primary keys, the unique
    ones (a constraint a load must still meet) and those whose first column is the table's ``keep`` column (what the
    load itself looks rows up by). A partitioned table's are its own (their partitions' follow them)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.relname, c.relname, pg_get_indexdef(i.indexrelid), "
            "(SELECT COALESCE(SUM(p.relpages), 0) FROM pg_partition_tree(t.oid) tree JOIN pg_class p ON p.oid = "
            "tree.relid), a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_class t ON t.oid = i.indrelid "
            "JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = i.indkey[0] "
            "WHERE t.relname = ANY(%s) AND t.relnamespace = 'public'::regnamespace "
            "AND NOT i.indisprimary AND NOT i.indisunique ORDER BY t.relname, c.relname",
            [list(keep)],
        )
        rows = cursor.fetchall()
    return [
        Index(table, name, definition, pages) for table, name, definition, pages, first in rows if first != keep[table]
    ]


@dataclass
class Deferred:
    indexes: list[Index]
    seconds: float = 0.0  # building them again


@contextlib.contextmanager
def indexes_deferred(keep: dict[str, str]) -> Iterator[Deferred]:
    """Drop :func:`deferrable_indexes` of ``keep``'s tables (PostgreSQL), and build them again when the block ends,
    however it ends: the definitions as they were, :data:`BUILDERS` at a time, largest table first, each with
    :data:`BUILD_MEMORY` to sort in. Yields what was dropped, and how long building took once it is done."""
    if connection.in_atomic_block:
        raise RuntimeError(ERROR_IN_TRANSACTION)
    deferred = Deferred(deferrable_indexes(keep))
    quote = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        for index in deferred.indexes:
            cursor.execute(f"DROP INDEX {quote(index.name)}")
    try:
        yield deferred
    finally:
        started = time.perf_counter()
        indexes_build(deferred.indexes)
        deferred.seconds = time.perf_counter() - started


def indexes_build(indexes: Sequence[Index]) -> None:
    """``CREATE INDEX`` each of ``indexes``, :data:`BUILDERS` at a time. A partitioned table's index is made on the
    table, not ``ON ONLY`` it as its definition reads: PostgreSQL builds it on every partition and attaches them."""
    ordered = sorted(indexes, key=lambda index: -index.pages)
    with ThreadPoolExecutor(max_workers=BUILDERS, thread_name_prefix="bench-index") as pool:
        for done in [pool.submit(_build, index) for index in ordered]:
            done.result()


def _build(index: Index) -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
            cursor.execute("SET max_parallel_maintenance_workers = 0")  # the builders are the parallelism
            cursor.execute(index.definition.replace(" ON ONLY ", " ON ", 1))
    finally:
        connection.close()  # this thread's


class BackgroundWriter:
    """``write`` run over each item :meth:`put` gives, in order, on a thread with its own database connection (each
    item committed by ``write`` itself), while the caller goes on. ``start`` and ``finish`` run on that thread
    first and last (what belongs to its connection: temporary tables). At most one item waits while one is written;
    an error on the thread is raised by the next :meth:`put` or by :meth:`close`."""

    def __init__(
        self,
        write: Callable[[Any], None],
        *,
        start: Callable[[], None] = lambda: None,
        finish: Callable[[], None] = lambda: None,
    ):
        if connection.in_atomic_block:
            raise RuntimeError(ERROR_IN_TRANSACTION)
        self._write, self._start, self._finish = write, start, finish
        self._items: queue.Queue[Any] = queue.Queue(maxsize=1)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="bench-writer", daemon=True)
        self._thread.start()

    def put(self, item: Any) -> None:
        while True:
            self._raise()
            try:
                self._items.put(item, timeout=0.5)
                return
            except queue.Full:
                continue

    def close(self) -> None:
        """Wait for every item to be written; raise the thread's error if it had one."""
        while self._thread.is_alive():
            try:
                self._items.put(_DONE, timeout=0.5)
                break
            except queue.Full:
                continue
        self._thread.join()
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        try:
            self._start()
            try:
                while (item := self._items.get()) is not _DONE:
                    self._write(item)
            finally:
                self._finish()
        except BaseException as exc:  # noqa: BLE001 (handed to the caller's thread, raised there)
            self._error = exc
        finally:
            connection.close()


_DONE = object()
