"""Supervisor plans on real Celery workers (Redis broker), and the same plan in-process."""

from __future__ import annotations

import pytest

from routing.models import Message

pytestmark = pytest.mark.django_db(transaction=True)

SEED_MESSAGE = "Meu pedido atrasou e minha fatura veio duplicada"


@pytest.fixture
def supervisor(telecom):
    telecom.routing_mode = "supervisor"
    telecom.save()
    return telecom


def send(api, text, session_id):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": session_id}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_the_seed_message_plans_billing_and_orders_and_answers_both_through_real_workers(
    api, supervisor, celery_worker, settings
):
    settings.SUPERVISOR_EXECUTOR = "celery"

    body = send(api, SEED_MESSAGE, "s-celery")

    assert body["metadata"]["intent"] == "multi_intent"
    assert [(p["agent"], p["status"]) for p in body["metadata"]["supervisor"]] == [
        ("billing_agent", "ok"),
        ("orders_agent", "ok"),
    ]
    assert "billing_agent:" in body["answer"] and "orders_agent:" in body["answer"]
    assert Message.objects.filter(role="agent").count() == 2


def test_the_embedded_executor_gives_the_same_answer_as_celery(api, supervisor, celery_worker, settings):
    settings.SUPERVISOR_EXECUTOR = "celery"
    through_workers = send(api, SEED_MESSAGE, "s-workers")
    settings.SUPERVISOR_EXECUTOR = "inprocess"
    in_process = send(api, SEED_MESSAGE, "s-inprocess")

    assert through_workers["answer"] == in_process["answer"]
    assert [(p["agent"], p["status"]) for p in through_workers["metadata"]["supervisor"]] == [
        (p["agent"], p["status"]) for p in in_process["metadata"]["supervisor"]
    ]
