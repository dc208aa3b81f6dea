"""A real outage of the test database: no new connections, every backend terminated (what
``pg_ctl stop -m fast`` does to the platform's connections), until it is restored.

    with database_outage() as (down, up):
        down()   # every connection of the test database is cut, new ones are refused
        up()     # it accepts connections again (also done when the block ends)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import psycopg
from django.db import connection, connections


def admin_connect() -> psycopg.Connection:
    """A connection to the test server's ``postgres`` database (autocommit), outside Django and its pool."""
    params = connection.get_connection_params()
    return psycopg.connect(
        host=params.get("host"),
        port=params.get("port"),
        user=params.get("user"),
        password=params.get("password"),
        dbname="postgres",
        autocommit=True,
    )


@contextlib.contextmanager
def database_outage() -> Iterator[tuple[Callable[[], None], Callable[[], None]]]:
    """Yield ``(down, up)``: take the test database down, and bring it back (the block's end does too)."""
    name = connection.settings_dict["NAME"]
    admin = admin_connect()
    quoted = psycopg.sql.Identifier(name)

    def down() -> None:
        admin.execute(psycopg.sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(quoted))
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name])

    def up() -> None:
        admin.execute(psycopg.sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(quoted))

    try:
        yield down, up
    finally:
        up()
        admin.close()
        for alias in connections:  # this thread's connection was terminated with the others
            with contextlib.suppress(Exception):
                connections[alias].close()
            pool = getattr(connections[alias], "pool", None)
            if pool is not None and not pool.closed:
                with contextlib.suppress(Exception):
                    pool.check()  # drop the pooled connections the outage cut, so the test's teardown gets live ones
