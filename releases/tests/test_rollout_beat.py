"""Rollout plans end to end: a real ``celery beat`` sends the guard's task every second to a real Celery
worker, on PostgreSQL and Redis, while customers' messages arrive through the gateway API.

A bad candidate (invoice questions fall to the fallback specialist) is rolled back in its first stage by the
beat, with its webhook received by a real HTTP server; a good one is advanced stage by stage as traffic reaches
each stage's minimum, and released to every customer.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.conf import settings

from agents.models import AgentProfile
from common.config_version import config_version_bump
from releases.models import RolloutPlan, RolloutPlanStatus
from releases.rollout.guard import plan_start
from releases.versions import version_publish
from routing.models import Intent, Keyword
from routing.selectors import live_version
from tests.celery_fixtures import worker_database_url
from tests.celery_processes import CeleryBeatProcess
from tests.served import serve_in_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(180)]

INVOICE = "Minha fatura veio alta"


@pytest.fixture(autouse=True)
def unthrottled(settings):
    settings.API_MESSAGE_RATE_PER_KEY = "off"


@pytest.fixture
def beat(celery_worker, tmp_path):
    """Celery beat sending ``conversations.rollout_evaluate`` every second, to the session's worker."""
    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "VAR_DIR": str(settings.VAR_DIR),
        "ROLLOUT_EVALUATE_SECONDS": "1",
        "ROLLOUT_WEBHOOK_SECRET": settings.ROLLOUT_WEBHOOK_SECRET,
        "CELERY_SKIP_CHECKS": "1",
    }
    process = CeleryBeatProcess(env=env, log_dir=tmp_path / "beat").start()
    yield process
    process.stop()


@pytest.fixture
def hook():
    received: list[tuple[dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append((dict(self.headers), self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    serve_in_thread(server)
    yield f"http://127.0.0.1:{server.server_address[1]}/rollout", received
    server.shutdown()
    server.server_close()


def say(api, session: str, text: str = INVOICE) -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def wait_for(plan: RolloutPlan, what, timeout: float = 60.0) -> RolloutPlan:
    deadline = time.monotonic() + timeout
    while True:
        plan.refresh_from_db()
        if what(plan):
            return plan
        if time.monotonic() > deadline:
            decisions = list(plan.decisions.values_list("action", "reason"))
            raise AssertionError(f"plan {plan.status}, stage {plan.stage} after {timeout:g} s: {decisions}")
        time.sleep(0.2)


@pytest.fixture
def profile(telecom):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="v1")
    return profile


def test_beat_rolls_a_bad_candidate_back_in_its_first_stage_and_posts_the_signed_decision(api, profile, beat, hook):
    url, received = hook
    Intent.objects.filter(profile=profile, name="billing_invoice_explanation").update(enabled=False)
    config_version_bump()
    candidate = version_publish(profile=profile, note="invoices off", release=False)
    plan = RolloutPlan.objects.create(
        name="invoices off",
        profile=profile,
        candidate=candidate,
        stages=[20, 50, 100],
        hold_minutes=0,
        min_conversations=10,  # at 20 % of 120 conversations the candidate has 24 ± 4.4
        webhook_url=url,
    )
    plan_start(plan, actor="test")

    for n in range(120):
        say(api, f"beat-bad-{n}")
    plan = wait_for(plan, lambda p: p.status != RolloutPlanStatus.RUNNING)

    assert (plan.status, plan.stage) == (RolloutPlanStatus.ROLLED_BACK, 0)
    rollback = plan.decisions.get(action="rollback")
    assert rollback.actor == "beat" and "fallback rate" in rollback.reason
    assert {say(api, f"beat-bad-{n}", "e agora?")["metadata"]["version"] for n in range(30)} == {1}
    deadline = time.monotonic() + 60  # a hang guard
    while not any(json.loads(body)["action"] == "rollback" for _, body in received) and time.monotonic() < deadline:
        time.sleep(0.1)
    headers, body = next((h, b) for h, b in received if json.loads(b)["action"] == "rollback")
    signed = headers["X-Platform-Timestamp"].encode() + b"." + body
    signature = hmac.new(settings.ROLLOUT_WEBHOOK_SECRET.encode(), signed, hashlib.sha256).hexdigest()
    assert headers["X-Platform-Signature"] == f"sha256={signature}"
    assert json.loads(body)["figures"]["candidate"]["fallback_rate"]["rate"] > 0.9


def test_beat_takes_a_good_candidate_through_every_stage_to_every_customer(api, profile, beat):
    Keyword.objects.create(intent=Intent.objects.get(profile=profile, name="billing_invoice_explanation"), text="zz")
    candidate = version_publish(profile=profile, note="zz", release=False)
    plan = RolloutPlan.objects.create(
        name="zz", profile=profile, candidate=candidate, stages=[20, 50, 100], hold_minutes=0, min_conversations=10
    )
    plan_start(plan, actor="test")

    for stage in range(3):
        for n in range(120):
            say(api, f"beat-good-{stage}-{n}")
        plan = wait_for(plan, lambda p, stage=stage: p.stage > stage or p.status != RolloutPlanStatus.RUNNING)
        assert plan.status in (RolloutPlanStatus.RUNNING, RolloutPlanStatus.COMPLETED), (
            plan.status,
            list(plan.decisions.exclude(action="hold").values_list("action", "reason")),
        )

    assert plan.status == RolloutPlanStatus.COMPLETED
    assert live_version(profile).number == 2
    actions = list(plan.decisions.exclude(action="hold").order_by("created_at", "id").values_list("action", "actor"))
    assert actions == [("start", "test"), ("advance", "beat"), ("advance", "beat"), ("complete", "beat")]
    assert say(api, "beat-good-0-0", "e agora?")["metadata"]["version"] == 2
