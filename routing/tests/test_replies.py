"""The reply reader: a message as the answer to a yes/no question, in Portuguese, English and Spanish (pure)."""

from __future__ import annotations

import pytest

from agents.models import DEFAULT_CONFIRMATION_WORDS, DEFAULT_DENIAL_WORDS
from routing.replies import NO, YES, Reply, ReplyWords, reply_read

DEFAULTS = ReplyWords(yes=tuple(DEFAULT_CONFIRMATION_WORDS), no=tuple(DEFAULT_DENIAL_WORDS))


def reads(text: str, words: ReplyWords = DEFAULTS) -> str | None:
    return words.read(text).reads_as


@pytest.mark.parametrize(
    "text",
    [
        # Portuguese
        "sim",
        "Sim!",
        "sim, pode diagnosticar",
        "Sim, pode verificar",
        "sim pode diagnosticar a minha linha",
        "pode verificar sim",
        "Pode sim",
        "pode",
        "claro, pode seguir",
        "claro que sim",
        "com certeza",
        "tá bom, pode ver",
        "tudo bem",
        "ok, paguei agora pelo pix",
        "acho que sim",
        "então, pode sim",
        "não tem problema, pode",
        "autorizo",
        # English
        "yes",
        "yes, go ahead",
        "Yes please",
        "yeah sure, check it",
        "go ahead and check my line",
        "sure thing",
        "of course",
        "ok",
        "no problem, go ahead",
        "yes please, and how long will it take?",
        # Spanish
        "sí",
        "sí, adelante",
        "si, claro",
        "sí por favor",
        "dale, revisa",
        "vale",
        "de acuerdo, hazlo",
        "claro que sí",
        "por supuesto",
        "creo que sí",
        "no hay problema",
    ],
)
def test_it_reads_a_yes_in_the_three_languages_whatever_words_follow(text):
    assert reads(text) == YES


@pytest.mark.parametrize(
    "text",
    [
        # Portuguese
        "não",
        "Não.",
        "não, obrigado",
        "Não, prefiro não",
        "agora não",
        "ainda não",
        "não pode",
        "claro que não",
        "não precisa, obrigado",
        "nem pensar",
        "pode não",
        # English
        "no",
        "No.",
        "no thanks",
        "nope",
        "nah, leave it",
        "not now",
        "don't",
        "please don't",
        "I'd rather not",
        # Spanish
        "no",
        "mejor no",
        "no, no hace falta",
        "no quiero",
        "no gracias",
        "ahora no",
        "todavía no",
        "ni hablar",
    ],
)
def test_it_reads_a_no_in_the_three_languages(text):
    assert reads(text) == NO


@pytest.mark.parametrize(
    "text",
    [
        # a question that merely holds a yes word
        "você pode me dizer o valor da fatura?",
        "você pode me dizer o valor da fatura",
        "Pode me dizer o valor da fatura?",
        "can you tell me my balance?",
        "Could you please check my invoice?",
        "¿puedes decirme el saldo?",
        "¿Sí?",
        "sim?",
        # the user cannot tell
        "não sei",
        "Não sei, talvez",
        "sei lá",
        "talvez depois",
        "I don't know",
        "not sure yet",
        "maybe later",
        "no sé",
        "no lo sé, quizás",
        "tal vez mañana",
        # a message of its own, not an answer
        "Estou sem sinal no celular",
        "Minha fatura veio alta",
        "minha fatura não chegou",
        "Na verdade, meu pedido P100 atrasou",
        "já paguei",
        "My order P100 is late, what happened?",
        "Mi pedido no ha llegado todavía",
        "Obrigado, resolvido!",
        "bom dia",
        "",
        "   ",
        "👍",
        # a word that is another word in the message's language, not a reply
        "No meu celular aparece sem serviço",
        "No caso da fatura, quanto é?",
        "si puedes revisar la línea",
        "Si no funciona, llámame",
    ],
)
def test_it_reads_neither_where_the_message_is_no_answer(text):
    assert reads(text) is None


def test_a_refusal_wins_over_agreement_where_both_lead_or_end_the_reply():
    assert DEFAULTS.read("não pode") == Reply(NO, "não")
    assert DEFAULTS.read("claro que não") == Reply(NO, "não")
    assert DEFAULTS.read("no, no hace falta") == Reply(NO, "no")
    assert DEFAULTS.read("ok, não") == Reply(NO, "não")


def test_a_longer_phrase_is_read_before_the_words_inside_it():
    assert DEFAULTS.read("no problem") == Reply(YES, "no problem")
    assert DEFAULTS.read("não tem problema") == Reply(YES, "não tem problema")
    assert DEFAULTS.read("I don't know") == Reply(None, "i don't know")  # not "don't"
    assert DEFAULTS.read("prefiro não") == Reply(NO, "prefiro não")


def test_it_says_which_words_decided_as_the_profiles_list_spells_them():
    assert DEFAULTS.read("SIM, pode diagnosticar").as_metadata() == {"reads_as": "yes", "words": "sim"}
    assert DEFAULTS.read("nao, obrigado").as_metadata() == {"reads_as": "no", "words": "não"}  # the list's first
    assert DEFAULTS.read("yes, go ahead").words == "yes"
    assert DEFAULTS.read("pode verificar sim").words == "pode"
    assert DEFAULTS.read("mejor no").words == "no"


def test_a_long_message_is_read_by_its_first_clause_and_the_rest_is_kept():
    reply = DEFAULTS.read("Não, na verdade meu pedido P100 atrasou")

    assert (reply.reads_as, reply.words, reply.rest) == (NO, "não", "na verdade meu pedido P100 atrasou")
    assert DEFAULTS.read("sim, pode diagnosticar").rest == ""  # a short message is read whole
    assert DEFAULTS.read("yes please, and how long will it take?").rest == "and how long will it take?"


def test_a_reply_word_inside_a_long_first_clause_does_not_count():
    assert reads("meu celular não liga desde ontem, pode ver?") is None
    assert reads("eu queria saber se pode parcelar a fatura") is None
    assert reads("the line is fine now, yes") is None  # the yes is not in the first clause


def test_only_the_profiles_own_words_are_read():
    words = ReplyWords(yes=("manda ver",), no=("esquece",))

    assert reads("manda ver", words) == YES
    assert reads("esquece, obrigado", words) == NO
    assert reads("sim", words) is None
    assert reads("não", words) is None
    assert reads("não sei", words) is None  # the platform's unsure phrases hold whatever the words


def test_no_words_read_nothing_but_a_phrase_in_both_lists_is_a_refusal():
    assert reads("sim", ReplyWords()) is None
    assert reads("talvez", ReplyWords(yes=("talvez",))) is None
    assert reads("pois", ReplyWords(yes=("pois",), no=("pois",))) == NO


def test_the_reader_takes_lists_as_a_profile_stores_them():
    assert reply_read("Sim, pode", yes_words=["sim"], no_words=["não"]) == Reply(YES, "sim")
    assert not reply_read("talvez", yes_words=["sim"], no_words=["não"])
