"""A saved routing test's expectation in the admin, one field per key: intent and specialist chosen from the
test's profile, how it is decided from the router's methods, the next state from the profile's states, goal and
goal status where the profile is in goal mode. A blank field is not checked; errors name the field."""

from __future__ import annotations

import datetime
import typing

import pytest

from agents.models import RoutingMode
from releases.forms import RoutingTestCaseForm
from releases.models import RoutingTestCase
from routing import routing_test_drafts as drafts
from routing.expectations import ROUTING_TEST_KEYS
from routing.forms import (
    ERROR_EXPECT_NOTHING,
    EXPECT_LABELS,
    METHOD_WORDS,
    expect_field,
)
from routing.models import Goal
from routing.router import Method
from tests.adminkit import add_url, change_url, error_messages, form_data
from tests.factories import (
    AgentProfileFactory,
    IntentFactory,
    McpServerFactory,
    SpecialistFactory,
    StatePolicyFactory,
)

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

GOAL_KEYS = ("goal", "status")


def values(field) -> list[str]:
    """A choice field's values, groups opened, the blank left out."""
    found = []
    for value, label in field.choices:
        if isinstance(label, (list, tuple)):
            found.extend(str(inner) for inner, _ in label)
        elif value:
            found.append(str(value))
    return found


def groups(field) -> list[str]:
    return [str(value) for value, label in field.choices if isinstance(label, (list, tuple))]


@pytest.fixture
def other_profile(db):
    """A second profile with an intent of the same name as telecom's: the choices must not mix them."""
    profile = AgentProfileFactory(agent_id="retail_orders")
    IntentFactory(profile=profile, name="support_request", specialist=SpecialistFactory(profile=profile, name="desk"))
    IntentFactory(profile=profile, name="order_status", specialist=SpecialistFactory(profile=profile, name="shop"))
    return profile


def add_page(client, telecom, **params):
    response = client.get(add_url(RoutingTestCase), {"profile": telecom.pk, **params})
    assert response.status_code == 200
    return response


def post_add(client, telecom, **expect):
    data = form_data(add_page(client, telecom))
    data.update(name="modem", message="meu modem parou", enabled="on")
    data.update({expect_field(key): value for key, value in expect.items()})
    return client.post(add_url(RoutingTestCase) + f"?profile={telecom.pk}", data)


def test_the_add_form_has_one_field_per_expectation_and_no_json_box(editor_client, telecom):
    form = add_page(editor_client, telecom).context["adminform"].form
    page = add_page(editor_client, telecom).content.decode()

    for key in ("intent", "agent", "method", "next_state"):
        assert expect_field(key) in form.fields
        assert f'name="{expect_field(key)}"' in page
    assert 'name="expect"' not in page and "{&quot;intent&quot;" not in page


def test_intent_and_specialist_are_chosen_from_the_tests_profile_only(editor_client, telecom, other_profile):
    form = add_page(editor_client, telecom).context["adminform"].form

    intents = values(form.fields[expect_field("intent")])
    agents = values(form.fields[expect_field("agent")])

    assert {"billing_invoice_explanation", "retail_order_tracking", "support_request", "fallback"} <= set(intents)
    assert "order_status" not in intents and intents.count("support_request") == 1
    assert {"billing_agent", "orders_agent", "product_agent", "support_agent"} <= set(agents)
    assert "desk" not in agents and "shop" not in agents


def test_the_method_is_chosen_from_every_way_the_router_decides_in_words(editor_client, telecom):
    form = add_page(editor_client, telecom).context["adminform"].form

    assert set(values(form.fields[expect_field("method")])) == set(typing.get_args(Method))
    assert set(METHOD_WORDS) == set(typing.get_args(Method))
    labels = dict(form.fields[expect_field("method")].choices)
    assert labels["keyword"].startswith("keyword") and len(labels["keyword"]) > len("keyword")


def test_the_next_state_is_chosen_from_the_profiles_states_and_blank_checks_none(editor_client, telecom):
    billing = telecom.intents.get(name="billing_invoice_explanation")
    billing.next_state = "WAITING_PAYMENT_CONFIRMATION"
    billing.save(update_fields=["next_state"])
    StatePolicyFactory(profile=telecom, state="WAITING_ORDER_NUMBER", specialist=billing.specialist)

    field = add_page(editor_client, telecom).context["adminform"].form.fields[expect_field("next_state")]

    assert values(field) == ["WAITING_ORDER_NUMBER", "WAITING_PAYMENT_CONFIRMATION"]
    assert field.choices[0][0] == "" and "not checked" in str(field.choices[0][1])


def test_the_filled_fields_make_the_expectation_and_blank_ones_are_not_checked(editor_client, telecom):
    response = post_add(editor_client, telecom, intent="support_request", agent="support_agent")

    assert response.status_code == 302, error_messages(response)
    assert RoutingTestCase.objects.get(name="modem").expect == {"intent": "support_request", "agent": "support_agent"}


def test_a_test_that_checks_nothing_is_refused_with_the_fields_named(editor_client, telecom):
    response = post_add(editor_client, telecom)

    assert response.status_code == 200
    assert ERROR_EXPECT_NOTHING in error_messages(response)
    for key in ("intent", "agent", "method", "next_state"):
        assert EXPECT_LABELS[key].lower() in ERROR_EXPECT_NOTHING.lower()
    assert not RoutingTestCase.objects.exists()


def test_an_intent_of_another_profile_is_refused_on_the_intent_field(editor_client, telecom, other_profile):
    response = post_add(editor_client, telecom, intent="order_status", agent="support_agent")

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == [expect_field("intent")]
    assert errors[expect_field("intent")][0].startswith(f"{EXPECT_LABELS['intent']}: ")
    assert "order_status" in errors[expect_field("intent")][0] and "telecom_contas" in errors[expect_field("intent")][0]
    assert not RoutingTestCase.objects.exists()


def test_a_stored_expectation_fills_the_fields_and_saves_back_unchanged(editor_client, telecom):
    case = RoutingTestCase.objects.create(
        profile=telecom,
        name="bom dia",
        message="bom dia",
        # A value the draft does not list as a choice of its own (small talk), and a method.
        expect={"intent": "small_talk:greeting", "agent": "support_agent", "method": "small_talk"},
    )
    response = editor_client.get(change_url(case))
    form = response.context["adminform"].form
    assert form[expect_field("intent")].value() == "small_talk:greeting"
    assert form[expect_field("agent")].value() == "support_agent"
    assert form[expect_field("method")].value() == "small_talk"

    saved = editor_client.post(change_url(case), form_data(response))

    assert saved.status_code == 302, error_messages(saved)
    case.refresh_from_db()
    assert case.expect == {"intent": "small_talk:greeting", "agent": "support_agent", "method": "small_talk"}


def test_goal_and_status_are_offered_where_the_profile_is_in_goal_mode(editor_client, telecom):
    page = add_page(editor_client, telecom)
    assert not any(expect_field(key) in page.content.decode() for key in GOAL_KEYS)

    finance = McpServerFactory(name="finance")
    Goal.objects.create(server=finance, domain="finance", name="TOP_MOVERS")
    telecom.routing_mode = RoutingMode.GOAL
    telecom.save(update_fields=["routing_mode"])
    form = add_page(editor_client, telecom).context["adminform"].form

    assert f'name="{expect_field("goal")}"' in add_page(editor_client, telecom).content.decode()
    assert "finance.TOP_MOVERS" in values(form.fields[expect_field("goal")])
    assert set(values(form.fields[expect_field("status")])) == {"plan", "clarification", "general", "failure"}
    response = post_add(editor_client, telecom, goal="finance.TOP_MOVERS", status="plan")
    assert response.status_code == 302, error_messages(response)
    assert RoutingTestCase.objects.get(name="modem").expect == {"goal": "finance.TOP_MOVERS", "status": "plan"}


def test_the_add_page_without_a_profile_groups_the_choices_by_profile(editor_client, telecom, other_profile):
    form = editor_client.get(add_url(RoutingTestCase)).context["adminform"].form

    intent = form.fields[expect_field("intent")]
    assert {"telecom_contas", "retail_orders"} <= set(groups(intent))
    assert values(intent).count("support_request") == 2  # one per profile, each under its profile's name


def test_a_link_made_from_a_decision_fills_the_intent_and_specialist_fields(editor_client, telecom):
    url = drafts.test_case_add_url(
        drafts.RoutingTestDraft(
            profile_id=telecom.pk,
            message="Fui atendido muito mal na loja",
            expect={"intent": "billing_invoice_explanation", "agent": "billing_agent"},
        )
    )

    form = editor_client.get(url).context["adminform"].form

    assert form[expect_field("intent")].value() == "billing_invoice_explanation"
    assert form[expect_field("agent")].value() == "billing_agent"
    assert form[expect_field("method")].value() in ("", None)
    assert "expect=" not in url


def test_a_link_made_from_a_message_is_named_apart_from_the_profiles_tests_of_that_name(editor_client, telecom):
    draft = drafts.RoutingTestDraft(
        profile_id=telecom.pk, message="minha fatura veio alta", when=datetime.date(2026, 11, 22)
    )
    name = "minha fatura veio alta (2026-11-22)"
    assert drafts.test_case_name(draft) == name
    RoutingTestCase.objects.create(profile=telecom, name=name, message="minha fatura veio alta")

    form = editor_client.get(drafts.test_case_add_url(draft)).context["adminform"].form

    assert form.initial["name"] == f"{name} 2"


def test_an_older_link_with_the_expectation_as_json_still_fills_the_fields(editor_client, telecom):
    form = (
        add_page(editor_client, telecom, expect='{"intent": "retail_order_tracking", "method": "keyword"}')
        .context["adminform"]
        .form
    )

    assert form[expect_field("intent")].value() == "retail_order_tracking"
    assert form[expect_field("method")].value() == "keyword"


def test_the_form_class_builds_the_expectation_on_its_own(telecom):
    form = RoutingTestCaseForm(
        data={
            "profile": telecom.pk,
            "name": "rastreio",
            "message": "cadê meu pedido",
            expect_field("intent"): "retail_order_tracking",
            expect_field("method"): "keyword",
            "enabled": "on",
        }
    )

    assert form.is_valid(), form.errors
    case = form.save()
    assert case.expect == {"intent": "retail_order_tracking", "method": "keyword"}
    assert set(EXPECT_LABELS) == set(ROUTING_TEST_KEYS)


# -- a conversation: the earlier turns, one per line, and what the conversation must show ----------------------------

FLOW = "WAITING_PAYMENT_CONFIRMATION"
TURNS = (
    "Minha fatura veio alta | intent: billing_invoice_explanation; state after: WAITING_PAYMENT_CONFIRMATION\n"
    "\n"
    "antes disso, cadê meu pedido? | events: pushed, resumed; specialist: orders_agent\n"
    "obrigado!\n"
)


@pytest.fixture
def flow(telecom):
    billing = telecom.intents.get(name="billing_invoice_explanation")
    billing.next_state = FLOW
    billing.save(update_fields=["next_state"])
    return telecom


def post_conversation(client, telecom, turns: str, **expect):
    data = form_data(add_page(client, telecom))
    data.update(name="conversa", message="sim", enabled="on", turns=turns)
    data.update({expect_field(key): value for key, value in (expect or {"method": "state"}).items()})
    return client.post(add_url(RoutingTestCase) + f"?profile={telecom.pk}", data)


def test_the_earlier_turns_are_written_a_line_each_and_saved_with_their_expectations(editor_client, flow):
    response = post_conversation(editor_client, flow, TURNS)

    assert response.status_code == 302, error_messages(response)
    assert RoutingTestCase.objects.get(name="conversa").turns == [
        {"message": "Minha fatura veio alta", "expect": {"intent": "billing_invoice_explanation", "state_after": FLOW}},
        {
            "message": "antes disso, cadê meu pedido?",
            "expect": {"events": ["pushed", "resumed"], "agent": "orders_agent"},
        },
        {"message": "obrigado!"},
    ]


def test_a_stored_conversation_shows_its_turns_as_lines_and_saves_back_unchanged(editor_client, flow):
    turns = [
        {"message": "Minha fatura veio alta", "expect": {"intent": "billing_invoice_explanation", "state_after": FLOW}},
        {"message": "deixa pra lá", "expect": {"repair": "cancel", "state_after": "", "events": ["cancelled"]}},
        {"message": "obrigado!"},
    ]
    case = RoutingTestCase.objects.create(
        profile=flow,
        name="conversa",
        message="sim",
        turns=turns,
        expect={"state_after": "", "events": ["bound", "closed"], "topics": ["billing_invoice_explanation"]},
    )
    response = editor_client.get(change_url(case))
    form = response.context["adminform"].form

    assert form["turns"].value().splitlines() == [
        "Minha fatura veio alta | intent: billing_invoice_explanation; state after: WAITING_PAYMENT_CONFIRMATION",
        "deixa pra lá | events: cancelled; repair: cancel; state after: (none)",
        "obrigado!",
    ]
    assert form[expect_field("state_after")].value() == "(none)"
    assert form[expect_field("events")].value() == ["bound", "closed"]
    saved = editor_client.post(change_url(case), form_data(response, newline="\r\n"))

    assert saved.status_code == 302, error_messages(saved)
    case.refresh_from_db()
    assert case.turns == turns
    assert case.expect == {"state_after": "", "events": ["bound", "closed"], "topics": ["billing_invoice_explanation"]}


def test_what_the_conversation_must_show_is_chosen_in_fields_of_its_own(editor_client, flow):
    form = add_page(editor_client, flow).context["adminform"].form

    assert values(form.fields[expect_field("events")]) == [
        "opened",
        "pushed",
        "resumed",
        "bound",
        "closed",
        "cancelled",
        "expired",
        "queued",
    ]
    assert set(values(form.fields[expect_field("repair")])) == {"cancel", "correct", "repeat", "skip", "already_told"}
    assert values(form.fields[expect_field("state_after")]) == ["(none)", FLOW]
    assert "retail_order_tracking" in values(form.fields[expect_field("topics")])

    response = post_conversation(
        editor_client, flow, "", events=["pushed", "resumed"], state_after="(none)", repair="cancel"
    )

    assert response.status_code == 302, error_messages(response)
    case = RoutingTestCase.objects.get(name="conversa")
    assert case.turns == [] and case.expect == {"events": ["pushed", "resumed"], "state_after": "", "repair": "cancel"}


@pytest.mark.parametrize(
    "turns, problem",
    [
        ("oi | intnt: x", "Turn 1 (“oi”): “intnt: x” is not one of “what: value” (what: intent, specialist,"),
        ("oi | intent x", "Turn 1 (“oi”): “intent x” is not one of “what: value”"),
        ("oi | intent: a; intent: b", "Turn 1 (“oi”): intent is given twice."),
        ("oi\nsim | events: pushd", "Turn 2 (“sim”): events: no event 'pushd' (events: opened,"),
        ("oi | repair: undo", "Turn 1 (“oi”): repair: must be one of: cancel, correct, repeat, skip, already_told."),
        ("oi | intent: order_status", "Turn 1 (“oi”): intent: “order_status” is not an intent of telecom_contas."),
        ("oi | state after: WAITING_X", "Turn 1 (“oi”): state after: “WAITING_X” is not a state of telecom_contas."),
        ("| intent: fallback", "Turn 1 (“”): the message is missing."),
        (
            "\n".join(f"oi {n}" for n in range(11)),
            "Earlier turns: at most 10 turns before the test's message (11 given).",
        ),
    ],
)
def test_bad_turns_are_refused_on_their_field_naming_the_turn(editor_client, flow, other_profile, turns, problem):
    response = post_conversation(editor_client, flow, turns)

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["turns"]
    assert any(error.startswith(problem) for error in errors["turns"]), errors["turns"]
    assert not RoutingTestCase.objects.exists()


def test_a_turns_message_longer_than_the_profiles_input_limit_is_refused(editor_client, flow):
    flow.guardrails = {"max_input_chars": 30}
    flow.save(update_fields=["guardrails"])

    response = post_conversation(editor_client, flow, "obrigado!\n" + "quero saber da minha fatura de março, por favor")

    assert response.status_code == 200
    assert error_messages(response) == [
        "Turn 2 (“quero saber da minha fatura de março, po…”): the message is longer than the profile's limit of 30 "
        "characters (47)."
    ]
