"""Schemathesis hooks of tests/test_schema_fuzz.py: every operation that takes ``start`` or ``end`` (the analytics)
is also sent the calendar's first and last days and the days around the range the analytics count, as explicit
examples. Generated dates seldom reach them, and the window's arithmetic overflowed there (a 500)."""

from __future__ import annotations

from typing import Any

import schemathesis

EDGE_DATES = ("0001-01-01", "1969-12-31", "1970-01-01", "9998-12-31", "9999-12-31")


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
