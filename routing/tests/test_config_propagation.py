"""A routing edit made in one process is seen by the compiled router of another process; so is a rollout flag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from routing.admin import CONFIRMED
from routing.models import Keyword, RolloutFlag
from routing.services import rollout_flag_set
from tests.adminkit import change_url, form_data

ROOT = Path(__file__).resolve().parents[2]

WORKER = """
import json, sys
import django
django.setup()
from routing import snapshot
for line in sys.stdin:
    current = snapshot.current()
    decision = current.profiles["telecom_contas"].router.route_sync(line.strip())
    flags = {
        key: {"kill_switch": flag.kill_switch, "percentage": flag.percentage, "users": dict(flag.user_overrides)}
        for key, flag in current.flags.items()
    }
    print(json.dumps({"agent": decision.agent, "version": current.version, "flags": flags}), flush=True)
"""


def database_url() -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def second_process(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("needs a database two processes share (the suite runs on PostgreSQL)")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "platform.settings",
        "DATABASE_URL": database_url(),
        "CACHE_DIR": settings.CACHES["default"].get("LOCATION", ""),
    }
    process = subprocess.Popen(
        [sys.executable, "-c", WORKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )

    def ask(text: str) -> dict:
        process.stdin.write(text + "\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    yield ask
    process.stdin.close()
    process.wait(timeout=10)


def test_an_admin_edit_is_seen_by_another_processs_router(telecom, second_process, client, staff_user):
    assert second_process("quero um upgrade")["agent"] == "support_agent"

    client.force_login(staff_user)
    product = telecom.intents.get(name="product_information")
    response = client.post("/admin/routing/keyword/add/", {"intent": product.pk, "text": "upgrade"})
    assert response.status_code == 302, response.content[:2000]
    assert Keyword.objects.filter(intent=product, text="upgrade").exists()

    assert second_process("quero um upgrade")["agent"] == "product_agent"


def test_disabling_an_intent_is_seen_by_another_process(telecom, second_process):
    assert second_process("Minha fatura veio alta")["agent"] == "billing_agent"

    intent = telecom.intents.get(name="billing_invoice_explanation")
    intent.enabled = False
    intent.save()

    assert second_process("Minha fatura veio alta")["agent"] == "support_agent"


def test_a_rollout_change_in_the_admin_and_a_kill_from_the_shell_reach_another_process(
    telecom, second_process, client, staff_user
):
    rollout_flag_set(key="multi_agent", actor="test", create=True)  # an earlier flush may have removed the migration's
    flag = RolloutFlag.objects.get(key="multi_agent")
    assert second_process("oi")["flags"]["multi_agent"] == {"kill_switch": False, "percentage": 0, "users": {}}

    client.force_login(staff_user)
    data = form_data(client.get(change_url(flag)))
    data.update({"percentage": "10", "user_overrides-0-user_id": "admin_user", "user_overrides-0-enabled": "on"})
    assert client.post(change_url(flag), data).status_code == 200  # "10 % of customers will get …": confirm
    assert client.post(change_url(flag), {**data, CONFIRMED: "1"}).status_code == 302
    assert second_process("oi")["flags"]["multi_agent"] == {
        "kill_switch": False,
        "percentage": 10,
        "users": {"admin_user": True},
    }

    call_command("set_rollout", "multi_agent", "--kill", stdout=StringIO())
    assert second_process("oi")["flags"]["multi_agent"]["kill_switch"] is True
