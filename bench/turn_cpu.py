"""CPU per message of the chat API, in one process: the figure each cut of the message path is measured by.

    PYTHONPATH=. .venv/bin/python bench/turn_cpu.py [--messages 3000] [--clients 8] [--rounds 3]

``bench/chat_load.py`` measures the served platform under load, but its CPU per message moves with whatever else
the two cores run (the load generator included). This runs the same request — ``POST /api/gateway/message`` with
an API key, an invoice question to ``telecom_contas``, the offline model answering at once — through the real ASGI
application (``platform.asgi``: the middleware, DRF, the graph, PostgreSQL through the pool) in this process,
``--clients`` conversations at a time, with no HTTP server and no network in between, and divides the process's
CPU time (all its threads) by the messages answered. The database is a throwaway PostgreSQL
(``scripts/services.py``); its own CPU is measured too, from /proc. Each round sends ``--messages`` messages after
a warm-up; the median round is reported.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import services  # noqa: E402  (scripts/services.py: the throwaway PostgreSQL)

from bench.chat_load import AGENT_ID, TENANT, TEXTS, _manage, _postmaster_pid, process_cpu_seconds  # noqa: E402


async def _post(app, key: str, body: bytes) -> tuple[int, bytes]:
    """One request through the ASGI application, as a server would hand it over."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/gateway/message",
        "raw_path": b"/api/gateway/message",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"authorization", f"Bearer {key}".encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent = False
    status = 0
    chunks: list[bytes] = []

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)  # the client stays connected
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(chunks)


async def _conversation(app, key: str, session: str, count: int, errors: list[str]) -> None:
    for n in range(count):
        body = json.dumps(
            {
                "channel": "web",
                "agent_id": AGENT_ID,
                "payload": {"text": TEXTS[n % len(TEXTS)], "session_id": session, "user_id": session},
            }
        ).encode()
        status, answer = await _post(app, key, body)
        if status != 200 or not json.loads(answer).get("answer"):
            errors.append(f"HTTP {status}: {answer[:200]!r}")


async def _round(
    app, key: str, prefix: str, messages: int, clients: int
) -> tuple[tuple[float, float], float, list[str]]:
    errors: list[str] = []
    each = messages // clients
    began_cpu, began = os.times(), time.perf_counter()
    await asyncio.gather(*(_conversation(app, key, f"{prefix}{n:03d}", each, errors) for n in range(clients)))
    ended = os.times()
    cpu = (ended.user - began_cpu.user, ended.system - began_cpu.system)
    return cpu, time.perf_counter() - began, errors


def run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env.update(stack.enter_context(services.scratch()))
        env.update(stack.enter_context(services.postgres()))
        env.update({**services.bench_server_env(ROOT), "OFFLINE_LLM_LATENCY_MS": "0"})
        _manage(env, "migrate", "--noinput")
        _manage(env, "seed_demo")
        key = _manage(env, "create_api_key", "--tenant", TENANT).strip().splitlines()[-1]
        os.environ.update(env)
        postmaster = _postmaster_pid(env["DATABASE_URL"])

        from platform.asgi import application

        async def main() -> list[tuple[tuple[float, float], float, float, list[str]]]:
            await _round(application, key, "warm-", max(args.clients * 20, 200), args.clients)
            rounds = []
            for number in range(args.rounds):
                postgres_before = sum(process_cpu_seconds(postmaster).values())
                cpu, wall, errors = await _round(application, key, f"r{number}-", args.messages, args.clients)
                postgres = sum(process_cpu_seconds(postmaster).values()) - postgres_before
                rounds.append((cpu, wall, postgres, errors))
            return rounds

        import uvloop

        rounds = uvloop.run(main())

    sent = args.messages // args.clients * args.clients
    print(f"\nCPU per message, in process: {args.clients} conversations at a time, {sent} messages a round\n")
    print(
        "| round | server CPU per message | of which system | PostgreSQL CPU per message | msg/s (one process) "
        "| errors |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for number, ((user, system), wall, postgres, errors) in enumerate(rounds, 1):
        print(
            f"| {number} | {(user + system) * 1000 / sent:.2f} ms | {system * 1000 / sent:.2f} ms "
            f"| {postgres * 1000 / sent:.2f} ms | {sent / wall:.0f} | {len(errors)} |"
        )
    median = statistics.median(sum(cpu) * 1000 / sent for cpu, *_ in rounds)
    print(f"\nmedian server CPU per message: {median:.2f} ms")
    failures = [error for *_, errors in rounds for error in errors]
    for error in sorted(set(failures))[:5]:
        print("error:", error)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000, help="messages per measured round")
    parser.add_argument("--clients", type=int, default=8, help="conversations at a time")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds (the median is reported)")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
