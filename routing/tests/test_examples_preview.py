"""The route preview explains an examples-tier decision: the nearest examples, each intent's score, and why the
others lost — or why the tier did not decide."""

from __future__ import annotations

import pytest

from agents.models import AgentProfile
from common.config_version import config_version_bump
from routing.models import Intent

pytestmark = pytest.mark.django_db

PREVIEW_URL = "/admin/routing/intent/preview/"


@pytest.fixture
def examples(telecom):
    Intent.objects.filter(profile=telecom, name="billing_invoice_explanation").update(
        examples=["minha conta de telefone veio cara", "phone bill is way too expensive"]
    )
    Intent.objects.filter(profile=telecom, name="retail_order_tracking").update(
        examples=["o chip ainda não chegou em casa", "my router was never delivered"]
    )
    AgentProfile.objects.filter(pk=telecom.pk).update(examples_threshold=0.2, examples_margin=0.05)
    config_version_bump()
    return telecom


def preview(client, profile, text):
    response = client.get(PREVIEW_URL, {"profile": profile.pk, "text": text})
    assert response.status_code == 200
    return response.context["preview"], response.content.decode()


def test_the_preview_explains_an_examples_decision(staff_client, examples):
    shown, page = preview(staff_client, examples, "o telefone veio caro demais")

    assert (shown.decision.method, shown.decision.intent) == ("examples", "billing_invoice_explanation")
    assert shown.examples["decided"]
    [won, lost, *_] = shown.examples["rows"]
    assert won["intent"] == "billing_invoice_explanation" and won["why"].startswith("Won:")
    assert lost["intent"] == "retail_order_tracking" and lost["why"].startswith("Less likely")
    assert 'id="route-nearest"' in page and "minha conta de telefone veio cara" in page
    assert "Decided (tfidf; threshold 0.20, margin 0.05)" in " ".join(page.split())


def test_the_preview_says_why_the_examples_did_not_decide(staff_client, examples):
    AgentProfile.objects.filter(pk=examples.pk).update(examples_threshold=1.0)
    config_version_bump()

    shown, page = preview(staff_client, examples, "o telefone veio caro demais")

    assert shown.decision.method == "fallback"
    assert not shown.examples["decided"]
    assert "below the threshold 1.00" in shown.examples["rows"][0]["why"]
    assert "Consulted, did not decide" in page


def test_a_keyword_decision_says_the_examples_were_not_consulted(staff_client, examples):
    shown, page = preview(staff_client, examples, "Minha fatura veio alta")

    assert shown.decision.method == "keyword" and shown.examples is None
    assert "Not consulted: the keyword match decided first." in page
