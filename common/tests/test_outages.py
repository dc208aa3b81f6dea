"""The database circuit: after an outage is met, requests are answered 503 at once, one trial at a time."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection
from django.db.backends.postgresql import base as django_postgresql
from django.test import Client

from common.infra import circuit
from common.infra.circuit import CHECK_INTERVAL_SECONDS, CLOSED, TRIAL, Circuit
from common.infra.outages import OUTAGE_POOL_WAIT_SECONDS
from common.infra.postgresql.base import connection_untouched
from common.tests.database_outage import admin_connect, database_outage
from tests.stock_paths import fast_path_only


def test_a_closed_circuit_admits_everything():
    circuit = Circuit("thing", pause=lambda: 60.0)
    assert [circuit.admit() for _ in range(3)] == [CLOSED] * 3


def test_a_tripped_circuit_refuses_until_its_pause_ends_then_admits_one_trial_at_a_time():
    circuit = Circuit("thing", pause=lambda: 0.2)
    circuit.trip()
    assert circuit.admit() is None
    time.sleep(0.25)
    assert circuit.admit() == TRIAL
    assert circuit.admit() is None  # the trial is still running
    circuit.trial_done()
    assert circuit.admit() == CLOSED and not circuit.is_open


def test_a_trial_that_meets_the_outage_again_keeps_the_circuit_open_for_another_pause():
    circuit = Circuit("thing", pause=lambda: 0.2)
    circuit.trip()
    time.sleep(0.25)
    assert circuit.admit() == TRIAL
    circuit.trip()  # the trial failed
    circuit.trial_done()
    assert circuit.is_open and circuit.admit() is None


def test_an_abandoned_trial_proves_nothing_the_circuit_stays_open_and_the_next_request_is_the_trial():
    circuit = Circuit("thing", pause=lambda: 0.2)
    circuit.trip()
    time.sleep(0.25)
    assert circuit.admit() == TRIAL
    circuit.trial_abandoned()  # its client left before it could tell
    assert circuit.is_open
    assert circuit.admit() == TRIAL  # at once: the pause had already run out
    circuit.trial_done()
    assert circuit.admit() == CLOSED


def test_a_circuit_that_checks_for_itself_tells_clients_to_come_back_at_its_next_check_not_after_the_pause():
    circuit = Circuit("thing", pause=lambda: 60.0, check=lambda: None)
    plain = Circuit("thing", pause=lambda: 60.0)
    circuit.trip()
    plain.trip()
    assert circuit.seconds_left() <= CHECK_INTERVAL_SECONDS < 59 < plain.seconds_left()
    circuit.reset()


def test_only_one_of_many_concurrent_requests_is_the_trial():
    circuit = Circuit("thing", pause=lambda: 0.0)
    circuit.trip()
    results: list[int | None] = []
    threads = [threading.Thread(target=lambda: results.append(circuit.admit())) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(TRIAL) == 1 and results.count(None) == 19


@pytest.mark.django_db(transaction=True)
def test_during_a_database_outage_requests_after_the_first_are_refused_at_once_and_service_resumes_after(
    tenant_key, telecom, settings, monkeypatch
):
    settings.DATABASE_OUTAGE_PAUSE_SECONDS = 1.0
    monkeypatch.setattr(circuit, "CHECK_INTERVAL_SECONDS", 60.0)  # no check of its own asks the pool meanwhile
    client = Client(HTTP_AUTHORIZATION=f"Bearer {tenant_key.raw}")
    client.raise_request_exception = False
    path = f"/api/sessions/{tenant_key.tenant.slug}:telecom_contas:outage/messages"  # reads the conversation store
    assert client.get("/api/agents").status_code == 200  # the key is known to this process now
    with database_outage() as (down, up):
        down()
        first = client.get(path)
        assert first.status_code == 503 and first.json()["error"]["code"] == "service_unavailable"
        asked = connection.pool.get_stats().get("requests_num", 0)
        refused = [client.get(path) for _ in range(5)]
        assert connection.pool.get_stats().get("requests_num", 0) == asked  # refused before any view asked the pool
        assert {r.status_code for r in refused} == {503}
        assert all(1 <= int(r["Retry-After"]) <= 1 for r in refused)
        assert client.get("/api/health/live").status_code == 200  # health routes are never refused
        assert connection.pool.timeout == OUTAGE_POOL_WAIT_SECONDS  # a request under way waits 1 s a step, not 10
        up()
    deadline = time.monotonic() + 60  # a hang guard
    while (answer := client.get(path)).status_code != 404 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert answer.status_code == 404  # the store answers again (no such conversation): the circuit closed
    assert connection.pool.timeout == settings.DATABASES["default"]["OPTIONS"]["pool"]["timeout"]


@pytest.mark.django_db(transaction=True)
def test_a_pool_wait_that_runs_out_under_load_does_not_open_the_circuit(settings):
    """Every connection in use and the pool at its size: the wait is the load's, not an outage."""
    from psycopg_pool import PoolTimeout

    from common.infra.outages import database_outage_evident

    pool = connection.pool
    held = [pool.getconn() for _ in range(pool.max_size)]
    try:
        with pytest.raises(PoolTimeout) as waited:
            pool.getconn(timeout=0.1)
        assert not database_outage_evident(waited.value)
    finally:
        for conn in held:
            pool.putconn(conn)


@pytest.mark.django_db(transaction=True)
def test_a_pool_wait_that_runs_out_during_an_outage_opens_the_circuit_though_the_pool_was_full():
    """psycopg_pool keeps counting a connection it is replacing: during an outage a pool that had grown to its size
    stays full, and each request waited the pool's whole timeout for a 503 that did not open the circuit."""
    from psycopg_pool import PoolTimeout

    from common.infra.outages import database_outage_evident

    pool = connection.pool
    connection.close()
    held = [pool.getconn() for _ in range(pool.max_size)]
    for conn in held:
        pool.putconn(conn)  # the pool at its size, every connection idle
    with database_outage() as (down, _up):
        down()
        pool.check()  # every idle connection found cut: the pool replaces them, still counting them
        with pytest.raises(PoolTimeout) as waited:
            pool.getconn(timeout=0.5)
        assert pool.get_stats()["pool_size"] == pool.max_size
        assert database_outage_evident(waited.value)


@fast_path_only
@pytest.mark.django_db(transaction=True)
def test_pooled_connections_cut_while_idle_are_replaced_before_a_request_gets_one(tenant_key, telecom):
    """PostgreSQL restarted while a process was idle: its pooled connections are dead but look alive. A request
    must get a working one, not a 503 (and the circuit must stay closed): each is checked when handed out."""
    from common.infra.outages import database_circuit

    client = Client(HTTP_AUTHORIZATION=f"Bearer {tenant_key.raw}")
    client.raise_request_exception = False
    path = f"/api/sessions/{tenant_key.tenant.slug}:telecom_contas:restart/messages"
    assert client.get(path).status_code == 404  # the pool holds idle connections now
    connection.close()  # this thread's connection back to the pool too
    admin = admin_connect()
    database = connection.settings_dict["NAME"]
    with admin:
        cut = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s", [database]
        ).fetchone()[0]
        # pg_terminate_backend only signals: a backend still running could answer the pool's check and be cut
        # after it. A restart is over before the idle process gets its next request, so wait as long.
        deadline = time.monotonic() + 60  # a hang guard
        while admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [database]).fetchone()[0]:
            assert time.monotonic() < deadline, "the cut backends did not exit"
            time.sleep(0.05)
    assert cut >= 1

    answers = [client.get(path).status_code for _ in range(connection.pool.max_size + 1)]

    assert answers == [404] * len(answers)
    assert not database_circuit.is_open


@fast_path_only
@pytest.mark.django_db(transaction=True)
def test_a_pool_that_kept_failing_to_reconnect_during_an_outage_connects_within_seconds_of_the_databases_return():
    """psycopg_pool retries a failed connection after 1, 2, 4, 8 … s: after an outage of 8 s its next try could be
    8 s after the database is back, and a request of that process waits its whole pool timeout for a 503 that
    opens the circuit (the fault tests' PostgreSQL outage). The retries are spaced no wider than
    RECONNECT_MAX_DELAY_SECONDS."""
    from psycopg_pool import ConnectionPool
    from psycopg_pool.pool import AddConnection

    from common.infra.postgresql.base import RECONNECT_MAX_DELAY_SECONDS

    pool = connection.pool
    connection.close()
    delays: list[float] = []  # the waits before each next attempt, as psycopg_pool's scheduler gets them
    schedule_task = ConnectionPool.schedule_task

    def scheduled(self, task, delay):
        if isinstance(task, AddConnection):
            delays.append(delay)
        schedule_task(self, task, delay)

    with database_outage() as (down, up), pytest.MonkeyPatch.context() as patch:
        patch.setattr(ConnectionPool, "schedule_task", scheduled)  # psycopg_pool's, under the platform's override
        down()
        pool.check()  # every pooled connection found cut: the pool retries with its backoff
        time.sleep(8.0)  # psycopg_pool's own backoff would be at 1, 2, 4 s by now
        up()
        with pool.connection(timeout=60) as conn:  # a hang guard: the spacing is read from the attempts below
            conn.execute("SELECT 1")

    assert len(delays) >= 2, delays  # past the first retry (1 s ± 10 %), where psycopg_pool's own would double
    assert max(delays) <= RECONNECT_MAX_DELAY_SECONDS, delays


@fast_path_only
@pytest.mark.django_db(transaction=True)
def test_a_pooled_connection_nothing_cut_is_handed_out_without_a_round_trip_and_a_cut_one_is_checked(monkeypatch):
    """The checkout looks at the socket first (common/infra/postgresql: connection_untouched); psycopg's check, an
    empty query, runs only for a connection the server wrote to unasked, such as one it cut."""
    from psycopg_pool import ConnectionPool

    checked = []
    check_connection = ConnectionPool.check_connection
    monkeypatch.setattr(
        ConnectionPool, "check_connection", staticmethod(lambda conn: checked.append(conn) or check_connection(conn))
    )
    with connection.cursor() as cursor:  # a connection from the pool, given back
        cursor.execute("SELECT 1")
    connection.close()

    for _ in range(3):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        connection.close()
    assert checked == []

    # One pooled connection cut, as by a restart. With a timeout, pg_terminate_backend waits for the backend to end,
    # its goodbye on the socket before the checks below (the bound a hang guard, never a measure). The checkout's
    # first look (connection_untouched) then sees it, so the pool's round trip runs and the connection is dropped.
    # Which idle connection a checkout gets is not asserted: in whole runs other threads of the process (a circuit's
    # own checks) take and give back pooled connections between two lines here, and "the one given back last" was
    # then theirs, untouched, checked by nobody.
    pool = connection.pool
    cut = pool.getconn()
    pid = cut.info.backend_pid
    assert connection_untouched(cut)
    with admin_connect() as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 30000)", [pid])
    assert not connection_untouched(cut)
    pool.putconn(cut)
    with connection.cursor() as cursor:  # every checkout after the cut answers: no request meets the dead socket
        cursor.execute("SELECT pg_backend_pid()")
        [new_pid] = cursor.fetchone()
    connection.close()
    assert new_pid != pid


@fast_path_only
@pytest.mark.django_db(transaction=True)
def test_a_checkout_from_a_pool_already_made_reads_djangos_pool_property_no_more(monkeypatch):
    """Django's property reads the settings and the pools again each time, and a checkout and its return read the pool
    six times: the pool made, it is handed back at once (common/infra/postgresql: DatabaseWrapper.pool)."""
    if connection.vendor != "postgresql":
        pytest.skip("the pool is PostgreSQL's")
    with connection.cursor() as cursor:  # the pool made, a connection taken and given back
        cursor.execute("SELECT 1")
    connection.close()
    made = connection.pool
    read = []
    stock = django_postgresql.DatabaseWrapper.pool
    monkeypatch.setattr(
        django_postgresql.DatabaseWrapper, "pool", property(lambda wrapper: read.append(1) or stock.fget(wrapper))
    )

    for _ in range(3):
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        connection.close()

    assert read == [] and connection.pool is made


@fast_path_only
@pytest.mark.django_db
def test_the_pool_hands_out_the_connection_given_back_last_so_a_quiet_process_keeps_one_backend_warm():
    """psycopg_pool's own order is the connection idle longest first: consecutive requests took turns over every
    backend of the pool, each one's caches cold (docs/benchmarks.md, "CPU per message")."""
    pool = connection.pool
    first, second = pool.getconn(), pool.getconn()
    pool.putconn(first)
    pool.putconn(second)

    taken = pool.getconn()
    again = pool.getconn()
    pool.putconn(taken)
    pool.putconn(again)

    assert taken is second
    assert again is first


@pytest.mark.django_db(transaction=True)
def test_an_open_database_circuit_closes_within_seconds_of_the_databases_return_while_a_long_trial_still_runs(
    settings,
):
    """The trial is a whole request: a chat message waiting for its conversation's earlier messages kept every other
    request of its process refused 5–16 s (once 150 s) after the database was back. The circuit checks the
    database itself and closes when it answers."""
    from common.infra.outages import database_circuit

    settings.DATABASE_OUTAGE_PAUSE_SECONDS = 0.2
    with database_outage() as (down, up):
        down()
        database_circuit.trip()  # a request met the outage
        time.sleep(1.5)
        assert database_circuit.is_open  # the circuit's own checks meet the outage too
        assert database_circuit.admit() == TRIAL  # a request that will not end soon is the trial
        up()
        deadline = time.monotonic() + 60  # a hang guard: the trial never ends, so only the circuit's checks close it
        while database_circuit.is_open and time.monotonic() < deadline:
            time.sleep(0.05)

    assert not database_circuit.is_open  # closed by its own check while the trial still ran (it never reported)
    assert database_circuit.admit() == CLOSED
    assert connection.pool.timeout == settings.DATABASES["default"]["OPTIONS"]["pool"]["timeout"]
