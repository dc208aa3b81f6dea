"""The suite's little HTTP servers (the scripted model, the webhook receivers, the fake Kubernetes API…), each served
by ``serve_forever`` in a daemon thread of the test's process.

``socketserver`` looks at a ``shutdown()`` between two waits on its socket, half a second each by default: a test
that stopped its server waited for it in its teardown (~0.4 s a test, some 150 tests). Here the loop looks every
20 ms, a wake-up that costs microseconds; so does the shutdown of the app served by uvicorn (``PromptUvicorn``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import socketserver
import threading

import uvicorn

POLL_SECONDS = 0.02  # how long a shutdown() waits for the serving loop, at most


def serve_in_thread(server: socketserver.BaseServer, name: str | None = None) -> threading.Thread:
    """``server`` served in a daemon thread, started; ``server.shutdown()`` returns within :data:`POLL_SECONDS`."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, name=name, daemon=True
    )
    thread.start()
    return thread


class PromptUvicorn(uvicorn.Server):
    """uvicorn's server, stopped by :meth:`stop` from another thread within milliseconds. uvicorn's serving loop looks
    for ``should_exit`` every 0.1 s, and its shutdown gives the open connections a fixed 0.1 s, then looks every 0.1 s
    for them and their tasks to be gone: some 0.16 s of each ``asgi_server`` test's teardown. Here the loop wakes when
    told, and the shutdown does as uvicorn's (the listening sockets closed, each connection asked to shut down, their
    requests and tasks awaited, the lifespan's shutdown sent) looking every :data:`POLL_SECONDS`."""

    _wake: asyncio.Event | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), 0.1)  # uvicorn's tick (the Date header, each second)
            should_exit = await self.on_tick(counter)

    def stop(self) -> None:
        """Tell the server to exit (from any thread); it wakes at once if it is serving."""
        self.should_exit = True
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed already
                self._loop.call_soon_threadsafe(self._wake.set)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        while (self.server_state.connections or self.server_state.tasks) and not self.force_exit:
            await asyncio.sleep(POLL_SECONDS)
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()
