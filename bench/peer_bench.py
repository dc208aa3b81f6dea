"""Our chat API against a LangGraph server serving the same flow, side by side under the same load in one run.

    PYTHONPATH=. .venv/bin/python bench/peer_bench.py [--clients 64] [--duration 20] [--warmup 5]
        [--latency-ms 0] [--rounds 3] [--workers 4] [--knowledge on|off] [--features on|off]

The peer (``bench/peer_app.py``) serves the same flow as ours — the ``telecom_contas`` keyword router, one
specialist answering from the same offline model (``agents.llm.OfflineChatModel``) with the same latency, the
conversation stored in PostgreSQL — as a LangGraph ``StateGraph`` compiled with its PostgreSQL checkpointer
(``AsyncPostgresSaver``), a Starlette route under ``uvicorn --workers N``. It runs from its own virtualenv,
``.venv-peer``, which this script creates and fills (``requirements.txt`` and ``bench/requirements-peer.txt``)
when it is missing or the requirements changed (their hash is stamped inside it, as ``scripts/bootstrap`` does
for ``.venv``).

One throwaway PostgreSQL (``scripts/services.py``) holds both: ours in its database, set up as
``bench/chat_load.py`` does (``migrate``, ``seed_demo``, ``create_api_key``), the peer's checkpoints in a
database of its own (``peer``). Both servers start once, with the same number of workers, the same access log
and the same key; then each round runs the same load (``bench/chat_load.py``'s clients: one session and one
kept-alive connection each, the next message as soon as the answer arrives) against ours, then against the
peer, each time with fresh sessions, so the machine's noise falls on both.

Reported per server, the median over rounds and each round: messages/s, p50, p99, errors, lost, server CPU and
PostgreSQL CPU per message; then ours/peer throughput per round and its median, against the target "≥ 2× its
throughput at equal p99" (read as: the median ratio ≥ ``--target`` with ours' median p99 no higher than the
peer's under the same load; at the peer's p99 ours could then only carry more). Nothing may be lost: ours' user
and assistant ``Message`` rows per conversation must equal its client's 2xx answers (as chat_load checks), the
peer's latest checkpoint of each thread must hold two messages per 2xx answer. Exits non-zero on any error or
lost message.

The peer searches no documents. ``--knowledge off`` measures ours as a profile that does not use its help centre
(``bench/turn_cpu.py`` has the same switch): the flow the peer serves; on, as the demo is seeded, two of the five
messages are answered from the help centre with a search and a citation.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bench import chat_load

services = chat_load.services  # scripts/services.py: the throwaway PostgreSQL, ports, server start and stop

ROOT = chat_load.ROOT
PEER_VENV = ROOT / ".venv-peer"
PEER_REQUIREMENTS = (ROOT / "requirements.txt", ROOT / "bench" / "requirements-peer.txt")
PEER_STAMP = ".requirements.sha256"
PEER_DATABASE = "peer"
PEER_POOL_SIZE = 5  # connections per worker, as ours (DATABASE_POOL_MAX_SIZE)
SERVERS = ("ours", "peer")


# --- the peer's virtualenv -------------------------------------------------------------------------------------


def requirements_hash(paths: Iterable[Path]) -> str:
    """sha256 of the requirement files' contents one after the other (``cat a b | sha256sum``, as bootstrap)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()


def ensure_peer_venv(venv: Path = PEER_VENV, requirements: Sequence[Path] = PEER_REQUIREMENTS) -> Path:
    """``venv``'s python, after creating the virtualenv and installing ``requirements`` into it if needed."""
    python = venv / "bin" / "python"
    stamp = venv / PEER_STAMP
    if python.exists() and subprocess.run([str(python), "-c", ""], check=False).returncode != 0:
        print(f"peer_bench: {venv.name} is broken; recreating it", file=sys.stderr)
        shutil.rmtree(venv)
    if not python.exists():
        print(f"peer_bench: creating {venv.name}", file=sys.stderr)
        # The interpreter ours runs on (this one's base), so both sides run the same Python.
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wanted = requirements_hash(requirements)
    if not stamp.exists() or stamp.read_text().strip() != wanted:
        names = " and ".join(str(path.relative_to(ROOT)) for path in requirements)
        print(f"peer_bench: installing {names} into {venv.name}", file=sys.stderr)
        command = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        for path in requirements:
            command += ["-r", str(path)]
        subprocess.run(command, check=True)
        stamp.write_text(f"{wanted}\n")
    return python


# --- one measured load -----------------------------------------------------------------------------------------


@dataclass
class Measured:
    """One round's load against one server."""

    server: str
    round: int
    duration: float
    sessions: list[str]
    latencies: list[float] = field(default_factory=list)  # seconds, answers completed in the measured window
    errors: Counter = field(default_factory=Counter)
    accepted: Counter = field(default_factory=Counter)  # session -> 2xx answers, warm-up and stragglers included
    server_processes: dict[int, float] = field(default_factory=dict)  # pid -> cores over the window
    postgres_cores: float = 0.0
    client_cores: float = 0.0
    machine_cores: float = 0.0
    trace: dict[str, list[float]] = field(default_factory=dict)  # graph node -> ms per answer
    lost: int = 0
    beyond: int = 0  # stored messages beyond the 2xx answers (a request the client gave up on)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.duration

    @property
    def p50_ms(self) -> float:
        return chat_load._percentile(self.latencies, 0.5) * 1000

    @property
    def p99_ms(self) -> float:
        return chat_load._percentile(self.latencies, 0.99) * 1000

    @property
    def server_cores(self) -> float:
        return sum(self.server_processes.values())

    @property
    def server_ms_per_message(self) -> float:
        return self.server_cores * 1000 / max(self.rate, 1e-9)

    @property
    def postgres_ms_per_message(self) -> float:
        return self.postgres_cores * 1000 / max(self.rate, 1e-9)

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


def measure(
    args: argparse.Namespace,
    server: str,
    round_: int,
    base_url: str,
    key: str,
    sessions: list[str],
    pids: tuple[int, int | None],
) -> Measured:
    """``args.clients`` clients (chat_load's load generator) against ``base_url`` for warm-up + duration, with the
    CPU of the server's process tree (``pids[0]``) and of PostgreSQL (``pids[1]``) over the measured window."""
    reports, before, after, _ = chat_load.run_load(base_url, key, sessions, args, pids)

    seconds = args.duration
    found = Measured(server=server, round=round_, duration=seconds, sessions=sessions)
    for report in reports:
        found.latencies.extend(report["latencies"])
        found.errors.update(report["errors"])
        found.accepted.update(report["accepted"])
        found.client_cores += report["cpu_seconds"] / seconds
        for node, values in report["trace"].items():
            found.trace.setdefault(node, []).extend(values)
    found.server_processes = {pid: (cpu - before[0].get(pid, 0.0)) / seconds for pid, cpu in after[0].items()}
    found.postgres_cores = (sum(after[1].values()) - sum(before[1].values())) / seconds
    found.machine_cores = (after[2][0] - before[2][0]) / seconds
    return found


# --- what was stored -------------------------------------------------------------------------------------------


def count_ours(run: Measured, stored: dict[str, Counter]) -> None:
    """Lost: per session, user and assistant ``Message`` rows short of the 2xx answers (as chat_load counts)."""
    roles = ("user", "assistant")
    run.lost = sum(
        max(0, run.accepted[session] - stored.get(session, Counter())[role])
        for session in run.sessions
        for role in roles
    )
    run.beyond = sum(
        max(0, stored[session][role] - run.accepted[session])
        for session in run.sessions
        if session in stored
        for role in roles
    )


def count_peer(run: Measured, stored: dict[str, int], conversation_key: str) -> None:
    """Lost: per thread, messages of its latest checkpoint short of two per 2xx answer."""
    held = {session: stored.get(conversation_key.format(session=session), 0) for session in run.sessions}
    run.lost = sum(max(0, 2 * run.accepted[session] - held[session]) for session in run.sessions)
    run.beyond = sum(max(0, held[session] - 2 * run.accepted[session]) for session in run.sessions)


def peer_stored(peer_python: Path, env: dict[str, str], prefix: str) -> dict[str, int]:
    """thread_id -> messages in its latest checkpoint, read with the peer's checkpointer (``peer_app count``)."""
    result = subprocess.run(
        [str(peer_python), "-m", "bench.peer_app", "count", prefix],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"bench.peer_app count failed:\n{result.stdout}{result.stderr}")
    return json.loads(result.stdout)


# --- the report ------------------------------------------------------------------------------------------------


def _ms(value: float) -> str:
    return f"{value:,.1f} ms" if value < 100 else f"{value:,.0f} ms"


def server_table(runs: Sequence[Measured]) -> list[str]:
    """One server's Markdown table: the median over the rounds, then each round."""
    lines = [
        "| round | msg/s | p50 | p99 | errors | lost | server CPU / msg | PostgreSQL CPU / msg |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]

    def row(label: str, values: Sequence[float], errors: int, lost: int) -> str:
        rate, p50, p99, server, postgres = values
        cpu = f"{server:.2f} ms | {postgres:.2f} ms"
        return f"| {label} | {rate:,.1f} | {_ms(p50)} | {_ms(p99)} | {errors} | {lost} | {cpu} |"

    figures = [
        (run.rate, run.p50_ms, run.p99_ms, run.server_ms_per_message, run.postgres_ms_per_message) for run in runs
    ]
    medians = [statistics.median(column) for column in zip(*figures, strict=True)]
    lines.append(row("**median**", medians, sum(run.error_count for run in runs), sum(run.lost for run in runs)))
    lines += [row(str(run.round), values, run.error_count, run.lost) for run, values in zip(runs, figures, strict=True)]
    return lines


def verdict(ours: Sequence[Measured], peer: Sequence[Measured], target: float) -> tuple[list[str], bool]:
    """The ours/peer ratio per round and its median, the p99s side by side, and whether the target is met."""
    lines = [
        "| round | ours msg/s | peer msg/s | ours / peer | ours p99 | peer p99 |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    ratios = []
    for mine, theirs in zip(ours, peer, strict=True):
        ratio = mine.rate / theirs.rate if theirs.rate else float("inf")
        ratios.append(ratio)
        lines.append(
            f"| {mine.round} | {mine.rate:,.1f} | {theirs.rate:,.1f} | {ratio:.2f}× | {_ms(mine.p99_ms)} "
            f"| {_ms(theirs.p99_ms)} |"
        )
    ratio = statistics.median(ratios)
    our_p99 = statistics.median(run.p99_ms for run in ours)
    their_p99 = statistics.median(run.p99_ms for run in peer)
    lines.append(f"| **median** | | | **{ratio:.2f}×** | {_ms(our_p99)} | {_ms(their_p99)} |")
    clean = not any(run.error_count or run.lost for run in (*ours, *peer))
    met = ratio >= target and our_p99 <= their_p99 and clean
    why = []
    if ratio < target:
        why.append(f"the median ratio is below {target:g}×")
    if our_p99 > their_p99:
        why.append("ours' p99 is higher than the peer's, so the throughput was not had at equal p99")
    if not clean:
        why.append("there were errors or lost messages")
    lines += [
        "",
        f"Target ≥ {target:g}× the peer's throughput at equal p99: ours {ratio:.2f}× (median of the rounds), "
        f"p99 ours {_ms(our_p99)} against the peer's {_ms(their_p99)} — "
        + ("**met**." if met else f"**NOT met** ({'; '.join(why)})."),
    ]
    return lines, met


def details(run: Measured) -> str:
    """One line per round and server: how the CPU was shared out and where the graph's time went."""
    nodes = ", ".join(f"{node} {statistics.median(values):.1f}" for node, values in run.trace.items()) or "none"
    processes = ", ".join(f"{cores:.2f}" for _, cores in sorted(run.server_processes.items()) if cores >= 0.005)
    errors = "; errors: " + ", ".join(f"{name} × {n}" for name, n in run.errors.most_common()) if run.errors else ""
    return (
        f"- round {run.round}, {run.server}: {sum(run.accepted.values())} answers accepted, {run.lost} lost, "
        f"{run.beyond} stored beyond them; server processes (cores) {processes}; PostgreSQL {run.postgres_cores:.2f}, "
        f"load generator {run.client_cores:.2f}, machine {run.machine_cores:.2f} of {os.cpu_count()} cores; "
        f"graph nodes, median ms: {nodes}{errors}"
    )


# --- orchestration ---------------------------------------------------------------------------------------------


def database_url(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` on the same server."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def create_database(url: str, name: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def start_server(
    stack: contextlib.ExitStack, command: list[str], env: dict[str, str], log: Path, port: int
) -> subprocess.Popen:
    """The server, answering ``/api/health``; stopped when ``stack`` closes (also if it never became healthy)."""
    with log.open("w") as log_file:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    stack.callback(services.stop_process, server)
    services.wait_healthy(f"http://127.0.0.1:{port}", server, log)
    return server


def run(args: argparse.Namespace) -> int:
    peer_python = ensure_peer_venv()
    access_log = [] if args.access_log else ["--no-access-log"]
    runs: dict[str, list[Measured]] = {name: [] for name in SERVERS}
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env.update(stack.enter_context(services.scratch()))
        env.update(stack.enter_context(services.postgres()))
        env.update({**services.bench_server_env(ROOT), "OFFLINE_LLM_LATENCY_MS": str(args.latency_ms)})
        if not env.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
            raise SystemExit("the benchmark needs PostgreSQL: scripts/services.py did not provide DATABASE_URL")
        chat_load._manage(env, "migrate", "--noinput")
        chat_load._manage(env, "seed_demo")
        key = chat_load._manage(env, "create_api_key", "--tenant", chat_load.TENANT).strip().splitlines()[-1]
        knowledge = chat_load.switched_off(env, chat_load.AGENT_ID, args)
        peer_url = database_url(env["DATABASE_URL"], PEER_DATABASE)
        create_database(env["DATABASE_URL"], PEER_DATABASE)
        # The peer sees neither our database nor our settings: only its own database and the model's latency.
        peer_env = {name: value for name, value in env.items() if not name.startswith(("DJANGO_", "DATABASE_"))}
        peer_env.update(
            {
                "PEER_DATABASE_URL": peer_url,
                "PEER_API_KEY": key,
                "PEER_POOL_MAX_SIZE": str(PEER_POOL_SIZE),
            }
        )

        ports = {name: services.free_port() for name in SERVERS}
        ours_command = [sys.executable, "-m", "platform.serve", "--port", str(ports["ours"])]
        peer_command = [str(peer_python), "-m", "uvicorn", "bench.peer_app:app", "--port", str(ports["peer"])]
        common = ["--host", "127.0.0.1", "--workers", str(args.workers), *access_log]
        commands = {"ours": [*ours_command, *common], "peer": [*peer_command, *common, "--no-proxy-headers"]}
        servers = {}
        for name, server_env in (("ours", env), ("peer", peer_env)):
            log = Path(env["VAR_DIR"]) / f"{name}-server.log"
            servers[name] = start_server(stack, commands[name], server_env, log, ports[name])
        postmaster = chat_load._postmaster_pid(env["DATABASE_URL"])

        prefix = f"peer-bench-{os.getpid()}-{int(time.time())}-"
        for round_ in range(1, args.rounds + 1):
            for name in SERVERS:
                sessions = [f"{prefix}{round_}-{name}-{n:04d}" for n in range(args.clients)]
                print(f"peer_bench: round {round_}, {name}", file=sys.stderr, flush=True)
                pids = (servers[name].pid, postmaster)
                runs[name].append(measure(args, name, round_, f"http://127.0.0.1:{ports[name]}", key, sessions, pids))

        for server in servers.values():
            services.stop_process(server)
        logs = {name: (Path(env["VAR_DIR"]) / f"{name}-server.log").read_text(errors="replace") for name in SERVERS}
        their_stored = peer_stored(peer_python, peer_env, f"{chat_load.TENANT}:{chat_load.AGENT_ID}:{prefix}")
        our_stored = chat_load._stored_counts(env, prefix)
    for measured in runs["ours"]:
        count_ours(measured, our_stored)
    for measured in runs["peer"]:
        count_peer(measured, their_stored, f"{chat_load.TENANT}:{chat_load.AGENT_ID}:{{session}}")

    print()
    print(
        f"Ours against a LangGraph peer: {args.clients} clients × {args.duration:g} s (after {args.warmup:g} s "
        f"warm-up) per server and round, {args.rounds} round(s), offline model {args.latency_ms} ms, "
        f"{args.workers} workers each, access log {'on' if args.access_log else 'off'}, one PostgreSQL"
    )
    print(f"ours' {knowledge}")
    print(f"ours: python {' '.join(commands['ours'][1:])}")
    print(
        f"peer: {PEER_VENV.name}/bin/python {' '.join(commands['peer'][1:])} (LangGraph StateGraph, AsyncPostgresSaver)"
    )
    for name, title in (("ours", "Ours (`platform.serve`)"), ("peer", "Peer (LangGraph + AsyncPostgresSaver)")):
        print()
        print(f"{title}:")
        print()
        print("\n".join(server_table(runs[name])))
    print()
    lines, _met = verdict(runs["ours"], runs["peer"], args.target)
    print("\n".join(lines))
    print()
    for ours_run, peer_run in zip(runs["ours"], runs["peer"], strict=True):
        print(details(ours_run))
        print(details(peer_run))
    for name, text in logs.items():
        tracebacks = text.count("Traceback (most recent call last)")
        if tracebacks:
            print(f"{name} server log: {tracebacks} traceback(s)")
    failed = any(run.error_count or run.lost for measured in runs.values() for run in measured)
    print(f"zero errors, zero lost on both sides: {'yes' if not failed else 'NO'}")
    return 1 if failed else 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients, each its own session")
    parser.add_argument("--duration", type=float, default=20, help="measured seconds per server and round")
    parser.add_argument("--warmup", type=float, default=5, help="seconds of load before each measured window")
    parser.add_argument("--latency-ms", type=int, default=0, help="the offline model's latency, both servers")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, each ours then the peer")
    parser.add_argument("--workers", type=int, default=4, help="worker processes of each server")
    parser.add_argument("--client-procs", type=int, default=1, help="load-generator processes")
    parser.add_argument("--ramp", type=float, default=1, help="seconds over which the clients start")
    parser.add_argument("--timeout", type=float, default=60, help="client timeout per request, seconds")
    parser.add_argument("--knowledge", choices=("on", "off"), default="on", help=chat_load.KNOWLEDGE_HELP)
    parser.add_argument("--features", choices=("on", "off"), default="on", help=chat_load.FEATURES_HELP)
    parser.add_argument("--target", type=float, default=2.0, help="ours / peer throughput to reach at equal p99")
    parser.add_argument(
        "--no-access-log", dest="access_log", action="store_false", help="both servers without their access log"
    )
    args = parser.parse_args(argv)
    for name in ("clients", "rounds", "workers", "client_procs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.duration <= 0 or args.warmup < 0 or args.latency_ms < 0:
        parser.error("--duration must be positive, --warmup and --latency-ms not negative")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
