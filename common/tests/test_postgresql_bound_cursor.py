"""The message path's statements bind their values on the server and are prepared (common/infra/postgresql/base.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.db.utils import DataError
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from psycopg import _queries
from psycopg.types.json import Jsonb

from common.infra.statements import statement_cursor
from tests.stock_paths import fast_path_only

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("the bound cursor is PostgreSQL's")


def test_a_bound_cursors_statements_are_counted_and_logged_as_djangos(django_assert_num_queries):
    with django_assert_num_queries(2) as captured, statement_cursor() as cursor:
        cursor.execute("SELECT %s::int + %s", [40, 2])
        assert cursor.fetchone() == (42,)
        cursor.execute("SELECT %s || '%%'", ["50"])
        assert cursor.fetchone() == ("50%",)

    assert captured.captured_queries[0]["sql"].startswith("SELECT")


@fast_path_only
def test_a_statement_sent_again_and_again_is_prepared_once_by_postgresql():
    statement = "SELECT %s::text || ' bound ' || %s::text"
    for number in range(6):
        with statement_cursor() as cursor:
            cursor.execute(statement, ["run", str(number)])
            assert cursor.fetchone() == ("run bound " + str(number),)

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%' bound '%"])
        assert cursor.fetchone() == (1,)


def test_statements_of_many_values_keep_each_value_in_its_place():
    # Over psycopg's own limit of 50 values for its cache of converted statements, and two statements of the same
    # length: each run must bind its own values in its own order.
    count = 60
    for shift in (0, 1):
        values = [number * 10 + shift for number in range(count)]
        placeholders = " + ".join(f"%s * {position}" for position in range(count))
        with statement_cursor() as cursor:
            cursor.execute(f"SELECT ({placeholders})::bigint", values)
            assert cursor.fetchone() == (sum(value * position for position, value in enumerate(values)),)


def test_values_keep_their_types_and_the_connections_time_zone_reads_timestamps():
    moment = timezone.now()
    with statement_cursor() as cursor:
        cursor.execute("SELECT %s::timestamptz, %s::jsonb, %s, %s::text", [moment, Jsonb({"a": [1, "ã"]}), None, "ç"])
        when, document, nothing, text = cursor.fetchone()

    assert when == moment and when.tzinfo is not None and when.utcoffset() == dt.timedelta(0)
    assert document == '{"a": [1, "ã"]}'  # Django reads jsonb as text and the field decodes it
    assert (nothing, text) == (None, "ç")


def test_a_database_error_is_djangos():
    with pytest.raises(DataError), statement_cursor() as cursor:
        cursor.execute("SELECT %s::int", ["not a number"])


def test_the_default_cursor_still_quotes_values_into_the_statement():
    with CaptureQueriesContext(connection) as captured, connection.cursor() as cursor:
        cursor.execute("SELECT %s", ["quoted"])

    assert "'quoted'" in captured.captured_queries[0]["sql"]


class CountedText(str):
    """A statement's text that counts its encodings."""

    encoded = 0

    def encode(self, *args, **kwargs):
        CountedText.encoded += 1
        return super().encode(*args, **kwargs)


@fast_path_only
def test_a_statements_text_sent_again_is_neither_encoded_nor_scanned_again(monkeypatch):
    scanned = []
    scan = _queries._query2pg_nocache
    monkeypatch.setattr(_queries, "_query2pg_nocache", lambda *args: scanned.append(args) or scan(*args))
    statement = CountedText("SELECT %s::text || ' scanned once ' || %s::text")
    for number in range(3):
        with statement_cursor() as cursor:
            cursor.execute(statement, ["run", str(number)])
            assert cursor.fetchone() == ("run scanned once " + str(number),)

    assert (len(scanned), CountedText.encoded) == (1, 1)
