"""The database's outage circuit: every request needs the database, so while it is down requests fail fast.

When a request meets the outage, :data:`database_circuit` (a :class:`~common.infra.circuit.Circuit`) opens: for
``DATABASE_OUTAGE_PAUSE_SECONDS`` every request is answered 503 at once instead of waiting, each, for the
connection pool's timeout (``platform.errors.DatabaseCircuitMiddleware``). Then one request at a time is let through
as a trial; if it meets the outage again the circuit opens for another pause, and if it does not, the circuit
closes and everything goes through again.

A trial is a whole request, and a chat message can take long (waiting for the conversation's earlier messages,
model calls): the circuit stayed open, every other request refused, until it ended, 5–16 s after the database
was back. So the circuit also checks for itself (one ``SELECT 1`` on a pooled connection), in a thread of its own,
every :data:`~common.infra.circuit.CHECK_INTERVAL_SECONDS` while it is open, and closes as soon as the check passes,
whether or not requests come. Process-local: each web worker finds out for itself.
"""

from __future__ import annotations

import logging
from typing import Any

from common.infra.circuit import Circuit

logger = logging.getLogger(__name__)


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
    pause=_database_pause,
    refusal="answering 503 at once",
    on_open=_shorten_pool_waits,
    on_close=_restore_pool_waits,
    check=_database_check,
    logger=logger,
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
