"""Helpers for tests that drive the ASGI app from their own event loop: run a client, read Server-Sent Events."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

T = TypeVar("T")


LEFTOVER_GRACE_SECONDS = 10.0


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a client coroutine, then close the connections its database thread opened (the test DB is dropped).

    As ``asyncio.run``, but the tasks left running (a consumer whose socket the test did not close, its channel
    layer's receive) are given a bounded time to end once cancelled: channels_redis's receive, cancelled in the
    middle of its Redis command on a busy machine, can take forever to end, and ``asyncio.run`` would wait for it
    (a test held until pytest-timeout's 300 s). What has not ended by then is named on stderr and abandoned."""

    async def with_cleanup() -> T:
        try:
            return await coroutine
        finally:
            await sync_to_async(connections.close_all)()

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(with_cleanup())
    finally:
        try:
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            if leftovers:
                _, stuck = loop.run_until_complete(asyncio.wait(leftovers, timeout=LEFTOVER_GRACE_SECONDS))
                for task in stuck:
                    print(
                        f"tests.streaming.run: abandoned a task that did not end when cancelled: {task!r}",
                        file=sys.stderr,
                    )
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def sse_events(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """``(event, data)`` of each Server-Sent Event in ``body``, in order."""
    events = []
    for block in body.decode().strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events
