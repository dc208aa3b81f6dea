"""What one crossing from the event loop to a request's thread and back costs, in this process: CPU µs a crossing
(both threads), through asgiref's ``sync_to_async`` as the message path crosses, against the bare executor under it.

    PYTHONPATH=. .venv/bin/python bench/crossing_cost.py [--calls 3000] [--blocks 12] [--context-vars 10]

A message crosses twice (``platform/tests/test_middleware.py`` counts them: DRF's checks with the turn's start, then
the turn's write). Each way is timed on the thread a request gets (``platform.middleware.RequestThread``, in the
``ThreadSensitiveContext`` Django's handler opens), with a context like a request's (the language activated, two
asgiref ``Local`` values, ``--context-vars`` variables of its own), the call itself doing nothing: what is left is the
crossing. The ways are alternated block by block and the median block reported. Beside them, what a suspension costs
a coroutine awaited through the middleware's depth (about forty frames) against one awaited through five (every
suspension of a message's turn resumes the whole chain), and what Django's handler pays for a disconnect to cancel its
request (the response and a listener for the disconnect as two tasks, ``asyncio.wait`` for the first) against an
answer awaited directly.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")

import django

django.setup()

from asgiref.local import Local  # noqa: E402
from asgiref.sync import SyncToAsync, ThreadSensitiveContext, sync_to_async  # noqa: E402
from django.utils import translation  # noqa: E402

from platform.middleware import request_threads  # noqa: E402

ASGIREF = "asgiref's sync_to_async, onto the request's thread"
BARE = "loop.run_in_executor, onto the request's thread"
PLAIN = "loop.run_in_executor, onto a plain one-thread ThreadPoolExecutor"
DEEP, SHALLOW = 40, 5  # frames between the task and the suspending coroutine
SUSPENSIONS = 5


def nothing() -> None:
    return None


async def _chain(depth: int) -> None:
    if depth:
        await _chain(depth - 1)
        return
    for _ in range(SUSPENSIONS):
        await asyncio.sleep(0)


async def _answered() -> int:
    await asyncio.sleep(0)
    return 1


async def _with_listener() -> None:
    """Django's ``ASGIHandler.handle``: the answer and the disconnect's listener raced, the listener then cancelled."""
    disconnect = asyncio.get_running_loop().create_future()
    tasks = [asyncio.create_task(_listen(disconnect)), asyncio.create_task(_answered())]
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _listen(disconnect: asyncio.Future[None]) -> None:
    await disconnect


def _cpu_us(calls: int, began: float) -> float:
    return (time.process_time() - began) / calls * 1e6


async def measure(calls: int, blocks: int, context_vars: int) -> dict[str, list[float]]:
    """CPU µs a crossing (and a chain's suspensions), per block, each way alternated with the others."""
    translation.activate("pt-br")
    locals_ = Local(), Local()
    locals_[0].value, locals_[1].value = 1, 2
    for number in range(context_vars):
        contextvars.ContextVar[int](f"request_{number}").set(number)
    loop = asyncio.get_running_loop()
    plain = ThreadPoolExecutor(max_workers=1)
    crossed = sync_to_async(nothing)
    async with ThreadSensitiveContext() as context:
        thread = request_threads.take()
        SyncToAsync.context_to_thread_executor[context] = thread  # as platform.middleware.ASGIHandler does
        ways: dict[str, Callable[[], Awaitable[object]]] = {
            ASGIREF: crossed,
            BARE: lambda: loop.run_in_executor(thread, nothing),
            PLAIN: lambda: loop.run_in_executor(plain, nothing),
            f"{SUSPENSIONS} suspensions through {DEEP} frames": lambda: _chain(DEEP),
            f"{SUSPENSIONS} suspensions through {SHALLOW} frames": lambda: _chain(SHALLOW),
            "an answer raced against a disconnect's listener (Django's handler)": _with_listener,
            "the same answer awaited directly": _answered,
        }
        figures: dict[str, list[float]] = {way: [] for way in ways}
        try:
            for _ in range(blocks):
                for way, call in ways.items():
                    began = time.process_time()
                    for _ in range(calls):
                        await call()
                    figures[way].append(_cpu_us(calls, began))
        finally:
            del SyncToAsync.context_to_thread_executor[context]
            request_threads.give_back(thread)
            plain.shutdown()
    return figures


def report(figures: dict[str, list[float]]) -> str:
    rows = ["| way | CPU a call (median block) | blocks |", "| --- | ---: | --- |"]
    for way, values in figures.items():
        spread = f"{min(values):.1f}–{max(values):.1f}"
        rows.append(f"| {way} | {statistics.median(values):.1f} µs | {len(values)} ({spread}) |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls a block")
    parser.add_argument("--blocks", type=int, default=12, help="blocks of each way, alternated")
    parser.add_argument("--context-vars", type=int, default=10, help="context variables of the request's own")
    args = parser.parse_args(argv)
    import uvloop

    figures = uvloop.run(measure(args.calls, args.blocks, args.context_vars))
    print(f"\nOne crossing and back, CPU of this process ({args.calls} calls a block):\n")
    print(report(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
