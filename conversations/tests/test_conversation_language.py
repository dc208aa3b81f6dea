"""The conversation's language: detected from the first messages, kept, changed only on clear evidence, named by the
channel; the platform's own words (the permission ask, its yes, the queue notice) are written in it."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from agents.models import McpServer
from bench.conversation_accuracy import answer_language, fixed_read
from common.config_version import config_version_bump
from conversations.language import language_asked, language_decide
from conversations.models import Conversation
from conversations.tests.test_goal_mode import publish
from routing.models import Goal
from tests.demo_snapshot import demo_seed

MSISDN = "5511999999999"


@pytest.fixture
def demo(db, mcp_servers):
    """The demo, its MCP servers running. Asked for before ``api``: the seed reads the tenants' table, and a tenant
    made first would make every test seed for real instead of restoring the worker's record (tests/demo_snapshot.py)."""
    demo_seed()
    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    config_version_bump()


def say(api, text, *, session, headers=None, **payload):
    body = {"channel": "api", "agent_id": "telecom_contas", "payload": {"text": text, "session_id": session, **payload}}
    response = api.post("/api/gateway/message", body, format="json", headers=headers or {})
    assert response.status_code == 200, response.content
    return response.json()


def test_the_kept_language_changes_on_a_sentence_in_another_language_not_on_one_ambiguous_word():
    assert language_decide(kept="", channel="", text="My phone has no signal since yesterday") == ("en", "en")
    assert language_decide(kept="en", channel="", text="sim") == ("en", "en")
    assert language_decide(kept="en", channel="", text="no") == ("en", "en")
    assert language_decide(kept="en", channel="", text="mi teléfono no tiene señal desde ayer") == ("es", "es")
    assert language_decide(kept="es", channel="en", text="meu celular está sem sinal") == ("en", "en")
    assert language_decide(kept="", channel="", text="P100?", earlier=["quiero cancelar mi pedido"]) == ("es", "es")
    assert language_decide(kept="", channel="", text="P100?") == ("pt", "")  # nothing told: not kept
    assert language_decide(kept="", channel="", text="P100?", hint="es") == ("es", "")


@pytest.mark.parametrize(
    ("kept", "reply"),
    [
        ("es", "si, anulala por favor"),
        ("es", "si, confirmado por favor"),
        ("es", "vale, devolvelo por favor"),
        ("es", "no, por ahora no"),
        ("es", "gracias, listo"),
        ("pt", "ok, confirmado por favor"),
        ("pt", "claro, pode ser"),
        ("pt", "nao, obrigado"),
        ("pt", "beleza, valeu"),
        ("en", "yes, confirm it"),
        ("en", "no, cancel it"),
        ("en", "ok cool thanks"),
    ],
)
def test_a_short_yes_no_or_thanks_in_the_kept_language_never_switches_it(kept, reply):
    """A confirmation Portuguese and Spanish share ("si ... por favor", "ok, confirmado") reads to the model as
    either: it is not the clear evidence a change needs."""
    assert language_decide(kept=kept, channel="", text=reply) == (kept, kept)


def test_a_short_message_clearly_in_another_language_still_switches_it():
    assert language_decide(kept="pt", channel="", text="muchas gracias por la ayuda") == ("es", "es")
    assert language_decide(kept="es", channel="", text="obrigada pela ajuda") == ("pt", "pt")
    assert language_decide(kept="es", channel="", text="ok cool thanks") == ("en", "en")
    assert language_decide(kept="en", channel="", text="nao, pode deixar") == ("pt", "pt")


def test_a_listing_code_is_one_word_and_leaves_the_kept_language_as_it_is():
    """A customer who picks "NDA-SE.ST" from the listings offered wrote one code, not three words of Portuguese."""
    assert language_decide(kept="en", channel="", text="NDA-SE.ST") == ("en", "en")
    assert language_decide(kept="es", channel="", text="NDA-FI.HE") == ("es", "es")
    assert language_decide(kept="en", channel="", text="meu celular está sem sinal") == ("pt", "pt")


def test_a_first_message_portuguese_and_spanish_read_alike_takes_the_profiles_language_and_is_not_kept():
    """Every word of "a bolsa abre que horas?" is Portuguese and Spanish both; the model leans to Spanish (0.59). A
    customer of a Portuguese-speaking business is answered in Portuguese, and the next message that tells decides."""
    assert language_decide(kept="", channel="", text="a bolsa abre que horas?") == ("es", "es")
    assert language_decide(kept="", channel="", text="a bolsa abre que horas?", own="pt") == ("pt", "")
    assert language_decide(kept="", channel="", text="a bolsa abre que horas?", own="es") == ("es", "es")
    assert language_decide(kept="", channel="", text="a fatura vence que dia?", own="pt") == ("pt", "")
    # The client's language first, as where the words tell nothing.
    assert language_decide(kept="", channel="", text="a bolsa abre que horas?", hint="es", own="pt") == ("es", "es")
    assert language_decide(kept="", channel="", text="a bolsa abre que horas?", hint="en", own="pt") == ("pt", "")


def test_a_message_that_tells_its_language_keeps_it_whatever_the_profiles_language():
    assert language_decide(kept="", channel="", text="cuanto cuesta el plan?", own="pt") == ("es", "es")
    assert language_decide(kept="", channel="", text="quanto custa o plano?", own="es") == ("pt", "pt")
    assert language_decide(kept="", channel="", text="My phone has no signal since yesterday", own="es") == ("en", "en")
    assert language_decide(kept="es", channel="", text="a bolsa abre que horas?", own="pt") == ("es", "es")


def test_where_nothing_tells_the_profiles_language_comes_after_the_clients_and_before_the_platforms():
    assert language_decide(kept="", channel="", text="P100?", own="en") == ("en", "")
    assert language_decide(kept="", channel="", text="P100?", hint="es", own="en") == ("es", "")
    assert language_decide(kept="", channel="", text="P100?", earlier=["I want to cancel my order"], own="es") == (
        "en",
        "en",
    )


def test_a_portuguese_customers_first_message_read_as_spanish_too_is_answered_in_portuguese(demo, api):
    first = say(api, "a fatura vence que dia?", session="lang-alike")
    told = say(api, "muchas gracias por la ayuda, necesito la factura", session="lang-alike")

    assert first["metadata"]["language"] == "pt"
    assert told["metadata"]["language"] == "es"  # the first was not kept: this one decides
    assert Conversation.objects.get(conversation_key=first["conversation_key"]).language == "es"


def test_a_channel_names_its_language_by_tag_or_accept_language_preference():
    assert language_asked("es-MX") == "es"
    assert language_asked("fr-FR,fr;q=0.9,en;q=0.8,es;q=0.9") == "es"
    assert language_asked("fr") == ""


@pytest.mark.parametrize(
    ("language", "problem", "yes", "asked", "queued"),
    [
        ("en", "My phone has no signal since yesterday", "Yes, go ahead", "I need your permission", "in line"),
        ("es", "Mi teléfono no tiene señal desde ayer", "Sí, adelante", "necesito su autorización", "en la fila"),
        ("pt", "Meu celular está sem sinal desde ontem", "Sim, pode", "preciso da sua autorização", "da fila"),
    ],
)
def test_a_demo_conversation_is_answered_in_its_language_from_permission_to_a_person(
    demo, api, fixed, language, problem, yes, asked, queued
):
    session = f"lang-{language}"
    ask = say(api, problem, session=session, context={"msisdn": MSISDN})

    assert asked in ask["answer"] and "diagnosticar_linha" in ask["answer"]
    assert ask["metadata"]["language"] == language
    granted = say(api, yes, session=session)
    assert granted["metadata"]["permission"] == {"tool": "diagnosticar_linha", "reply": "granted"}
    person = say(
        api,
        {
            "en": "I want to talk to a real person please",
            "es": "quiero hablar con una persona, por favor",
            "pt": "quero falar com um atendente humano",
        }[language],
        session=session,
    )
    assert queued in person["answer"]
    assert Conversation.objects.get(conversation_key=ask["conversation_key"]).language == language
    answers = [("problem", ask["answer"]), ("yes", granted["answer"]), ("person", person["answer"])]
    assert off_language(answers, language, fixed) == {}


def off_language(answers, language, fixed) -> dict[str, str]:
    """The ``(turn, answer)`` pairs whose answer is not in ``language``: another language read in the whole or a
    sentence of it, or a fixed text of another language's catalogue."""
    return {turn: answer for turn, answer in answers if not answer_language(answer, language, fixed).fits(language)}


def test_the_payload_names_the_language_and_wins_over_the_words(demo, api):
    body = say(api, "Estou sem sinal no celular", session="lang-named", language="en-GB", context={"msisdn": MSISDN})

    assert body["metadata"]["language"] == "en"
    assert "I need your permission to use diagnosticar_linha" in body["answer"]
    assert 'Reply "yes"' in body["answer"]  # the language's own yes, which the profile reads as yes


def test_accept_language_is_a_guess_only_when_the_words_do_not_tell(demo, api):
    told = say(api, "Estou sem sinal no celular", session="lang-h1", headers={"Accept-Language": "es-ES,es;q=0.9"})
    untold = say(api, "P100", session="lang-h2", headers={"Accept-Language": "es-ES,es;q=0.9"})

    assert told["metadata"]["language"] == "pt"
    assert untold["metadata"]["language"] == "es"


def test_a_language_the_platform_does_not_speak_is_refused_naming_the_field(demo, api):
    body = {"channel": "api", "agent_id": "telecom_contas", "payload": {"text": "bonjour", "language": "fr"}}

    response = api.post("/api/gateway/message", body, format="json")

    assert response.status_code == 400
    assert "payload.language" in str(response.json()) or "language" in response.json().get("payload", {})
    assert not Conversation.objects.exists()


@pytest.fixture
def demo_with_goals(db, mcp_servers, finance_mcp, monkeypatch):
    """The demo with its three MCP servers, the finance profile's goal plans included (asked for before ``api``, as
    ``demo`` is)."""
    for name, url in {**mcp_servers, "finance": finance_mcp}.items():
        address = urlsplit(url)
        monkeypatch.setenv(f"MCP_{name.upper()}_HOST", address.hostname or "")
        monkeypatch.setenv(f"MCP_{name.upper()}_PORT", str(address.port))
    demo_seed("--sync")


@pytest.fixture(scope="module")
def fixed():
    return fixed_read()


WALKS = {
    "en": {
        "pay": "I'd like to pay this month's bill via pix",
        "paid": "yes, I've paid it already",
        "drop": "never mind",
        "cancel_order": "I want to cancel my order P100",
        "confirm": "yes, cancel it",
        "quote": "what's the price of Nordea?",
        "pick": "the second one",
        "movers": "top gainers today",
        "yes": "yes",
        "asks": "Reply yes to go on",
        "quotes": "what are Vale and Petrobras trading at?",
    },
    "es": {
        "pay": "quiero pagar la factura de este mes con pix",
        "paid": "sí, ya pagué",
        "drop": "olvídalo",
        "cancel_order": "quiero cancelar mi pedido P100",
        "confirm": "sí, cancélalo",
        "quote": "¿cuánto vale Nordea?",
        "pick": "la segunda",
        "movers": "mayores alzas de hoy",
        "yes": "sí",
        "asks": "Responda sí para continuar",
        "quotes": "¿cuánto están Vale y Petrobras?",
    },
    "pt": {
        "pay": "quero pagar a fatura deste mês com pix",
        "paid": "sim, já paguei",
        "drop": "deixa pra lá",
        "cancel_order": "quero cancelar meu pedido P100",
        "confirm": "sim, pode cancelar",
        "quote": "quanto vale a Nordea?",
        "pick": "a segunda",
        "movers": "maiores altas de hoje",
        "yes": "sim",
        "asks": "Responda sim para continuar",
        "quotes": "quanto está a Vale e a Petrobras?",
    },
}


@pytest.mark.parametrize("language", ["en", "es", "pt"])
def test_a_demo_conversation_per_language_walks_payment_cancellations_goal_confirmation_and_lists_in_it(
    demo_with_goals, api, fixed, language
):
    said = WALKS[language]
    answers = []

    def turn(agent_id, key, session, **context):
        body = {"channel": "api", "agent_id": agent_id, "payload": {"text": said[key], "session_id": session}}
        if context:
            body["payload"]["context"] = context
        response = api.post("/api/gateway/message", body, format="json")
        assert response.status_code == 200, response.content
        answers.append((key, response.json()["answer"]))
        return response.json(), Conversation.objects.get(conversation_key=response.json()["conversation_key"])

    line = {"msisdn": MSISDN}
    _, paying = turn("telecom_contas", "pay", f"walk-pay-{language}", **line)
    assert paying.state == "WAITING_PAYMENT_CONFIRMATION"
    paid, paying = turn("telecom_contas", "paid", f"walk-pay-{language}", **line)
    # The payments' status: the tool's own sentence where it is the customer's language, else its rows.
    status = "foi paga em duplicidade" if language == "pt" else "status: confirmado"
    assert paying.state == "" and status in paid["answer"]
    turn("telecom_contas", "pay", f"walk-drop-{language}", **line)
    dropped, _ = turn("telecom_contas", "drop", f"walk-drop-{language}", **line)
    assert dropped["metadata"]["conversation"]["repair"] == "cancel"
    _, ordering = turn("retail_orders", "cancel_order", f"walk-order-{language}", order_id="P100")
    assert ordering.state == "WAITING_CANCELLATION_CONFIRMATION"
    confirmed, ordering = turn("retail_orders", "confirm", f"walk-order-{language}", order_id="P100")
    assert ordering.state == "" and confirmed["agent"] == "orders_agent"
    options, _ = turn("finance_assistente", "quote", f"walk-goal-{language}")
    assert "NDA-SE.ST" in options["answer"] and "NDA-FI.HE" in options["answer"]  # the listings the search found
    quoted, _ = turn("finance_assistente", "pick", f"walk-goal-{language}")
    assert quoted["metadata"]["goal"]["status"] != "clarification" and "NDA-SE.ST" not in quoted["answer"]
    # Unsure of the goal (its threshold above what the reader gives), goal mode asks before it acts.
    Goal.objects.filter(name="TOP_MOVERS").update(confidence_threshold=1.0)
    publish("TOP_MOVERS asks below certainty")
    asked, _ = turn("finance_assistente", "movers", f"walk-movers-{language}")
    assert asked["metadata"]["goal"]["clarification"]["reason"] == "low_confidence"
    assert asked["metadata"]["mcp_results"] == [] and said["asks"] in asked["answer"]
    assert "GAINERS" not in asked["answer"]  # the value as the customer said it, not the platform's code
    listed, _ = turn("finance_assistente", "yes", f"walk-movers-{language}")
    assert listed["metadata"]["goal"]["status"] == "success"
    gainers = [row["name"] for result in listed["metadata"]["mcp_results"] for row in result["result"]["items"]]
    assert len(gainers) > 1 and all(name in listed["answer"] for name in gainers)  # the list, not a summary
    both, _ = turn("finance_assistente", "quotes", f"walk-quotes-{language}")
    assert [result["tool"] for result in both["metadata"]["mcp_results"]].count("get_stock_price") == 2
    assert "VALE3" in both["answer"] and "PETR4" in both["answer"]  # each quote the plan found

    assert off_language(answers, language, fixed) == {}
