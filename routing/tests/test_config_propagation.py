"""A routing edit made in one process is seen by the compiled router of another process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from routing.models import Keyword

ROOT = Path(__file__).resolve().parents[2]

WORKER = """
import json, sys
import django
django.setup()
from routing import snapshot
for line in sys.stdin:
    current = snapshot.current()
    decision = current.profiles["telecom_contas"].router.route_sync(line.strip())
    print(json.dumps({"agent": decision.agent, "version": current.version}), flush=True)
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
