"""``bench/bulk_load.py``: indexes built after a load, batches written beside the caller."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from bench.bulk_load import ERROR_IN_TRANSACTION, BackgroundWriter, deferrable_indexes, indexes_deferred
from conversations.models import Message

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGES = Message._meta.db_table


def definitions(table: str) -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s ORDER BY indexname", [table])
        return cursor.fetchall()


@pytest.fixture
def postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("indexes are dropped and built on PostgreSQL only")


def test_the_indexes_a_load_does_without_are_all_but_the_keys_and_what_it_reads_by(postgresql):
    deferred = {index.name for index in deferrable_indexes({MESSAGES: "conversation_id"})}

    assert "message_version_time" in deferred and "message_user_window" in deferred
    assert "routing_message_pkey" not in deferred  # the primary key
    assert "message_conversation_time" not in deferred  # leads with the column kept
    kept = {"routing_message_pkey", "message_conversation_time"}
    assert {name for name, _ in definitions(MESSAGES)} - deferred == kept


def test_indexes_dropped_for_a_load_come_back_as_they_were_even_when_it_fails(postgresql):
    before = definitions(MESSAGES)

    with pytest.raises(ValueError, match="the load failed"), indexes_deferred({MESSAGES: "conversation_id"}) as dropped:
        assert {name for name, _ in definitions(MESSAGES)} == {"routing_message_pkey", "message_conversation_time"}
        assert len(dropped.indexes) == len(before) - 2
        raise ValueError("the load failed")

    assert definitions(MESSAGES) == before  # built again, every one as it was


def test_the_writer_writes_every_item_in_order_on_a_thread_with_its_own_connection():
    written, threads = [], set()

    def write(item: int) -> None:
        threads.add(threading.current_thread().name)
        with connection.cursor() as cursor:
            cursor.execute("SELECT %s", [item])
            written.append(cursor.fetchone()[0])

    writer = BackgroundWriter(write, start=lambda: written.append("start"), finish=lambda: written.append("finish"))
    for item in range(5):
        writer.put(item)
    writer.close()

    assert written == ["start", 0, 1, 2, 3, 4, "finish"]
    assert threads == {"bench-writer"}


def test_the_writers_error_is_raised_to_the_caller_and_the_rest_is_not_written():
    written = []

    def write(item: int) -> None:
        if item == 2:
            raise ValueError("item 2 cannot be written")
        written.append(item)

    writer = BackgroundWriter(write)
    with pytest.raises(ValueError, match="item 2"):
        for item in range(100):
            writer.put(item)
        writer.close()
    writer.close()  # once raised, closing again is quiet

    assert written == [0, 1]


@pytest.mark.django_db(transaction=False)
def test_inside_a_transaction_neither_starts():
    with pytest.raises(RuntimeError, match=ERROR_IN_TRANSACTION):
        BackgroundWriter(lambda item: None)
    with pytest.raises(RuntimeError, match=ERROR_IN_TRANSACTION), indexes_deferred({MESSAGES: "conversation_id"}):
        pass
