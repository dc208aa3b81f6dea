"""Goal plan benchmark: a DAG of 8 steps on 3 levels over an MCP server whose every tool call takes 200 ms.

    PYTHONPATH=. .venv/bin/python bench/plan_bench.py [--runs 15] [--delay-ms 200] [--celery]

Starts an MCP server of its own (official SDK, ``mcp_servers.common``: every ``tools/call`` held ``--delay-ms``)
in a subprocess and runs one plan through ``conversations.goals.engine.plan_execute`` ``--runs`` times after two
warm-ups: three independent steps, then three that each read two of them (``${1.explanation}``…), then two that
each read two of those (one through an output key, ``${b2.result.name}``) — 3 → 3 → 2, ``max_concurrency`` 4.
The critical path is three calls (3 × 200 ms); the target is a median wall time within 1.2× of it.

In-process always; with ``REDIS_URL`` also through Celery workers (a prefork worker of 4 processes is started
here), the DAG scheduled in this process and each call a ``conversations.goal_step`` task. ``--celery`` without
``REDIS_URL`` re-runs this script inside ``scripts/services.py --scratch --redis`` (a throwaway Redis).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
LEVELS = 3  # the plan's depth: its critical path is this many calls


def serve(port: int, delay_ms: int) -> None:
    """The benchmark's MCP server: one tool, ``step(name, inputs)``, held ``delay_ms`` per call."""
    from mcp_servers.common import main, new_server

    def build(*, delay_ms: int, log_level: Any):
        server = new_server(
            "plan_bench", title="Plan benchmark", instructions="One slow tool.", delay_ms=delay_ms, log_level=log_level
        )

        def step(name: str, inputs: list[str] | None = None) -> dict[str, Any]:
            """Name the step and what it read."""
            return {"name": name, "explanation": f"{name}({', '.join(inputs or [])})"}

        server.add_tool(step)
        return server

    argv = ["--host", HOST, "--port", str(port), "--delay-ms", str(delay_ms), "--log-level", "WARNING"]
    main(build, description="plan benchmark server", port_env="PLAN_BENCH_PORT", default_port=port, argv=argv)


def server_start(delay_ms: int) -> tuple[subprocess.Popen, str]:
    from tests.mcp_processes import free_port

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), "--delay-ms", str(delay_ms)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        connection = http.client.HTTPConnection(HOST, port, timeout=1)
        try:
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return process, f"http://{HOST}:{port}/mcp"
        except OSError:
            time.sleep(0.05)
        finally:
            connection.close()
    process.kill()
    raise SystemExit("the benchmark's MCP server did not start")


def the_plan():
    from routing.goals.planner import DAG, REPORT, ExecutionPlan, ExecutionStep

    def step(id: int, name: str, *depends_on: int, key: str = "", inputs: tuple[str, ...] = ()):
        params: dict[str, Any] = {"name": name, "inputs": list(inputs)}
        return ExecutionStep(id, "bench", "step", params, tuple(depends_on), True, key or name)

    def ref(id: int) -> str:
        return f"${{{id}.explanation}}"

    return ExecutionPlan(
        DAG,
        REPORT,
        4,
        (
            step(1, "a1"),
            step(2, "a2"),
            step(3, "a3"),
            step(4, "b1", 1, 2, inputs=(ref(1), ref(2))),
            step(5, "b2", 2, 3, inputs=(ref(2), ref(3))),
            step(6, "b3", 1, 3, inputs=(ref(1), ref(3))),
            step(7, "c1", 4, 5, inputs=(ref(4), "${b2.result.name}")),
            step(8, "c2", 5, 6, inputs=(ref(5), ref(6))),
        ),
    )


def measure(executor: str, url: str, runs: int) -> list[float]:
    """Wall times (ms) of ``runs`` plans after two warm-ups; exits if a run does not succeed."""
    from agents.mcp import Endpoint, tools_list
    from conversations.goals.engine import plan_execute
    from routing.goals.planner import SUCCESS, CapabilitySpec, GoalCatalogue
    from routing.snapshot import Snapshot
    from routing.specs import ServerSpec, ToolSpec

    async def all_runs() -> list[float]:
        tools = {
            info.name: ToolSpec(info.name, "bench", info.description, info.input_schema, False, True)
            for info in await tools_list(Endpoint("bench", url, 10.0))
        }
        snapshot = Snapshot(0, 0, {}, tools, {"bench": ServerSpec("bench", url, "streamable_http", 10.0, True)})
        catalogue = GoalCatalogue({}, {"step": CapabilitySpec("bench", "step")})
        plan = the_plan()
        walls = []
        for run in range(runs + 2):
            started = time.perf_counter()
            result = await plan_execute(plan, catalogue, snapshot, executor=executor)
            wall = (time.perf_counter() - started) * 1000
            if result.status != SUCCESS:
                raise SystemExit(f"{executor} run {run}: {result.status} {result.as_dict()}")
            if run == 0:
                print(f"{executor}: c1 = {result.outputs[7].explanation}")
            if run >= 2:  # two warm-ups: sessions opened, worker processes imported and connected
                walls.append(wall)
        return walls

    return asyncio.run(all_runs())


def report(name: str, walls: list[float], critical_ms: float, total_ms: float) -> bool:
    median = statistics.median(walls)
    p90 = sorted(walls)[max(int(len(walls) * 0.9) - 1, 0)]
    ratio = median / critical_ms
    print(
        f"| {name} | {median:,.0f} ms | {p90:,.0f} ms | {min(walls):,.0f}–{max(walls):,.0f} ms "
        f"| {critical_ms:,.0f} ms | **{ratio:.2f}×** | {median / total_ms:.2f}× |"
    )
    return ratio <= 1.2


def inner(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))  # the project before bench/, whose tests/ would hide the project's tests/
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")
    import django

    django.setup()
    logging.disable(logging.INFO)  # every MCP request's log line would bury the figures
    from django.conf import settings

    server, url = server_start(args.delay_ms)
    worker = None
    try:
        results = {"in-process": measure("inprocess", url, args.runs)}
        if settings.REDIS_URL:
            from tests.celery_processes import CeleryWorkerProcess

            var_dir = Path(os.environ.get("VAR_DIR") or settings.VAR_DIR)
            worker = CeleryWorkerProcess(
                concurrency=4, log_dir=var_dir, env={**os.environ, "CELERY_SKIP_CHECKS": "1"}
            ).start()
            results["Celery (4 worker processes)"] = measure("celery", url, args.runs)
    finally:
        if worker is not None:
            worker.stop()
        server.terminate()
        server.wait(timeout=10)
    critical, total = LEVELS * args.delay_ms, 8 * args.delay_ms
    print(
        f"\nGoal plan: 8 steps on 3 levels (3 → 3 → 2), tools of {args.delay_ms} ms, max_concurrency 4, "
        f"{args.runs} runs after 2 warm-ups\n"
    )
    print("| executor | wall (median) | p90 | range | critical path | wall / critical path | wall / all 8 in a row |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    met = [report(name, walls, critical, total) for name, walls in results.items()]
    print(f"\ntarget wall ≤ 1.2 × critical path: {'met' if all(met) else 'NOT met'}")
    return 0 if all(met) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--delay-ms", type=int, default=200)
    parser.add_argument("--celery", action="store_true", help="without REDIS_URL: run inside a throwaway Redis")
    parser.add_argument("--serve", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        sys.path.insert(0, str(ROOT))
        serve(args.serve, args.delay_ms)
        return 0
    if args.celery and not os.environ.get("REDIS_URL"):
        command = [sys.executable, str(ROOT / "scripts" / "services.py"), "--scratch", "--redis", "--"]
        command += [sys.executable, __file__, *(arg for arg in sys.argv[1:] if arg != "--celery")]
        return subprocess.call(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return inner(args)


if __name__ == "__main__":
    raise SystemExit(main())
