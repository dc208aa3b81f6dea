"""A supervisor plan tried on the draft runs the draft's specialists on the Celery workers too.

The worker rebuilds each part's request from its own snapshot: for a draft turn it must take the profile's draft,
not the released version customers get, or the plan's parts would silently answer as the live profile.
"""

from __future__ import annotations

import pytest

from agents.models import Specialist
from chat.tests.test_websocket import chat, path, session_cookie
from releases.versions import version_publish

pytestmark = pytest.mark.django_db(transaction=True)

SEED_MESSAGE = {"text": "Meu pedido atrasou e minha fatura veio duplicada"}
DRAFT_NAME = "Faturas (rascunho)"


@pytest.fixture
def published_supervisor(telecom):
    """telecom_contas in supervisor mode, published as version 1; then its billing specialist renamed in the draft."""
    telecom.routing_mode = "supervisor"
    telecom.save()
    version_publish(profile=telecom, note="supervisor")
    billing = Specialist.objects.get(profile=telecom, name="billing_agent")
    billing.display_name = DRAFT_NAME
    billing.save(update_fields=["display_name"])
    return telecom


def test_a_draft_turns_plan_parts_run_the_drafts_specialists_on_real_workers(
    staff_user, tenant, published_supervisor, celery_worker, settings
):
    settings.SUPERVISOR_EXECUTOR = "celery"
    cookie = session_cookie(staff_user)

    (draft,) = chat(
        path(tenant="tenant_a", session_id="fd-1", route="profile", version="draft"), SEED_MESSAGE, headers=cookie
    )
    (live,) = chat(path(tenant="tenant_a", session_id="fl-1", route="profile"), SEED_MESSAGE, headers=cookie)

    for turn in (draft, live):
        assert [(p["agent"], p["status"]) for p in turn[-1]["metadata"]["supervisor"]] == [
            ("billing_agent", "ok"),
            ("orders_agent", "ok"),
        ]
    parts = {event["agent"]: event["answer"] for event in draft if event["type"] == "partial"}
    assert parts["billing_agent"].startswith(DRAFT_NAME)
    assert DRAFT_NAME in draft[-1]["answer"] and draft[-1]["metadata"]["version"] == "draft"
    live_parts = {event["agent"]: event["answer"] for event in live if event["type"] == "partial"}
    assert not live_parts["billing_agent"].startswith(DRAFT_NAME)
    assert DRAFT_NAME not in live[-1]["answer"] and live[-1]["metadata"]["version"] == 1
