"""Helpers for tests that drive the ASGI app from their own event loop: run a client, read Server-Sent Events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a client coroutine, then close the connections its database thread opened (the test DB is dropped)."""

    async def with_cleanup() -> T:
        try:
            return await coroutine
        finally:
            await sync_to_async(connections.close_all)()

    return asyncio.run(with_cleanup())


def sse_events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """``(event, data)`` of each Server-Sent Event in ``body``, in order."""
    events = []
    for block in body.decode().strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events
