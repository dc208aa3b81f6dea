"""The language of a customer's message or of an answer: pt, es, en, or None when it cannot be told."""

from __future__ import annotations

import pytest

from common.language import detect_language

PORTUGUESE = [
    "minha fatura veio muito alta esse mes",
    "nao consigo acessar minha conta",
    "cade minha encomenda",
    "quero falar com um atendente humano",
    "a internet ta muito lenta desde ontem",
    "vcs cobraram duas vezes no meu cartao",
    "Minha fatura veio alta. Pode consultar?",
    "Onde está meu pedido?",
]
SPANISH = [
    "mi factura llego muy alta este mes",
    "no puedo entrar a mi cuenta",
    "donde esta mi encomienda",
    "quiero hablar con una persona por favor",
    "el internet esta muy lento desde ayer",
    "me cobraron dos veces en la tarjeta",
    "Mi factura llegó muy alta. ¿Puede revisarla?",
    "¿Dónde está mi pedido?",
]
ENGLISH = [
    "my bill was really high this month",
    "i cant log into my account",
    "wheres my package",
    "i want to talk to a real person",
    "the internet is super slow since yesterday",
    "you charged my card twice",
    "my bil is to high",
    "My bill is too high, can you check it?",
]


@pytest.mark.parametrize("text", PORTUGUESE)
def test_it_tells_short_portuguese_messages(text):
    assert detect_language(text) == "pt"


@pytest.mark.parametrize("text", SPANISH)
def test_it_tells_short_spanish_messages(text):
    assert detect_language(text) == "es"


@pytest.mark.parametrize("text", ENGLISH)
def test_it_tells_short_english_messages_even_with_typos(text):
    assert detect_language(text) == "en"


@pytest.mark.parametrize("text", ["ok", "👍", "12345", "P100?", "", "  ", "R$ 289,90", "sim", "internet"])
def test_it_cannot_tell_a_word_alone_emoji_or_numbers(text):
    assert detect_language(text) is None


def test_a_word_alone_that_belongs_to_one_language_only_is_told():
    assert detect_language("thanks") == "en"


def test_a_portuguese_answer_quoting_an_english_question_is_portuguese():
    answer = (
        'Faturas e pagamentos (offline model): recebi sua mensagem. Você disse: "My bill is too high, can you '
        'check it?". Vou tratar disso como especialista.'
    )
    assert detect_language(answer) == "pt"


def test_an_english_answer_quoting_a_portuguese_question_is_english():
    answer = (
        'Billing (offline model): I received your message. You said: "minha fatura veio muito alta esse mes". '
        "I will look into it as a specialist."
    )
    assert detect_language(answer) == "en"
