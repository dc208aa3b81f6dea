"""Calibrating the examples tier (releases.calibration, manage.py routing_calibrate)."""

from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from agents.models import AgentProfile
from releases.calibration import (
    NONE,
    OUT_OF_SCOPE_LEFT,
    WRONG_COST,
    Sample,
    _figures,
    calibrate,
    calibration_samples,
    calibration_save,
    near_copies,
)
from releases.models import RoutingTestCase
from releases.routing_tests import DRAFT, Case, CaseTurn, routing_tests_saved, routing_tests_spec
from routing.models import Intent

pytestmark = pytest.mark.django_db

BILLING = [
    "minha conta de telefone veio cara",
    "cobraram um valor estranho no meu plano",
    "phone bill is way too expensive",
    "me cobraron de más en el plan",
    "quero entender o valor cobrado",
]
DELIVERY = [
    "o chip ainda não chegou em casa",
    "cadê o modem que comprei",
    "my router was never delivered",
    "el módem no ha llegado",
    "a entrega do aparelho atrasou",
]


@pytest.fixture
def examples(telecom):
    Intent.objects.filter(profile=telecom, name="billing_invoice_explanation").update(examples=BILLING)
    Intent.objects.filter(profile=telecom, name="retail_order_tracking").update(examples=DELIVERY)
    from common.config_version import config_version_bump

    config_version_bump()
    return telecom


def sample(score, gap, best="a", expected="a"):
    return Sample(text="t", expected=expected, source="example", name="e", best=best, score=score, gap=gap)


def test_a_rule_is_scored_right_wrong_or_fallen_back():
    samples = [
        sample(0.9, 0.5),  # routed to its intent: right
        sample(0.9, 0.5, best="b"),  # routed elsewhere: wrong
        sample(0.2, 0.5),  # below the threshold: falls back
        sample(0.2, 0.5, expected=NONE),  # left alone, as it should: right
        sample(0.9, 0.01, expected=NONE),  # too close a call: left alone, right
    ]

    figures = _figures(samples, 0.5, 0.05)

    assert (figures.right, figures.wrong, figures.fell_back) == (3, 1, 1)
    assert figures.accuracy == 0.6 and figures.wrong_rate == 0.2 and figures.fallback_rate == 0.2


def test_calibration_keeps_the_saved_fallback_tests_and_routes_the_examples(examples):
    RoutingTestCase.objects.create(
        profile=examples, name="fora do escopo", message="qual a capital da França?", expect={"method": "fallback"}
    )
    RoutingTestCase.objects.create(
        profile=examples,
        name="conta cara",
        message="o telefone veio muito caro este mês",
        expect={"intent": "billing_invoice_explanation"},
    )

    result = calibrate(routing_tests_spec(examples, DRAFT), routing_tests_saved(examples))

    assert result.from_tests == 2 and result.from_examples == len(BILLING) + len(DELIVERY)
    assert result.by_source["test"].wrong == 0  # the saved tests never break
    assert result.chosen.wrong_rate <= 0.05
    chosen, current = result.chosen, result.current
    assert chosen.right - WRONG_COST * chosen.wrong >= current.right - WRONG_COST * current.wrong
    assert 0.05 <= result.chosen.threshold <= 0.999 and 0.0 <= result.chosen.margin <= 0.95


def test_a_test_decided_by_a_keyword_is_not_the_tiers_to_judge(examples):
    cases = [Case(name="k", message="minha fatura veio alta", expect={"intent": "billing_invoice_explanation"})]

    result = calibrate(routing_tests_spec(examples, DRAFT), cases)

    assert result.from_tests == 0


def test_a_conversation_tests_message_is_not_read_alone(examples):
    """Its message is decided after its turns (a reply to a flow, a correction): alone it says nothing of the tier."""
    alone = Case(
        name="só", message="o telefone veio muito caro este mês", expect={"intent": "billing_invoice_explanation"}
    )
    after = Case(
        name="depois", message=alone.message, expect=alone.expect, turns=(CaseTurn("quero pagar"), CaseTurn("ok"))
    )
    spec = routing_tests_spec(examples, DRAFT)

    assert [s.name for s in calibration_samples(spec, [alone, after]) if s.source == "test"] == ["só"]


def test_every_rule_is_judged_on_bare_replies_that_nothing_before_the_tier_takes(examples):
    examples.intents.get(name="support_request").keywords.create(text="obrigado")
    from common.config_version import config_version_bump

    config_version_bump()
    spec = routing_tests_spec(examples, DRAFT)

    samples = calibration_samples(spec, [])
    result = calibrate(spec, [])

    small_talk = {s.text: s for s in samples if s.source == "small talk"}
    assert "obrigado" not in small_talk  # a keyword's message, not the tier's
    assert not {"bom dia", "thanks", "gracias"} & set(small_talk)  # the small-talk step's, not the tier's
    assert {"sim, pode", "ok", "não", "vale"} <= set(small_talk)
    assert all(s.expected == NONE for s in small_talk.values())
    assert result.by_source["small talk"].right + result.by_source["small talk"].wrong == len(small_talk)


def test_saving_a_calibration_changes_the_draft_and_keeps_its_figures(examples, django_user_model):
    editor = django_user_model.objects.create_user("ana")
    result = calibrate(routing_tests_spec(examples, DRAFT), [])

    calibration_save(examples, result, user=editor)

    stored = AgentProfile.objects.get(pk=examples.pk)
    assert (stored.examples_threshold, stored.examples_margin) == (result.chosen.threshold, result.chosen.margin)
    assert stored.examples_state_threshold == result.state_threshold
    assert stored.examples_calibration["by"] == "ana"
    assert stored.examples_calibration["chosen"]["accuracy"] == result.chosen.accuracy
    spec = routing_tests_spec(stored, DRAFT)
    assert spec.router.examples_threshold == result.chosen.threshold


def test_the_command_prints_the_figures_and_saves_only_when_asked(examples):
    out = StringIO()
    call_command("routing_calibrate", "--profile", "telecom_contas", stdout=out)

    assert "chosen: threshold" in out.getvalue() and "in force: threshold 0.90" in out.getvalue()
    wrong = [line for line in out.getvalue().splitlines() if line.strip().startswith("wrong:")]
    assert all("'example " not in line and ": '" in line for line in wrong), wrong  # by intent and message
    assert AgentProfile.objects.get(pk=examples.pk).examples_calibration == {}

    call_command("routing_calibrate", "--profile", "telecom_contas", "--save", stdout=out)
    assert AgentProfile.objects.get(pk=examples.pk).examples_calibration["chosen"]
    assert "Saved to the draft" in out.getvalue()


def test_a_profile_without_an_examples_tier_cannot_be_calibrated(examples):
    AgentProfile.objects.filter(pk=examples.pk).update(examples_enabled=False)
    from common.config_version import config_version_bump

    config_version_bump()

    with pytest.raises(CommandError, match="examples tier is off"):
        call_command("routing_calibrate", "--profile", "telecom_contas", stdout=StringIO())
    with pytest.raises(CommandError, match="--profile"):
        call_command("routing_calibrate", "--profile", "nobody", stdout=StringIO())


def test_an_editor_calibrates_in_the_admin_and_saves_the_rule_to_the_draft(client, editor, examples):
    client.force_login(editor)

    page = client.get("/admin/releases/routingtestcase/calibrate/", {"profile": "telecom_contas"}).content.decode()

    assert 'id="chosen"' in page and 'id="current"' in page and "out-of-scope messages left out in turn" in page
    assert 'id="explanation"' in page and 'id="reliability"' in page and "Expected calibration error" in page
    assert 'id="state-bar"' in page
    assert AgentProfile.objects.get(pk=examples.pk).examples_calibration == {}
    saved = client.post("/admin/releases/routingtestcase/calibrate/", {"profile": "telecom_contas", "save": "1"})
    assert saved.status_code == 302
    shown = client.get(saved["Location"]).content.decode()
    # The identifier as it is, not capitalised.
    assert '<li class="success">Saved to the draft of telecom_contas: threshold' in shown
    stored = AgentProfile.objects.get(pk=examples.pk)
    assert stored.examples_calibration["by"] == "editor"
    profile_page = client.get(f"/admin/agents/agentprofile/{examples.pk}/change/").content.decode()
    assert f"threshold {stored.examples_threshold}" in profile_page
    assert "Calibrate the examples tier" in client.get("/admin/releases/routingtestcase/").content.decode()


def test_a_viewer_without_the_profile_change_right_sees_the_figures_but_cannot_save(
    client, examples, django_user_model
):
    from django.contrib.auth.models import Permission

    viewer = django_user_model.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_routingtestcase"))
    client.force_login(viewer)

    page = client.get("/admin/releases/routingtestcase/calibrate/", {"profile": "telecom_contas"}).content.decode()
    assert 'id="chosen"' in page and 'name="save"' not in page
    denied = client.post("/admin/releases/routingtestcase/calibrate/", {"profile": "telecom_contas", "save": "1"})
    assert denied.status_code == 403
    assert AgentProfile.objects.get(pk=examples.pk).examples_calibration == {}


def test_an_example_left_out_takes_its_near_copies_with_it():
    texts = [
        "minha fatura veio alta este mes",
        "minha fatura veio muito alta este mes",  # shares 6 of 7 words: a near copy
        "a conta do celular subiu",
        "onde esta meu pedido",
    ]

    copies = near_copies(texts, np.arange(len(texts)))

    assert [list(rows) for rows in copies] == [[0, 1], [0, 1], [2], [3]]


def test_every_rule_is_judged_on_out_of_scope_samples_and_calibrating_keeps_them_left_alone(examples):
    examples.out_of_scope_examples = ["quero abrir uma conta no banco", "how do I pay my electricity bill?"]
    examples.save(update_fields=["out_of_scope_examples"])
    spec = routing_tests_spec(examples, DRAFT)

    samples = calibration_samples(spec, [])
    result = calibrate(spec, [])

    sources = {s.source for s in samples if s.expected == NONE}
    assert {"out of scope", "corpus"} <= sources  # the profile's own, and the shipped corpus's, each left out
    assert {s.text for s in samples if s.source == "out of scope"} <= set(examples.out_of_scope_examples)
    assert result.from_out_of_scope == sum(1 for s in samples if s.expected == NONE)
    assert result.chosen.out_of_scope == result.from_out_of_scope
    floor = min(result.current.out_of_scope_left, int(np.ceil(OUT_OF_SCOPE_LEFT * result.current.out_of_scope)))
    assert result.chosen.out_of_scope_left >= floor
    assert any("belong to no intent" in line for line in result.explanation())


def test_the_calibration_reports_how_often_a_routed_sample_is_right_at_each_score(examples):
    result = calibrate(routing_tests_spec(examples, DRAFT), [])

    routed = [row for row in result.reliability if row.routed]
    assert routed and all(row.low >= result.chosen.threshold - 0.3 for row in routed)
    assert all(0 <= row.right <= row.routed and row.low <= row.mean_score < row.high for row in routed)
    assert 0.0 <= result.calibration_error <= 1.0
    table = result.as_dict()["reliability"]
    assert [row["routed"] for row in table] == [row.routed for row in result.reliability]
    assert all(row["right_rate"] == round(row["right"] / row["routed"], 4) for row in table)


def test_the_state_bar_is_the_lowest_score_at_which_no_sample_that_should_not_would_set_a_state():
    from types import SimpleNamespace

    from releases.calibration import _state_threshold

    intents = [SimpleNamespace(name="pay", next_state="WAITING"), SimpleNamespace(name="bill", next_state="")]
    spec = SimpleNamespace(router=SimpleNamespace(intents=intents))
    samples = [
        sample(0.97, 0.9, best="pay", expected=NONE),  # out of scope, routed to a stateful intent
        sample(0.992, 0.9, best="pay", expected="bill"),  # a wrong route to it
        sample(0.999, 0.9, best="bill", expected=NONE),  # wrong, but to an intent that sets no state
        sample(0.9999, 0.9, best="pay", expected="pay"),  # right: may set the state
    ]

    assert _state_threshold(spec, samples, 0.9, 0.5) == 0.995
    assert _state_threshold(spec, samples[2:], 0.9, 0.5) == 0.9  # nothing would: the rule's own threshold


def test_keywords_that_take_out_of_scope_messages_are_reported_until_an_exclusion_leaves_them_alone(examples):
    from common.config_version import config_version_bump

    examples.out_of_scope_examples = ["me conta uma piada", "me conta uma história de terror"]
    examples.save(update_fields=["out_of_scope_examples"])
    billing = examples.intents.get(name="billing_invoice_explanation")
    keyword, _ = billing.keywords.get_or_create(normalized="conta", defaults={"text": "conta"})
    config_version_bump()

    result = calibrate(routing_tests_spec(examples, DRAFT), [])

    conflict = next(c for c in result.keyword_conflicts if c["keyword"] == "conta")
    assert conflict["intent"] == "billing_invoice_explanation" and conflict["count"] >= 2
    assert "me conta uma piada" in conflict["examples"]
    assert any("exclusion on the keyword" in line for line in result.explanation())

    keyword.exclusions = ["me conta"]
    keyword.save(update_fields=["exclusions"])
    config_version_bump()

    after = calibrate(routing_tests_spec(examples, DRAFT), [])
    assert all(not set(c["examples"]) & {"me conta uma piada"} for c in after.keyword_conflicts)


def test_the_keyword_check_proposed_sets_aside_none_of_the_profiles_own_examples_with_a_keyword(examples, staff_client):
    from releases.calibration import KEYWORD_CHECK_BARS, near_copies

    spec = routing_tests_spec(examples, DRAFT)
    result = calibrate(spec, [])

    index = spec.router.examples
    rows = np.asarray(
        [row for row, text in enumerate(index.texts[: index._ends[len(index.intents) - 1]]) if spec.router.match(text)]
    )
    highest = max(
        index.match_text(index.texts[row], exclude=left).none_of_these[1]
        for row, left in zip(rows, near_copies(index.texts, rows), strict=True)
    )
    assert result.keyword_check in KEYWORD_CHECK_BARS and result.keyword_check >= 0.9
    assert result.keyword_check > highest or result.keyword_check == 1.0
    page = staff_client.get("/admin/releases/routingtestcase/calibrate/", {"profile": "telecom_contas"})
    assert 'id="keyword-check"' in page.content.decode()


def test_a_keyword_taking_messages_in_a_language_its_intent_never_uses_it_in_is_reported_with_the_limit_to_set(
    examples,
):
    from common.config_version import config_version_bump

    orders = examples.intents.get(name="retail_order_tracking")
    orders.examples = [*DELIVERY, "meu pedido ainda não chegou", "o pedido P100 está atrasado, cadê?"]
    orders.save(update_fields=["examples"])
    Intent.objects.filter(profile=examples, name="support_request").update(
        examples=[
            "el pedido me llegó roto y quiero cambiarlo",
            "el aparato del pedido vino defectuoso, ¿cómo lo devuelvo?",
            "o aparelho veio com defeito, quero trocar",
        ]
    )
    config_version_bump()

    result = calibrate(routing_tests_spec(examples, DRAFT), [])

    capture = next(c for c in result.keyword_language_captures if c["keyword"] == "pedido")
    assert capture["intent"] == "retail_order_tracking" and capture["count"] >= 2
    assert capture["languages"] == ["es"] and capture["suggested"] == ["pt"]
    assert "el pedido me llegó roto y quiero cambiarlo" in capture["examples"]
    assert any("limiting each keyword to the languages suggested" in line for line in result.explanation())
    assert result.as_dict()["keyword_language_captures"] == result.keyword_language_captures

    keyword = orders.keywords.get(text="pedido")
    keyword.languages = ["pt"]
    keyword.save(update_fields=["languages"])
    config_version_bump()

    after = calibrate(routing_tests_spec(examples, DRAFT), [])
    assert all(c["keyword"] != "pedido" for c in after.keyword_language_captures)
