"""Keyword exclusions limited to languages end to end: edited on the intent page and the keyword page ("me conta
[pt]"), carried by the profile's document (and read from versions published before them), said in words by the diff,
imported and exported as YAML, explained by the route preview. The matching itself: ``test_exclusion_languages.py``."""

from __future__ import annotations

import copy

import pytest
import yaml

from releases.configio import ConfigImportError, Source, config_export_data, config_import
from releases.configio import messages as m
from releases.versions import document_diff, version_publish
from routing.documents import profile_compile, profile_documents
from routing.models import ERROR_EXCLUSION_LANGUAGES_UNKNOWN_PHRASE, ERROR_KEYWORD_LANGUAGE_UNKNOWN, Intent, Keyword
from routing.selectors import live_version
from tests.adminkit import add_url, change_url, changelist_url, error_messages, form_data

pytestmark = pytest.mark.django_db

PREVIEW_URL = "/admin/routing/intent/preview/"
SPANISH = "mi pedido P300 no llegó y quiero un pedido de desculpas formal"  # Portuguese words in a Spanish message
PORTUGUESE = "o atendente me deve um pedido de desculpas"


@pytest.fixture
def orders(telecom) -> Intent:
    return Intent.objects.get(profile=telecom, name="retail_order_tracking")


def excluding(intent: Intent, keyword: str, phrases: list[str], limits: dict[str, list[str]] | None = None) -> Keyword:
    row = intent.keywords.get(text=keyword)
    row.exclusions, row.exclusion_languages = phrases, limits or {}
    row.save(update_fields=["exclusions", "exclusion_languages"])
    return row


def post_exclusions(client, intent: Intent, keyword: str, written: str):
    """Post the intent page as rendered, with ``written`` in ``keyword``'s "Not in" box."""
    data = form_data(client.get(change_url(intent)))
    (prefix,) = [name[: -len("-text")] for name, value in data.items() if name.endswith("-text") and value == keyword]
    data[f"{prefix}-exclusions"] = written
    return client.post(change_url(intent), data)


# -- the admin ---------------------------------------------------------------------------------------------------


@pytest.mark.sqlite_too
def test_the_intent_page_saves_an_exclusions_languages_written_in_brackets(staff_client, orders):
    response = post_exclusions(staff_client, orders, "pedido", "pedido de desculpas [es, PT]\npedido de casamento")

    assert response.status_code == 302, error_messages(response)
    keyword = orders.keywords.get(text="pedido")
    assert keyword.exclusions == ["pedido de desculpas", "pedido de casamento"]
    assert keyword.exclusion_languages == {"pedido de desculpas": ["pt", "es"]}


@pytest.mark.sqlite_too
def test_the_intent_page_shows_the_stored_languages_in_brackets_and_saves_them_unchanged(staff_client, orders):
    excluding(orders, "pedido", ["pedido de desculpas", "pedido de casamento"], {"pedido de desculpas": ["pt"]})
    page = staff_client.get(change_url(orders))

    assert "pedido de desculpas [pt]" in page.content.decode()
    response = staff_client.post(change_url(orders), form_data(page))
    assert response.status_code == 302, error_messages(response)
    keyword = orders.keywords.get(text="pedido")
    assert keyword.exclusions == ["pedido de desculpas", "pedido de casamento"]
    assert keyword.exclusion_languages == {"pedido de desculpas": ["pt"]}


def test_an_unknown_language_in_brackets_is_an_error_and_nothing_is_saved(staff_client, orders):
    response = post_exclusions(staff_client, orders, "pedido", "pedido de desculpas [pt, fr]")

    assert response.status_code == 200
    assert "pedido de desculpas: " + ERROR_KEYWORD_LANGUAGE_UNKNOWN.format(
        language="fr", known="pt, es, en"
    ) in error_messages(response)
    assert orders.keywords.get(text="pedido").exclusions == []


def test_a_keyword_whose_languages_name_a_phrase_it_does_not_exclude_is_refused_by_its_clean(orders):
    keyword = orders.keywords.get(text="pedido")
    keyword.exclusions, keyword.exclusion_languages = ["pedido de casamento"], {"pedido de desculpas": ["pt"]}

    with pytest.raises(Exception) as refused:
        keyword.full_clean()

    assert refused.value.message_dict == {  # type: ignore[attr-defined]
        "exclusions": [
            ERROR_EXCLUSION_LANGUAGES_UNKNOWN_PHRASE.format(
                phrase="pedido de desculpas", phrases="'pedido de casamento'"
            )
        ]
    }


@pytest.mark.sqlite_too
def test_the_keyword_page_lists_adds_and_changes_an_exclusions_languages(staff_client, orders):
    excluding(orders, "pedido", ["pedido de desculpas"], {"pedido de desculpas": ["pt"]})

    listing = staff_client.get(changelist_url(Keyword), {"q": "pedido"}).content.decode()
    assert '<td class="field-not_in">pedido de desculpas [pt]</td>' in listing
    keyword = orders.keywords.get(text="entrega")
    data = form_data(staff_client.get(change_url(keyword)))
    data["exclusions"] = "entrega do tcc [pt], delivery room"
    response = staff_client.post(change_url(keyword), data)
    assert response.status_code == 302, error_messages(response)
    keyword.refresh_from_db()
    assert (keyword.exclusions, keyword.exclusion_languages) == (
        ["entrega do tcc", "delivery room"],
        {"entrega do tcc": ["pt"]},
    )
    added = staff_client.post(
        add_url(Keyword), {"intent": orders.pk, "text": "encomenda", "exclusions": "encomenda de missa [pt]"}
    )
    assert added.status_code == 302, error_messages(added)
    assert orders.keywords.get(text="encomenda").exclusion_languages == {"encomenda de missa": ["pt"]}


# -- the document, versions and the diff -----------------------------------------------------------------------------


def test_the_document_holds_each_exclusions_languages_and_the_compile_applies_them(telecom, orders):
    excluding(orders, "pedido", ["pedido de desculpas"], {"pedido de desculpas": ["pt"]})

    document = profile_documents()["telecom_contas"]

    assert document["intents"]["retail_order_tracking"]["keyword_exclusion_languages"] == {
        "pedido": {"pedido de desculpas": ["pt"]}
    }
    assert document["intents"]["billing_invoice_explanation"]["keyword_exclusion_languages"] == {}
    router = profile_compile(document, pk=telecom.pk).router
    assert router.match(PORTUGUESE) == []
    assert [hit.intent.name for hit in router.match(SPANISH)] == ["retail_order_tracking"]


def test_a_version_published_before_exclusion_languages_compiles_with_none_and_differs_in_nothing(telecom):
    draft = profile_documents()["telecom_contas"]
    old = copy.deepcopy(draft)
    for intent in old["intents"].values():
        del intent["keyword_exclusion_languages"]
    version_publish(profile=telecom, document=old, note="before exclusion languages")

    live = live_version(telecom)
    assert live is not None and "keyword_exclusion_languages" not in live.document["intents"]["retail_order_tracking"]
    assert document_diff(live.document, draft) == []
    spec = profile_compile(live.document, pk=telecom.pk)
    assert all(intent.exclusion_languages == () for intent in spec.intents)


def test_the_diff_says_which_exclusion_was_limited_to_which_languages(telecom, orders):
    excluding(orders, "pedido", ["pedido de desculpas"])
    before = profile_documents()["telecom_contas"]
    excluding(orders, "pedido", ["pedido de desculpas"], {"pedido de desculpas": ["pt"]})
    middle = profile_documents()["telecom_contas"]
    excluding(orders, "pedido", ["pedido de desculpas"])

    assert [change.text for change in document_diff(before, middle)] == [
        "keyword 'pedido' of retail_order_tracking: not in 'pedido de desculpas' limited to pt (before: every language)"
    ]
    assert [change.text for change in document_diff(middle, profile_documents()["telecom_contas"])] == [
        "keyword 'pedido' of retail_order_tracking: not in 'pedido de desculpas' every language (before: limited to pt)"
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


def test_the_export_writes_an_intents_exclusion_languages_and_imports_back_unchanged(telecom, orders):
    excluding(orders, "pedido", ["pedido de desculpas", "pedido de casamento"], {"pedido de desculpas": ["pt", "es"]})

    files = config_export_data()

    intents = {intent["name"]: intent for intent in files["routing.telecom_contas.yaml"]["intents"]}
    assert intents["retail_order_tracking"]["keyword_exclusion_languages"] == {
        "pedido": {"pedido de desculpas": ["pt", "es"]}
    }
    assert "keyword_exclusion_languages" not in intents["billing_invoice_explanation"]
    before = profile_documents()
    text = yaml.safe_dump(files["routing.telecom_contas.yaml"], allow_unicode=True)
    report = config_import(sources=[Source("routing.telecom_contas.yaml", text)])
    assert not report.changed
    assert profile_documents() == before


def test_an_import_sets_keeps_prunes_and_clears_exclusion_languages(telecom, orders):
    config_import(
        sources=[
            routing_file(
                "keyword_exclusions: {pedido: [pedido de desculpas, pedido de casamento]}",
                "keyword_exclusion_languages: {PEDIDO: {Pedido de Desculpas: [es, pt]}}",
            )
        ]
    )
    keyword = orders.keywords.get(text="pedido")
    assert keyword.exclusion_languages == {"pedido de desculpas": ["pt", "es"]}  # keyed by the exclusion as stored

    config_import(sources=[routing_file("keywords: [pedido, entrega]")])  # the key left out: kept
    keyword.refresh_from_db()
    assert keyword.exclusion_languages == {"pedido de desculpas": ["pt", "es"]}

    config_import(sources=[routing_file("keyword_exclusions: {pedido: [pedido de casamento]}")])  # phrase gone
    keyword.refresh_from_db()
    assert keyword.exclusion_languages == {}

    config_import(
        sources=[
            routing_file(
                "keyword_exclusions: {pedido: [pedido de desculpas]}",
                "keyword_exclusion_languages: {pedido: {pedido de desculpas: [pt]}}",
            )
        ]
    )
    config_import(sources=[routing_file("keyword_exclusion_languages: {}")])  # the file names none: cleared
    keyword.refresh_from_db()
    assert (keyword.exclusions, keyword.exclusion_languages) == (["pedido de desculpas"], {})


def test_an_import_refuses_an_unknown_language_and_a_phrase_the_keyword_does_not_exclude(telecom, orders):
    problems = import_problems(
        routing_file(
            "keyword_exclusions: {pedido: [pedido de desculpas]}",
            "keyword_exclusion_languages: {pedido: {pedido de desculpas: [pt, fr], pedido de casamento: pt}}",
        )
    )
    assert problems == [
        "routing.yaml:6: intents[0].keyword_exclusion_languages.pedido.pedido de desculpas[1]: "
        + ERROR_KEYWORD_LANGUAGE_UNKNOWN.format(language="fr", known="pt, es, en").rstrip("."),
        "routing.yaml:6: intents[0].keyword_exclusion_languages.pedido.pedido de casamento: "
        "must be a list, not a string",
    ]
    assert import_problems(routing_file("keyword_exclusion_languages: {pedido: {pedido de casamento: [pt]}}")) == [
        "routing.yaml:5: intents[0].keyword_exclusion_languages.pedido: "
        + m.ERROR_EXCLUSION_LANGUAGES_UNKNOWN_PHRASE.format(
            phrase="pedido de casamento", keyword="pedido", phrases="it has none"
        )
    ]
    assert orders.keywords.get(text="pedido").exclusions == []


# -- the route preview ---------------------------------------------------------------------------------------------


def test_the_route_preview_says_an_exclusion_cancelled_nothing_in_the_messages_language(staff_client, telecom, orders):
    excluding(orders, "pedido", ["pedido de desculpas"], {"pedido de desculpas": ["pt"]})

    response = staff_client.get(PREVIEW_URL, {"profile": telecom.pk, "text": SPANISH})

    preview = response.context["preview"]
    assert preview.decision.intent == "retail_order_tracking"
    assert preview.excluded == [
        "'pedido de desculpas' did not cancel 'pedido' of retail_order_tracking: the message reads as Spanish, "
        "'pedido de desculpas' is limited to pt"
    ]
    assert "did not cancel" in response.content.decode()
