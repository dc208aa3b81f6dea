"""Saved conversation tests in the admin, as forms: the list per profile, the test's fields and each turn a row of
fields a business user fills (the rest of ``expect`` in a JSON box), every problem the contract finds on the field it
is about, the profile's page linking the list, and the routing editors' rights."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from releases.evals.forms import MORE_FIELD, TURN_PREFIX
from releases.models import ConversationTest
from tests.adminkit import add_url, change_url, changelist_url, error_messages, form_data

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

EXAMPLE_TURNS = [
    {
        "user": "minha fatura veio alta este mês",
        "expect": {
            "agent": "billing_agent",
            "intent": "billing_invoice_explanation",
            "answer_language": "pt",
            "answer_contains": ["fatura"],
            "answer_not_contains": ["Subject:"],
            "tools_called": ["consultar_fatura"],
        },
    },
    {
        "user": "obrigado, era isso",
        "expect": {
            "no_state": True,
            "judge": {"rubric": "Thanks the customer and asks for nothing else.", "min_score": 0.7},
        },
    },
]


def field(turn: int, name: str) -> str:
    return f"{TURN_PREFIX}-{turn}-{name}"


def saved_test(profile, **fields) -> ConversationTest:
    values = {"name": "fatura alta", "language": "pt", "context": {"msisdn": "5511999999999"}, "turns": EXAMPLE_TURNS}
    return ConversationTest.objects.create(profile=profile, **{**values, **fields})


def add_data(client, profile) -> dict:
    page = client.get(add_url(ConversationTest), {"profile": profile.pk})
    assert page.status_code == 200
    data = form_data(page)
    data.update(name="fatura alta", language="pt", required="on", enabled="on")
    return data


def test_the_list_shows_each_tests_name_rights_turns_and_language_per_profile(editor_client, telecom):
    saved_test(telecom)
    saved_test(telecom, name="desligado", required=False, language="en", turns=EXAMPLE_TURNS[:1])

    page = editor_client.get(changelist_url(ConversationTest), {"profile__id__exact": telecom.pk})

    assert page.status_code == 200
    rows = {row.name: row for row in page.context["cl"].result_list}
    assert set(rows) == {"fatura alta", "desligado"}
    admin = page.context["cl"].model_admin
    assert [admin.turns_count(rows["fatura alta"]), admin.turns_count(rows["desligado"])] == [2, 1]
    text = page.content.decode()
    for column in ("column-name", "column-required", "column-enabled", "column-turns_count", "column-language"):
        assert column in text


def test_a_test_written_in_the_turns_fields_is_saved_in_the_contracts_shape(editor_client, telecom):
    data = add_data(editor_client, telecom)
    data.update(
        {
            field(0, "user"): "minha fatura veio alta este mês",
            field(0, "agent"): "billing_agent",
            field(0, "intent"): "billing_invoice_explanation",
            field(0, "answer_language"): "pt",
            field(0, "answer_contains"): "fatura",
            field(0, "answer_not_contains"): "Subject:",
            field(0, "tools_called"): "consultar_fatura",
        }
    )

    answer = editor_client.post(add_url(ConversationTest), data)

    assert answer.status_code == 302, error_messages(answer)
    saved = ConversationTest.objects.get(profile=telecom, name="fatura alta")
    assert saved.turns == [EXAMPLE_TURNS[0]]
    assert saved.required and saved.enabled and saved.language == "pt"


def test_a_saved_tests_page_shows_each_turn_in_its_fields_and_saves_back_unchanged(editor_client, telecom):
    turns = [*EXAMPLE_TURNS, {"user": "e o pix?", "expect": {"tools_called": {"consultar_fatura": {"msisdn": "1"}}}}]
    test = saved_test(telecom, turns=turns, tool_answers={"consultar_fatura": {"total": 120}})
    page = editor_client.get(change_url(test))
    formset = page.context["adminform"].form.turns

    assert [form.initial["user"] for form in formset.initial_forms] == [turn["user"] for turn in turns]
    first, second, third = formset.initial_forms
    assert first.initial["answer_contains"] == ["fatura"]
    assert (second.initial["judge_rubric"], second.initial["judge_min_score"]) == (
        "Thanks the customer and asks for nothing else.",
        0.7,
    )
    assert second.initial[MORE_FIELD] == {"no_state": True}
    assert third.initial[MORE_FIELD] == {"tools_called": {"consultar_fatura": {"msisdn": "1"}}}  # arguments: the box
    answer = editor_client.post(change_url(test), form_data(page))

    assert answer.status_code == 302, error_messages(answer)
    test.refresh_from_db()
    assert test.turns == turns
    assert test.tool_answers == {"consultar_fatura": {"total": 120}}


def test_each_problem_of_a_turn_is_shown_on_its_field(editor_client, telecom):
    telecom.guardrails = {**(telecom.guardrails or {}), "max_input_chars": 20}
    telecom.save(update_fields=["guardrails"])
    data = add_data(editor_client, telecom)
    data.update(
        {
            field(0, "user"): "minha fatura veio alta este mês",
            field(0, "agent"): "billing_agnt",
            field(0, "judge_rubric"): "Explains the invoice.",
            field(0, MORE_FIELD): '{"answr_matches": "fatura", "escalated": "no"}',
        }
    )

    answer = editor_client.post(add_url(ConversationTest), data)

    assert answer.status_code == 200
    turn = answer.context["adminform"].form.turns.forms[0]
    assert turn.errors["agent"] == ["“billing_agnt” is not a specialist of telecom_contas."]
    assert turn.errors["user"] == ["longer than the profile's limit of 20 characters (31)."]
    assert turn.errors["judge_min_score"] == ["required number from 0 to 1 (the lowest score that passes)."]
    more = turn.errors[MORE_FIELD]
    assert any(error.startswith("answr_matches: unknown key 'answr_matches'") for error in more), more
    assert "escalated: must be true or false." in more
    assert not ConversationTest.objects.exists()
    text = answer.content.decode()
    assert "billing_agnt" in text and "unknown key" in text


def test_a_json_box_that_is_not_json_or_nests_too_deep_is_an_error_on_it(editor_client, telecom):
    data = add_data(editor_client, telecom)
    data.update({field(0, "user"): "oi", field(0, MORE_FIELD): "[" * 5000, field(0, "context"): "{msisdn: 1}"})

    answer = editor_client.post(add_url(ConversationTest), data)

    assert answer.status_code == 200
    turn = answer.context["adminform"].form.turns.forms[0]
    assert turn.errors[MORE_FIELD][0].startswith("Not JSON: The JSON is nested more than")
    assert turn.errors["context"][0].startswith("Not JSON:")


def test_a_test_with_no_turn_or_checking_nothing_is_refused_with_a_reason(editor_client, telecom):
    data = add_data(editor_client, telecom)
    data["language"] = ""

    empty = editor_client.post(add_url(ConversationTest), data)
    data[field(0, "user")] = "oi"
    unchecked = editor_client.post(add_url(ConversationTest), data)

    assert "Write at least one turn: the customer's message." in error_messages(empty)
    assert any(error.startswith("checks nothing") for error in error_messages(unchecked)), error_messages(unchecked)
    assert not ConversationTest.objects.exists()


def test_a_turn_is_deleted_by_its_box_and_a_new_one_added_in_the_blank_row(editor_client, telecom):
    test = saved_test(telecom)
    page = editor_client.get(change_url(test))
    data = form_data(page)
    data[field(0, "DELETE")] = "on"
    data[field(2, "user")] = "e a segunda via?"
    data[field(2, "answer_contains")] = "segunda via\nboleto"

    answer = editor_client.post(change_url(test), data)

    assert answer.status_code == 302, error_messages(answer)
    test.refresh_from_db()
    assert [turn["user"] for turn in test.turns] == ["obrigado, era isso", "e a segunda via?"]
    assert test.turns[1]["expect"] == {"answer_contains": ["segunda via", "boleto"]}


def test_the_profiles_page_links_its_conversation_tests(editor_client, telecom):
    page = editor_client.get(change_url(telecom)).content.decode()

    assert f'{changelist_url(ConversationTest)}?profile__id__exact={telecom.pk}"' in page


def test_a_staff_user_without_the_tests_rights_may_not_add_one(client, django_user_model, telecom):
    user = django_user_model.objects.create_user("viewer", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_conversationtest"))
    client.force_login(user)

    assert client.get(changelist_url(ConversationTest)).status_code == 200
    assert client.get(add_url(ConversationTest)).status_code == 403
    assert client.post(add_url(ConversationTest), {"profile": telecom.pk, "name": "x"}).status_code == 403
