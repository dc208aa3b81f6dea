"""``PromptUvicorn`` (tests/served.py) stops as uvicorn's server does: a request in flight when it is told to stop is
answered in full before the server's thread ends, and no new connection is taken after."""

from __future__ import annotations

import asyncio
import socket
import threading

import httpx
import pytest
import uvicorn

from tests.served import PromptUvicorn


def test_a_request_in_flight_when_the_server_is_stopped_is_answered_before_it_ends_and_no_connection_is_taken_after():
    arrived, release = threading.Event(), threading.Event()

    async def app(scope, receive, send):
        assert scope["type"] == "http"
        arrived.set()
        while not release.is_set():  # the stop is asked while the request is being served
            await asyncio.sleep(0.005)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"answered"})

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # a connection made before the server's loop starts waits in the backlog, never refused
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    server = PromptUvicorn(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    serving.start()
    answers: list[httpx.Response] = []
    asking = threading.Thread(target=lambda: answers.append(httpx.get(url, timeout=30)), daemon=True)
    asking.start()
    assert arrived.wait(30)

    server.stop()
    serving.join(0.5)
    assert serving.is_alive()  # waiting for the request's answer
    release.set()
    serving.join(30)
    asking.join(30)

    assert not serving.is_alive()
    assert [(answer.status_code, answer.text) for answer in answers] == [(200, "answered")]
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=5)
    sock.close()
