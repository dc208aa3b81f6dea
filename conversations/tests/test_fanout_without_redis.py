"""A supervisor plan with Redis down runs in-process, and goes back to the broker when Redis returns.

The web side runs in a process of its own whose ``REDIS_URL`` is a private Redis (the Celery app reads its broker
once per process): the test stops and restarts that Redis between two messages to the same running process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import redis

from common.tests.private_redis import PrivateRedis
from tests.celery_fixtures import worker_database_url
from tests.celery_processes import PROJECT_ROOT
from tests.stock_paths import fast_path_only

# With STOCK_PATHS on, the cache is Django's own, which fails the requests that touch it while Redis is down
# (docs/decisions/resilient-redis-cache.md): going on without Redis is the hand-written cache's.
pytestmark = [pytest.mark.django_db(transaction=True), fast_path_only]

SEED_MESSAGE = "Meu pedido atrasou e minha fatura veio duplicada"
PAUSE_SECONDS = 0.5

WEB_SIDE = """
import asyncio, json, sys, time
import django
django.setup()
from common.language import language_model_warm
from conversations.graph import run_turn
from conversations.turn import TurnInput
language_model_warm()  # as the served processes do at start (platform/asgi.py, platform/celery.py)
from routing import snapshot
tenant_pk, tenant_slug, text = int(sys.argv[1]), sys.argv[2], sys.argv[3]
for line in sys.stdin:
    profile = snapshot.current().profiles["telecom_contas"]
    data = TurnInput(tenant_pk=tenant_pk, tenant_slug=tenant_slug, profile=profile, text=text, session_id=line.strip())
    started = time.monotonic()
    result = asyncio.run(run_turn(data))
    parts = [(part["agent"], part["status"]) for part in result.metadata["supervisor"]]
    print(json.dumps({"seconds": time.monotonic() - started, "parts": parts}), flush=True)
"""


def test_a_plan_runs_in_process_while_redis_is_down_and_on_the_broker_again_when_it_returns(
    tenant,
    telecom,
    settings,
):
    telecom.routing_mode = "supervisor"
    telecom.save()
    with PrivateRedis() as private_redis:
        _two_turns(tenant, private_redis, settings)


def _two_turns(tenant, private_redis: PrivateRedis, settings) -> None:
    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "REDIS_URL": private_redis.url,
        "SUPERVISOR_EXECUTOR": "celery",
        "SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS": "1",
        "REDIS_OUTAGE_PAUSE_SECONDS": str(PAUSE_SECONDS),
        "VAR_DIR": str(settings.VAR_DIR),
        "PYTHONPATH": str(PROJECT_ROOT),
    }
    web = subprocess.Popen(
        [sys.executable, "-c", WEB_SIDE, str(tenant.pk), tenant.slug, SEED_MESSAGE],
        env=env,
        cwd=PROJECT_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def turn(session_id: str) -> dict:
        web.stdin.write(session_id + "\n")
        web.stdin.flush()
        line = web.stdout.readline()
        assert line, web.stderr.read()
        return json.loads(line)

    try:
        private_redis.stop()
        down = turn("redis-down")
        private_redis.start()  # empty, and no worker listens: steps sent now wait in its queue
        time.sleep(PAUSE_SECONDS + 0.1)
        back = turn("redis-back")
        queued = redis.Redis.from_url(private_redis.url).llen("celery")
    finally:
        web.stdin.close()
        web.wait(timeout=30)
    log = web.stderr.read()  # the web side's log, shown with any assertion below that fails
    # Every step answered here, not lost on a broker that is gone.
    assert down["parts"] == [["billing_agent", "ok"], ["orders_agent", "ok"]], log
    assert queued >= 2, log  # the same process published its steps to the broker again
    assert {status for _, status in back["parts"]} == {"timeout"}, log  # nobody took them within the limit
    assert log.count("Redis (fan-out broker) unreachable") == 1, log
