"""Cursors no list ever gave, by list, as a client could forge them: the lists' tests (chat/tests/test_cursors.py) and
the schema fuzzer's explicit examples (tests/schema_fuzz_hooks.py) send the same ones. No Django here: the fuzzer's
hooks import this module in schemathesis' own process."""

from __future__ import annotations

import base64
import json
import uuid

FAR_FUTURE = "9999-12-31T23:59:59-12:00"  # year 10000 once in UTC
YEAR_ONE = "0001-01-01T00:00:00+14:00"  # year 0 once in UTC
SOME_ID = str(uuid.UUID(int=7))
SOME_TIME = "2026-01-01T00:00:00+00:00"


def drf(query: str) -> str:
    """A cursor as DRF's pagination writes one (the sessions list): base64 of its query string."""
    return base64.b64encode(query.encode()).decode()


def keyset(*values: object) -> str:
    """A cursor as the messages and escalations lists write one: base64url of a JSON array."""
    return base64.urlsafe_b64encode(json.dumps(list(values)).encode()).decode().rstrip("=")


SESSIONS = {
    "not base64": "!!!",
    "base64 of no query": drf("hello"),
    "a position that is no time": drf("o=0&p=garbage"),
    "reversed, a position that is no time": drf("r=1&p=zzz"),
    "a position of twenty digits": drf("p=12345678901234567890"),
    "a position with a NUL": drf("p=a%00b"),
    "a position beyond the calendar in UTC": drf(f"p={FAR_FUTURE}"),
    "a position before the calendar in UTC": drf("p=0001-01-01T00:00:00%2B14:00"),
    "a negative offset": drf("o=-5"),
}
MESSAGES = {
    "not base64": "@@@",
    "beyond the calendar in UTC": keyset(FAR_FUTURE, 1),
    "before the calendar in UTC": keyset(YEAR_ONE, 1),
    "an id beyond 64 bits": keyset(SOME_TIME, 10**30),
    "an id that is not whole": keyset(SOME_TIME, 1.5),
    "a time without a zone": keyset("2026-01-01T00:00:00", 1),
}
# The open escalations' list (priority, time, id) and another status's (time, id).
ESCALATIONS = {
    "a priority beyond 64 bits": keyset(10**30, SOME_TIME, SOME_ID),
    "beyond the calendar in UTC": keyset(3, FAR_FUTURE, SOME_ID),
    "before the calendar in UTC": keyset(3, YEAR_ONE, SOME_ID),
    "an id that is no uuid": keyset(3, SOME_TIME, "x"),
}
RETURNED_ESCALATIONS = {"beyond the calendar in UTC": keyset(FAR_FUTURE, SOME_ID)}
