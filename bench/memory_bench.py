"""Memory per process: the resident memory of a web worker and of a Celery worker as demo messages go through.

    PYTHONPATH=. .venv/bin/python bench/memory_bench.py [--messages 10000,50000] [--clients 16]

Starts everything itself, as ``bench/chat_load.py`` does: a throwaway PostgreSQL, Redis and scratch VAR_DIR
(``scripts/services.py``), ``migrate``, ``seed_demo`` (``telecom_contas`` switched to supervisor mode and published,
so its plans' steps go to the Celery worker), a key; then the production web server with one worker (``python -m
platform.serve --workers 1``) and a Celery worker with one pool process (``celery -A platform worker --concurrency
1``), both with ``DJANGO_DEBUG=false`` and the offline model answering at once.

``--clients`` clients send the demo's messages (:data:`MESSAGES`: each demo profile's customers, the supervisor's
two-topic questions among them) through ``POST /api/gateway/message``, each client starting a new conversation
every :data:`CONVERSATION_MESSAGES` messages (the conversations and the database grow as in a day's traffic). At
each count of ``--messages`` the load pauses and the resident memory (VmRSS; and the proportional set, PSS, which
shares the pages a forked pool process has in common with its parent) is read from /proc for: the web worker, the
Celery worker's main process and its pool process. Also after the start and after the first
:data:`WARM_MESSAGES` messages.

The budget (SPEC §8): a web worker and a Celery pool process each ≤ 350 MiB resident after 10,000 messages, and
growing ≤ 5 % from 10,000 to 50,000. Exits non-zero on a failed message or a budget not met.

What a message costs, over the messages after the warm-up (the capacity model of docs/operations.md): CPU of the web
worker, the Celery worker (main and pool), PostgreSQL (every backend) and Redis, from /proc; PostgreSQL's
transactions and rows (``pg_stat_database``) and Redis's commands (``INFO commandstats``), each per message.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import services  # noqa: E402  (scripts/services.py: the throwaway PostgreSQL and Redis)

from bench.chat_load import Client, process_cpu_seconds  # noqa: E402  (its HTTP/1.1 client; CPU from /proc)

TENANT = "tenant_a"
SUPERVISOR_PROFILE = "telecom_contas"
# (profile, text): the demo's customers. telecom_contas runs in supervisor mode here: a two-topic question is a plan
# whose steps run on the Celery worker.
MESSAGES = (
    ("telecom_contas", "Minha fatura veio alta e quero contestar uma cobrança"),
    ("telecom_contas", "Meu pedido atrasou e minha fatura veio duplicada"),
    ("telecom_contas", "Quando vence a minha conta?"),
    ("retail_orders", "Onde está o meu pedido? Ele atrasou"),
    ("retail_orders", "Quero trocar um produto que veio com defeito"),
    ("telecom_contas", "Preciso da segunda via do boleto e quero cancelar o plano de internet"),
    ("finance_assistente", "Quero ver o meu saldo e o extrato do mês"),
    ("retail_orders", "My order is late, where is it?"),
    ("telecom_contas", "Mi factura llegó muy alta"),
    ("finance_assistente", "Preciso de ajuda com um pagamento"),
)
CONVERSATION_MESSAGES = 10
WARM_MESSAGES = 200
BUDGET_MIB = 350.0
GROWTH_BUDGET = 0.05


def memory_of(pid: int) -> tuple[float, float]:
    """``(rss, pss)`` of ``pid`` in MiB, from /proc."""
    rss = pss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1]) / 1024
    return rss, pss


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def postgres_counters(url: str) -> tuple[int, Counter[str]]:
    """The postmaster's pid and the database's counters (transactions and rows) from ``pg_stat_database``."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        backend = connection.execute("SELECT pg_backend_pid()").fetchone()[0]
        row = connection.execute(
            "SELECT xact_commit + xact_rollback, tup_returned, tup_fetched, tup_inserted, tup_updated, tup_deleted"
            " FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    parent = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
    names = ("transactions", "rows returned", "rows fetched", "rows inserted", "rows updated", "rows deleted")
    return parent, Counter(dict(zip(names, row, strict=True)))


def redis_counters(url: str) -> tuple[int, Counter[str]]:
    """Redis's pid and its commands so far, by name (``INFO commandstats``)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
        pid = int(client.info("server")["process_id"])
    finally:
        client.close()
    return pid, Counter({name.removeprefix("cmdstat_"): figures["calls"] for name, figures in stats.items()})


def cpu_of(pids: dict[str, int]) -> Counter[str]:
    """CPU seconds of each named process tree (the web worker, the Celery worker, PostgreSQL, Redis)."""
    return Counter({name: sum(process_cpu_seconds(pid).values()) for name, pid in pids.items()})


def _worker_answers(broker_url: str) -> bool:
    """Whether a Celery worker answers a ping over the broker (its pool is up)."""
    from celery import Celery

    pinger = Celery("memory-bench-ping", broker=broker_url)
    try:
        return bool(pinger.control.ping(timeout=1.0))
    except Exception:  # noqa: BLE001 — not up yet
        return False
    finally:
        pinger.close()


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args[:2])} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


class Load:
    """The clients: each sends the next message when the answer came, until :meth:`until` says how many in all."""

    def __init__(self, base_url: str, key: str, clients: int) -> None:
        self.base_url, self.key, self.clients = base_url, key, clients
        self.sent = 0
        self.answered = 0
        self.errors: Counter[str] = Counter()
        self.run_id = os.urandom(3).hex()

    async def until(self, total: int) -> None:
        connections = [Client(self.base_url, timeout=60) for _ in range(self.clients)]
        try:
            await asyncio.gather(*(self._client(n, connection, total) for n, connection in enumerate(connections)))
        finally:
            for connection in connections:
                connection.close()

    async def _client(self, n: int, connection: Client, total: int) -> None:
        headers = {"Authorization": f"Bearer {self.key}"}
        while self.sent < total:
            number = self.sent
            self.sent += 1
            agent_id, text = MESSAGES[number % len(MESSAGES)]
            session = f"mem-{self.run_id}-{n}-{number // (CONVERSATION_MESSAGES * self.clients)}"
            body = {"channel": "web", "agent_id": agent_id, "payload": {"text": text, "session_id": session}}
            try:
                status, _ = await connection.post("/api/gateway/message", json.dumps(body).encode(), headers)
            except Exception as exc:  # noqa: BLE001 — counted; the run fails at the end
                self.errors[type(exc).__name__] += 1
                continue
            if status == 200:
                self.answered += 1
            else:
                self.errors[f"HTTP {status}"] += 1


def run(args: argparse.Namespace) -> int:
    milestones = sorted(int(count) for count in args.messages.split(","))
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        for name in ("DATABASE_URL", "REDIS_URL"):
            env.pop(name, None)
        env.update(stack.enter_context(services.scratch()))
        env.update(stack.enter_context(services.postgres()))
        env.update(stack.enter_context(services.redis()))
        env.update(services.bench_server_env(ROOT))
        env.update(OFFLINE_LLM_LATENCY_MS="0", SUPERVISOR_EXECUTOR="celery", LOG_LEVEL="WARNING")
        # migrate, seed_demo, the supervisor profile published and a key, in one Django start.
        key = (
            _manage(
                env,
                "shell",
                "-c",
                "import io\n"
                "from django.core.management import call_command\n"
                "call_command('migrate', interactive=False, verbosity=0)\n"
                "call_command('seed_demo', stdout=io.StringIO())\n"
                "from agents.models import AgentProfile\n"
                "from common.config_version import config_version_bump\n"
                "from releases.versions import version_publish\n"
                f"AgentProfile.objects.filter(agent_id={SUPERVISOR_PROFILE!r}).update(routing_mode='supervisor')\n"
                f"version_publish(profile=AgentProfile.objects.get(agent_id={SUPERVISOR_PROFILE!r}), note='bench')\n"
                "config_version_bump()\n"
                "key = io.StringIO()\n"
                f"call_command('create_api_key', tenant={TENANT!r}, stdout=key)\n"
                "print(key.getvalue().strip().splitlines()[-1])\n",
            )
            .strip()
            .splitlines()[-1]
        )

        var = Path(env["VAR_DIR"])
        worker_log = (var / "celery.log").open("w")
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "platform", "worker", "--concurrency", "1", "--loglevel=WARNING"],
            cwd=ROOT,
            env=env,
            stdout=worker_log,
            stderr=subprocess.STDOUT,
        )
        stack.callback(services.stop_process, worker)
        port = services.free_port()
        base_url = f"http://127.0.0.1:{port}"
        server_log = var / "server.log"
        serve = ["platform.serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1", "--no-access-log"]
        with server_log.open("w") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", *serve],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        stack.callback(services.stop_process, server)
        services.wait_healthy(base_url, server, server_log, timeout=600)  # a busy machine starts slowly
        deadline = time.monotonic() + 600
        while not _worker_answers(env["REDIS_URL"]):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the Celery worker did not start:\n{(var / 'celery.log').read_text()[-3000:]}")
            time.sleep(0.5)

        def processes() -> dict[str, int]:
            web = [pid for pid in children(server.pid) if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text()]
            pool = children(worker.pid)
            return {"web worker": web[0], "Celery main": worker.pid, "Celery pool": pool[0]}

        rows: list[tuple[str, dict[str, tuple[float, float]]]] = []

        def note(label: str) -> None:
            figures = {name: memory_of(pid) for name, pid in processes().items()}
            rows.append((label, figures))
            print(
                f"{label:>16}: "
                + ", ".join(f"{name} {rss:.0f} MiB (PSS {pss:.0f})" for name, (rss, pss) in figures.items()),
                flush=True,
            )

        note("started")
        load = Load(base_url, key, args.clients)
        began = time.monotonic()
        asyncio.run(load.until(WARM_MESSAGES))
        time.sleep(2)  # the last steps' results read, the collector's passes done
        note(f"{WARM_MESSAGES:,} messages")
        postmaster, database_before = postgres_counters(env["DATABASE_URL"])
        redis_pid, redis_before = redis_counters(env["REDIS_URL"])
        parties = {"web worker": processes()["web worker"], "Celery": worker.pid, "PostgreSQL": postmaster}
        parties["Redis"] = redis_pid
        cpu_before, answered_before = cpu_of(parties), load.answered
        for count in milestones:
            asyncio.run(load.until(count))
            time.sleep(2)
            note(f"{count:,} messages")
        cpu = cpu_of(parties) - cpu_before
        database = postgres_counters(env["DATABASE_URL"])[1] - database_before
        commands = redis_counters(env["REDIS_URL"])[1] - redis_before
        measured = load.answered - answered_before
        seconds = time.monotonic() - began
        pids = processes()

    print()
    print(
        f"{load.answered:,} messages answered in {seconds:.0f} s ({load.answered / seconds:.0f} msg/s), "
        f"errors: {dict(load.errors) or 0}; web worker pid {pids['web worker']}, Celery pool pid {pids['Celery pool']}"
    )
    per = max(measured, 1)
    print(
        f"per message, over {measured:,} after the warm-up: CPU "
        + ", ".join(f"{name} {seconds * 1000 / per:.2f} ms" for name, seconds in cpu.items())
        + "; PostgreSQL "
        + ", ".join(f"{value / per:.2f} {name}" for name, value in database.items())
        + f"; Redis {sum(commands.values()) / per:.1f} commands ("
        + ", ".join(f"{name} {calls / per:.2f}" for name, calls in commands.most_common(8))
        + ")"
    )
    print("| after | web worker RSS (PSS) | Celery main RSS (PSS) | Celery pool RSS (PSS) |")
    print("| --- | ---: | ---: | ---: |")
    for label, figures in rows:
        cells = " | ".join(f"{figures[name][0]:.0f} MiB ({figures[name][1]:.0f})" for name in pids)
        print(f"| {label} | {cells} |")
    verdicts = []
    first, last = dict(rows)[f"{milestones[0]:,} messages"], dict(rows)[f"{milestones[-1]:,} messages"]
    for name in ("web worker", "Celery pool"):
        at_first, at_last = first[name][0], last[name][0]
        growth = (at_last - at_first) / at_first
        met = at_first <= BUDGET_MIB and growth <= GROWTH_BUDGET
        verdicts.append(met)
        print(
            f"{name}: {at_first:.0f} MiB at {milestones[0]:,} (budget {BUDGET_MIB:.0f}), {growth:+.1%} to "
            f"{milestones[-1]:,} (budget +{GROWTH_BUDGET:.0%}): {'met' if met else 'NOT met'}"
        )
    return 0 if all(verdicts) and not load.errors else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", default="10000,50000", help="counts at which memory is read, comma-separated")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
