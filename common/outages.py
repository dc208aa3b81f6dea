"""A circuit for an outage of something every request needs (the database): fail fast while it is down.

When a request meets the outage (:meth:`Circuit.trip`), the circuit opens: for ``pause`` seconds every request
is answered 503 at once instead of waiting, each, for the connection pool's timeout. Then one request at a time
is let through as a trial; if it meets the outage again the circuit opens for another pause, and if it does not,
the circuit closes and everything goes through again.

A trial is a whole request, and a chat message can take long (waiting for the conversation's earlier messages,
model calls): the circuit stayed open, every other request refused, until it ended, 5–16 s after the database
was back. So a circuit with a ``check`` (the database's: one ``SELECT 1`` on a pooled connection) also checks
for itself, in a thread of its own, every :data:`CHECK_INTERVAL_SECONDS` while it is open, and closes as soon
as the check passes, whether or not requests come. Process-local: each web worker finds out for itself.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

CLOSED = 0  # the admission of an ordinary request
TRIAL = 1  # the admission of the one request that tries the resource while the circuit is open
# How often an open circuit with a check tries its resource: it closes within about this long of its return.
CHECK_INTERVAL_SECONDS = 0.5


class Circuit:
    def __init__(
        self,
        name: str,
        pause_seconds: Callable[[], float],
        *,
        on_open: Callable[[], None] | None = None,
        on_close: Callable[[], None] | None = None,
        refusal: str = "answering 503 at once",
        check: Callable[[], None] | None = None,
    ) -> None:
        """``check``: raises while the resource is down; run from a thread of the circuit's while it is open."""
        self.name = name
        self._check = check
        # The running checking thread's token, (pid, object): a forked child's inherited one is not its own.
        self._checker: tuple[int, object] | None = None
        self._refusal = refusal  # what the circuit does while open, for its log line
        self._pause_seconds = pause_seconds
        self._on_open = on_open
        self._on_close = on_close
        self._lock = threading.Lock()
        self._checker_wakeup = threading.Condition(self._lock)
        self._tripped = False
        self._open_until = 0.0
        self._trial_running = False
        self._trips = 0  # bumped by every trip: a trial that ends after a new trip does not close the circuit
        self._trial_trips = 0

    @property
    def is_open(self) -> bool:
        return self._tripped

    def trip(self) -> None:
        """The resource failed a request: refuse requests for a pause."""
        with self._lock:
            if not self._tripped:
                # INFO: each request that met the outage already logged its own WARNING line.
                logger.info("%s unavailable: %s, trying again every %gs", self.name, self._refusal, self.pause)
                if self._on_open is not None:
                    self._on_open()
            self._tripped = True
            self._trips += 1
            self._open_until = time.monotonic() + self.pause
            self._trial_running = False
            if self._check is not None and (self._checker is None or self._checker[0] != os.getpid()):
                self._checker = token = (os.getpid(), object())
                thread = threading.Thread(target=self._checking, args=(token,), name=f"{self.name} check", daemon=True)
                thread.start()

    def _checking(self, token: tuple[int, object]) -> None:
        """While the circuit is open, check the resource every :data:`CHECK_INTERVAL_SECONDS`; close it on a pass
        (unless a request met the outage again meanwhile: the next check decides). Ends when the circuit is
        closed, or when it is reset."""
        assert self._check is not None
        while True:
            with self._lock:
                self._checker_wakeup.wait(CHECK_INTERVAL_SECONDS)
                if self._checker is not token or not self._tripped:
                    if self._checker is token:
                        self._checker = None
                    return
                trips = self._trips
            try:
                self._check()
            except Exception:  # noqa: BLE001, S112 — still down: the next check tells
                continue
            with self._lock:
                self._close(trips)

    def _close(self, trips: int) -> None:
        """Close the circuit if nothing tripped it since ``trips`` (the caller holds the lock)."""
        if self._tripped and self._trips == trips:
            self._tripped = False
            logger.info("%s answers again", self.name)
            if self._on_close is not None:
                self._on_close()

    @property
    def pause(self) -> float:
        return self._pause_seconds()

    def admit(self) -> int | None:
        """``CLOSED`` or ``TRIAL`` when the request may go on (a trial must call :meth:`trial_done`), ``None`` when
        it is to be refused. Costs one attribute read while the circuit is closed."""
        if not self._tripped:
            return CLOSED
        with self._lock:
            if not self._tripped:
                return CLOSED
            if self._trial_running or time.monotonic() < self._open_until:
                return None
            self._trial_running = True
            self._trial_trips = self._trips
            return TRIAL

    def trial_done(self) -> None:
        """The trial request ended: unless it tripped the circuit again, the resource is back."""
        with self._lock:
            if self._trial_running:
                self._close(self._trial_trips)
            self._trial_running = False

    def trial_abandoned(self) -> None:
        """The trial request was cut off before it could tell (its client left and the server cancelled it): it
        proves nothing, so the circuit stays open and the next request after the pause is the trial."""
        with self._lock:
            self._trial_running = False

    def reset(self) -> None:
        """Closed, as at start (tests)."""
        with self._lock:
            if self._tripped and self._on_close is not None:
                self._on_close()
            self._tripped = self._trial_running = False
            self._open_until = 0.0
            self._checker = None
            self._checker_wakeup.notify_all()

    def seconds_left(self) -> float:
        """How long the circuit may stay open, as far as it knows (a client's ``Retry-After``): to the end of the
        pause, or, for a circuit that checks for itself, to its next check."""
        left = max(self._open_until - time.monotonic(), 0.0)
        return min(left, CHECK_INTERVAL_SECONDS) if self._check is not None else left


def _database_pause() -> float:
    from django.conf import settings

    return float(getattr(settings, "DATABASE_OUTAGE_PAUSE_SECONDS", 2.0))


# While the circuit is open, a request already under way waits this long for a pooled connection at each later
# step, not the pool's whole timeout again (psycopg_pool reads ``pool.timeout`` at each ``getconn``).
OUTAGE_POOL_WAIT_SECONDS = 1.0
_pool_timeouts: dict[str, float] = {}


def _pools() -> list[tuple[str, Any]]:
    from django.db import connections

    found = []
    for alias in connections:
        pool = getattr(connections[alias], "pool", None)  # PostgreSQL with DATABASE_POOL on; None otherwise
        if pool is not None:
            found.append((alias, pool))
    return found


def _shorten_pool_waits() -> None:
    for alias, pool in _pools():
        _pool_timeouts.setdefault(alias, pool.timeout)
        pool.timeout = min(pool.timeout, OUTAGE_POOL_WAIT_SECONDS)


def _restore_pool_waits() -> None:
    for alias, pool in _pools():
        if alias in _pool_timeouts:
            pool.timeout = _pool_timeouts.pop(alias)


def database_select_one(*, timeout: float) -> None:
    """``SELECT 1`` on a pooled connection, waiting at most ``timeout`` for one (on Django's connection where there
    is no pool); raises while the database does not answer."""
    from django.db import connection

    pool = getattr(connection, "pool", None)
    if pool is not None:
        # Django opens its pool on the process's first query; a check may come first (a new worker). Idempotent.
        pool.open(wait=False)
        with pool.connection(timeout=timeout) as conn:
            conn.execute("SELECT 1")
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        if not connection.in_atomic_block:
            connection.close()


def _database_check() -> None:
    database_select_one(timeout=OUTAGE_POOL_WAIT_SECONDS)


database_circuit = Circuit(
    "database",
    _database_pause,
    on_open=_shorten_pool_waits,
    on_close=_restore_pool_waits,
    check=_database_check,
)


def _accepts_connections(pool: Any) -> bool:
    """Whether ``pool``'s database takes a connection now: one of its own, outside the pool, closed at once."""
    import psycopg

    try:
        with psycopg.connect(pool.conninfo, **{**pool.kwargs, "connect_timeout": 2}) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def database_outage_evident(exc: BaseException) -> bool:
    """Whether ``exc`` shows the database down, not merely busy: a connection error does; a pool's wait running out
    does while the pool holds fewer connections than it may (it failed to open more). Under load the pool is full
    and every connection in use: that wait is the load's, and opening the circuit would shed it all. But a pool
    also counts each connection it is replacing (psycopg_pool): during an outage a pool that had grown to its size
    stays full, so a full pool's timed-out wait is an outage if the database takes no connection of its own."""
    from psycopg_pool import PoolTimeout

    if not isinstance(exc, PoolTimeout):
        return True
    pools = [pool for _, pool in _pools()]
    if any(pool.get_stats().get("pool_size", 0) < pool.max_size for pool in pools):
        return True
    return not all(_accepts_connections(pool) for pool in pools)
