"""A rolled-back rollout plan with real traffic, for the rollout view's tests (API and browser).

As in ``releases/tests/test_rollout_guard.py``: telecom_contas published as version 1; a candidate (version 2)
with the invoice intent switched off, so invoice questions fall to the fallback specialist; a plan at 20 → 50 →
100 % started, customers' messages through the gateway API, and the guard's evaluation rolls it back.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from agents.models import AgentProfile
from common.config_version import config_version_bump
from releases.models import RolloutDecision, RolloutPlan
from releases.rollout.guard import plan_evaluate, plan_start
from releases.versions import version_publish
from routing.models import Intent
from routing.rollout_plans import DEFAULT_GUARDS, RELATIVE_MAX

INVOICE = "Minha fatura veio alta"
CONVERSATIONS = 60


Say = Callable[[str], dict]


def through_client(api) -> Say:
    """A customer's message through the gateway API, by the test's own client (no browser in the thread)."""

    def say(session: str) -> dict:
        response = api.post("/api/gateway/message", _body(session), format="json")
        assert response.status_code == 200, response.content
        return response.json()

    return say


def through_http(base_url: str, raw_key: str) -> Say:
    """A customer's message over HTTP to a live server (a browser test's thread may not run the async view)."""

    def say(session: str) -> dict:
        response = httpx.post(
            f"{base_url}/api/gateway/message",
            json=_body(session),
            headers={"Authorization": f"Bearer {raw_key}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        return response.json()

    return say


def _body(session: str) -> dict:
    return {"agent_id": "telecom_contas", "payload": {"text": INVOICE, "session_id": session}}


def started_plan() -> RolloutPlan:
    """Needs the ``telecom`` fixture: version 1 live, the candidate (2) at the plan's first stage, 20 %."""
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    version_publish(profile=profile, note="v1")
    Intent.objects.filter(profile=profile, name="billing_invoice_explanation").update(enabled=False)
    config_version_bump()
    candidate = version_publish(profile=profile, note="invoices off", release=False)
    plan = RolloutPlan.objects.create(
        name="invoices off",
        profile=profile,
        candidate=candidate,
        stages=[20, 50, 100],
        hold_minutes=0,
        min_conversations=3,  # at 20 % of 60 conversations the candidate has 12 ± 3.1
        # Every default guard, the latency's loosened to "ten times worse": the turns' times are the machine's, and a
        # busy one made the candidate's p95 30 % worse by chance; the fallback rate is what the candidate breaks.
        guards=[
            {**guard, "threshold": RELATIVE_MAX} if guard["metric"] == "p95_latency_ms" else dict(guard)
            for guard in DEFAULT_GUARDS
        ],
    )
    plan_start(plan, actor="test")
    plan.refresh_from_db()
    return plan


def rolled_back_plan(say: Say, *, conversations: int = CONVERSATIONS) -> tuple[RolloutPlan, RolloutDecision]:
    """Needs the ``telecom`` fixture; ``say`` sends a customer's message. Returns the plan and its rollback."""
    plan = started_plan()
    for n in range(conversations):
        say(f"rollout-{n}")
    decision = plan_evaluate(plan)
    assert decision.action == "rollback", decision.reason
    plan.refresh_from_db()
    return plan, decision
