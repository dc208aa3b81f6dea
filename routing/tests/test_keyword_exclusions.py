"""Keyword exclusions end to end: edited on the intent page and the keyword page, carried by the profile's document
(and read from versions published before them), said in words by the diff, imported and exported as YAML under the
import's rights, explained by the route preview and shown by ``/api/debug/route``.

The matching itself (both kinds, occurrences inside and outside, accents and case) is in ``test_router.py``.
"""

from __future__ import annotations

import copy

import pytest
import yaml
from auditlog.models import LogEntry
from django.contrib.auth.models import Permission
from django.urls import reverse

from releases.configio import ConfigImportError, Source, config_export_data, config_import
from releases.configio import messages as m
from releases.versions import NothingToPublish, document_diff, version_publish
from routing.documents import profile_compile, profile_documents
from routing.models import (
    ERROR_EXCLUSION_COMMA,
    ERROR_EXCLUSION_EMPTY,
    ERROR_EXCLUSION_IN_KEYWORD,
    ERROR_EXCLUSION_REPEATED,
    Intent,
    Keyword,
)
from routing.selectors import live_version
from tests.adminkit import add_url, change_url, changelist_url, error_messages, form_data

pytestmark = pytest.mark.django_db

PREVIEW_URL = "/admin/routing/intent/preview/"


@pytest.fixture
def billing(telecom) -> Intent:
    return Intent.objects.get(profile=telecom, name="billing_invoice_explanation")


def excluding(billing: Intent, *phrases: str) -> Keyword:
    keyword = billing.keywords.get(text="conta")
    keyword.exclusions = list(phrases)
    keyword.save(update_fields=["exclusions"])
    return keyword


def post_exclusions(client, intent: Intent, keyword: str, text: str):
    """Post the intent page as rendered, with ``text`` in the "Not in" box of ``keyword``'s row."""
    data = form_data(client.get(change_url(intent)))
    (prefix,) = [name[: -len("-text")] for name, value in data.items() if name.endswith("-text") and value == keyword]
    data[f"{prefix}-exclusions"] = text
    return client.post(change_url(intent), data)


# -- the admin ---------------------------------------------------------------------------------------------------


def test_the_intent_page_saves_exclusions_written_one_per_line_or_with_commas(staff_client, billing):
    response = post_exclusions(staff_client, billing, "conta", "me conta, conta corrente\nbanco")

    assert response.status_code == 302, error_messages(response)
    assert billing.keywords.get(text="conta").exclusions == ["me conta", "conta corrente", "banco"]


def test_the_intent_page_shows_the_stored_exclusions_one_per_line_and_saves_them_unchanged(staff_client, billing):
    excluding(billing, "me conta", "banco")
    page = staff_client.get(change_url(billing))

    assert "Not in" in page.content.decode()
    response = staff_client.post(change_url(billing), form_data(page))
    assert response.status_code == 302, error_messages(response)
    assert billing.keywords.get(text="conta").exclusions == ["me conta", "banco"]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("me conta, !!!", ERROR_EXCLUSION_EMPTY.format(phrase="!!!")),
        ("me conta\nME CONTÁ", ERROR_EXCLUSION_REPEATED.format(phrase="ME CONTÁ", other="me conta")),
        ("conta", ERROR_EXCLUSION_IN_KEYWORD.format(phrase="conta", keyword="conta")),
    ],
    ids=["no letter or digit", "repeated", "the keyword itself"],
)
def test_a_bad_exclusion_is_an_error_on_the_keywords_not_in_field(staff_client, billing, text, error):
    response = post_exclusions(staff_client, billing, "conta", text)

    assert response.status_code == 200
    (formset,) = [inline.formset for inline in response.context["inline_admin_formsets"]]
    (row,) = [form for form in formset.forms if form.instance.text == "conta"]
    assert row.errors == {"exclusions": [error]}
    assert billing.keywords.get(text="conta").exclusions == []


def test_a_routing_editor_edits_exclusions_as_they_edit_keywords(editor_client, billing):
    response = post_exclusions(editor_client, billing, "conta", "me conta")

    assert response.status_code == 302, error_messages(response)
    assert billing.keywords.get(text="conta").exclusions == ["me conta"]


def test_the_keyword_page_lists_adds_and_changes_exclusions(staff_client, billing):
    excluding(billing, "me conta", "banco")
    listed = staff_client.get(changelist_url(Keyword), {"q": "conta"})
    assert "me conta, banco" in listed.content.decode()

    data = form_data(staff_client.get(add_url(Keyword)))
    data.update({"intent": billing.pk, "text": "débito", "exclusions": "débito em conta, cartão de débito"})
    assert staff_client.post(add_url(Keyword), data).status_code == 302
    added = Keyword.objects.get(intent=billing, text="débito")
    assert added.exclusions == ["débito em conta", "cartão de débito"]

    data = form_data(staff_client.get(change_url(added)))
    data["exclusions"] = "débito"
    response = staff_client.post(change_url(added), data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors == {
        "exclusions": [ERROR_EXCLUSION_IN_KEYWORD.format(phrase="débito", keyword="débito")]
    }


def test_the_field_history_records_an_exclusions_change(staff_client, billing):
    post_exclusions(staff_client, billing, "conta", "me conta")

    keyword = billing.keywords.get(text="conta")
    entry = LogEntry.objects.get_for_object(keyword).latest("timestamp")
    assert entry.changes_dict["exclusions"] == ["[]", '["me conta"]']
    history = staff_client.get(reverse("admin:routing_intent_history", args=[billing.pk]))
    page = history.content.decode()
    assert history.status_code == 200 and "exclusions" in page.lower() and "me conta" in page


# -- the document, versions and the diff -----------------------------------------------------------------------------


def test_the_document_holds_each_keywords_exclusions_sorted_and_the_compile_applies_them(telecom, billing):
    excluding(billing, "me conta", "conta corrente")

    document = profile_documents()["telecom_contas"]

    intents = document["intents"]
    assert intents["billing_invoice_explanation"]["keyword_exclusions"] == {"conta": ["conta corrente", "me conta"]}
    assert intents["retail_order_tracking"]["keyword_exclusions"] == {}
    router = profile_compile(document, pk=telecom.pk).router
    assert router.match("me conta do meu pedido")[0].intent.name == "retail_order_tracking"
    assert router.match("me conta o valor da conta")[0].intent.name == "billing_invoice_explanation"


def without_later_keys(document: dict) -> dict:
    """``document`` as a version published before exclusions and the examples tier's two settings were stored."""
    old = copy.deepcopy(document)
    for intent in old["intents"].values():
        del intent["keyword_exclusions"]
    del old["profile"]["out_of_scope_examples"], old["profile"]["examples_state_threshold"]
    return old


def test_a_version_published_before_exclusions_compiles_with_none_and_differs_in_nothing_from_the_draft(telecom):
    draft = profile_documents()["telecom_contas"]
    old = without_later_keys(draft)
    version_publish(profile=telecom, document=old, note="before exclusions")

    live = live_version(telecom)
    assert live is not None and "keyword_exclusions" not in live.document["intents"]["billing_invoice_explanation"]
    assert document_diff(live.document, draft) == []
    assert document_diff(draft, live.document) == []
    spec = profile_compile(live.document, pk=telecom.pk)
    assert all(intent.keyword_exclusions == () for intent in spec.intents)
    assert spec.router.match("me conta")[0].intent.name == "billing_invoice_explanation"
    with pytest.raises(NothingToPublish):  # the draft serves what the live version serves
        version_publish(profile=telecom, note="nothing new")


def test_the_diff_says_which_exclusion_of_which_keyword_was_added_or_removed(telecom, billing):
    excluding(billing, "banco")
    before = profile_documents()["telecom_contas"]
    excluding(billing, "me conta")

    texts = [change.text for change in document_diff(before, profile_documents()["telecom_contas"])]

    assert texts == [
        "keyword 'conta' of billing_invoice_explanation: not in 'me conta' added",
        "keyword 'conta' of billing_invoice_explanation: not in 'banco' removed",
    ]


def test_the_diff_against_an_old_version_names_only_the_exclusions_added_since(telecom, billing):
    old = without_later_keys(profile_documents()["telecom_contas"])
    excluding(billing, "me conta")

    texts = [change.text for change in document_diff(old, profile_documents()["telecom_contas"])]

    assert texts == ["keyword 'conta' of billing_invoice_explanation: not in 'me conta' added"]


# -- YAML ------------------------------------------------------------------------------------------------------------


def routing_file(*intent_lines: str) -> Source:
    body = "\n".join(f"    {line}" for line in intent_lines)
    text = (
        f"agent_id: telecom_contas\nintents:\n  - name: billing_invoice_explanation\n    agent: billing_agent\n{body}\n"
    )
    return Source("routing.yaml", text)


def import_problems(*sources: Source, user=None) -> list[str]:
    with pytest.raises(ConfigImportError) as refused:
        config_import(sources=list(sources), user=user)
    return refused.value.messages


def test_the_export_writes_an_intents_exclusions_and_imports_back_unchanged(telecom, billing):
    excluding(billing, "me conta", "banco")

    files = config_export_data()

    intents = {intent["name"]: intent for intent in files["routing.telecom_contas.yaml"]["intents"]}
    assert intents["billing_invoice_explanation"]["keyword_exclusions"] == {"conta": ["banco", "me conta"]}
    assert "keyword_exclusions" not in intents["retail_order_tracking"]
    before = profile_documents()
    text = yaml.safe_dump(files["routing.telecom_contas.yaml"], allow_unicode=True)
    report = config_import(sources=[Source("routing.telecom_contas.yaml", text)])
    assert not report.changed
    assert profile_documents() == before


def test_an_import_sets_and_clears_exclusions_matching_the_keyword_as_keywords_match(telecom, billing):
    config_import(sources=[routing_file("keyword_exclusions: {CONTA: [me conta, conta corrente]}")])
    assert billing.keywords.get(text="conta").exclusions == ["me conta", "conta corrente"]
    assert billing.keywords.count() == 8  # the file left the keywords as they are

    config_import(sources=[routing_file("keywords: [fatura, conta]")])  # the key left out: kept
    assert billing.keywords.get(text="conta").exclusions == ["me conta", "conta corrente"]

    config_import(sources=[routing_file("keyword_exclusions: {}")])
    assert billing.keywords.get(text="conta").exclusions == []


def test_an_import_gives_new_keywords_their_exclusions(telecom, billing):
    config_import(sources=[routing_file("keywords: [fatura, saldo]", "keyword_exclusions: {saldo: [saldo do banco]}")])

    assert billing.keywords.get(text="saldo").exclusions == ["saldo do banco"]


def test_an_import_refuses_an_exclusion_of_a_keyword_the_intent_does_not_list_naming_its_place(telecom, billing):
    problems = import_problems(routing_file("keywords: [fatura, conta]", "keyword_exclusions: {contas: [me conta]}"))

    assert problems == [
        "routing.yaml:6: intents[0].keyword_exclusions.contas: "
        + m.ERROR_EXCLUSION_UNKNOWN_KEYWORD.format(keyword="contas", keywords="'conta', 'fatura'")
    ]
    assert billing.keywords.count() == 8


def test_an_import_checks_an_exclusions_keyword_against_the_stored_keywords_when_the_file_leaves_them_out(billing):
    problems = import_problems(routing_file("keyword_exclusions: {saldo: [saldo do banco]}"))

    assert len(problems) == 1 and "intents[0].keyword_exclusions.saldo: 'saldo' is not a keyword" in problems[0]


def test_an_import_refuses_empty_and_non_text_phrases_each_on_its_line(telecom, billing):
    problems = import_problems(
        routing_file("keyword_exclusions:", "  conta:", "    - me conta", "    - '  '", "    - 42", "    - no")
    )

    assert problems == [
        "routing.yaml:8: intents[0].keyword_exclusions.conta[1]: "
        + ERROR_EXCLUSION_EMPTY.format(phrase="").rstrip("."),
        "routing.yaml:9: intents[0].keyword_exclusions.conta[2]: "
        + m.ERROR_TYPE.format(expected="a string", actual="an integer"),
        "routing.yaml:10: intents[0].keyword_exclusions.conta[3]: " + m.ERROR_WORD_BOOLEAN,
    ]
    assert billing.keywords.get(text="conta").exclusions == []


def test_an_import_refuses_a_phrase_with_a_comma_which_the_admin_would_split(telecom):
    problems = import_problems(routing_file("keyword_exclusions: {conta: ['me conta, por favor']}"))

    assert problems == [
        "routing.yaml:5: intents[0].keyword_exclusions.conta[0]: "
        + ERROR_EXCLUSION_COMMA.format(phrase="me conta, por favor").rstrip(".")
    ]


def test_an_import_refuses_exclusions_that_are_not_a_mapping_of_lists(telecom):
    problems = import_problems(routing_file("keyword_exclusions: [conta]"))
    assert problems == [
        "routing.yaml:5: intents[0].keyword_exclusions: " + m.ERROR_TYPE.format(expected="a mapping", actual="a list")
    ]
    problems = import_problems(routing_file("keyword_exclusions: {conta: me conta}"))
    assert problems == [
        "routing.yaml:5: intents[0].keyword_exclusions.conta: "
        + m.ERROR_TYPE.format(expected="a list", actual="a string")
    ]


def test_a_routing_editor_may_import_exclusions(editor, billing):
    config_import(sources=[routing_file("keyword_exclusions: {conta: [me conta]}")], user=editor)

    assert billing.keywords.get(text="conta").exclusions == ["me conta"]


def test_a_user_who_may_change_intents_but_not_keywords_may_not_import_exclusions(django_user_model, billing):
    user = django_user_model.objects.create_user("intents_only", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["change_intent", "view_intent"]))

    problems = import_problems(routing_file("keyword_exclusions: {conta: [me conta]}"), user=user)

    assert problems == [
        "routing.yaml:5: intents[0].keyword_exclusions.conta: "
        + m.ERROR_FORBIDDEN.format(
            user="intents_only", verb="change", permission_word="permission", permissions="routing.change_keyword"
        )
    ]
    assert billing.keywords.get(text="conta").exclusions == []


# -- the route preview and /api/debug/route ------------------------------------------------------------------------


def test_the_route_preview_says_why_a_keyword_did_not_count(staff_client, telecom, billing):
    excluding(billing, "me conta", "banco")

    response = staff_client.get(PREVIEW_URL, {"profile": telecom.pk, "text": "me conta do meu pedido"})

    preview = response.context["preview"]
    assert preview.decision.intent == "retail_order_tracking"
    assert preview.excluded == [
        "'conta' did not count: it is inside 'me conta', an exclusion of billing_invoice_explanation"
    ]
    page = response.content.decode()
    assert "did not count: it is inside &#x27;me conta&#x27;, an exclusion of billing_invoice_explanation" in page


def test_the_route_preview_explains_a_context_exclusion_on_a_fallback(staff_client, telecom, billing):
    excluding(billing, "banco")

    response = staff_client.get(PREVIEW_URL, {"profile": telecom.pk, "text": "a conta do banco"})

    preview = response.context["preview"]
    assert preview.decision.method == "fallback"
    assert preview.excluded == [
        "'conta' did not count: 'banco' is in the message, an exclusion of billing_invoice_explanation"
    ]


def test_the_debug_route_shows_the_cancelled_keyword_in_the_decisions_metadata(debug_api, telecom, billing):
    excluding(billing, "me conta")

    response = debug_api.post(
        "/api/debug/route",
        {"channel": "web", "agent_id": "telecom_contas", "payload": {"text": "me conta uma piada", "session_id": "s1"}},
        format="json",
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["method"] == "fallback"
    assert body["metadata"]["excluded_keywords"] == [
        {"intent": "billing_invoice_explanation", "keyword": "conta", "exclusion": "me conta", "kind": "inside"}
    ]
