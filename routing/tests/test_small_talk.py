"""Small talk (routing/small_talk.py): read before any intent, answered by the fallback, moving nothing."""

from __future__ import annotations

import asyncio

import pytest

from routing.router import CompiledRouter, IntentSpec, StatePolicySpec
from routing.small_talk import SmallTalkReader, small_talk_read

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
