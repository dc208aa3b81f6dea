"""A goal plan on the Celery executor with Redis down makes its calls in-process, and hands them to the broker again
when Redis returns.

The request side runs in a process of its own whose ``REDIS_URL`` is a private Redis (the Celery app reads its
broker once per process): the test stops and restarts that Redis between two plans run by the same process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
import redis

from common.tests.private_redis import PrivateRedis
from mcp_servers.common import new_server
from tests.celery_processes import PROJECT_ROOT
from tests.mcp_inline import mcp_serving

pytestmark = pytest.mark.slow

PAUSE_SECONDS = 0.5

REQUEST_SIDE = """
import asyncio, json, sys
import django
django.setup()
from agents.mcp import Endpoint, tools_list
from conversations.goals.engine import plan_execute
from routing.goals.planner import DAG, LAST, CapabilitySpec, ExecutionPlan, ExecutionStep, GoalCatalogue
from routing.snapshot import Snapshot
from routing.specs import ServerSpec, ToolSpec

async def main(url):
    listed = await tools_list(Endpoint("doubling", url, 5.0))
    tools = {tool.name: ToolSpec(tool.name, "doubling", "", tool.input_schema, False, True) for tool in listed}
    snapshot = Snapshot(0, 0, {}, tools, {"doubling": ServerSpec("doubling", url, "streamable_http", 1.0, True)})
    catalogue = GoalCatalogue({}, {"double": CapabilitySpec("doubling", "double")})
    plan = ExecutionPlan(DAG, LAST, 4, (
        ExecutionStep(1, "doubling", "double", {"n": 2}),
        ExecutionStep(2, "doubling", "double", {"n": "${1.result.n}"}, (1,)),
    ))
    for _ in sys.stdin:
        run = await plan_execute(plan, catalogue, snapshot)
        steps = {key: [out.status, out.result, out.metadata.get("status")] for key, out in run.outputs.items()}
        print(json.dumps({"status": run.status, "steps": steps}), flush=True)

asyncio.run(main(sys.argv[1]))
"""


def double(n: int) -> dict[str, Any]:
    """``n`` doubled."""
    return {"n": n * 2, "explanation": f"{n} × 2 = {n * 2}"}


def test_calls_are_made_in_process_while_redis_is_down_and_go_to_the_broker_again_when_it_returns(settings):
    server = new_server("doubling", title="Doubling", instructions="Doubles numbers.")
    server.add_tool(double)
    with mcp_serving(server) as url, PrivateRedis() as private_redis:
        env = {
            **os.environ,
            "REDIS_URL": private_redis.url,
            "SUPERVISOR_EXECUTOR": "celery",
            "REDIS_OUTAGE_PAUSE_SECONDS": str(PAUSE_SECONDS),
            "VAR_DIR": str(settings.VAR_DIR),
            "PYTHONPATH": str(PROJECT_ROOT),
        }
        request_side = subprocess.Popen(
            [sys.executable, "-c", REQUEST_SIDE, url],
            env=env,
            cwd=PROJECT_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

        def plan_run() -> dict:
            request_side.stdin.write("run\n")
            request_side.stdin.flush()
            line = request_side.stdout.readline()
            assert line, request_side.stderr.read()
            return json.loads(line)

        try:
            private_redis.stop()
            down = plan_run()
            # Both calls made here, in order, the second reading the first: not lost on a broker that is gone.
            assert down == {
                "status": "success",
                "steps": {
                    "1": ["success", {"n": 4, "explanation": "2 × 2 = 4"}, None],
                    "2": ["success", {"n": 8, "explanation": "4 × 2 = 8"}, None],
                },
            }

            private_redis.start()  # empty, and no worker listens: a call sent now waits in its queue
            time.sleep(PAUSE_SECONDS + 0.1)
            back = plan_run()
            assert redis.Redis.from_url(private_redis.url).llen("celery") >= 1  # the call went to the broker again
            assert back["status"] == "failure"
            assert back["steps"]["1"] == ["failure", None, "timeout"]  # nobody took it within the server's 1 s
            assert back["steps"]["2"][0] == "skipped"
        finally:
            request_side.stdin.close()
            request_side.wait(timeout=30)
        log = request_side.stderr.read()
        assert log.count("Redis (fan-out broker) unreachable") == 1
