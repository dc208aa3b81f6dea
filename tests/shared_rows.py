"""Rows built once for many tests: inside a transaction of their own, in which each test's transaction is a savepoint.

A fixture of a module's (or a class's) scope builds its rows with :func:`rows_shared`; every test that runs while it
is set up sees them as built and nothing another test wrote (pytest-django rolls each test's savepoint back), and the
rows are rolled back once the fixture's last test is done. For set-ups that cost seconds (a demo seeded, a bench's
data generated) read by many tests. Only where every test of the module is an ordinary ``db`` test: a transactional
one would commit and flush inside the shared transaction (refused here).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from django.db import transaction

from tests.xdist_worker import flushes_the_database

T = TypeVar("T")


@contextlib.contextmanager
def rows_shared(request: pytest.FixtureRequest, django_db_blocker, build: Callable[[], T]) -> Iterator[T]:
    """``build()``'s rows, for the tests that run until the block ends; what ``build`` returned."""
    flushing = [
        item.nodeid for item in request.session.items if item.path == request.path and flushes_the_database(item)
    ]
    if flushing:
        pytest.fail(f"rows shared by a module's tests need every test of it in a transaction: {flushing}")
    with django_db_blocker.unblock():
        shared = transaction.atomic()
        shared.__enter__()
        try:
            built = build()
        except BaseException:
            transaction.set_rollback(True)
            shared.__exit__(None, None, None)
            raise
    try:
        yield built
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            shared.__exit__(None, None, None)
