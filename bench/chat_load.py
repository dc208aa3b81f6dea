"""Chat API load benchmark: concurrent conversations against the platform served as in production.

    PYTHONPATH=. .venv/bin/python bench/chat_load.py [--clients 200] [--duration 30] [--workers N]

Starts everything itself: a throwaway PostgreSQL and scratch VAR_DIR
(``scripts/services.py``), ``migrate``, ``seed_demo``, ``create_api_key``, then
the production server (``python -m platform.serve``, as docker-compose.yml and
the Dockerfile run it) as a subprocess, with ``DJANGO_DEBUG=false`` and the
offline model sleeping ``--latency-ms`` per call. Each of ``--clients``
clients has its own session and kept-alive connection and sends invoice
questions to ``telecom_contas`` through ``POST /api/gateway/message`` one after
another (the next when the answer arrives) for ``--warmup`` + ``--duration``
seconds; only the last ``--duration`` seconds are measured. With a model that
takes L ms the ideal is ``clients × 1000 / L`` messages/s.

Then it checks that nothing was lost: per conversation, the user and
assistant Message rows in the database must equal the client's count of 2xx
answers (warm-up and stragglers included). Exits non-zero on any error or
lost message.

CPU is measured per party, from /proc, over the measured window: the server
(each worker too, to show how evenly the connections were shared out),
PostgreSQL (postmaster and backends) and the load generator itself
(``--client-procs`` processes sharing the same cores), so its cost is visible
next to the figures. It also prints the most PostgreSQL connections open,
where the server spent the time (the graph's own ``metadata.trace``) and, per
answered message, the server's page faults and context switches over the window
(:func:`kernel_counters`: what a message costs the kernel besides its CPU, with
no sampler running). ``--profile DIR`` samples every worker with py-spy and
splits the server CPU a message by pipeline stage as ``bench/turn_cpu.py
--stages`` does in one process (:mod:`bench.turn_stages`), the two tables read
side by side.
Variants: ``--env NAME=VALUE`` (server environment), ``--workers``,
``--server uvicorn`` (stock ``uvicorn --workers``) and ``--server-arg``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import json
import multiprocessing
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import services  # noqa: E402  (scripts/services.py: the throwaway PostgreSQL)

from bench.turn_stages import self_time_report, stages_report  # noqa: E402

AGENT_ID = "telecom_contas"
TENANT = "tenant_a"
# Invoice questions that the keyword router sends to billing_agent; without a
# context no tool's required arguments are present, so no MCP server is called.
TEXTS = (
    "Minha fatura veio alta",
    "Por que a minha fatura veio com valor alto este mês?",
    "Quando vence a minha conta?",
    "Preciso da segunda via do boleto",
    "Quero contestar uma cobrança que não reconheço na fatura",
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- CPU accounting from /proc ----------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()  # fields from the 3rd on (state, ppid, ...)


def _tree(root: int) -> list[int]:
    """``root`` and all its live descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))):
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def process_cpu_seconds(root: int | None) -> dict[int, float]:
    """CPU seconds of each process of a tree; reaped children are counted in their parents."""
    if root is None:
        return {}
    found = {}
    for pid in _tree(root):
        fields = _stat_fields(pid)
        if fields:  # utime, stime, cutime, cstime are fields 14-17
            found[pid] = sum(int(value) for value in fields[11:15]) / CLOCK_TICKS
    return found


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    total = sum(values[:8])
    return (total - idle) / CLOCK_TICKS, total / CLOCK_TICKS


# --- the load generator (one or more processes) ------------------------------------


def _new_report() -> dict:
    return {
        "latencies": [],  # seconds, of the answers completed inside the measured window
        "errors": Counter(),  # every failure, warm-up included
        "accepted": Counter(),  # session -> 2xx answers, warm-up and stragglers included
        "cpu_seconds": 0.0,  # this process over the measured window
        "trace": {},  # graph node -> its ms per answer (metadata.trace)
        "outside": [],  # ms per answer outside the graph's nodes: HTTP, middleware, auth, reading the conversation
    }


class KeptConnection(asyncio.Protocol):
    """One client's kept-alive HTTP/1.1 connection: a request written whole, its response read by Content-Length
    (or in chunks), the next request on the same connection; opened again if the server closed it.

    The load generator shares the two cores with the server, so it is a protocol on the event loop and nothing
    more: httpx (one ``AsyncClient`` per client, as before) cost 0.7-0.8 ms of CPU per message, this about a
    tenth of it, so that the server is what the figures measure (docs/benchmarks.md).
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.open = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport
        self.open = True

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.waiter is not None and not self.waiter.done():
            response = self._response()
            if response is not None:
                self.waiter.set_result(response)

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc or ConnectionResetError("the server closed the connection"))

    def _response(self) -> tuple[int, bytes] | None:
        """The whole response at the head of the buffer (taken off it), or None while it is incomplete."""
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        status_line, *lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        start = end + 4
        if "content-length" in headers:
            stop = start + int(headers["content-length"])
            if len(self.buffer) < stop:
                return None
            body = bytes(self.buffer[start:stop])
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            chunks, stop = [], start
            while True:
                line_end = self.buffer.find(b"\r\n", stop)
                if line_end < 0:
                    return None
                size = int(bytes(self.buffer[stop:line_end]).split(b";")[0], 16)
                if len(self.buffer) < line_end + 2 + size + 2:
                    return None
                chunks.append(bytes(self.buffer[line_end + 2 : line_end + 2 + size]))
                stop = line_end + 2 + size + 2
                if size == 0:
                    break
            body = b"".join(chunks)
        else:
            return None  # a body until the connection closes: not what either server sends
        del self.buffer[:stop]
        if headers.get("connection", "").lower() == "close" and self.transport is not None:
            self.transport.close()
        return int(status_line.split(" ", 2)[1]), body

    async def request(self, request: bytes, timeout: float) -> tuple[int, bytes]:
        """Send ``request`` (its bytes whole) and wait for the response: ``(status, body)``."""
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        try:
            return await asyncio.wait_for(self.waiter, timeout)
        except BaseException:
            self.transport.close()  # what arrives later belongs to no request
            raise


class Client:
    """A client's requests to the server, on one :class:`KeptConnection` at a time."""

    def __init__(self, base_url: str, timeout: float) -> None:
        address = base_url.split("://", 1)[1].rstrip("/")
        self.host, _, port = address.partition(":")
        self.port = int(port or 80)
        self.timeout = timeout
        self.connection: KeptConnection | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        if self.connection is None or not self.connection.open:
            loop = asyncio.get_running_loop()
            _, self.connection = await loop.create_connection(KeptConnection, self.host, self.port)
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        request = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{head}\r\n"
        ).encode("latin-1") + body
        return await self.connection.request(request, self.timeout)

    def close(self) -> None:
        if self.connection is not None and self.connection.transport is not None:
            self.connection.transport.close()


async def _converse(client: Client, key: str, session: str, plan: dict, report: dict) -> None:
    """One client: one session, the next message as soon as the answer arrives — or, with ``plan["interval"]``
    (``--rate``), one message every that many seconds (later if the answer comes later)."""
    await asyncio.sleep(max(0.0, plan["start"] - time.time()) + random.random() * plan["ramp"])
    headers = {"Authorization": f"Bearer {key}"}
    expected_key = f"{TENANT}:{AGENT_ID}:{session}"
    sent = 0
    interval = plan.get("interval") or 0.0
    next_at = time.time()
    while time.time() < plan["stop"]:
        if interval:
            await asyncio.sleep(max(0.0, next_at - time.time()))
            next_at += interval
        body = {
            "channel": "web",
            "agent_id": AGENT_ID,
            "payload": {"text": TEXTS[sent % len(TEXTS)], "session_id": session, "user_id": session},
        }
        sent += 1
        began = time.perf_counter()
        content = b""
        try:
            status, content = await client.post("/api/gateway/message", json.dumps(body).encode(), headers)
            failure = "" if 200 <= status < 300 else f"HTTP {status}"
        except Exception as exc:  # noqa: BLE001 — every failure is counted, none stops the run
            failure = type(exc).__name__
        latency = time.perf_counter() - began
        in_window = plan["window_start"] <= time.time() <= plan["stop"]
        if not failure:
            report["accepted"][session] += 1
            try:
                answer = json.loads(content)
                if answer["conversation_key"] != expected_key or not answer["answer"]:
                    failure = "wrong answer"
                elif in_window:  # where the server spent the time, from the graph's own trace (if it sends one)
                    steps = answer.get("metadata", {}).get("trace", [])
                    for step in steps:
                        report["trace"].setdefault(step["node"], []).append(step["ms"])
                    if steps:
                        report["outside"].append(latency * 1000 - sum(step["ms"] for step in steps))
            except (ValueError, KeyError, TypeError):
                failure = "malformed answer"
        if failure:
            report["errors"][failure] += 1
        elif in_window:
            report["latencies"].append(latency)


async def _measure_own_cpu(plan: dict, report: dict) -> None:
    await asyncio.sleep(max(0.0, plan["window_start"] - time.time()))
    began = time.process_time()
    await asyncio.sleep(max(0.0, plan["stop"] - time.time()))
    report["cpu_seconds"] = time.process_time() - began


async def _load(base_url: str, key: str, sessions: list[str], plan: dict, timeout: float) -> dict:
    report = _new_report()
    # One client with one kept-alive connection per conversation, as each user has their own.
    clients = [Client(base_url, timeout) for _ in sessions]
    try:
        await asyncio.gather(
            _measure_own_cpu(plan, report),
            *(_converse(client, key, session, plan, report) for client, session in zip(clients, sessions, strict=True)),
        )
    finally:
        for client in clients:
            client.close()
    return report


def load_process(base_url: str, key: str, sessions: list[str], timeout: float, ready, go, plan_box, results) -> None:
    """A load-generator process (spawned): waits for the common start, runs its clients, sends its report."""
    import uvloop

    ready.put(os.getpid())
    go.wait()
    plan = json.loads(plan_box.value.decode())
    results.put(uvloop.run(_load(base_url, key, sessions, plan, timeout)))


# --- orchestration -------------------------------------------------------------------


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


KNOWLEDGE_HELP = (
    "off: the profile's knowledge setting `retrieval` set to false and published before the measurement (a profile "
    "that does not use its help centre); on: as the demo is seeded"
)
# The profile's knowledge setting switched off and published, through the product's own model and command; it says
# whether it was off already (a kept database's second run).
KNOWLEDGE_OFF = """
from agents.models import AgentProfile
profile = AgentProfile.objects.get(agent_id={agent_id!r})
if (profile.knowledge or {{}}).get("retrieval") is False:
    print("knowledge: already off")
else:
    profile.knowledge = {{**(profile.knowledge or {{}}), "retrieval": False}}
    profile.save(update_fields=["knowledge"])
    print("knowledge: switched")
"""


def _knowledge_switched(run: Callable[..., str], agent_id: str) -> bool:
    """Whether :data:`KNOWLEDGE_OFF` switched ``agent_id``'s retrieval off (false: it was off already)."""
    return _printed(run("shell", "-c", KNOWLEDGE_OFF.format(agent_id=agent_id)), "knowledge:") == "switched"


def knowledge_switched_off(env: dict[str, str], agent_id: str, manage: Callable[..., str] | None = None) -> str:
    """``agent_id``'s knowledge retrieval set to false and published, unless it is off already (a kept database's
    second run: nothing to publish); what the run prints about it. ``manage`` as :func:`features_switched_off`'s."""
    if not (ROOT / "knowledge").is_dir():
        return "knowledge: off (this tree has no knowledge to switch off)"
    run = manage or functools.partial(_manage, env)
    if not _knowledge_switched(run, agent_id):
        return f"knowledge: off (the profile {agent_id}'s retrieval already false; nothing published)"
    run("routing_publish", "--profile", agent_id, "--note", "bench: knowledge off")
    return f"knowledge: off (the profile {agent_id}'s retrieval set to false and published)"


FEATURES_HELP = (
    "off: every feature a profile switches for itself set off and published before the measurement — its knowledge "
    "retrieval, the examples tier's keyword check (1), the running summary of long conversations, people in the loop "
    "(escalation.enabled false) — as a profile that uses none of them is configured (implies --knowledge off); on: as "
    "the demo is seeded"
)
# Each profile setting that switches a feature of the message path, and its value for "off"; a JSON setting's value
# is the keys set over the profile's own (people in the loop: what it saves a message is in docs/benchmarks.md,
# "People in the loop, off"). A tree that lacks one (an older commit under bench/compare.py --bench-from-head) has
# nothing of it to switch.
FEATURE_SWITCHES: dict[str, Any] = {
    "examples_keyword_check": 1.0,
    "summarise_conversations": False,
    "escalation": {"enabled": False},
}
FEATURES_OFF = """
from agents.models import AgentProfile
profile = AgentProfile.objects.get(agent_id={agent_id!r})
names = {{field.name for field in AgentProfile._meta.get_fields()}}
said, already, changed = [], [], []
for name, value in {switches!r}.items():
    if name not in names:
        continue
    current = getattr(profile, name)
    if isinstance(value, dict):
        pairs = [(f"{{name}}.{{key}}={{item}}", (current or {{}}).get(key) == item) for key, item in value.items()]
        value = {{**(current or {{}}), **value}}
    else:
        pairs = [(f"{{name}}={{value}}", current == value)]
    said += [setting for setting, off in pairs if not off]
    already += [setting for setting, off in pairs if off]
    if value != current:
        setattr(profile, name, value)
        changed.append(name)
if changed:
    profile.save(update_fields=changed)
print("switched:", ",".join(said))
print("already off:", ",".join(already))
"""


# A profile without people has no conversation tests of a handover to a person (a turn that expects one): the demo's
# are set aside (disabled) with people, else they would fail and block the publish. An older tree keeps the tests in
# routing (before the releases app), or has none (before conversation tests).
HANDOVER_TESTS_OFF = """
import importlib
def hands_over(turn):
    expect = turn.get("expect") or {{}}
    return expect.get("escalated") is True or expect.get("agent") == "human"
handovers = []
for app in ("releases", "routing"):
    try:
        ConversationTest = getattr(importlib.import_module(app + ".models"), "ConversationTest", None)
    except ImportError:
        continue
    if ConversationTest is not None:
        tests = ConversationTest.objects.filter(profile__agent_id={agent_id!r}, enabled=True)
        handovers = [test.pk for test in tests if any(hands_over(turn) for turn in test.turns or ())]
        ConversationTest.objects.filter(pk__in=handovers).update(enabled=False)
        break
print(f"its {{len(handovers)}} tests of a handover to a person disabled")
"""


def _printed(output: str, label: str) -> str:
    """What a snippet printed after ``label`` (Django's shell may print its own lines around the snippet's)."""
    return next((line[len(label) :].strip() for line in output.splitlines() if line.startswith(label)), "")


def features_switched_off(env: dict[str, str], agent_id: str, manage: Callable[..., str] | None = None) -> str:
    """Every feature ``agent_id`` can switch for itself set off, those not off already, and published when one was
    (a kept database's second run finds them off and live: nothing to publish); what the run prints about it.
    ``manage``: how a management command is run (default: ``manage.py`` in ``env``), its output returned."""
    run = manage or functools.partial(_manage, env)
    knowledge, changed = "knowledge: off (this tree has no knowledge to switch off)", False
    if (ROOT / "knowledge").is_dir():
        changed = _knowledge_switched(run, agent_id)
        knowledge = f"knowledge: off (the profile {agent_id}'s retrieval {'set to' if changed else 'already'} false)"
    shell = run("shell", "-c", FEATURES_OFF.format(agent_id=agent_id, switches=FEATURE_SWITCHES))
    switched, already = _printed(shell, "switched:"), _printed(shell, "already off:")
    if not (ROOT / "knowledge").is_dir() and not switched and not already:
        return f"features: off ({knowledge}; no other switch in this tree)"
    said = [f"{switched} switched" if switched else "", f"{already} already off" if already else ""]
    if not switched and not already:
        said.append("no other switch in this tree")
    if "escalation.enabled=False" in switched.split(","):
        said.append(run("shell", "-c", HANDOVER_TESTS_OFF.format(agent_id=agent_id)).strip().splitlines()[-1])
    if changed or switched:
        run("routing_publish", "--profile", agent_id, "--note", "bench: features off")
        said.append("published")
    else:
        said.append("nothing switched, nothing published")
    return f"features: off ({knowledge}; {'; '.join(part for part in said if part)})"


def switched_off(env: dict[str, str], agent_id: str, args: argparse.Namespace) -> str:
    """What ``--features off`` or ``--knowledge off`` switch off for the run, done; the line the run prints."""
    if args.features == "off":
        return features_switched_off(env, agent_id)
    return knowledge_switched_off(env, agent_id) if args.knowledge == "off" else "knowledge: as seeded (on)"


def _postmaster_pid(database_url: str) -> int | None:
    import psycopg

    with psycopg.connect(database_url) as conn:  # its backend's parent, read while the backend is alive
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        fields = _stat_fields(backend)
    return int(fields[1]) if fields else None


def _watch_connections(database_url: str, until: float) -> int:
    """The most client connections PostgreSQL had open (this one excluded), sampled until ``until``."""
    import psycopg

    peak = 0
    with psycopg.connect(database_url, autocommit=True) as conn:
        while time.time() < until:
            count = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            ).fetchone()[0]
            peak = max(peak, count)
            time.sleep(0.25)
    return peak


def _stored_counts(env: dict[str, str], prefix: str) -> dict[str, Counter]:
    """session -> Counter(role -> Message rows), read with the ORM once the server has stopped."""
    os.environ.update(env)
    import django

    django.setup()
    from django.db.models import Count

    from conversations.models import Message

    stored: dict[str, Counter] = {}
    rows = (
        Message.objects.filter(conversation__conversation_key__startswith=f"{TENANT}:{AGENT_ID}:{prefix}")
        .values_list("conversation__session_id", "role")
        .annotate(count=Count("id"))
    )
    for session, role, count in rows:
        stored.setdefault(session, Counter())[role] = count
    return stored


def ratio_to_ideal(rate: float, clients: int, latency_ms: int) -> str:
    """The rate as a share of the ideal (every client waiting only for the model, ``clients`` × 1000 / latency per
    second); with no model latency there is no such ceiling: the platform's own overhead is what is measured."""
    if latency_ms <= 0:
        return "— (no model latency)"
    ideal = clients * 1000 / latency_ms
    return f"{rate / ideal:.0%} of {ideal:.0f}"


def _milliseconds(seconds: float) -> str:
    """A latency for the table: a tenth of a millisecond below 100 ms (a target of 5 ms is read there)."""
    return f"{seconds * 1000:.1f} ms" if seconds < 0.1 else f"{seconds * 1000:,.0f} ms"


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- where the server's time goes (py-spy, bench/requirements.txt) --------------------


def _start_profiler(args: argparse.Namespace, server_pid: int) -> subprocess.Popen | None:
    """py-spy sampling every server worker for the measured window, as collapsed stacks (``--profile DIR``)."""
    if not args.profile:
        return None
    folder = Path(args.profile)
    folder.mkdir(parents=True, exist_ok=True)
    spy = Path(sys.executable).with_name("py-spy")
    common = ["record", "--pid", str(server_pid), "--subprocesses", "--duration", str(int(args.duration))]
    common += ["--rate", "250", "--nonblocking", "--gil"]
    subprocess.Popen(  # the flame graph to look at, and the same samples as text to sum up below
        [str(spy), *common, "--format", "flamegraph", "--output", str(folder / "flamegraph.svg")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return subprocess.Popen(
        [str(spy), *common, "--format", "raw", "--output", str(folder / "stacks.txt")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


# What a message costs the kernel besides its CPU, read without a sampler: pages faulted in (minor: already in memory,
# mapped into the process; major: read from disk) and the times a thread gave up its core (voluntary: it waited for
# the network, the database, a lock) or had it taken (involuntary: preempted by another runnable thread).
KERNEL_COUNTERS = ("minor faults", "major faults", "voluntary switches", "involuntary switches")


def kernel_counters(root: int | None) -> dict[int, tuple[int, ...]]:
    """:data:`KERNEL_COUNTERS` so far of each process of a tree: the faults of every thread the process had (the
    kernel keeps those of ended threads), the switches of its live threads."""
    if root is None:
        return {}
    found = {}
    for pid in _tree(root):
        fields = _stat_fields(pid)
        switches = [0, 0]
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError):
                    for line in (task / "status").read_text().splitlines():
                        name, _, value = line.partition(":")
                        if name in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"):
                            switches[name.startswith("non")] += int(value)
        if fields:  # minflt and majflt are fields 10 and 12
            found[pid] = (int(fields[7]), int(fields[9]), *switches)
    return found


def kernel_report(before: dict[int, tuple[int, ...]], after: dict[int, tuple[int, ...]], messages: int) -> str:
    """Each counter a message, the server's processes together, then each process's (those alive at both reads)."""
    rows = {pid: [b - a for a, b in zip(before[pid], after[pid], strict=True)] for pid in after if pid in before}
    whole = [sum(row[n] for row in rows.values()) for n in range(len(KERNEL_COUNTERS))]
    each = max(messages, 1)
    text = "kernel, per answered message: " + ", ".join(
        f"{name} {count / each:.1f}" for name, count in zip(KERNEL_COUNTERS, whole, strict=True)
    )
    return (
        text
        + "; by process ("
        + ", ".join(KERNEL_COUNTERS)
        + "): "
        + "; ".join("/".join(f"{count / each:.2f}" for count in row) for _, row in sorted(rows.items()) if any(row))
    )


def _frame_name(frame: str) -> str:
    """``function (path/to/module.py:line)`` -> ``module.py:function``, lines merged."""
    name, _, where = frame.partition(" (")
    return f"{where.split(':')[0].rsplit('/', 1)[-1]}:{name}" if where else name


def print_profile(folder: Path, ms_per_message: float, top: int = 25) -> None:
    """The functions holding the GIL most often, inclusive and by themselves, from py-spy's collapsed stacks, and the
    server CPU a message by pipeline stage (:mod:`bench.turn_stages`: each stage's share of the samples, of every
    worker together, times the CPU a message measured from /proc)."""
    stacks = folder / "stacks.txt"
    if not stacks.exists():
        print(f"profile: py-spy wrote no {stacks}")
        return
    inclusive: Counter = Counter()
    own: Counter = Counter()
    total = 0
    for line in stacks.read_text().splitlines():
        path, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = [_frame_name(frame) for frame in path.split(";")[1:]]  # the first is the process
        total += int(count)
        for name in set(frames):
            inclusive[name] += int(count)
        if frames:
            own[frames[-1]] += int(count)
    print(f"profile: {total} samples holding the GIL, flame graph in {folder / 'flamegraph.svg'}")
    for title, counter in (("inclusive", inclusive), ("own", own)):
        print(f"  {title}: " + "; ".join(f"{name} {count / total:.1%}" for name, count in counter.most_common(top)))
    print(stages_report(stacks, ms_per_message))
    print(self_time_report(stacks, ms_per_message, top=top))


def cpu_snapshot(watched: tuple[int | None, int | None]) -> tuple[dict[int, float], dict[int, float], tuple]:
    """CPU seconds so far of the server's processes, of PostgreSQL's, and (busy, total) of the whole machine."""
    server_pid, postmaster = watched
    return process_cpu_seconds(server_pid), process_cpu_seconds(postmaster), machine_busy_seconds()


def run_load(
    base_url: str,
    key: str,
    sessions: list[str],
    args: argparse.Namespace,
    watched: tuple[int | None, int | None],
    during: Callable[[float], Any] | None = None,
) -> tuple[list[dict], tuple, tuple, Any]:
    """``sessions`` as clients against ``base_url`` for ``args.warmup`` + ``args.duration`` seconds, in
    ``args.client_procs`` load-generator processes. Returns their reports, :func:`cpu_snapshot` of ``watched``
    (server pid, postmaster pid) at the start and the end of the measured window, and what ``during(stop)`` —
    called when the window opens, to return by ``stop`` — returned."""
    spawn = multiprocessing.get_context("spawn")
    ready, results, go = spawn.Queue(), spawn.Queue(), spawn.Event()
    plan_box: Any = spawn.Array("c", 256)
    loaders = [
        spawn.Process(
            target=load_process,
            args=(base_url, key, sessions[n :: args.client_procs], args.timeout, ready, go, plan_box, results),
        )
        for n in range(args.client_procs)
    ]
    for loader in loaders:
        loader.start()
    for _ in loaders:
        ready.get(timeout=60)
    start = time.time() + 0.5
    plan = {
        "interval": len(sessions) / args.rate if getattr(args, "rate", None) else 0.0,
        "start": start,
        "ramp": args.ramp,
        "window_start": start + args.warmup,
        "stop": start + args.warmup + args.duration,
    }
    plan_box.value = json.dumps(plan).encode()
    go.set()

    time.sleep(max(0.0, plan["window_start"] - time.time()))
    before = cpu_snapshot(watched)
    found = during(plan["stop"]) if during else time.sleep(max(0.0, plan["stop"] - time.time()))
    after = cpu_snapshot(watched)
    reports = [results.get(timeout=args.timeout + 30) for _ in loaders]
    for loader in loaders:
        loader.join()
    return reports, before, after, found


def run(args: argparse.Namespace) -> int:
    """Set up the database once, then one measured run, or ``--tracing side-by-side``: off, on, off, on ... each
    with a fresh server; exits non-zero when any run had errors or lost messages."""
    overrides = dict(item.split("=", 1) for item in args.env)
    modes = [False, True] * args.pairs if args.tracing == "side-by-side" else [args.tracing == "on"]
    rates: dict[bool, list[float]] = {False: [], True: []}
    failed = 0
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env.update(stack.enter_context(services.scratch()))
        env.update(stack.enter_context(services.postgres()))
        env.update(
            {
                **services.bench_server_env(ROOT),
                "OFFLINE_LLM_LATENCY_MS": str(args.latency_ms),
            }
        )
        env.update(overrides)
        if not env.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
            raise SystemExit("the benchmark needs PostgreSQL: scripts/services.py did not provide DATABASE_URL")
        _manage(env, "migrate", "--noinput")
        _manage(env, "seed_demo")
        key = _manage(env, "create_api_key", "--tenant", TENANT).strip().splitlines()[-1]
        print(switched_off(env, AGENT_ID, args))

        for number, traced in enumerate(modes, 1):
            if len(modes) > 1:
                print(f"\n## run {number} of {len(modes)}: tracing {'on' if traced else 'off'}")
            code, rate = run_once(args, env, key, overrides, traced=traced)
            failed |= code
            rates[traced].append(rate)
    if len(modes) > 1:
        print_side_by_side(modes, rates)
    return failed


def print_side_by_side(modes: list[bool], rates: dict[bool, list[float]]) -> None:
    """Each run's msg/s in order, each pair's ratio (on / off) and the medians' ratio."""
    off, on = rates[False], rates[True]
    print()
    print("| pair | off msg/s | on msg/s | on / off |")
    print("| ---: | ---: | ---: | ---: |")
    for pair, (plain, traced) in enumerate(zip(off, on, strict=True), 1):
        print(f"| {pair} | {plain:.1f} | {traced:.1f} | {traced / max(plain, 1e-9):.3f} |")
    median_off, median_on = statistics.median(off), statistics.median(on)
    print(
        f"| median | {median_off:.1f} | {median_on:.1f} | {median_on / max(median_off, 1e-9):.3f} |\n"
        f"tracing on costs {1 - median_on / max(median_off, 1e-9):.1%} of the median throughput "
        f"({len(modes)} runs, alternating)"
    )


def start_sink(env: dict[str, str], stack: contextlib.ExitStack) -> tuple[dict[str, str], Path, int]:
    """The OTLP/HTTP sink (bench/otlp_sink.py) as a process of its own; the server environment that exports to it,
    the file where it writes how many spans it received when it stops, and its pid (what it costs is measured)."""
    port = services.free_port()
    count_file = Path(env["VAR_DIR"]) / f"spans-{port}.txt"
    sink = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "otlp_sink.py"), "--port", str(port), "--count-file", str(count_file)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    stack.callback(services.stop_process, sink)
    deadline = time.monotonic() + 30
    while not _listening(port):
        if sink.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the OTLP sink did not start")
        time.sleep(0.05)
    tracing_env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}", "OTEL_SERVICE_NAME": "chat-load"}
    return tracing_env, count_file, sink.pid


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def run_once(
    args: argparse.Namespace, env: dict[str, str], key: str, overrides: dict[str, str], *, traced: bool
) -> tuple[int, float]:
    """One server (exporting traces to a fresh sink when ``traced``), one load; prints the report, returns
    (exit code, msg/s)."""
    with contextlib.ExitStack() as stack:
        env = dict(env)
        sink_pid = None
        if traced:
            tracing_env, count_file, sink_pid = start_sink(env, stack)
            env.update(tracing_env)
        port = services.free_port()
        base_url = f"http://127.0.0.1:{port}"
        if args.server == "serve":
            command = ["platform.serve", "--host", "127.0.0.1", "--port", str(port)]
        else:  # stock uvicorn workers sharing one socket, for comparison
            command = ["uvicorn", "platform.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
        command += ["--workers", str(args.workers), *args.server_arg]
        log = Path(env["VAR_DIR"]) / "server.log"
        with log.open("w") as log_file:
            server = subprocess.Popen(
                [sys.executable, "-m", *command], cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT
            )
        stack.callback(services.stop_process, server)
        services.wait_healthy(base_url, server, log)
        postmaster = _postmaster_pid(env["DATABASE_URL"])

        prefix = f"bench-{os.getpid()}-{int(time.time())}-"
        sessions = [f"{prefix}{n:04d}" for n in range(args.clients)]

        def during(stop: float) -> tuple[int, tuple[dict, dict]]:
            kernel_before = kernel_counters(server.pid)
            profiler = _start_profiler(args, server.pid)
            peak = _watch_connections(env["DATABASE_URL"], stop)
            kernel_after = kernel_counters(server.pid)
            if profiler is not None:
                profiler.wait(timeout=120)
            return peak, (kernel_before, kernel_after)

        reports, before, after, (peak_connections, kernel) = run_load(
            base_url, key, sessions, args, (server.pid, postmaster), during=during
        )
        services.stop_process(server)
        server_log = log.read_text(errors="replace")
        stored = _stored_counts(env, prefix)
        sink_cpu = sum(process_cpu_seconds(sink_pid).values())  # warm-up and window: every span it received

        stack.close()  # the sink stops: it writes its count
        spans = int(count_file.read_text()) if traced and count_file.exists() else None
    latencies = [value for report in reports for value in report["latencies"]]
    errors = sum((report["errors"] for report in reports), Counter())
    accepted = sum((report["accepted"] for report in reports), Counter())
    lost = sum(
        max(0, accepted[session] - stored.get(session, Counter())[role])
        for session in sessions
        for role in ("user", "assistant")
    )
    unanswered = sum(  # rows for messages the client never saw accepted (it timed out, say)
        max(0, stored[session][role] - accepted[session]) for session in stored for role in ("user", "assistant")
    )
    rate = len(latencies) / args.duration
    seconds = args.duration
    # Per server process (the workers show whether the connections were shared out evenly).
    server_processes = {pid: (cpu - before[0].get(pid, 0.0)) / seconds for pid, cpu in after[0].items()}
    server_cores = sum(server_processes.values())
    postgres_cores = (sum(after[1].values()) - sum(before[1].values())) / seconds
    client_cores = sum(report["cpu_seconds"] for report in reports) / seconds
    machine_cores = (after[2][0] - before[2][0]) / seconds
    # The last line of each traceback in the server log names the exception.
    lines = server_log.splitlines()
    server_errors = Counter(
        line[:200] for before, line in itertools.pairwise(lines) if before.startswith("  ") and line[:1] not in " "
    )

    print()
    print(
        f"Chat API load: {args.clients} clients × {args.duration:.0f} s (after {args.warmup:.0f} s warm-up), "
        f"offline model {args.latency_ms} ms, PostgreSQL, {args.client_procs} load-generator process(es)"
        + (f", {args.rate:g} msg/s offered at a steady pace" if args.rate else "")
    )
    print(f"server: {' '.join(command)}")
    if overrides:
        print(f"server environment: {' '.join(f'{k}={v}' for k, v in overrides.items())}")
    print()
    print(
        "| msg/s | ratio to ideal | p50 | p99 | errors | accepted | lost | server CPU | PostgreSQL CPU | load-gen CPU |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| {rate:.1f} | {ratio_to_ideal(rate, args.clients, args.latency_ms)} "
        f"| {_milliseconds(_percentile(latencies, 0.5))} "
        f"| {_milliseconds(_percentile(latencies, 0.99))} | {sum(errors.values())} | {sum(accepted.values())} "
        f"| {lost} | {server_cores:.2f} cores | {postgres_cores:.2f} cores | {client_cores:.2f} cores |"
    )
    print()
    print(
        f"CPU per answered message: server {server_cores * 1000 / max(rate, 1e-9):.1f} ms, "
        f"PostgreSQL {postgres_cores * 1000 / max(rate, 1e-9):.1f} ms, "
        f"load generator {client_cores * 1000 / max(rate, 1e-9):.1f} ms"
    )
    print(
        "server processes (cores): "
        + ", ".join(f"{cores:.2f}" for _, cores in sorted(server_processes.items()) if cores >= 0.005)
    )
    print(
        f"machine: {machine_cores:.2f} of {os.cpu_count()} cores busy in the window "
        f"({max(0.0, machine_cores - server_cores - postgres_cores - client_cores):.2f} by other processes); "
        f"latency mean {statistics.fmean(latencies) * 1000 if latencies else float('nan'):,.0f} ms, "
        f"max {max(latencies, default=float('nan')) * 1000:,.0f} ms; "
        f"{len(stored)} conversations stored, {unanswered} rows beyond the 2xx answers; "
        f"at most {peak_connections} PostgreSQL connections open"
    )
    if errors:
        print("errors:", ", ".join(f"{name} × {count}" for name, count in errors.most_common()))
    trace: dict[str, list[float]] = {}
    for report in reports:
        for node, values in report["trace"].items():
            trace.setdefault(node, []).extend(values)
    outside = [ms for report in reports for ms in report["outside"]]
    print(
        "graph nodes, median (p99) ms: "
        + ", ".join(
            f"{node} {statistics.median(values):.1f} ({_percentile(values, 0.99):.1f})"
            for node, values in trace.items()
        )
        + "; outside the graph's nodes (HTTP, middleware, auth, validation, reading the conversation), per answer: "
        f"median {_percentile(outside, 0.5):.1f} ms, p99 {_percentile(outside, 0.99):.1f} ms"
    )
    kernel_before, kernel_after = kernel
    print(kernel_report(kernel_before, kernel_after, len(latencies)))
    if args.profile:
        print_profile(Path(args.profile), server_cores * 1000 / max(rate, 1e-9))
    for line, count in server_errors.most_common(5):
        print(f"server log: {count} × {line}")
    if args.latency_ms > 0:
        verdict = rate / (args.clients * 1000 / args.latency_ms) >= args.target
        print(
            f"target ≥ {args.target:.0%} of ideal, zero errors, zero lost: "
            f"{'met' if verdict and not errors and not lost else 'NOT met'}"
        )
    else:  # the platform's overhead alone: the rate and the latencies above are the figures
        print(f"zero errors, zero lost: {'met' if not errors and not lost else 'NOT met'}")
    if spans is not None:
        answered = sum(accepted.values())
        print(
            f"traces: {spans} spans exported to the OTLP sink, {spans / max(answered, 1):.1f} per answered message; "
            f"the sink (on the same cores) decoded them in {sink_cpu:.1f} s of CPU, "
            f"{sink_cpu * 1e6 / max(spans, 1):.1f} µs a span"
        )
    return (1 if errors or lost else 0), rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200, help="concurrent clients, each its own session")
    parser.add_argument("--duration", type=float, default=30, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=5, help="seconds of load before the measured window")
    parser.add_argument("--latency-ms", type=int, default=1000, help="OFFLINE_LLM_LATENCY_MS of the server")
    parser.add_argument(
        "--workers", type=int, default=2 * (os.cpu_count() or 1), help="server worker processes (as platform.serve)"
    )
    parser.add_argument(
        "--server", choices=("serve", "uvicorn"), default="serve", help="platform.serve, or stock uvicorn --workers"
    )
    parser.add_argument("--client-procs", type=int, default=1, help="load-generator processes")
    parser.add_argument("--ramp", type=float, default=1, help="seconds over which the clients start")
    parser.add_argument(
        "--rate",
        type=float,
        help="messages/s the clients send together, each at a steady pace (latency without queueing); "
        "default: each sends its next message as soon as the answer arrives",
    )
    parser.add_argument("--timeout", type=float, default=60, help="client timeout per request, seconds")
    parser.add_argument("--target", type=float, default=0.75, help="share of the ideal rate to meet")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="server environment (variants)"
    )
    parser.add_argument("--server-arg", action="append", default=[], help="extra server option (variants)")
    parser.add_argument(
        "--tracing",
        choices=("off", "on", "side-by-side"),
        default="off",
        help="on: the server exports traces over OTLP/HTTP to a local sink (bench/otlp_sink.py); side-by-side: "
        "--pairs runs off and on, alternating, and their msg/s compared",
    )
    parser.add_argument("--pairs", type=int, default=3, help="side-by-side: how many (off, on) pairs")
    parser.add_argument("--knowledge", choices=("on", "off"), default="on", help=KNOWLEDGE_HELP)
    parser.add_argument("--features", choices=("on", "off"), default="on", help=FEATURES_HELP)
    parser.add_argument(
        "--profile", metavar="DIR", help="sample the server with py-spy over the window: flame graph and a summary"
    )
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
