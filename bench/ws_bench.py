"""WebSocket benchmark: idle sockets held open while clients stream answers, against the production server.

    PYTHONPATH=. .venv/bin/python bench/ws_bench.py [--idle 500] [--streaming 50] [--turns 5] [--latency-ms 1000]

Starts everything itself: a throwaway PostgreSQL, Redis (the channel layer) and scratch VAR_DIR
(``scripts/services.py``), ``migrate``, ``seed_demo``, ``create_api_key``, then the production server
(``python -m platform.serve``, ``DJANGO_DEBUG=false``) with the offline model sleeping ``--latency-ms`` per
call, so an answer streams word by word over about that long.

First ``--idle`` sockets connect to ``/ws/chat/telecom_contas/<session>/`` with the tenant's key and stay
open, silent, for the whole run. Then ``--streaming`` clients, each on its own socket and session, send
``--turns`` invoice questions one after another (the next when ``done`` arrives). Per turn the client
measures, from sending its frame: the first event (``route``), the first ``token``, the last ``token``
and ``done``; it checks that the tokens add up to the streamed answer. At the end every idle socket must
still be open (a ping answered) and nothing may have failed. The server's memory (the RSS of the
supervisor and its workers, from /proc) is sampled before the idle sockets, with them, and at the
streaming peak. Exits non-zero on any error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import services  # noqa: E402  (scripts/services.py)
from chat_load import _manage, _percentile, _tree  # noqa: E402

AGENT_ID = "telecom_contas"
TENANT = "tenant_a"
TEXTS = (
    "Minha fatura veio alta",
    "Quando vence a minha conta?",
    "Preciso da segunda via do boleto",
    "Por que a minha fatura veio com valor alto este mês?",
    "Quero contestar uma cobrança que não reconheço na fatura",
)


def rss_mib(root: int) -> float:
    """Resident memory of ``root`` and its descendants, MiB."""
    total = 0
    for pid in _tree(root):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


async def _open(url: str, key: str):
    import websockets

    return await websockets.connect(url, additional_headers={"Authorization": f"Bearer {key}"}, max_size=None)


async def _idle(ws_base: str, key: str, count: int, errors: list[str]) -> list:
    sockets = []
    for start in range(0, count, 50):  # in waves, as clients arrive
        batch = [
            _open(f"{ws_base}/ws/chat/{AGENT_ID}/idle-{n:04d}/", key) for n in range(start, min(count, start + 50))
        ]
        for result in await asyncio.gather(*batch, return_exceptions=True):
            if isinstance(result, BaseException):
                errors.append(f"idle connect: {type(result).__name__}: {result}")
            else:
                sockets.append(result)
    return sockets


async def _stream(ws_base: str, key: str, n: int, turns: int, timings: dict, errors: list[str]) -> None:
    try:
        ws = await _open(f"{ws_base}/ws/chat/{AGENT_ID}/stream-{n:04d}/", key)
    except Exception as exc:  # noqa: BLE001 — counted, the run goes on
        errors.append(f"stream connect: {type(exc).__name__}: {exc}")
        return
    async with ws:
        for turn in range(turns):
            sent = time.perf_counter()
            await ws.send(json.dumps({"text": TEXTS[(n + turn) % len(TEXTS)]}))
            first = first_token = last_token = None
            tokens: list[str] = []
            while True:
                try:
                    event = json.loads(await asyncio.wait_for(ws.recv(), timeout=60))
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"stream {n} turn {turn}: {type(exc).__name__}: {exc}")
                    return
                now = time.perf_counter()
                first = first or now
                if event["type"] == "token":
                    first_token = first_token or now
                    last_token = now
                    tokens.append(event["text"])
                elif event["type"] == "error":
                    errors.append(f"stream {n} turn {turn}: {event.get('error')}")
                    return
                elif event["type"] == "done":
                    break
            if not tokens or "".join(tokens).strip() != event["answer"].strip():
                errors.append(f"stream {n} turn {turn}: the tokens do not add up to the answer")
            timings["first_event"].append((first - sent) * 1000)
            timings["first_token"].append(((first_token or now) - sent) * 1000)
            timings["last_token"].append(((last_token or now) - sent) * 1000)
            timings["done"].append((now - sent) * 1000)


async def _still_open(sockets: list, errors: list[str]) -> int:
    async def alive(ws) -> bool:
        try:
            await asyncio.wait_for(await ws.ping(), timeout=10)
            return True
        except Exception as exc:  # noqa: BLE001
            errors.append(f"idle socket closed: {type(exc).__name__}: {exc} (close code {ws.close_code})")
            return False

    return sum(await asyncio.gather(*(alive(ws) for ws in sockets)))


async def _run(args, base: str, key: str, server_pid: int) -> dict:
    ws_base = base.replace("http://", "ws://")
    errors: list[str] = []
    memory = {"before": rss_mib(server_pid)}
    idle = await _idle(ws_base, key, args.idle, errors)
    await asyncio.sleep(2)
    memory["idle_open"] = rss_mib(server_pid)
    timings: dict[str, list[float]] = {"first_event": [], "first_token": [], "last_token": [], "done": []}
    peak = {"rss": 0.0}

    async def sample() -> None:
        while True:
            peak["rss"] = max(peak["rss"], rss_mib(server_pid))
            await asyncio.sleep(0.25)

    sampler = asyncio.create_task(sample())
    started = time.perf_counter()
    await asyncio.gather(*(_stream(ws_base, key, n, args.turns, timings, errors) for n in range(args.streaming)))
    elapsed = time.perf_counter() - started
    sampler.cancel()
    memory["streaming_peak"] = peak["rss"]
    open_at_end = await _still_open(idle, errors)
    for ws in idle:
        with contextlib.suppress(Exception):
            await ws.close()
    return {
        "errors": errors,
        "timings": timings,
        "memory": memory,
        "idle_connected": len(idle),
        "idle_open_at_end": open_at_end,
        "elapsed": elapsed,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=int, default=500)
    parser.add_argument("--streaming", type=int, default=50)
    parser.add_argument("--turns", type=int, default=5, help="Questions each streaming client asks in a row.")
    parser.add_argument("--latency-ms", type=int, default=1000, help="OFFLINE_LLM_LATENCY_MS of the server.")
    parser.add_argument("--workers", type=int, default=None, help="Server workers (default: platform.serve's).")
    parser.add_argument("--server-log", help="Keep the server's log in this file.")
    args = parser.parse_args(argv)

    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env.update(stack.enter_context(services.scratch()))
        env.update(stack.enter_context(services.postgres()))
        env.update(stack.enter_context(services.redis()))
        env.update(
            {
                **services.bench_server_env(ROOT),
                "OFFLINE_LLM_LATENCY_MS": str(args.latency_ms),
            }
        )
        _manage(env, "migrate", "--noinput")
        _manage(env, "seed_demo")
        key = _manage(env, "create_api_key", "--tenant", TENANT).strip().splitlines()[-1]
        port = services.free_port()
        base = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "platform.serve", "--host", "127.0.0.1", "--port", str(port)]
        command += ["--no-access-log"] + (["--workers", str(args.workers)] if args.workers else [])
        log = Path(env["VAR_DIR"]) / "server.log"
        with log.open("w") as log_file:
            server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
        stack.callback(services.stop_process, server)
        services.wait_healthy(base, server, log)
        workers = len(_tree(server.pid)) - 1
        result = asyncio.run(_run(args, base, key, server.pid))
        services.stop_process(server)
        server_log = log.read_text(errors="replace")
        complaints = [line for line in server_log.splitlines() if "ERROR" in line or "WARNING" in line]
        if args.server_log:
            Path(args.server_log).write_text(server_log)

    timings, memory = result["timings"], result["memory"]
    turns = len(timings["done"])
    print(
        f"\n{result['idle_connected']} idle sockets ({result['idle_open_at_end']} still open at the end) + "
        f"{args.streaming} streaming clients × {args.turns} turns, OFFLINE_LLM_LATENCY_MS={args.latency_ms}, "
        f"{workers} server workers, {os.cpu_count()} cores"
    )
    print(f"turns answered: {turns} of {args.streaming * args.turns} in {result['elapsed']:.1f} s")
    print("ms from sending the frame   median     p95     max")
    for name, label in (
        ("first_event", "first event (route)"),
        ("first_token", "first token"),
        ("last_token", "last token"),
        ("done", "done"),
    ):
        values = timings[name]
        if values:
            print(f"  {label:<24} {statistics.median(values):7.0f} {_percentile(values, 0.95):7.0f} {max(values):7.0f}")
    print(
        f"server memory (RSS, all workers): {memory['before']:.0f} MiB before, {memory['idle_open']:.0f} MiB with "
        f"the idle sockets open, {memory['streaming_peak']:.0f} MiB at the streaming peak"
    )
    print(f"errors: {len(result['errors'])}")
    for error in result["errors"][:20]:
        print(f"  {error}")
    print(f"server log warnings and errors: {len(complaints)}")
    for line in complaints[:20]:
        print(f"  {line}")
    failed = result["errors"] or result["idle_open_at_end"] != args.idle or turns != args.streaming * args.turns
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
