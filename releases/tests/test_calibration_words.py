"""What the calibration page says to an editor: one sentence for the trade-off when the proposed rule routes fewer
messages right or sends more to the fallback (none when it does not), samples named by intent and message rather
than "example example 106", and a saved message that starts with words, not a capitalised identifier."""

from __future__ import annotations

import pytest

from releases.admin import routing_tests as admin_tests
from releases.calibration import Calibration, Figures, Sample, calibrate, sample_label, sample_origin
from releases.routing_tests import DRAFT, routing_tests_saved, routing_tests_spec
from routing.models import Intent

CALIBRATE_URL = "/admin/releases/routingtestcase/calibrate/"


def figures(threshold: float, accuracy: float, wrong: float, fallback: float, **kwargs) -> Figures:
    return Figures(
        threshold=threshold,
        margin=0.5,
        accuracy=accuracy,
        wrong_rate=wrong,
        fallback_rate=fallback,
        right=0,
        wrong=0,
        fell_back=0,
        **kwargs,
    )


def calibration(chosen: Figures, current: Figures) -> Calibration:
    return Calibration(chosen=chosen, current=current, samples=100, from_tests=5, from_examples=95)


def test_a_rule_that_routes_fewer_right_and_falls_back_more_says_so_in_one_sentence_first():
    result = calibration(
        chosen=figures(0.97, accuracy=0.75, wrong=0.01, fallback=0.24),
        current=figures(0.92, accuracy=0.80, wrong=0.02, fallback=0.18),
    )

    assert result.trade_off() == (
        "With this rule the examples tier routes 75 % of the messages it was checked on right instead of 80 %, and "
        "sends 24 % to the fallback instead of 18 %: about 1 in 4 messages that no keyword decides will reach the "
        "fallback specialist rather than a guess, in exchange for fewer wrong routes (1 % instead of 2 %)."
    )
    assert result.explanation()[0] == result.trade_off()
    assert result.trade_off() not in result.details()


def test_a_rule_that_only_falls_back_more_says_that_alone():
    result = calibration(
        chosen=figures(0.97, accuracy=0.81, wrong=0.00, fallback=0.19),
        current=figures(0.92, accuracy=0.80, wrong=0.02, fallback=0.18),
    )

    sentence = result.trade_off()

    assert sentence.startswith(
        "With this rule the examples tier sends 19 % to the fallback instead of 18 %: about 1 in 5"
    )
    assert "right instead of" not in sentence


def test_rates_that_round_alike_keep_a_decimal():
    result = calibration(
        chosen=figures(0.97, accuracy=0.801, wrong=0.02, fallback=0.184),
        current=figures(0.92, accuracy=0.804, wrong=0.02, fallback=0.181),
    )

    assert (
        "right instead of" in result.trade_off() and "80.1 %" in result.trade_off() and "80.4 %" in result.trade_off()
    )


def test_a_rule_that_costs_nothing_has_no_trade_off_sentence():
    better = calibration(
        chosen=figures(0.9, accuracy=0.85, wrong=0.02, fallback=0.13),
        current=figures(0.92, accuracy=0.80, wrong=0.02, fallback=0.18),
    )
    same = calibration(
        chosen=figures(0.92, accuracy=0.80, wrong=0.02, fallback=0.18),
        current=figures(0.92, accuracy=0.80, wrong=0.02, fallback=0.18),
    )

    assert better.trade_off() == "" and same.trade_off() == ""
    assert not any("instead of" in line for line in [*better.explanation(), *same.explanation()])


def test_a_sample_is_named_by_its_intent_and_the_start_of_its_message():
    example = Sample(
        text="Fui atendido muito mal na loja, quero reclamar do vendedor",
        expected="support_request",
        source="example",
        name="example 106",
        best="billing_invoice_explanation",
        score=0.99,
        gap=0.5,
    )
    small_talk = Sample("boa tarde", "", "small talk", "boa tarde", "retail_order_tracking", 0.9, 0.5)
    test = Sample("minha fatura", "billing_invoice_explanation", "test", "fatura alta", "x", 0.9, 0.5)

    assert sample_label(example) == "support_request: 'Fui atendido muito mal na loja, quero…'"
    assert sample_label(small_talk) == "none of these: 'boa tarde'"
    assert sample_origin(test) == "saved test “fatura alta”"
    assert "106" not in sample_origin(example) and "example example" not in sample_label(example)


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_the_page_leads_with_the_trade_off_and_names_wrong_routes_by_intent_and_message(
    editor_client, telecom, monkeypatch
):
    Intent.objects.filter(profile=telecom, name="billing_invoice_explanation").update(
        examples=["minha conta de telefone veio cara", "cobraram um valor estranho no meu plano"]
    )
    from common.config_version import config_version_bump

    config_version_bump()
    real = calibrate(routing_tests_spec(telecom, DRAFT), routing_tests_saved(telecom))
    wrong = Sample(
        "Fui atendido muito mal na loja, quero reclamar do vendedor",
        "support_request",
        "example",
        "example 106",
        "billing_invoice_explanation",
        0.99,
        0.5,
    )
    real.chosen = figures(0.97, accuracy=0.75, wrong=0.01, fallback=0.24)
    real.current = figures(0.92, accuracy=0.80, wrong=0.02, fallback=0.18)
    real.mistakes = [{"label": sample_label(wrong), "origin": sample_origin(wrong), "text": wrong.text,
                      "expected": wrong.expected, "got": wrong.best}]  # fmt: skip
    # The one seam: the view's calibration, so the page shows a rule that costs something and a wrong route.
    monkeypatch.setattr(admin_tests, "calibrate", lambda spec, cases: real)

    page = editor_client.get(CALIBRATE_URL, {"profile": "telecom_contas"}).content.decode()

    assert '<p id="trade-off">With this rule the examples tier routes 75 %' in page
    assert page.index('id="trade-off"') < page.index('id="figures"')
    assert "support_request: &#x27;Fui atendido muito mal na loja, quero…&#x27;" in page
    assert "example example" not in page
    assert 'class="progress" hidden' in page and "Calibrating… this takes a few seconds." in page


@pytest.mark.django_db
@pytest.mark.sqlite_too
def test_the_saved_message_starts_with_words_not_the_profiles_identifier(editor_client, telecom):
    Intent.objects.filter(profile=telecom, name="billing_invoice_explanation").update(
        examples=["minha conta de telefone veio cara", "cobraram um valor estranho no meu plano"]
    )
    from common.config_version import config_version_bump

    config_version_bump()

    response = editor_client.post(CALIBRATE_URL, {"profile": "telecom_contas", "save": "1"}, follow=True)

    shown = [str(message) for message in response.context["messages"]]
    assert len(shown) == 1 and shown[0].startswith("Saved to the draft of telecom_contas: threshold ")
    assert shown[0].endswith("— publish to serve them.")
