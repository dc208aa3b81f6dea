"""CPU per message of the chat API, in one process: the figure each cut of the message path is measured by.

    PYTHONPATH=. .venv/bin/python bench/turn_cpu.py [--messages 3000] [--clients 8] [--rounds 3]
        [--path keyword|examples|goal] [--knowledge on|off] [--features on|off] [--stages [--gil] [--keep-stacks FILE]]

``bench/chat_load.py`` measures the served platform under load, but its CPU per message moves with whatever else
the two cores run (the load generator included). This runs the same request — ``POST /api/gateway/message`` with
an API key, an invoice question to ``telecom_contas``, the offline model answering at once — through the real ASGI
application (``platform.asgi``: the middleware, DRF, the graph, PostgreSQL through the pool) in this process,
``--clients`` conversations at a time, with no HTTP server and no network in between, and divides the process's
CPU time (all its threads) by the messages answered. The database is a throwaway PostgreSQL
(``scripts/services.py``); its own CPU is measured too, from /proc. Each round sends ``--messages`` messages after
a warm-up, after which the start-up heap is frozen out of the garbage collector's full passes as a served process's
is (``common.infra.heap``); the median round is reported, with the full collections that fell in the rounds.

``--path`` chooses the message path: ``keyword`` (the default, above), ``examples`` (questions to the same profile
that no keyword matches, decided by the examples tier) or ``goal`` (price questions to ``finance_assistente``, each
a plan over the finance MCP server, started here). ``--stages`` samples this process with py-spy over the measured
rounds and splits the CPU a message by pipeline stage (:mod:`bench.turn_stages`); this file's own client (the
requests built, the answers decoded and counted) is a row of its own there.

``--knowledge off`` measures the profile as one that does not use its help centre: after the seed it sets the
profile's own knowledge setting, ``retrieval``, to false and publishes the profile (``routing_publish``), as an
operator would in the admin; the documents stay. On a tree from before knowledge existed (``bench/compare.py
--bench-from-head`` against an older commit) there is nothing to switch off and the run says so. ``--features off``
goes further: every feature the profile can switch for itself is set off (``bench/chat_load.py``'s
``FEATURE_SWITCHES``: the knowledge's retrieval, the examples tier's keyword check, the running summary, people in
the loop), the profile that uses none of them; on an older tree, what it has of them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import services  # noqa: E402  (scripts/services.py: the throwaway PostgreSQL)

from bench.chat_load import (  # noqa: E402
    AGENT_ID,
    TENANT,
    TEXTS,
    _manage,
    _postmaster_pid,
    process_cpu_seconds,
)
from bench.turn_stages import sampling, self_time_report, stages_report  # noqa: E402

try:
    from common.infra.heap import heap_settle
except ImportError:  # an older tree (bench/compare.py --bench-from-head): the module before it moved to infra/
    from common.heap import heap_settle  # type: ignore[no-redef]
try:
    from bench.chat_load import FEATURES_HELP, KNOWLEDGE_HELP, switched_off
except ImportError:  # an older tree's chat_load.py (bench/compare.py --bench-from-head turn_cpu.py back to d34cf42)
    KNOWLEDGE_HELP = "off: the profile's knowledge retrieval switched off and published; on: as seeded"
    FEATURES_HELP = "off: every feature the profile switches for itself set off and published; on: as seeded"

    def switched_off(env: dict[str, str], agent_id: str, args: argparse.Namespace) -> str:
        if (ROOT / "knowledge").is_dir() and "off" in (args.knowledge, args.features):
            raise SystemExit("--knowledge/--features off: this tree's bench/chat_load.py cannot switch them (copy it)")
        return "knowledge: as seeded (this tree has no knowledge, nor the features to switch off)"


# Questions to telecom_contas that no keyword matches: the examples tier decides them (the run counts the methods).
EXAMPLE_TEXTS = (
    "Não entendi uns itens cobrados este mês",
    "O modem que comprei ainda não chegou",
    "Veio o dobro do mês passado, por quê?",
    "Me explica esses valores que vieram este mês",
)
# Price questions to finance_assistente, in goal mode: each one a plan over the finance server.
GOAL_TEXTS = ("qual o preço da PETR4?", "cotação da VALE3", "quanto está a Vale e a Petrobras?")
# Counted beside the methods: answers whose metadata shows a search of the profile's knowledge.
SEARCHED = "knowledge searched"
PATHS = {
    "keyword": (AGENT_ID, TEXTS),
    "examples": (AGENT_ID, EXAMPLE_TEXTS),
    "goal": ("finance_assistente", GOAL_TEXTS),
}


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


async def _conversation(
    app, key: str, path: str, session: str, count: int, errors: list[str], methods: Counter[str]
) -> None:
    agent_id, texts = PATHS[path]
    for n in range(count):
        body = json.dumps(
            {
                "channel": "web",
                "agent_id": agent_id,
                "payload": {"text": texts[n % len(texts)], "session_id": session, "user_id": session},
            }
        ).encode()
        status, answer = await _post(app, key, body)
        reply = json.loads(answer) if status == 200 else {}
        if not reply.get("answer"):
            errors.append(f"HTTP {status}: {answer[:200]!r}")
        metadata = reply.get("metadata") or {}
        decision = metadata.get("route_decision") or {}
        methods[str(decision.get("method") or metadata.get("method") or "-")] += 1
        methods[SEARCHED] += bool(metadata.get("knowledge"))  # the answer's metadata shows a knowledge search


async def _round(
    app, key: str, path: str, prefix: str, messages: int, clients: int, methods: Counter[str]
) -> tuple[tuple[float, float], float, list[str]]:
    errors: list[str] = []
    each = messages // clients
    began_cpu, began = os.times(), time.perf_counter()
    await asyncio.gather(
        *(_conversation(app, key, path, f"{prefix}{n:03d}", each, errors, methods) for n in range(clients))
    )
    ended = os.times()
    cpu = (ended.user - began_cpu.user, ended.system - began_cpu.system)
    return cpu, time.perf_counter() - began, errors


@contextlib.contextmanager
def _finance_server(env: dict[str, str]):
    """The demo's finance MCP server on a free port (the goal path's tools)."""
    port = services.free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mcp_servers.finance.server", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            time.sleep(0.2)
        yield {"MCP_FINANCE_PORT": str(port)}  # loopback is allowed to benchmarks (services.bench_server_env)
    finally:
        services.stop_process(server)


class _FullCollections:
    """The garbage collector's full (oldest-generation) passes, counted with their CPU (a ``gc.callbacks`` entry)."""

    def __init__(self) -> None:
        self.count, self.cpu_ms, self._began = 0, 0.0, 0.0

    def seen(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._began = time.thread_time()
        else:
            self.count += 1
            self.cpu_ms += (time.thread_time() - self._began) * 1000


def run(args: argparse.Namespace) -> int:
    methods: Counter[str] = Counter()
    full_collections = _FullCollections()
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env.update(stack.enter_context(services.scratch()))
        env.update(stack.enter_context(services.postgres()))
        env.update({**services.bench_server_env(ROOT), "OFFLINE_LLM_LATENCY_MS": "0"})
        if args.path == "goal":
            env.update(stack.enter_context(_finance_server(env)))
        _manage(env, "migrate", "--noinput")
        _manage(env, "seed_demo", *(["--sync"] if args.path == "goal" else []))
        key = _manage(env, "create_api_key", "--tenant", TENANT).strip().splitlines()[-1]
        knowledge = switched_off(env, PATHS[args.path][0], args)
        os.environ.update(env)
        postmaster = _postmaster_pid(env["DATABASE_URL"])
        stacks = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="turn-stages-"))) / "stacks.txt"

        from platform.asgi import application

        async def main() -> list[tuple[tuple[float, float], float, float, list[str]]]:
            await _round(application, key, args.path, "warm-", max(args.clients * 20, 200), args.clients, Counter())
            # As a served process does before its first request (platform/serve.py): without it, whether one of the
            # ~220 ms full collections of the start-up heap falls inside a round moves the figure by up to a tenth,
            # and where it falls shifts with any change to what the process allocates.
            heap_settle()
            gc.callbacks.append(full_collections.seen)
            rounds = []
            with sampling(stacks, gil=args.gil) if args.stages else contextlib.nullcontext():
                for number in range(args.rounds):
                    postgres_before = sum(process_cpu_seconds(postmaster).values())
                    cpu, wall, errors = await _round(
                        application, key, args.path, f"r{number}-", args.messages, args.clients, methods
                    )
                    postgres = sum(process_cpu_seconds(postmaster).values()) - postgres_before
                    rounds.append((cpu, wall, postgres, errors))
            return rounds

        import uvloop

        rounds = uvloop.run(main())
        sent = args.messages // args.clients * args.clients
        median = statistics.median(sum(cpu) * 1000 / sent for cpu, *_ in rounds)
        stage_table = stages_report(stacks, median) if args.stages else ""
        self_table = self_time_report(stacks, median) if args.stages else ""
        if args.stages and args.keep_stacks:
            args.keep_stacks.write_text(stacks.read_text())

    print(
        f"\nCPU per message, in process ({args.path} path): {args.clients} conversations at a time, "
        f"{sent} messages a round\n"
    )
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
    print(f"\nmedian server CPU per message: {median:.2f} ms")
    collected = f"{full_collections.count} ({full_collections.cpu_ms:.0f} ms)"
    print(f"full garbage collections in the measured rounds: {collected}")
    searched = methods.pop(SEARCHED, 0)
    print("decided by: " + ", ".join(f"{method} {count}" for method, count in methods.most_common()))
    print(f"{knowledge}; answers whose metadata shows a knowledge search: {searched} of {sum(methods.values())}")
    if stage_table:
        print(f"\nBy stage (py-spy samples of this process over the measured rounds, {sent} messages a round):\n")
        print(stage_table)
        print("\nThe functions that ran themselves most (the leaf frame of each sample):\n")
        print(self_table)
    failures = [error for *_, errors in rounds for error in errors]
    for error in sorted(set(failures))[:5]:
        print("error:", error)
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000, help="messages per measured round")
    parser.add_argument("--clients", type=int, default=8, help="conversations at a time")
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds (the median is reported)")
    parser.add_argument("--path", choices=sorted(PATHS), default="keyword", help="the message path measured")
    parser.add_argument(
        "--knowledge",
        choices=("on", "off"),
        default="on",
        help=KNOWLEDGE_HELP,
    )
    parser.add_argument("--features", choices=("on", "off"), default="on", help=FEATURES_HELP)
    parser.add_argument("--stages", action="store_true", help="split the CPU a message by stage (py-spy)")
    parser.add_argument("--gil", action="store_true", help="with --stages: sample only the thread holding the GIL")
    parser.add_argument("--keep-stacks", type=Path, help="with --stages: keep py-spy's collapsed stacks in this file")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
