"""The helper that runs a test's client coroutine (tests/streaming.py)."""

import asyncio
import threading

from tests import streaming


def test_a_task_that_does_not_end_when_cancelled_is_abandoned_after_the_grace_and_named(monkeypatch, capsys):
    monkeypatch.setattr(streaming, "LEFTOVER_GRACE_SECONDS", 0.2)

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                continue  # as a library's receive stuck in its command

    async def client() -> str:
        asyncio.get_running_loop().create_task(stubborn(), name="stubborn")
        await asyncio.sleep(0)
        return "answered"

    answered: list[str] = []
    running = threading.Thread(target=lambda: answered.append(streaming.run(client())), daemon=True)
    running.start()
    running.join(60)  # a hang guard: the stubborn task is never going to end

    assert answered == ["answered"]
    err = capsys.readouterr().err
    assert "abandoned a task" in err and "name='stubborn'" in err


def test_a_task_left_running_is_cancelled_when_the_client_ends():
    cancelled = []

    async def waiting() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def client() -> str:
        asyncio.get_running_loop().create_task(waiting())
        await asyncio.sleep(0)
        return "answered"

    assert streaming.run(client()) == "answered"
    assert cancelled == [True]
