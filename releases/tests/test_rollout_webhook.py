"""A rollout plan's webhook: where a routing editor may point it (common/outbound.py), what its decisions' log says
about the post, and how the post is signed (docs/rollouts.md, "Webhook").

Real receivers on loopback (``receiver``, ``nothing_allowed``: tests/outbound_fixtures.py). The suite allows loopback
(tests/suite_environment.py): each test here says what the operator allows."""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.checks import run_checks
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse

from agents.models import AgentProfile
from common.outbound import ERROR_INTERNAL
from releases.models import RolloutPlan
from releases.rollout.commands import WEBHOOK_DELIVERED, WEBHOOK_FAILED, plan_command, plan_start
from releases.versions import version_publish
from routing.models import Intent, Keyword
from tests.adminkit import error_messages, form_data

pytestmark = pytest.mark.django_db(transaction=True)  # a decision is posted once its transaction commits

ROOT = Path(__file__).resolve().parents[2]
SECRET = "a-rollout-secret-of-its-own-0123456789"
INTERNAL = [
    "http://127.0.0.1:{port}/hook",
    "http://localhost:{port}/hook",  # a name that resolves to loopback
    "http://[::1]:{port}/hook",
    "http://[::ffff:127.0.0.1]:{port}/hook",
    "http://169.254.169.254/latest/meta-data/",
    "http://10.0.0.7/hook",
    "http://100.64.0.1/hook",
    "http://0.0.0.0:{port}/hook",
]


@pytest.fixture(autouse=True)
def own_secret(settings):
    settings.ROLLOUT_WEBHOOK_SECRET = SECRET


@pytest.fixture
def candidate(telecom):
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="v1")
    Keyword.objects.create(intent=Intent.objects.get(profile=profile, name="billing_invoice_explanation"), text="zz")
    return version_publish(profile=profile, note="zz", release=False)


def running(candidate, url: str) -> RolloutPlan:
    """A started plan whose webhook is ``url``, stored as it is (an address saved before the policy, or a name that
    resolved elsewhere then)."""
    plan = RolloutPlan.objects.create(name="zz", profile=candidate.profile, candidate=candidate, webhook_url=url)
    plan_start(plan, actor="test")
    return plan


def moved(plan: RolloutPlan) -> str:
    """Pause ``plan``, or resume it when it is paused (a decision its webhook gets): what the decision says of the
    post."""
    plan.refresh_from_db()
    decision = plan_command(plan, "resume" if plan.status == "paused" else "pause", actor="test")
    decision.refresh_from_db()
    return decision.webhook


def webhook_cells(page: str) -> list[str]:
    """The decisions' webhook column on a plan's page."""
    cells = re.findall(r'<td class="field-webhook">(.*?)</td>', page, re.S)
    return [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in cells]


@pytest.mark.parametrize("url", INTERNAL)
def test_an_editor_cannot_save_a_webhook_on_an_internal_address(editor_client, candidate, nothing_allowed, url):
    url = url.format(port=18511)
    add = reverse("admin:releases_rolloutplan_add")
    data = form_data(editor_client.get(add))
    data.update(name="zz", target="version", profile=candidate.profile.pk, candidate=candidate.pk, webhook_url=url)

    answer = editor_client.post(add, data)

    assert answer.status_code == 200, "saved"
    assert answer.context["adminform"].form.errors["webhook_url"] == [ERROR_INTERNAL]
    assert ERROR_INTERNAL in answer.content.decode()  # shown on the page, beside the field
    assert not RolloutPlan.objects.exists()


def test_the_command_line_refuses_an_internal_webhook_too(candidate, nothing_allowed):
    with pytest.raises(CommandError, match="webhook_url"):
        call_command(
            "rollout",
            "start",
            "--profile",
            "telecom_contas",
            "--version",
            "2",
            "--webhook",
            "http://169.254.169.254/latest/meta-data/",
        )
    assert not RolloutPlan.objects.exists()


@pytest.mark.parametrize("url", ["http://127.0.0.1:{port}/hook", "http://localhost:{port}/hook"])
def test_a_stored_webhook_on_an_internal_address_is_not_posted_and_its_log_says_not_delivered(
    candidate, receiver, nothing_allowed, url
):
    plan = running(candidate, url.format(port=receiver.port))

    logged = moved(plan)

    assert receiver.requests == []
    assert logged.startswith("not delivered") and "HTTP" not in logged and "Error" not in logged


def test_the_log_says_delivered_or_not_and_never_what_answered(editor_client, candidate, receiver, nothing_allowed):
    """An editor must not tell an open port from a closed one, nor one answer from another, by what the plan's page
    says of its posts."""
    nothing_allowed.OUTBOUND_ALLOWED = ["127.0.0.1"]  # the operator's receivers live there
    plan = running(candidate, f"http://127.0.0.1:{receiver.port}/hook")
    logged = {}
    for what in ("204", "400", "401", "403", "500", "closed"):
        receiver.status = 204 if what == "closed" else int(what)
        port = 1 if what == "closed" else receiver.port  # nothing listens on port 1
        RolloutPlan.objects.filter(pk=plan.pk).update(webhook_url=f"http://127.0.0.1:{port}/hook")
        logged[what] = moved(plan)

    assert logged.pop("204") == "delivered"
    [failed] = set(logged.values())
    assert failed.startswith("not delivered") and not any(character.isdigit() for character in failed)
    assert "Error" not in failed and "HTTP" not in failed
    page = editor_client.get(reverse("admin:releases_rolloutplan_change", args=[plan.pk])).content.decode()
    assert set(webhook_cells(page)) - {"", "-", "—"} == {"delivered", failed}  # the start posts nothing


def test_the_operator_allows_an_internal_receiver_by_address_and_port(candidate, receiver, nothing_allowed, settings):
    settings.OUTBOUND_ALLOWED = [f"127.0.0.1:{receiver.port}"]
    plan = running(candidate, f"http://127.0.0.1:{receiver.port}/hook")

    assert moved(plan) == "delivered"
    assert [json.loads(body)["action"] for _, body in receiver.posts] == ["pause"]


def signed(
    secret: str, headers: dict[str, str], body: bytes, *, now: float | None = None, tolerance: int = 300
) -> bool:
    """docs/rollouts.md's verifier: the HMAC of "<timestamp>.<body>", and a timestamp no older than ``tolerance``."""
    timestamp = headers["X-Platform-Timestamp"]
    expected = "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    fresh = abs((now or time.time()) - int(timestamp)) <= tolerance
    return fresh and hmac.compare_digest(expected, headers["X-Platform-Signature"])


def test_a_post_is_signed_with_the_webhooks_own_secret_over_a_timestamp(candidate, receiver, nothing_allowed, settings):
    settings.OUTBOUND_ALLOWED = ["127.0.0.1"]
    plan = running(candidate, f"http://127.0.0.1:{receiver.port}/hook")
    moved(plan)

    [(headers, body)] = receiver.posts
    decision = plan.decisions.get(action="pause")
    assert signed(SECRET, headers, body)
    assert (headers["X-Platform-Event"], headers["X-Platform-Event-Id"]) == ("rollout.decision", str(decision.pk))
    for secret in (settings.SECRET_KEY, "another-secret-of-its-own-0123456"):
        assert not signed(secret, headers, body)
        plain = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        assert plain not in headers.values()
    # Replayed later, the same post is stale; with a fresh timestamp, its signature no longer matches.
    assert not signed(SECRET, headers, body, now=int(headers["X-Platform-Timestamp"]) + 301)
    assert not signed(SECRET, {**headers, "X-Platform-Timestamp": str(int(time.time()) + 5)}, body)


def test_without_its_secret_nothing_is_posted_and_the_log_says_why(candidate, receiver, settings):
    settings.OUTBOUND_ALLOWED = ["127.0.0.1"]
    settings.ROLLOUT_WEBHOOK_SECRET = ""
    plan = running(candidate, f"http://127.0.0.1:{receiver.port}/hook")

    logged = moved(plan)

    assert receiver.requests == []
    assert logged.startswith("not delivered") and "ROLLOUT_WEBHOOK_SECRET" in logged


def settings_value(name: str, **environ: str) -> str:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "ROLLOUT_"))}
    env.update(PYTHONPATH=str(ROOT), **environ)
    probe = f"import platform.settings as s; print(repr(s.{name}))"
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_webhook_secret_is_never_the_platforms_secret_key(tmp_path):
    assert settings_value("ROLLOUT_WEBHOOK_SECRET", VAR_DIR=str(tmp_path), DJANGO_SECRET_KEY="k" * 50) == "''"


def test_production_without_the_secret_or_with_the_secret_key_as_it_is_told_so(settings):
    settings.DEBUG = False
    settings.ROLLOUT_WEBHOOK_SECRET = ""
    assert "releases.W001" in {message.id for message in run_checks(include_deployment_checks=True)}
    assert "releases.W001" not in {message.id for message in run_checks()}
    settings.ROLLOUT_WEBHOOK_SECRET = settings.SECRET_KEY
    assert "releases.E001" in {message.id for message in run_checks()}
    settings.ROLLOUT_WEBHOOK_SECRET = SECRET
    found = {message.id for message in run_checks(include_deployment_checks=True)}
    assert not {"releases.W001", "releases.E001"} & found


@pytest.mark.sqlite_too  # the plan's admin page, on the embedded default's database too
def test_the_plan_form_refuses_the_metadata_service_and_saves_a_public_webhook(
    editor_client, candidate, nothing_allowed, monkeypatch
):
    from common import outbound

    monkeypatch.setattr(outbound, "resolve", lambda host, port: ["93.184.216.34"])  # hooks.example.com, public
    add = reverse("admin:releases_rolloutplan_add")
    data = form_data(editor_client.get(add))
    data.update(name="zz", target="version", profile=candidate.profile.pk, candidate=candidate.pk)

    refused = editor_client.post(add, {**data, "webhook_url": "http://169.254.169.254/latest/meta-data/"})
    saved = editor_client.post(add, {**data, "webhook_url": "https://hooks.example.com/rollouts?sig=abc"})

    assert refused.status_code == 200 and ERROR_INTERNAL in error_messages(refused)
    assert saved.status_code == 302, error_messages(saved)
    assert RolloutPlan.objects.get().webhook_url == "https://hooks.example.com/rollouts?sig=abc"


@pytest.mark.sqlite_too  # a data migration: the embedded default's database too
def test_what_receivers_answered_before_is_reworded_to_delivered_or_not(migrations):
    before = ("routing", "0035_history_opaque_user_ids_pseudonymised")
    # On PostgreSQL a copy of the run's database installed at it; on SQLite a copy of the run's migrated file is
    # migrated back, and dropped after (releases/tests/test_versions.py runs the reverses on PostgreSQL).
    apps = migrations.installed_at(before) if connection.vendor == "postgresql" else migrations.back_to(before)
    profile = AgentProfile.objects.create(agent_id="webhooked", name="Webhooked")  # agents' tables stay as they are
    plan = apps.get_model("routing", "RolloutPlan").objects.create(name="old", profile_id=profile.pk)
    said = {}
    for answered in ("HTTP 204", "HTTP 403", "HTTP 400", "failed: ConnectError", "failed: RemoteProtocolError", ""):
        decision = apps.get_model("routing", "RolloutDecision").objects.create(
            plan=plan, action="pause", stage=0, percentage=5, reason="r", actor="editor", webhook=answered
        )
        said[answered] = decision.pk

    migrated = migrations.forward_to(("routing", "0036_rollout_webhook_outbound"))

    now = dict(migrated.get_model("routing", "RolloutDecision").objects.values_list("pk", "webhook"))
    assert now[said["HTTP 204"]] == WEBHOOK_DELIVERED and now[said[""]] == ""
    failed = {now[said[answered]] for answered in said if answered not in ("HTTP 204", "")}
    assert failed == {WEBHOOK_FAILED}
