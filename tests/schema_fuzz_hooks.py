"""Schemathesis hooks of tests/test_schema_fuzz.py, explicit examples where generated values seldom reach:

* every operation that takes ``start`` or ``end`` (the analytics) is also sent the calendar's first and last days
  and the days around the range the analytics count: the window's arithmetic overflowed there (a 500);
* every list that takes a ``cursor`` is also sent the one a real page of it gave (the test reads them from the served
  platform and hands them over in ``FUZZ_CURSORS``) and the forged ones of tests/forged_cursors.py: generated
  cursors are never valid base64, and forged positions and calendar edges were 500s."""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis

from tests import forged_cursors

EDGE_DATES = ("0001-01-01", "1969-12-31", "1970-01-01", "9998-12-31", "9999-12-31")
# The environment variable carrying, by operation path, a cursor a real page gave ({"cursor", "path_parameters"}).
FUZZ_CURSORS = "FUZZ_CURSORS"
# Each list's forged cursors, with the query they are sent with (the escalations of another status keep another key).
FORGED = {
    "/api/sessions": [({}, forged_cursors.SESSIONS)],
    "/api/sessions/{conversation_key}/messages": [({}, forged_cursors.MESSAGES)],
    "/api/escalations": [
        ({}, forged_cursors.ESCALATIONS),
        ({"status": "returned"}, forged_cursors.RETURNED_ESCALATIONS),
    ],
}


@schemathesis.hook
def before_add_examples(context: Any, examples: list[Any]) -> None:
    operation = context.operation
    if operation is None:
        return
    for name in ("start", "end"):
        if name in operation.query:
            examples.extend(operation.Case(query={name: day}) for day in EDGE_DATES)
    if "start" in operation.query and "end" in operation.query:
        examples.append(operation.Case(query={"start": EDGE_DATES[-1], "end": EDGE_DATES[-1]}))
    if "cursor" in operation.query:
        examples.extend(_cursor_cases(operation))


def _cursor_cases(operation: Any) -> list[Any]:
    given = json.loads(os.environ.get(FUZZ_CURSORS) or "{}").get(operation.path)
    if given is None:
        return []  # no real page to take the path's parameters from
    path = given.get("path_parameters") or None
    cases = [operation.Case(query={"cursor": given["cursor"]}, path_parameters=path)]
    for query, forged in FORGED.get(operation.path, []):
        cases += [operation.Case(query={**query, "cursor": cursor}, path_parameters=path) for cursor in forged.values()]
    return cases
