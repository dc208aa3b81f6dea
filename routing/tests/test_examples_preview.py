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


def test_the_preview_says_when_a_message_reads_as_none_of_these(staff_client, examples):
    shown, page = preview(staff_client, examples, "what's the tallest mountain in the world?")

    assert shown.decision.method == "fallback"
    [best, *_, none] = shown.examples["rows"]
    assert "reads as none of these" in best["why"]
    assert none["intent"].startswith("none of these (") and "belong to no intent" in none["why"]
    assert "none of these (" in page


def test_the_preview_reads_how_often_a_decision_at_its_score_is_right_from_the_calibration(staff_client, examples):
    AgentProfile.objects.filter(pk=examples.pk).update(
        examples_reliability=[
            {"low": 0.0, "high": 0.9, "routed": 40, "right": 30, "right_rate": 0.75, "mean_score": 0.7},
            {"low": 0.9, "high": 1.0, "routed": 200, "right": 188, "right_rate": 0.94, "mean_score": 0.97},
        ]
    )
    config_version_bump()

    shown, page = preview(staff_client, examples, "o telefone veio caro demais")

    assert shown.decision.method == "examples"
    reliability = shown.decision.metadata["examples"]["reliability"]
    expected = 94 if shown.decision.metadata["examples"]["score"] >= 0.9 else 75
    assert round(reliability["right_rate"] * 100) == expected
    assert f"right {expected} times in 100" in shown.decision.reason
    assert f"right <strong>{expected} times in 100</strong>" in " ".join(page.split())


def test_the_preview_says_an_examples_decision_set_no_state_below_the_profiles_bar(staff_client, examples):
    Intent.objects.filter(profile=examples, name="billing_invoice_explanation").update(next_state="WAITING_X")
    AgentProfile.objects.filter(pk=examples.pk).update(examples_state_threshold=1.0)
    config_version_bump()

    shown, page = preview(staff_client, examples, "o telefone veio caro demais")

    assert (shown.decision.method, shown.decision.next_state) == ("examples", None)
    assert "WAITING_X not set" in " ".join(page.split())
