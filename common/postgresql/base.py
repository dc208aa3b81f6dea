"""Django's PostgreSQL backend, with psycopg's pool checking its connections the way a restart needs.

``CONN_HEALTH_CHECKS`` makes Django's pool check each connection as it is handed out, so a request never gets one
that PostgreSQL cut. Psycopg's check is a round trip (an empty query) on every checkout, two a message; here a
connection is first looked at without one (:func:`connection_untouched`): a server that cuts a connection (a
restart, ``pg_terminate_backend``) sends its last message and closes the socket, so an idle connection with
nothing to read was not cut, and only one with something to read gets the round trip.

A restart of PostgreSQL cuts every idle connection of every process at once, and the pool finds them one
checkout at a time, waiting 1, 2, 4, 8 s between one failed check and the next: with five cut connections a
request waits past the pool's timeout and gets a 503 although the database answers again — and that 503 opens
the database circuit (:mod:`common.outages`) for every request of the process. Here the first failed check
tests every idle connection of the pool at once (``ConnectionPool.check``: the cut ones are replaced), so the
request that met it gets a working connection on its next try, about a second later. And a connection that
cannot be opened is tried again at least every second (:data:`RECONNECT_MAX_DELAY_SECONDS`), not after a backoff
that grows with the outage.

A few rows are inserted as ``VALUES`` rows, not through ``UNNEST`` (:mod:`common.postgresql.compiler`).

Used as ``ENGINE = "common.postgresql"`` when the pool is on (platform/settings.py).
"""

from __future__ import annotations

import logging
import select
from typing import Any

from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base, operations

logger = logging.getLogger(__name__)

# psycopg_pool waits 1, 2, 4, 8 … s between a connection's failed attempts: after an outage of some seconds a
# process could stay without connections for as long again once the database is back, and its requests wait the
# pool's whole timeout for a 503. Here the attempts are never further apart than this.
RECONNECT_MAX_DELAY_SECONDS = 1.0


def _pool_class() -> type:
    """psycopg_pool's ``ConnectionPool`` retrying a failed connection at least every ``RECONNECT_MAX_DELAY_SECONDS``
    (imported on first use: psycopg_pool is needed only with the pool on)."""
    from psycopg_pool import ConnectionPool
    from psycopg_pool.pool import AddConnection

    class Pool(ConnectionPool):
        def schedule_task(self, task: Any, delay: float) -> None:
            if isinstance(task, AddConnection):  # the next attempt of a failed connection
                delay = min(delay, RECONNECT_MAX_DELAY_SECONDS)
            super().schedule_task(task, delay)

    return Pool


def connection_untouched(conn: Any) -> bool:
    """Whether a pooled psycopg connection is open and nothing has arrived on it since its last result.

    An idle connection has nothing to read unless the server wrote to it unasked — as it does, with a ``FATAL``
    message and the socket's end, when it cuts the connection. One ``poll`` with no wait, instead of a round trip
    to the server; the pool's own check (an empty query) is for a connection with something to read.
    """
    if conn.closed or conn.broken:
        return False
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN | select.POLLPRI)  # errors and hang-ups are always reported
    return not poller.poll(0)


class DatabaseOperations(operations.DatabaseOperations):
    compiler_module = "common.postgresql.compiler"  # a turn's few rows inserted as VALUES (see there)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    @property
    def pool(self) -> Any:
        options = self.settings_dict["OPTIONS"].get("pool")
        pools = self._connection_pools  # type: ignore[attr-defined]  # Django's, one per alias (not in the stubs)
        checked = options and self.settings_dict["CONN_HEALTH_CHECKS"] and self.alias != NO_DB_ALIAS
        if checked and self.alias not in pools:
            from psycopg_pool import ConnectionPool

            pool: ConnectionPool | None = None

            def check(conn: Any) -> None:
                if connection_untouched(conn):
                    return
                try:
                    ConnectionPool.check_connection(conn)
                except Exception:
                    logger.info("a pooled connection was cut; checking the pool's other idle connections")
                    if pool is not None:
                        pool.check()
                    raise

            connect_kwargs = self.get_connection_params()
            connect_kwargs["autocommit"] = True  # as Django's own pool: Django sets it later on
            pool = _pool_class()(
                kwargs=connect_kwargs,
                open=False,
                configure=self._configure_connection,  # type: ignore[attr-defined]
                check=check,
                **({} if options is True else options),
            )
            pools.setdefault(self.alias, pool)
        return super().pool
