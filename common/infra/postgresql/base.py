"""Django's PostgreSQL backend, with psycopg's pool checking its connections the way a restart needs.

``CONN_HEALTH_CHECKS`` makes Django's pool check each connection as it is handed out, so a request never gets one
that PostgreSQL cut. Psycopg's check is a round trip (an empty query) on every checkout, two a message; here a
connection is first looked at without one (:func:`connection_untouched`): a server that cuts a connection (a
restart, ``pg_terminate_backend``) sends its last message and closes the socket, so an idle connection with
nothing to read was not cut, and only one with something to read gets the round trip.

A restart of PostgreSQL cuts every idle connection of every process at once, and the pool finds them one
checkout at a time, waiting 1, 2, 4, 8 s between one failed check and the next: with five cut connections a
request waits past the pool's timeout and gets a 503 although the database answers again — and that 503 opens
the database circuit (:mod:`common.infra.outages`) for every request of the process. Here the first failed check
tests every idle connection of the pool at once (``ConnectionPool.check``: the cut ones are replaced), so the
request that met it gets a working connection on its next try, about a second later. And a connection that
cannot be opened is tried again at least every second (:data:`RECONNECT_MAX_DELAY_SECONDS`), not after a backoff
that grows with the outage.

A few rows are inserted as ``VALUES`` rows, not through ``UNNEST`` (:mod:`common.infra.postgresql.compiler`).

:meth:`DatabaseWrapper.bound_cursor` is a cursor whose statements travel with their values apart (psycopg's
server-side binding) instead of as one text with the values quoted into it, Django's default: the message path's
statements, a handful of shapes sent on every message, are then prepared by PostgreSQL on each connection
(psycopg's ``prepare_threshold``: from their fifth run) and parsed and planned once, and their values, a turn's
metadata among them, are not quoted into the text in Python.

Used as ``ENGINE = "common.infra.postgresql"`` for every PostgreSQL database (platform/settings.py).
"""

from __future__ import annotations

import functools
import logging
import select
from typing import Any

from django.db.backends.base.base import NO_DB_ALIAS
from django.db.backends.postgresql import base, operations
from django.db.backends.postgresql.psycopg_any import register_tzloader
from django.db.backends.utils import CursorWrapper
from psycopg import _queries
from psycopg.pq import Format
from psycopg.types.json import Jsonb

from common.infra import fastjson

logger = logging.getLogger(__name__)

# psycopg_pool waits 1, 2, 4, 8 … s between a connection's failed attempts: after an outage of some seconds a
# process could stay without connections for as long again once the database is back, and its requests wait the
# pool's whole timeout for a 503. Here the attempts are never further apart than this.
RECONNECT_MAX_DELAY_SECONDS = 1.0


def _pool_class() -> type:
    """psycopg_pool's ``ConnectionPool`` retrying a failed connection at least every ``RECONNECT_MAX_DELAY_SECONDS``
    and handing out the connection given back last, as PgBouncer does by default (imported on first use:
    psycopg_pool is needed only with the pool on)."""
    from psycopg_pool import ConnectionPool
    from psycopg_pool.pool import AddConnection

    class Pool(ConnectionPool):
        def schedule_task(self, task: Any, delay: float) -> None:
            if isinstance(task, AddConnection):  # the next attempt of a failed connection
                delay = min(delay, RECONNECT_MAX_DELAY_SECONDS)
            super().schedule_task(task, delay)

        def _get_ready_connection(self, timeout: float | None) -> Any:
            # The connection given back last is handed out first (psycopg_pool hands out the one idle longest):
            # consecutive requests of a quiet process then reuse one PostgreSQL backend, whose caches are warm,
            # instead of taking turns over all of them; the idle ones are the pool's to close (``max_idle``).
            if self._pool:
                self._pool.rotate(1)  # the newest (right) end to the left, where psycopg_pool takes from
            return super()._get_ready_connection(timeout)

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


# psycopg turns a statement's ``%s`` into ``$1``, ``$2`` … by scanning its text, and keeps what it found for the next
# run only for statements of at most 50 values and 4 kB (so that an ORM's ever-different bulk inserts do not fill
# its cache): a turn's joined write has about 60 values, and the scan took a fifth of the write's CPU. The bound
# cursor's statements have a few dozen shapes, every one sent again and again, so its own cache keeps them all, by
# their text: the message path builds each shape's text once (common.infra.statements, conversations.records), so
# the same text comes back as the same object, whose hash is kept, where its encoding would be new bytes to hash.
@functools.lru_cache(maxsize=256)
def _bound_statement_parts(query: str, encoding: str) -> Any:
    return _queries._query2pg_nocache(query.encode(encoding), encoding)


class BoundQuery(_queries.PostgresQuery):
    """psycopg's query conversion for server-side binding, each statement's placeholders found once (above)."""

    __slots__ = ()

    def convert(self, query: Any, vars: Any) -> None:
        if vars is None or not isinstance(query, str):
            return super().convert(query, vars)
        encoding = self._tx.encoding
        self.query, self._want_formats, self._order, self._parts = _bound_statement_parts(query, encoding)
        self.dump(vars)
        return None


class BoundCursor(base.ServerBindingCursor):
    """Django's cursor for server-side binding, with :class:`BoundQuery`."""

    _query_cls = BoundQuery


class DatabaseOperations(operations.DatabaseOperations):
    compiler_module = "common.infra.postgresql.compiler"  # a turn's few rows inserted as VALUES (see there)

    def adapt_json_value(self, value: Any, encoder: Any) -> Any:
        """A ``jsonb`` value encoded by orjson (:mod:`common.infra.fastjson`) unless its field names an encoder: a turn
        stores its metadata twice. PostgreSQL keeps ``jsonb`` parsed, so the stored value is the same."""
        if encoder is not None:
            return super().adapt_json_value(value, encoder)
        if type(value) is fastjson.Encoded:  # encoded already, for its size
            return Jsonb(value, dumps=fastjson.encoded)
        return Jsonb(value, dumps=fastjson.dumps)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    def bound_cursor(self) -> CursorWrapper:
        """A cursor that binds its parameters on the server (see the module's docstring), wrapped as Django wraps
        every cursor: its statements are logged and counted (``django_assert_num_queries``), go through
        ``execute_wrapper`` and raise Django's database errors. A statement's ``%s`` placeholders and values are
        written as for :meth:`cursor`; a literal ``%`` is ``%%`` in both."""
        self.close_if_health_check_failed()
        self.ensure_connection()
        with self.wrap_database_errors:
            cursor = BoundCursor(self.connection)  # type: ignore[call-arg]  # psycopg's Cursor(connection), untyped
            # The connection's time zone for timestamps read, as Django's own cursors get it.
            loader = self.connection.adapters.get_loader(base.TIMESTAMPTZ_OID, Format.TEXT)
            if self.timezone != loader.timezone:
                register_tzloader(self.timezone, cursor)
            return self._prepare_cursor(cursor)  # type: ignore[attr-defined]  # Django's wrapping, not in the stubs

    @property
    def pool(self) -> Any:
        options = self.settings_dict["OPTIONS"].get("pool")
        pools = self._connection_pools  # type: ignore[attr-defined]  # Django's, one per alias (not in the stubs)
        made = pools.get(self.alias)
        if made is not None and options:
            # What Django's property returns once the pool is made (every alias's but NO_DB_ALIAS's, which never gets
            # one): read six times a checkout, and Django's own looks the settings up again each time.
            return made
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
