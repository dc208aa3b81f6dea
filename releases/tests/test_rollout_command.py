"""``manage.py routing_publish --candidate`` and ``manage.py rollout``, with the plan's webhook received by a real
HTTP server and its signature checked."""

from __future__ import annotations

import hashlib
import hmac
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from agents.models import AgentProfile
from releases.models import RolloutPlan, RolloutPlanStatus
from releases.versions import version_publish
from routing.models import Intent, Keyword
from routing.selectors import live_version
from tests.served import serve_in_thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hook():
    """A webhook receiver on loopback: the posts it got, as (headers, body bytes)."""
    received: list[tuple[dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((dict(self.headers), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    serve_in_thread(server)
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    server.shutdown()
    server.server_close()


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def candidate(telecom):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="v1")
    Keyword.objects.create(intent=Intent.objects.get(profile=profile, name="billing_invoice_explanation"), text="zz")
    return profile


def test_a_candidate_is_stored_without_release_and_rolled_out_by_command(candidate, hook):
    url, received = hook

    stored = run("routing_publish", "--profile", "telecom_contas", "--note", "zz", "--candidate")
    assert "version 2 stored as a candidate; version 1 stays live" in stored
    assert live_version(candidate).number == 1

    started = run(
        "rollout", "start", "--profile", "telecom_contas", "--version", "2", "--stages", "10,50,100", "--webhook", url
    )
    plan = RolloutPlan.objects.get()
    assert f"plan {plan.pk}" in started and "Started at stage 1 of 3 (10 %)" in started
    assert "running, stage 1 of 3 (10 %)" in run("rollout", "status")
    assert "paused" in run("rollout", "pause", str(plan.pk)).lower()
    run("rollout", "resume", str(plan.pk))
    assert "Advanced by hand to stage 2 of 3 (50 %)" in run("rollout", "advance", str(plan.pk))
    run("rollout", "abort", str(plan.pk))

    plan.refresh_from_db()
    assert plan.status == RolloutPlanStatus.ABORTED
    shown = run("rollout", "status", str(plan.pk))
    assert "abort" in shown and "advance" in shown and "start" in shown
    # pause, resume, advance and abort moved the plan: each was posted, signed with the secret over its timestamp
    bodies = [json.loads(body) for _, body in received]
    assert [body["action"] for body in bodies] == ["pause", "resume", "advance", "abort"]
    for headers, body in received:
        signed = headers["X-Platform-Timestamp"].encode() + b"." + body
        expected = hmac.new(settings.ROLLOUT_WEBHOOK_SECRET.encode(), signed, hashlib.sha256).hexdigest()
        assert headers["X-Platform-Signature"] == f"sha256={expected}"
    assert bodies[-1]["profile"] == "telecom_contas" and bodies[-1]["candidate"] == 2 and bodies[-1]["control"] == 1
    assert set(plan.decisions.exclude(action="start").values_list("webhook", flat=True)) == {"delivered"}


def test_the_command_names_what_is_wrong(candidate):
    with pytest.raises(CommandError, match="no version 9"):
        run("rollout", "start", "--profile", "telecom_contas", "--version", "9")
    version_publish(profile=candidate, note="v2 live")  # the draft's keyword is live now
    with pytest.raises(CommandError, match="stages: Stages: each percentage must be higher than the one before it"):
        run("rollout", "start", "--profile", "telecom_contas", "--version", "2", "--stages", "50,20")
    with pytest.raises(CommandError, match="live already"):
        run("rollout", "start", "--profile", "telecom_contas", "--version", "2")
    with pytest.raises(CommandError, match="No rollout plan 42"):
        run("rollout", "pause", "42")


def test_evaluate_runs_the_guard_once_and_prints_what_moved(candidate, api, settings):
    settings.API_MESSAGE_RATE_PER_KEY = "off"
    Intent.objects.filter(profile=candidate, name="billing_invoice_explanation").update(enabled=False)
    run("routing_publish", "--profile", "telecom_contas", "--candidate")  # the keyword, and invoices switched off
    start = ("--stages", "30,100", "--min-conversations", "10", "--hold-minutes", "0")
    run("rollout", "start", "--profile", "telecom_contas", "--version", "2", *start)
    plan = RolloutPlan.objects.get()
    for n in range(80):
        answer = api.post(
            "/api/gateway/message",
            {"agent_id": "telecom_contas", "payload": {"text": "Minha fatura veio alta", "session_id": f"e-{n}"}},
            format="json",
        )
        assert answer.status_code == 200

    printed = run("rollout", "evaluate")

    assert (
        f"plan {plan.pk}: rollback: Rolled back automatically at stage 1 of 2 (30 %): fallback rate 100 % against 0 % "
        "for the control"
    ) in printed
