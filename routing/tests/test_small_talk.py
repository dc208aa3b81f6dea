"""Small talk (routing/small_talk.py): read before any intent, answered by the fallback, moving nothing."""

from __future__ import annotations

import asyncio
import random

import pytest

from common.text import normalize
from routing.router import CompiledRouter, IntentSpec, StatePolicySpec
from routing.small_talk import SmallTalkReader, person_asked_in, small_talk_read

KINDS = {
    "greeting": ["Bom dia!", "oi, tudo bem?", "e aí, beleza?", "hello there", "good evening", "Hola, ¿qué tal?"],
    "thanks": ["obrigado", "valeu mesmo!", "thanks a lot", "thank you so much!", "muchas gracias", "mil gracias"],
    "goodbye": ["tchau", "até amanhã, obrigado", "bye for now", "that's all, bye", "adiós", "hasta luego, gracias"],
    "bot_question": [
        "vc é um robô?",
        "estou falando com uma pessoa?",
        "are you a bot?",
        "is this a real person?",
        "¿eres un robot?",
        "¿hablo con una persona?",
    ],
    "human_request": [
        "quero falar com um atendente",
        "me passa pra um humano",
        "I want to speak to a person",
        "transfer me to an agent please",
        "quiero hablar con un asesor",
        "pásame con una persona",
    ],
}


@pytest.mark.parametrize(("kind", "text"), [(kind, text) for kind, texts in KINDS.items() for text in texts])
def test_greetings_thanks_goodbyes_bot_questions_and_asking_for_a_person_are_small_talk_of_their_kind(kind, text):
    talk = small_talk_read(text)

    assert talk is not None and talk.kind == kind


@pytest.mark.parametrize(
    "text",
    [
        "obrigado, era isso",
        "thanks, that was it",
        "ok thanks, that was all I needed",
        "thank you, that will be all",
        "gracias, era eso",
        "gracias, era todo",
        "gracias, solo era eso",
    ],
)
def test_thanks_that_close_a_conversation_are_a_goodbye_in_each_language(text):
    """After an answer, "that was it" closes the conversation in English and Spanish as "era isso" does in Portuguese:
    read by its words instead, it went to the fallback, which searched the help centre and answered "I don't know"."""
    talk = small_talk_read(text)

    assert talk is not None and talk.kind == "goodbye"


@pytest.mark.parametrize(
    "text",
    [
        "bom dia, minha fatura veio alta",
        "obrigado, mas o pedido ainda não chegou",
        "hi, I can't log in to my account",
        "hola, quiero cancelar mi pedido",
        "me conta uma piada",
        "how do I bake a carrot cake?",
        "quero falar com um atendente sobre a minha conta",
        "👍",
        "",
    ],
)
def test_a_message_with_anything_else_in_it_is_not_small_talk(text):
    assert small_talk_read(text) is None


@pytest.mark.parametrize("text", ["sim", "ok", "não", "yes", "no", "sí", "vale", "pode sim", "claro"])
def test_bare_replies_are_never_small_talk(text):
    assert small_talk_read(text) is None


def test_letters_repeated_for_emphasis_are_read_once_and_the_phrases_kept_as_written():
    talk = small_talk_read("Oiiii, obrigadooo!!")

    assert talk is not None and talk.kind == "thanks"
    assert talk.phrases == ("oiiii", "obrigadooo")


def test_a_message_holding_several_kinds_is_named_by_the_one_that_asks_most():
    assert small_talk_read("oi, bom dia, quero falar com um atendente").kind == "human_request"
    assert small_talk_read("ok obrigado, tchau").kind == "goodbye"


def test_a_lexicon_phrase_with_alternatives_reads_each_spelling_and_an_empty_one_makes_a_part_optional():
    reader = SmallTalkReader({"human_request": ["(quero|preciso) falar com (um|uma|) (atendente|pessoa)"]}, ["agora"])

    assert reader.read("preciso falar com uma pessoa agora").kind == "human_request"
    assert reader.read("quero falar com atendente").kind == "human_request"
    assert reader.read("quero falar com um gerente") is None
    assert reader.read("agora") is None  # filler alone is not small talk


ROUTER = CompiledRouter(
    intents=(IntentSpec(name="billing", agent="billing_agent", keywords=("fatura", "obrigado pela fatura")),),
    state_policies=(StatePolicySpec(state="WAITING_PAYMENT", agent="billing_agent", intent="billing"),),
    fallback_agent="support_agent",
)


def test_the_router_answers_small_talk_with_the_fallback_before_the_state_policy_and_keeps_the_conversation():
    decision = asyncio.run(
        ROUTER.route("obrigado!", state="WAITING_PAYMENT", active_agent="billing_agent", active_intent="billing")
    )

    assert decision.method == "small_talk"
    assert (decision.agent, decision.intent) == ("support_agent", "small_talk:thanks")
    assert decision.keeps_conversation and decision.next_state is None
    assert decision.handoff is False  # answered by another specialist, but nothing moved
    assert decision.metadata["small_talk"] == {"kind": "thanks", "phrases": ["obrigado"]}


def test_a_reply_in_a_waiting_flow_is_still_the_state_policys():
    decision = asyncio.run(ROUTER.route("sim, obrigado", state="WAITING_PAYMENT"))

    assert decision.method == "state"


# Whether the customer talks to a person or a machine is a question the assistant answers; asking to be passed to a
# person queues the conversation for one. Written from that description: phrasings, typos, accents left out.
ASKS_WHO_ANSWERS = {
    "pt": [
        "tô falando com gente ou com robô?",
        "você é uma pessoa de verdade?",
        "vc é humano?",
        "voce e um robo ou uma pessoa",
        "estou falando com uma pessoa ou com uma máquina?",
        "isso é um bot?",
        "to conversando com um robo??",
        "vc eh humano ou maquina",
        "é robô ou gente?",
        "é um atendente humano ou um bot?",
        "você é de verdade ou é uma IA?",
        "tou teclando com uma pesoa real?",
        "oi, vc é um robôôô?",
        "voce e um ser humano mesmo?",
        "eu to falando com uma maquina",
        "quem tá me respondendo é uma pessoa?",
        "humano ou robô?",
        "vc é uma pessoa ou um robô, hein?",
    ],
    "en": [
        "is this a real person or a bot?",
        "are you human?",
        "am I talking to a bot?",
        "r u a real person",
        "are you a person or a machine?",
        "is this an AI or a human?",
        "am i chatting with a human or a robot",
        "is this automated?",
        "who am I talking to, a person or a bot?",
        "are you a real human being?",
        "hey, are you a bot?",
        "am I speaking with a real person?",
        "are u human or ai",
        "is this a bot or a live agent?",
        "wait, are you really a robot?",
        "human or bot?",
        "am i talking to an actual human",
    ],
    "es": [
        "¿estoy hablando con una persona o con una máquina?",
        "¿eres humano?",
        "¿eres un robot o una persona?",
        "hablo con un bot?",
        "esto es una respuesta automatica?",
        "eres una persona real?",
        "estoy chateando con una IA?",
        "sos humano o maquina",
        "¿con quién hablo, con una persona o con un bot?",
        "eres de verdad?",
        "usted es una persona?",
        "hola, eres un bot?",
        "estoy hablando con un humano de verdad?",
        "eres un ser humano o una maquina?",
        "esto es un bot o un humano",
        "persona o maquina?",
        "¿me está atendiendo una persona o un robot?",
    ],
}
ASKS_FOR_A_PERSON = {
    "pt": [
        "quero falar com uma pessoa",
        "quero falar com um humano, não com robô",
        "preciso falar com um atendente de verdade",
        "me passa pra um atendente",
        "posso falar com uma pessoa?",
        "tem como falar com um humano?",
        "queria falar com alguem de verdade",
        "me transfere pra um humano por favor",
        "gostaria de falar com um atendente humano",
        "chama um atendente",
        "atendente por favor",
        "nao quero falar com robo, quero uma pessoa",
        "da pra falar com uma pessoa real?",
        "me coloca com um humano",
        "quero atendimento humano",
        "vc é um robô? quero falar com uma pessoa",
    ],
    "en": [
        "can I talk to a human",
        "is there a person I can talk to?",
        "I want to speak to a real person",
        "let me talk to an agent",
        "connect me to a human please",
        "i need a human",
        "transfer me to a live agent",
        "get me a real person",
        "I'd like to talk to a representative",
        "human please",
        "no bots, I want a person",
        "could I speak to a person?",
        "put me through to a human",
        "i wanna talk to a human",
        "are you a bot? I want to talk to a human",
        "can i speak with someone",
    ],
    "es": [
        "pásame con una persona",
        "quiero hablar con una persona",
        "puedo hablar con un humano?",
        "necesito hablar con un asesor",
        "comunícame con un agente",
        "quisiera hablar con alguien de verdad",
        "transfiéreme a un asesor por favor",
        "me gustaría hablar con una persona real",
        "no quiero hablar con un robot, quiero una persona",
        "atencion humana por favor",
        "ponme con un humano",
        "podria hablar con un agente?",
        "quiero un asesor",
        "dejame hablar con alguien real",
        "¿eres un bot? quiero hablar con una persona",
        "necesito un asesor humano",
    ],
}


def _cases(by_language):
    return [pytest.param(text, id=f"{language}-{text}") for language, texts in by_language.items() for text in texts]


@pytest.mark.parametrize("text", _cases(ASKS_WHO_ANSWERS))
def test_asking_whether_a_person_or_a_machine_answers_is_a_bot_question_and_asks_for_no_one(text):
    talk = small_talk_read(text)

    assert talk is not None and talk.kind == "bot_question"
    assert not person_asked_in(text)


@pytest.mark.parametrize("text", _cases(ASKS_FOR_A_PERSON))
def test_asking_to_be_passed_to_a_person_is_a_request_for_a_person(text):
    talk = small_talk_read(text)

    assert talk is not None and talk.kind == "human_request"
    assert person_asked_in(text)


def test_a_plain_phrase_is_read_whole_beside_a_shorter_spelling_of_a_phrase_with_alternatives():
    reader = SmallTalkReader({"human_request": ["(a|) human (please|)", "human support"]}, [])

    assert reader.read("human support").phrases == ("human support",)


@pytest.mark.parametrize(
    ("text", "asked"),
    [
        ("minha fatura veio alta, vc é humano?", False),
        ("is this a real person? my bill is wrong", False),
        ("¿eres humano o una máquina? mi pedido no llegó", False),
        ("minha fatura veio alta e quero falar com um atendente", True),
        ("my bill is wrong, is this a bot? I want to talk to a human", True),
        ("mi pedido no llegó, pásame con una persona", True),
        ("¿cómo hablo con una persona?", True),
        ("how do I reach a live person?", True),
        ("eu não ia pagar essa conta de novo", False),
        ("¿por qué no programa la entrega para el lunes?", False),
        ("vocês podem falar com a gente pelo whatsapp?", False),
    ],
)
def test_among_business_words_a_person_is_asked_for_only_by_a_request_not_by_a_question_about_who_answers(text, asked):
    assert person_asked_in(text) is asked


class CountedSearches:
    """A kind's phrases searched inside messages, each search counted."""

    def __init__(self, pattern):
        self.pattern, self.searched = pattern, 0

    def search(self, *args):
        self.searched += 1
        return self.pattern.search(*args)


def test_a_message_holding_none_of_the_words_a_request_for_a_person_needs_is_not_searched_for_one():
    reader = SmallTalkReader({"human_request": ["(quero|preciso) falar com (um|uma|) (atendente|pessoa)"]}, [])
    searches = reader.anywhere["human_request"] = CountedSearches(reader.anywhere["human_request"])

    assert reader.anchors["human_request"] == {"atendente", "pesoa"}  # canonical words: a letter twice read once
    assert reader.found_in("minha fatura veio alta, quero falar com alguém", "human_request") is None
    assert searches.searched == 0
    assert reader.found_in("minha fatura veio alta, quero falar com um atendenteee", "human_request") == (
        "quero falar com um atendente"
    )
    assert searches.searched == 1


def test_every_phrase_of_the_lexicon_is_found_among_other_words_as_a_search_of_every_message_finds_it():
    """The words a kind's phrases need (``SmallTalkReader.anchors``) leave out only messages its search would not find
    a phrase in: every spelling drawn from the shipped lexicon's phrases, among business words and alone."""
    from routing.small_talk import _ALTERNATIVES, lexicon

    kinds, filler = lexicon()
    reader, searched_always = SmallTalkReader(kinds, filler), SmallTalkReader(kinds, filler)
    searched_always.anchors = dict.fromkeys(searched_always.anchors)
    draw = random.Random(7)
    found = 0
    for kind, phrases in kinds.items():
        for phrase in phrases:
            for _ in range(12):
                parts = _ALTERNATIVES.split(phrase)
                spelled = " ".join(
                    draw.choice(part.split("|")) if index % 2 else part for index, part in enumerate(parts)
                )
                for text in (spelled, f"minha fatura veio alta, {spelled} e o boleto", f"my order is late {spelled}"):
                    expected = searched_always.found_in(text, kind)
                    assert reader.found_in(text, kind) == expected, (kind, text)
                    found += expected is not None
    assert found > 5000


def test_a_letter_repeated_is_read_once_as_the_regular_expressions_own_template_reads_it():
    from routing.small_talk import _REPEATS, _words, lexicon

    kinds, filler = lexicon()
    draw = random.Random(11)
    texts = [phrase for phrases in kinds.values() for phrase in phrases] + filler
    texts += ["".join(draw.choice("aabbooss ççãã__11") for _ in range(draw.randint(1, 40))) for _ in range(3000)]
    for text in texts:
        assert _words(text) == tuple(_REPEATS.sub(r"\1", normalize(text)).split()), text
