"""What kind of answer a question asks for, read by each language's interrogative phrases, and whether a passage holds
an answer of that kind beside what the question is about (knowledge.answer_kinds): pure text, no database."""

from __future__ import annotations

import pytest

from agents.passages import asked_words, holds, stems_of
from knowledge.answer_kinds import (
    DURATION,
    LIVE,
    PRICE,
    TIME,
    asked_with_kinds,
    kind_held,
    kinds_asked,
    kinds_held,
)


def held(question: str, heading: str, text: str) -> list[str]:
    """The kinds ``question`` asks for that a passage of ``heading`` and ``text`` holds."""
    words = asked_with_kinds(asked_words(question), question)
    stems = stems_of(heading) | stems_of(text) | kinds_held(heading, heading=True) | kinds_held(text, heading=False)
    return [mark for mark in kinds_asked(question).marks if kind_held(mark, words, stems)]


@pytest.mark.parametrize(
    ("question", "mark"),
    [
        ("a loja abre que horas?", TIME),
        ("Até que horas funciona o atendimento?", TIME),
        ("What time does the store close?", TIME),
        ("when do you open on sundays?", TIME),
        ("¿A qué hora abre la tienda?", TIME),
        ("¿Hasta qué hora atienden por teléfono?", TIME),
        ("Quanto tempo demora a entrega?", DURATION),
        ("em quantos dias chega o pedido?", DURATION),
        ("How long does a refund take?", DURATION),
        ("how much time do I have to return it?", DURATION),
        ("¿Cuánto tarda el envío?", DURATION),
        ("¿En cuántos días llega?", DURATION),
        ("Quanto custa o frete?", PRICE),
        ("How much is express delivery?", PRICE),
        ("¿Cuánto cuesta el envío exprés?", PRICE),
        ("cuanto sale la reparacion?", PRICE),
    ],
)
def test_a_questions_interrogative_phrase_names_the_kind_of_answer_it_asks_for_in_portuguese_english_and_spanish(
    question, mark
):
    assert kinds_asked(question).marks == (mark,)


@pytest.mark.parametrize(
    "question",
    ["Posso trocar um produto?", "Can I pay by card?", "¿Tienen tiendas en Madrid?", "what is roaming?", "How do I?"],
)
def test_a_question_with_no_such_phrase_asks_for_no_kind(question):
    assert kinds_asked(question).marks == ()
    assert asked_with_kinds(asked_words(question), question) == asked_words(question)


@pytest.mark.parametrize(
    ("question", "words"),
    [
        ("a bolsa abre que horas?", ["bolsa", TIME]),
        ("what time does the brazilian stock market close?", ["brazilian", "stock", "market", TIME]),
        ("¿a qué hora cierra la tienda?", ["tienda", TIME]),
        ("quero abrir uma conta", ["abrir", "conta"]),  # no time asked: a word of its own
    ],
)
def test_a_verb_of_opening_or_closing_asks_for_the_time_of_day_with_the_phrase_that_asks_it(question, words):
    assert asked_with_kinds(asked_words(question), question) == words


def test_the_phrases_own_words_are_read_as_the_kind_and_the_questions_other_words_are_kept():
    question = "quanto tempo demora pra chegar em manaus?"
    assert asked_with_kinds(asked_words(question), question) == ["demora", "chegar", "manaus", DURATION]
    question = "What time does your call centre open?"  # "open": what opens at that time, read as the phrase's
    assert asked_with_kinds(asked_words(question), question) == ["call", "centre", TIME]


@pytest.mark.parametrize(
    ("question", "text"),
    [
        ("At what time does the call centre open?", "The call centre answers from 8 a.m. to 8 p.m."),
        ("A central atende até que horas?", "A central atende das 8h às 20h, de segunda a sábado."),
        ("¿A qué hora abre la central?", "La central atiende de 08:00 a 20:00."),
        ("How long does a refund take?", "A refund reaches your card within five working days."),
        ("Quanto tempo demora o reembolso?", "O reembolso sai em até 5 dias úteis."),
        ("¿Cuánto tarda el reembolso?", "El reembolso llega en dos días hábiles."),
        ("How much is express delivery?", "Express delivery costs US$ 9.90."),
        ("Quanto custa a entrega expressa?", "A entrega expressa sai por R$ 19,90."),
        ("¿Cuánto cuesta el envío exprés?", "El envío exprés cuesta 5 € en la península."),
    ],
)
def test_a_sentence_holding_an_answer_of_the_kind_by_its_shape_beside_a_word_of_the_question_answers_it(question, text):
    assert held(question, "Help centre", text) == list(kinds_asked(question).marks)


def test_an_answer_of_the_kind_in_a_sentence_about_something_else_does_not_answer_the_question():
    text = "Open the app to see your bills. An older bill arrives by email within 5 working days."

    assert held("how long does it take to port my number?", "Bills", text) == []
    assert held("how long does an older bill take to arrive?", "Bills", text) == [DURATION]


def test_a_heading_naming_the_kind_holds_it_for_its_whole_section_in_each_language():
    assert held("how long does delivery take to Recife?", "Delivery times", "Ask us.") == []  # no word of the kind
    assert held("quanto tempo demora pra chegar?", "Prazos de entrega", "Veja a tabela abaixo.") == [DURATION]
    assert held("what time do you open?", "Opening hours", "Every day but Sunday.") == [TIME]
    assert held("¿cuánto cuesta el envío?", "Precios del envío", "Según la región.") == [PRICE]


@pytest.mark.parametrize(
    ("question", "text"),
    [
        ("a cotação é em tempo real?", "As cotações aparecem com atraso de 15 minutos."),
        ("are the quotes real-time?", "Quotes are delayed by 15 minutes."),
        ("las cotizaciones son en tiempo real?", "El asistente muestra las cotizaciones con 15 minutos de retraso."),
        ("o rastreio é em tempo real?", "O rastreio é atualizado em tempo real."),
    ],
)
def test_a_question_whether_something_is_live_is_answered_by_how_late_it_is_or_that_it_is_live(question, text):
    assert kinds_asked(question).marks == (LIVE,)
    assert held(question, "Help centre", text) == [LIVE]


def test_a_number_that_is_no_answer_of_the_kind_is_not_held():
    assert held("how much is roaming?", "Roaming", "Roaming works in 120 countries.") == []
    assert held("what time does roaming start?", "Roaming", "Roaming starts in 2 steps.") == []


@pytest.mark.parametrize(
    ("question", "words"),
    [
        (
            "vale a pena comprar petrobras agora? me indica",
            ["comprar", "petrobras", "recomenda"],
        ),  # agora: when, not what
        ("should I sell my stocks?", ["sell", "stocks", "recommend"]),
        ("¿me conviene comprar dólares?", ["comprar", "dolares", "recomienda"]),
    ],
)
def test_a_request_for_a_recommendation_is_read_as_the_languages_word_for_it_in_place_of_its_own_words(question, words):
    assert asked_with_kinds(asked_words(question), question) == words
    assert kinds_asked(question).marks == ()


@pytest.mark.parametrize("question", ["how much should I pay for roaming?", "¿a qué hora debería llegar el técnico?"])
def test_a_question_asking_for_a_kind_of_answer_asks_for_no_advice_whatever_its_modal_verb(question):
    assert kinds_asked(question).read == ()
    assert "recommend" not in asked_with_kinds(asked_words(question), question)
    assert "recomienda" not in asked_with_kinds(asked_words(question), question)


def test_a_passage_saying_what_is_not_recommended_holds_a_request_for_advice_and_what_it_is_about():
    question = "vale a pena comprar petrobras agora? me indica"
    stems = stems_of("O assistente não recomenda a compra ou a venda de nenhum ativo.")

    held = [word for word in asked_with_kinds(asked_words(question), question) if holds(word, stems)]

    assert held == ["comprar", "recomenda"]
