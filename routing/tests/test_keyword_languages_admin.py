"""Keywords limited to languages end to end: edited on the intent page and the keyword page, carried by the
profile's document (and read from versions published before them), said in words by the diff, imported and exported
as YAML, explained by the route preview. The matching itself: ``test_keyword_languages.py``."""

from __future__ import annotations

import copy

import pytest
import yaml

from releases.configio import ConfigImportError, Source, config_export_data, config_import
from releases.configio import messages as m
from releases.versions import document_diff, version_publish
from routing.documents import profile_compile, profile_documents
from routing.models import ERROR_KEYWORD_LANGUAGE_UNKNOWN, Intent, Keyword
from routing.selectors import live_version
from tests.adminkit import add_url, change_url, changelist_url, error_messages, form_data

pytestmark = pytest.mark.django_db

PREVIEW_URL = "/admin/routing/intent/preview/"


@pytest.fixture
def orders(telecom) -> Intent:
    return Intent.objects.get(profile=telecom, name="retail_order_tracking")


def limiting(intent: Intent, keyword: str, *languages: str) -> Keyword:
    row = intent.keywords.get(text=keyword)
    row.languages = list(languages)
    row.save(update_fields=["languages"])
    return row


def post_languages(client, intent: Intent, keyword: str, languages: list[str]):
    """Post the intent page as rendered, with ``languages`` ticked in ``keyword``'s row."""
    data = form_data(client.get(change_url(intent)))
    (prefix,) = [name[: -len("-text")] for name, value in data.items() if name.endswith("-text") and value == keyword]
    data[f"{prefix}-languages"] = languages
    return client.post(change_url(intent), data)


# -- the admin ---------------------------------------------------------------------------------------------------


@pytest.mark.sqlite_too
def test_the_intent_page_saves_the_languages_ticked_for_a_keyword_in_the_platforms_order(staff_client, orders):
    response = post_languages(staff_client, orders, "pedido", ["es", "pt"])

    assert response.status_code == 302, error_messages(response)
    assert orders.keywords.get(text="pedido").languages == ["pt", "es"]
    assert orders.keywords.get(text="entrega").languages == []


@pytest.mark.sqlite_too
def test_the_intent_page_shows_the_stored_languages_ticked_and_saves_them_unchanged(staff_client, orders):
    limiting(orders, "pedido", "pt")
    page = staff_client.get(change_url(orders))

    assert "Only in" in page.content.decode()
    response = staff_client.post(change_url(orders), form_data(page))
    assert response.status_code == 302, error_messages(response)
    assert orders.keywords.get(text="pedido").languages == ["pt"]


def test_an_unknown_language_is_an_error_on_the_keywords_only_in_field(staff_client, orders):
    response = post_languages(staff_client, orders, "pedido", ["fr"])

    assert response.status_code == 200
    assert "Select a valid choice. fr is not one of the available choices." in error_messages(response)
    assert orders.keywords.get(text="pedido").languages == []


def test_a_keyword_saved_with_an_unknown_language_is_refused_by_its_clean(orders):
    keyword = orders.keywords.get(text="pedido")
    keyword.languages = ["pt", "fr"]

    with pytest.raises(Exception) as refused:
        keyword.full_clean()

    assert refused.value.message_dict == {  # type: ignore[attr-defined]
        "languages": [ERROR_KEYWORD_LANGUAGE_UNKNOWN.format(language="fr", known="pt, es, en")]
    }


@pytest.mark.sqlite_too
def test_the_keyword_page_lists_adds_and_changes_languages(staff_client, orders):
    limiting(orders, "pedido", "pt")

    listing = staff_client.get(changelist_url(Keyword), {"q": "pedido"}).content.decode()
    assert '<td class="field-only_in">pt</td>' in listing
    assert '<td class="field-only_in">every language</td>' in staff_client.get(changelist_url(Keyword)).content.decode()
    keyword = orders.keywords.get(text="entrega")
    data = form_data(staff_client.get(change_url(keyword)))
    data["languages"] = ["pt", "es"]
    response = staff_client.post(change_url(keyword), data)
    assert response.status_code == 302, error_messages(response)
    assert orders.keywords.get(text="entrega").languages == ["pt", "es"]
    added = staff_client.post(
        add_url(Keyword), {"intent": orders.pk, "text": "where is my order", "exclusions": "", "languages": ["en"]}
    )
    assert added.status_code == 302, error_messages(added)
    assert orders.keywords.get(text="where is my order").languages == ["en"]


# -- the document, versions and the diff -----------------------------------------------------------------------------


def test_the_document_holds_each_keywords_languages_and_the_compile_applies_them(telecom, orders):
    limiting(orders, "pedido", "pt")

    document = profile_documents()["telecom_contas"]

    assert document["intents"]["retail_order_tracking"]["keyword_languages"] == {"pedido": ["pt"]}
    assert document["intents"]["billing_invoice_explanation"]["keyword_languages"] == {}
    router = profile_compile(document, pk=telecom.pk).router
    assert router.match("quiero saber dónde está el pedido que hice") == []
    assert router.match("quero saber onde está o pedido que fiz")[0].intent.name == "retail_order_tracking"


def test_a_version_published_before_keyword_languages_compiles_with_none_and_differs_in_nothing(telecom):
    draft = profile_documents()["telecom_contas"]
    old = copy.deepcopy(draft)
    for intent in old["intents"].values():
        del intent["keyword_languages"]
    version_publish(profile=telecom, document=old, note="before keyword languages")

    live = live_version(telecom)
    assert live is not None and "keyword_languages" not in live.document["intents"]["retail_order_tracking"]
    assert document_diff(live.document, draft) == []
    spec = profile_compile(live.document, pk=telecom.pk)
    assert all(intent.keyword_languages == () for intent in spec.intents)


def test_the_diff_says_which_keyword_was_limited_to_which_languages(telecom, orders):
    before = profile_documents()["telecom_contas"]
    limiting(orders, "pedido", "pt")
    middle = profile_documents()["telecom_contas"]
    limiting(orders, "pedido")

    assert [change.text for change in document_diff(before, middle)] == [
        "keyword 'pedido' of retail_order_tracking: limited to pt (before: every language)"
    ]
    assert [change.text for change in document_diff(middle, profile_documents()["telecom_contas"])] == [
        "keyword 'pedido' of retail_order_tracking: every language (before: limited to pt)"
    ]


# -- YAML ------------------------------------------------------------------------------------------------------------


def routing_file(*intent_lines: str) -> Source:
    body = "\n".join(f"    {line}" for line in intent_lines)
    text = f"agent_id: telecom_contas\nintents:\n  - name: retail_order_tracking\n    agent: orders_agent\n{body}\n"
    return Source("routing.yaml", text)


def import_problems(*sources: Source) -> list[str]:
    with pytest.raises(ConfigImportError) as refused:
        config_import(sources=list(sources))
    return refused.value.messages


def test_the_export_writes_an_intents_keyword_languages_and_imports_back_unchanged(telecom, orders):
    limiting(orders, "pedido", "pt", "es")

    files = config_export_data()

    intents = {intent["name"]: intent for intent in files["routing.telecom_contas.yaml"]["intents"]}
    assert intents["retail_order_tracking"]["keyword_languages"] == {"pedido": ["pt", "es"]}
    assert "keyword_languages" not in intents["billing_invoice_explanation"]
    before = profile_documents()
    text = yaml.safe_dump(files["routing.telecom_contas.yaml"], allow_unicode=True)
    report = config_import(sources=[Source("routing.telecom_contas.yaml", text)])
    assert not report.changed
    assert profile_documents() == before


def test_an_import_sets_keeps_and_clears_keyword_languages(telecom, orders):
    config_import(sources=[routing_file("keyword_languages: {PEDIDO: [es, pt]}")])
    assert orders.keywords.get(text="pedido").languages == ["pt", "es"]

    config_import(sources=[routing_file("keywords: [pedido, entrega]")])  # the key left out: kept
    assert orders.keywords.get(text="pedido").languages == ["pt", "es"]

    config_import(sources=[routing_file("keywords: [pedido, entrega, anular]", "keyword_languages: {anular: [es]}")])
    assert orders.keywords.get(text="anular").languages == ["es"]
    assert orders.keywords.get(text="pedido").languages == []  # the file names the keywords' languages: none


def test_an_import_refuses_an_unknown_language_and_a_keyword_the_intent_does_not_list(telecom, orders):
    problems = import_problems(routing_file("keyword_languages: {pedido: [pt, fr], anular: [es], entrega: pt}"))

    assert problems == [
        "routing.yaml:5: intents[0].keyword_languages.pedido[1]: "
        + ERROR_KEYWORD_LANGUAGE_UNKNOWN.format(language="fr", known="pt, es, en").rstrip("."),
        "routing.yaml:5: intents[0].keyword_languages.entrega: must be a list, not a string",
    ]
    assert import_problems(routing_file("keyword_languages: {anular: [es]}")) == [
        "routing.yaml:5: intents[0].keyword_languages.anular: "
        + m.ERROR_LANGUAGES_UNKNOWN_KEYWORD.format(
            keyword="anular", keywords="'atraso', 'entrega', 'pedido', 'rastreio'"
        )
    ]
    assert orders.keywords.get(text="pedido").languages == []


# -- the route preview ---------------------------------------------------------------------------------------------


def test_the_route_preview_says_a_keyword_did_not_count_in_the_messages_language(staff_client, telecom, orders):
    limiting(orders, "pedido", "pt")

    response = staff_client.get(PREVIEW_URL, {"profile": telecom.pk, "text": "¿dónde está el pedido que hice ayer?"})

    preview = response.context["preview"]
    assert preview.decision.intent != "retail_order_tracking"
    assert preview.excluded == [
        "'pedido' of retail_order_tracking did not count: the message reads as Spanish, 'pedido' is limited to pt"
    ]
    assert "the message reads as Spanish" in response.content.decode()
