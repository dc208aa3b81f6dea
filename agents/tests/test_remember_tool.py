"""The offline model's rule for the remember tool: a sentence that states the customer's preference, in Portuguese,
English and Spanish; a question about preferences, or a message without one, states none."""

from __future__ import annotations

import pytest

from agents.remember_tool import preference_stated


@pytest.mark.parametrize(
    ("text", "preference"),
    [
        ("Prefiro ser contatado por e-mail.", "Prefiro ser contatado por e-mail"),
        ("Oi! Eu prefiro receber a fatura por e-mail. Obrigado", "Eu prefiro receber a fatura por e-mail"),
        ("e também preferiria falar de manhã", "e também preferiria falar de manhã"),
        ("I prefer to be called in the morning", "I prefer to be called in the morning"),
        ("Thanks. I'd rather get texts!", "I'd rather get texts"),
        ("we would prefer invoices by post", "we would prefer invoices by post"),
        ("Prefiero que me llamen por la tarde.", "Prefiero que me llamen por la tarde"),
        ("Hola.\nYo preferiría hablar en español", "Yo preferiría hablar en español"),
    ],
)
def test_a_sentence_stating_a_preference_is_read(text, preference):
    assert preference_stated(text) == preference


@pytest.mark.parametrize(
    "text",
    [
        "Which plan do you prefer?",
        "Qual plano você prefere?",
        "¿Cuál prefieres?",
        "Minha fatura veio alta",
        "I prefer",  # nothing preferred
        "My preferred store closed",
    ],
)
def test_a_message_stating_no_preference_gives_none(text):
    assert preference_stated(text) == ""
