"""The examples tier is open-set: intents compete with "none of these" (routing.background), and an intent that sets
a state needs strong evidence to set it."""

from __future__ import annotations

import asyncio

import pytest

from routing.admin_views import set_aside_sentences
from routing.background import OUT_OF_SCOPE, PREFIX, background_of, corpus, none_label
from routing.examples import ExampleIndex
from routing.router import CompiledRouter, IntentSpec
from routing.tests.test_examples import sklearn_posteriors
from routing.tfidf import TfidfVectoriser

INTENTS = (
    IntentSpec(
        name="payment",
        agent="billing_agent",
        next_state="WAITING_PAYMENT",
        examples=(
            "Quero quitar a mensalidade do celular hoje",
            "Me manda o código para eu acertar o que devo",
            "I want to settle my phone bill today",
            "Quiero saldar la deuda de mi línea hoy",
        ),
    ),
    IntentSpec(
        name="delivery",
        agent="orders_agent",
        examples=(
            "Meu chip ainda não chegou, já faz uma semana",
            "Onde está a entrega do meu modem?",
            "My new router has not been delivered yet",
            "Mi módem todavía no ha llegado a casa",
        ),
    ),
)
BACKGROUND = (
    (PREFIX + "greeting", ("bom dia, tudo bem?", "hello, how are you today?", "hola, ¿qué tal?")),
    (
        PREFIX + "off_topic",
        (
            "como faço um bolo de cenoura com cobertura?",
            "what is the tallest mountain in the world?",
            "¿cuántos planetas tiene el sistema solar?",
            "who won the football match yesterday?",
        ),
    ),
)


def index_with_background() -> ExampleIndex:
    index = ExampleIndex.build([(i.name, i.examples) for i in INTENTS], TfidfVectoriser(), BACKGROUND)
    assert index is not None
    return index


def router(**settings) -> CompiledRouter:
    rule = {"examples_threshold": 0.5, "examples_margin": 0.1, **settings}
    return CompiledRouter(intents=INTENTS, fallback_agent="support_agent", examples=index_with_background(), **rule)


@pytest.mark.parametrize(
    "text",
    ["quero acertar a conta do celular", "how do I bake a carrot cake?", "bom dia! meu modem chegou?", "xyz hola"],
)
def test_the_intents_scores_and_none_of_these_are_scikit_learns_posteriors_over_every_class(text):
    index = index_with_background()
    expected = sklearn_posteriors(index, text)

    match = index.match_text(text)

    assert dict(match.ranking) == pytest.approx({name: expected[name] for name in index.intents}, abs=1e-6)
    background = {name: p for name, p in expected.items() if name.startswith(PREFIX)}
    assert match.none_of_these[0] == max(background, key=background.get)
    assert match.none_of_these[1] == pytest.approx(sum(background.values()), abs=1e-6)
    whole = index.match(index.vectoriser.vector(text))  # from its words as from its whole vector
    assert dict(match.ranking) == pytest.approx(dict(whole.ranking), abs=1e-12)
    assert match.none_of_these[0] == whole.none_of_these[0]
    assert match.none_of_these[1] == pytest.approx(whole.none_of_these[1], abs=1e-12)


def test_background_rows_left_out_leave_its_counts_as_if_fitted_without_them():
    index = index_with_background()
    text = "como faço um bolo de chocolate?"
    cake = index.texts.index("como faço um bolo de cenoura com cobertura?")

    match = index.match_text(text, exclude=[cake])

    expected = sklearn_posteriors(index, text, exclude=frozenset({cake}))
    assert match.none_of_these[1] == pytest.approx(sum(p for n, p in expected.items() if n.startswith(PREFIX)))
    assert match.none_of_these[1] < index.match_text(text).none_of_these[1]


def test_a_message_like_no_intent_reads_as_none_of_these_and_the_tier_leaves_it_to_the_fallback():
    decision = asyncio.run(router().route("what is the tallest building in the world?"))

    assert decision.method == "fallback"
    evidence = decision.metadata["examples"]["none_of_these"]
    assert evidence["kind"] == PREFIX + "off_topic" and evidence["label"] == "off-topic"
    assert evidence["score"] > decision.metadata["examples"]["score"]
    assert "reads as none of the intents (off-topic" in decision.reason


def test_the_best_intent_must_beat_none_of_these_by_the_margin_as_it_beats_the_runner_up():
    index = index_with_background()
    match = index.match_text("bom dia, meu modem ainda não chegou")
    assert match.best[0] == "delivery"

    assert match.gap == pytest.approx(match.best[1] - max(match.runner_up[1], match.none_of_these[1]))
    assert match.decides(match.best[1], match.gap)
    assert not match.decides(match.best[1], match.gap + 0.01)


def test_an_intent_that_sets_a_state_sets_it_only_at_or_above_the_state_bar():
    text = "quero acertar o que devo da linha hoje"
    score = router().examples.match_text(text).best[1]

    below = asyncio.run(router(examples_state_threshold=min(1.0, score + 0.001)).route(text))
    at = asyncio.run(router(examples_state_threshold=score).route(text))

    assert (below.method, below.intent, below.next_state) == ("examples", "payment", None)
    assert below.metadata["state_withheld"]["state"] == "WAITING_PAYMENT"
    assert "Its state WAITING_PAYMENT is not set" in below.reason
    assert (at.next_state, at.metadata["state_set_by"]) == ("WAITING_PAYMENT", "examples")
    assert "state_withheld" not in at.metadata


def test_a_keyword_sets_its_intents_state_whatever_the_state_bar():
    intents = (IntentSpec(name="payment", agent="billing_agent", keywords=("pix",), next_state="WAITING_PAYMENT"),)
    compiled = CompiledRouter(intents=intents, fallback_agent="support_agent", examples_state_threshold=1.0)

    decision = asyncio.run(compiled.route("quero pagar com pix"))

    assert (decision.next_state, decision.metadata["state_set_by"]) == ("WAITING_PAYMENT", "keyword")


def test_a_profiles_background_is_the_shipped_corpus_and_its_own_out_of_scope_examples():
    shipped = corpus()
    labels = [label for label, _ in shipped]
    assert {PREFIX + kind for kind in ("greeting", "thanks", "goodbye", "off_topic")} <= set(labels)
    assert all(texts for _, texts in shipped)

    own = background_of(["Quero abrir uma conta no banco", "  "])

    assert own[:-1] == shipped
    assert own[-1] == (PREFIX + OUT_OF_SCOPE, ("Quero abrir uma conta no banco",))
    assert background_of([]) == shipped
    assert none_label(PREFIX + OUT_OF_SCOPE) == "like the profile's out-of-scope examples"


KEYWORDED = tuple(
    IntentSpec(name=i.name, agent=i.agent, next_state=i.next_state, examples=i.examples, keywords=keywords)
    for i, keywords in zip(INTENTS, (("pagar",), ("entrega",)), strict=True)
)


def keyword_router(check: float) -> CompiledRouter:
    return CompiledRouter(
        intents=KEYWORDED,
        fallback_agent="support_agent",
        examples=index_with_background(),
        examples_threshold=0.5,
        examples_margin=0.1,
        keyword_check=check,
    )


def test_the_keyword_check_sets_a_keyword_aside_when_the_whole_message_reads_as_none_of_these():
    text = "who won the entrega football match yesterday?"  # "entrega" in a message about something else

    off = asyncio.run(keyword_router(1.0).route(text))
    on = asyncio.run(keyword_router(0.5).route(text))

    assert (off.method, off.intent) == ("keyword", "delivery")
    assert on.method == "fallback"
    aside = on.metadata["keywords_set_aside"]
    assert aside["keywords"][0]["intent"] == "delivery" and aside["bar"] == 0.5
    assert aside["none_of_these"]["score"] >= 0.5 and aside["none_of_these"]["label"]
    assert keyword_router(0.5).checked_match(text) == []


def test_the_keyword_check_sets_a_keyword_aside_when_the_whole_message_reads_as_another_intent():
    text = "quero quitar hoje a mensalidade da entrega do celular"  # names the delivery, asks to settle the bill

    off = asyncio.run(keyword_router(1.0).route(text))
    on = asyncio.run(keyword_router(0.8).route(text))

    assert (off.method, off.intent) == ("keyword", "delivery")
    assert (on.method, on.intent) == ("examples", "payment")
    aside = on.metadata["keywords_set_aside"]
    assert aside["keywords"][0]["intent"] == "delivery"
    assert aside["reads_as"]["intent"] == "payment" and aside["reads_as"]["score"] >= 0.8
    assert "reads as payment" in set_aside_sentences(aside)[0]


def test_the_keyword_check_leaves_a_keyword_that_reads_as_its_intent():
    text = "a entrega do meu modem ainda não chegou"

    decision = asyncio.run(keyword_router(0.5).route(text))

    assert (decision.method, decision.intent) == ("keyword", "delivery")
    assert "keywords_set_aside" not in decision.metadata


def test_the_keyword_check_never_sets_aside_a_message_with_two_keywords():
    text = "who won the entrega football match, and can I pagar for it?"  # two keywords, of two intents

    decision = asyncio.run(keyword_router(0.01).route(text))

    assert decision.method == "keyword" and "keywords_set_aside" not in decision.metadata
