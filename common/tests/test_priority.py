"""Background work at a lower CPU priority (common/priority.py): a thread of its own, nicer than the caller, on
connections of its own; in the caller's thread where that cannot be."""

from __future__ import annotations

import threading

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction

from common.priority import NICEST, lowered_here_possible, run_lowered, thread_niceness
from tenants.models import Tenant
from tests.factories import TenantFactory

pytestmark = pytest.mark.skipif(not lowered_here_possible(), reason="a thread's own niceness is Linux's")


@pytest.fixture(autouse=True)
def _a_database_another_thread_can_reach():
    if connection.vendor == "sqlite" and connection.is_in_memory_db():
        pytest.skip("the test runner's in-memory SQLite is one connection's: the work runs in the caller's thread")


def where() -> tuple[int, int]:
    return threading.get_ident(), thread_niceness()


def test_the_work_runs_in_a_thread_of_its_own_nicer_by_the_steps_and_the_caller_keeps_its_niceness():
    before = thread_niceness()

    thread, niceness = run_lowered(where, steps=5)

    assert thread != threading.get_ident()
    assert niceness == min(before + 5, NICEST)
    assert thread_niceness() == before  # the caller's is untouched: an unprivileged process could not raise it back


def test_a_niceness_past_the_lowest_priority_stops_at_it():
    assert run_lowered(where, steps=40)[1] == NICEST


def test_what_the_work_raises_is_raised_to_the_caller():
    def fails() -> None:
        raise LookupError("no such tenant")

    with pytest.raises(LookupError, match="no such tenant"):
        run_lowered(fails, steps=5)


def test_no_steps_run_the_work_in_the_callers_thread():
    assert run_lowered(where, steps=0) == where()


@pytest.mark.django_db
def test_inside_an_open_transaction_the_work_runs_in_the_callers_thread_and_sees_its_rows():
    TenantFactory(slug="seen")
    assert connection.in_atomic_block

    assert run_lowered(lambda: (where(), Tenant.objects.filter(slug="seen").exists()), steps=5) == (where(), True)


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_work_reads_the_database_on_a_connection_it_hands_back_at_its_end():
    TenantFactory(slug="committed")
    used = []

    def reads() -> bool:
        found = Tenant.objects.filter(slug="committed").exists()
        used.append(connections[DEFAULT_DB_ALIAS])  # this thread's own (Django's connections are a thread's)
        return found

    assert run_lowered(reads, steps=5) is True
    assert used[0] is not connections[DEFAULT_DB_ALIAS]
    assert used[0].connection is None  # closed, or handed back to the pool where there is one


@pytest.mark.django_db(transaction=True)
def test_the_work_writes_in_transactions_of_its_own_the_caller_then_reads():
    def writes() -> int:
        with transaction.atomic():
            return TenantFactory(slug="written").pk

    pk = run_lowered(writes, steps=5)

    assert Tenant.objects.get(pk=pk).slug == "written"
