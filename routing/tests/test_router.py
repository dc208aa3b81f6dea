"""The compiled router: pure decisions over plain data (no database)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest

from common.text import normalize
from routing.keywords import KeywordExclusion, KeywordLoopMatcher
from routing.replies import ReplyWords
from routing.router import Classification, CompiledRouter, IntentSpec, StatePolicySpec

BILLING = IntentSpec(
    name="billing_invoice_explanation",
    agent="billing_agent",
    domain="telecom",
    priority=10,
    keywords=("fatura", "conta", "cobrança", "boleto", "vencimento", "segunda via", "contestar", "valor alto"),
    mcp_tools=("consultar_fatura", "consultar_pagamentos"),
)
ORDERS = IntentSpec(
    name="retail_order_tracking",
    agent="orders_agent",
    domain="retail",
    priority=20,
    keywords=("pedido", "entrega", "rastreio", "atraso"),
    mcp_tools=("consultar_pedido", "consultar_entrega"),
)
SUPPORT = IntentSpec(name="support_request", agent="support_agent", priority=40, keywords=("troca", "defeito"))
PAYMENT_POLICY = StatePolicySpec(
    state="WAITING_PAYMENT_CONFIRMATION",
    agent="billing_agent",
    intent="billing_payment_confirmation",
    mcp_tools=("consultar_pagamentos",),
)


def make_router(*intents: IntentSpec, llm_enabled: bool = False, threshold: float = 0.6) -> CompiledRouter:
    return CompiledRouter(
        intents=intents or (BILLING, ORDERS, SUPPORT),
        state_policies=(PAYMENT_POLICY,),
        fallback_agent="support_agent",
        llm_enabled=llm_enabled,
        llm_threshold=threshold,
    )


def route(router: CompiledRouter, text: str, **kwargs):
    return asyncio.run(router.route(text, **kwargs))


class RecordingClassifier:
    def __init__(self, result: Classification | None) -> None:
        self.result = result
        self.calls: list[str] = []

    async def __call__(self, text, intents):
        self.calls.append(text)
        return self.result


# -- normalisation and matching ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("COBRANÇA", "cobranca"),
        ("Cobrança!!", "cobranca"),
        ("segunda-via", "segunda via"),
        ("  Não   sei ", "nao sei"),
        ("pedido_123", "pedido 123"),
    ],
)
def test_normalisation_folds_case_accents_and_punctuation(text, expected):
    assert normalize(text) == expected


@pytest.mark.parametrize("text", ["Minha COBRANÇA veio errada", "minha cobranca veio errada", "Cobrança?"])
def test_keywords_match_whatever_the_case_and_accents(text):
    decision = make_router().by_keywords(text)
    assert decision is not None
    assert decision.intent == "billing_invoice_explanation"


def test_a_keyword_does_not_match_inside_a_longer_word():
    assert make_router().by_keywords("Qual é o contato de vocês?") is None


def test_a_keyword_matches_next_to_punctuation():
    assert make_router().by_keywords("Minha conta, por favor.").intent == "billing_invoice_explanation"


def test_a_phrase_keyword_matches_only_as_a_whole_phrase():
    router = make_router()
    assert router.by_keywords("Preciso da segunda-via").metadata["matched_keywords"] == ["segunda via"]
    assert router.by_keywords("Preciso da segunda opção") is None
    assert router.by_keywords("O valor está alto") is None


def test_the_decision_carries_every_field_of_the_contract():
    decision = route(make_router(), "Minha fatura veio alta")
    assert decision.as_dict().keys() == {
        "route",
        "agent",
        "intent",
        "confidence",
        "reason",
        "method",
        "next_state",
        "handoff",
        "domain",
        "mcp_tools",
        "metadata",
        "agents",
        "plan",
        "keeps_conversation",
    }
    assert decision.agents == ["billing_agent"]
    assert decision.plan == []
    assert (decision.route, decision.agent, decision.intent, decision.method) == (
        "billing_agent",
        "billing_agent",
        "billing_invoice_explanation",
        "keyword",
    )
    assert decision.mcp_tools == ["consultar_fatura", "consultar_pagamentos"]
    assert decision.domain == "telecom"
    assert "fatura" in decision.reason


def test_the_order_question_goes_to_the_orders_agent():
    decision = route(make_router(), "Onde está meu pedido?")
    assert (decision.agent, decision.intent, decision.method) == ("orders_agent", "retail_order_tracking", "keyword")
    assert decision.mcp_tools == ["consultar_pedido", "consultar_entrega"]


# -- priority and ties ----------------------------------------------------------------


def test_the_lower_priority_number_wins_and_the_beaten_candidates_are_listed():
    decision = route(make_router(), "Meu pedido atrasou e minha fatura veio duplicada")
    assert decision.intent == "billing_invoice_explanation"
    assert decision.metadata["candidates"] == [
        {
            "intent": "retail_order_tracking",
            "agent": "orders_agent",
            "priority": 20,
            "matched_keywords": ["pedido"],
        }
    ]


def test_a_priority_tie_goes_to_the_intent_with_more_matched_keywords():
    one = IntentSpec(name="a_one", agent="a", priority=5, keywords=("internet",))
    two = IntentSpec(name="b_two", agent="b", priority=5, keywords=("plano", "lento"))
    assert make_router(one, two).by_keywords("plano de internet lento").intent == "b_two"


def test_a_priority_tie_with_equal_counts_goes_to_the_longer_keyword():
    word = IntentSpec(name="a_word", agent="a", priority=5, keywords=("via",))
    phrase = IntentSpec(name="b_phrase", agent="b", priority=5, keywords=("segunda via",))
    assert make_router(word, phrase).by_keywords("quero a segunda via").intent == "b_phrase"


def test_a_remaining_tie_goes_to_the_earlier_match_then_the_name():
    first = IntentSpec(name="z_first", agent="a", priority=5, keywords=("boleto",))
    second = IntentSpec(name="a_second", agent="b", priority=5, keywords=("cartao",))
    assert make_router(first, second).by_keywords("boleto ou cartão").intent == "z_first"
    assert make_router(first, second).by_keywords("cartão ou boleto").intent == "a_second"
    same = IntentSpec(name="y_same", agent="c", priority=5, keywords=("cartao",))
    assert make_router(same, second).by_keywords("cartão").intent == "a_second"


# -- the order of the steps --------------------------------------------------------------


def test_a_short_confirmation_stays_with_the_flow_that_asked():
    decision = route(make_router(), "sim", state="WAITING_PAYMENT_CONFIRMATION")
    assert (decision.method, decision.agent, decision.intent) == (
        "state",
        "billing_agent",
        "billing_payment_confirmation",
    )
    assert decision.confidence == 1.0
    assert decision.mcp_tools == ["consultar_pagamentos"]


def test_the_state_policy_decides_before_keywords():
    decision = route(make_router(), "sim, e o pedido?", state="WAITING_PAYMENT_CONFIRMATION")
    assert decision.method == "state"


def test_a_yes_or_no_in_a_state_flow_is_recorded_with_the_words_that_decided():
    router = CompiledRouter(
        intents=(BILLING, ORDERS, SUPPORT),
        state_policies=(PAYMENT_POLICY,),
        fallback_agent="support_agent",
        reply_words=ReplyWords(yes=("sim", "ok"), no=("não", "no")),
    )

    said_yes = route(router, "ok, pode confirmar", state="WAITING_PAYMENT_CONFIRMATION")
    said_no = route(router, "no, not yet", state="WAITING_PAYMENT_CONFIRMATION")
    other = route(router, "Na verdade, meu pedido P100 atrasou", state="WAITING_PAYMENT_CONFIRMATION")

    assert said_yes.metadata == {"state": "WAITING_PAYMENT_CONFIRMATION", "reply": {"reads_as": "yes", "words": "ok"}}
    assert said_no.metadata["reply"] == {"reads_as": "no", "words": "no"}
    assert (other.method, other.metadata) == ("state", {"state": "WAITING_PAYMENT_CONFIRMATION"})
    assert router.by_state("WAITING_PAYMENT_CONFIRMATION").metadata == {"state": "WAITING_PAYMENT_CONFIRMATION"}


def test_a_router_without_reply_words_reads_no_reply():
    decision = route(make_router(), "sim", state="WAITING_PAYMENT_CONFIRMATION")

    assert "reply" not in decision.metadata


def test_an_unknown_state_falls_through_to_keywords():
    assert route(make_router(), "meu pedido", state="SOMETHING_ELSE").method == "keyword"


def test_nothing_matching_falls_back_to_the_fallback_specialist():
    decision = route(make_router(), "qual a capital da França?")
    assert (decision.method, decision.agent, decision.intent, decision.confidence) == (
        "fallback",
        "support_agent",
        "fallback",
        0.0,
    )


def test_the_classifier_is_not_consulted_when_a_keyword_decides():
    classifier = RecordingClassifier(Classification("retail_order_tracking", 0.99))
    decision = route(make_router(llm_enabled=True), "minha fatura", classifier=classifier)
    assert decision.method == "keyword"
    assert classifier.calls == []


def test_the_classifier_decides_when_no_keyword_matches_and_it_is_confident():
    classifier = RecordingClassifier(Classification("retail_order_tracking", 0.9, "It is about a parcel."))
    decision = route(make_router(llm_enabled=True), "cadê minha encomenda?", classifier=classifier)
    assert (decision.method, decision.agent, decision.intent) == ("llm", "orders_agent", "retail_order_tracking")
    assert decision.reason == "It is about a parcel."
    assert decision.metadata["classifier"]["confidence"] == 0.9


def test_a_low_confidence_classification_falls_through_to_the_fallback():
    classifier = RecordingClassifier(Classification("retail_order_tracking", 0.3))
    decision = route(make_router(llm_enabled=True, threshold=0.6), "cadê minha encomenda?", classifier=classifier)
    assert decision.method == "fallback"
    assert "below the threshold" in decision.reason
    assert decision.metadata["classifier"]["intent"] == "retail_order_tracking"


def test_a_classification_naming_an_unknown_intent_falls_through():
    classifier = RecordingClassifier(Classification("made_up_intent", 0.99))
    assert route(make_router(llm_enabled=True), "hmm", classifier=classifier).method == "fallback"


def test_the_classifier_is_never_consulted_when_disabled_for_the_profile():
    classifier = RecordingClassifier(Classification("retail_order_tracking", 0.99))
    assert route(make_router(llm_enabled=False), "cadê minha encomenda?", classifier=classifier).method == "fallback"
    assert classifier.calls == []


def test_moving_away_from_the_active_specialist_is_marked_as_a_handoff():
    router = make_router()
    assert route(router, "meu pedido", active_agent="billing_agent").handoff is True
    assert route(router, "minha fatura", active_agent="billing_agent").handoff is False
    assert route(router, "minha fatura").handoff is False


# -- keyword exclusions ------------------------------------------------------------------

BILLING_EXCLUDING = replace(
    BILLING, keyword_exclusions=(("conta", ("banco", "conta corrente", "Conta Bancária", "me conta")),)
)
JOKES = IntentSpec(name="small_talk_jokes", agent="support_agent", priority=50, keywords=("piada",))


def excluding_router() -> CompiledRouter:
    return make_router(BILLING_EXCLUDING, ORDERS, SUPPORT, JOKES)


def test_a_keyword_inside_an_exclusion_that_contains_it_does_not_count():
    found = excluding_router().keyword_match("me conta uma piada")

    assert [hit.intent.name for hit in found.hits] == ["small_talk_jokes"]
    assert found.excluded == (KeywordExclusion("billing_invoice_explanation", "conta", "me conta", "inside"),)


def test_an_occurrence_outside_the_exclusion_still_counts():
    (hit,) = excluding_router().match("me conta o valor da conta")

    assert (hit.intent.name, hit.keywords) == ("billing_invoice_explanation", ("conta",))
    assert hit.first_position == len(" me conta o valor da ")  # the occurrence that counted
    assert excluding_router().keyword_match("me conta o valor da conta").excluded == ()


def test_a_phrase_that_does_not_contain_the_keyword_cancels_it_in_the_whole_message():
    found = excluding_router().keyword_match("a conta do banco")

    assert found.hits == []
    assert found.excluded == (KeywordExclusion("billing_invoice_explanation", "conta", "banco", "context"),)


@pytest.mark.parametrize("text", ["ME CONTA uma piada", "me contá uma piada!", "Me-conta uma piada"])
def test_exclusions_match_whatever_the_case_accents_and_punctuation(text):
    assert [hit.intent.name for hit in excluding_router().match(text)] == ["small_talk_jokes"]


def test_an_exclusion_written_with_accents_and_capitals_matches_the_plain_text():
    found = excluding_router().keyword_match("quero abrir uma conta bancaria")

    assert found.hits == []
    assert found.excluded[0].exclusion == "Conta Bancária"


def test_an_exclusion_matches_only_whole_words():
    assert [hit.intent.name for hit in excluding_router().match("a conta do bancote")] == [
        "billing_invoice_explanation"
    ]


def test_a_cancelled_keyword_leaves_the_intents_other_keywords_counting():
    (hit,) = excluding_router().match("me conta por que a fatura veio alta")

    assert hit.keywords == ("fatura",)


def test_the_first_exclusion_in_their_order_that_cancelled_the_keyword_is_named():
    found = excluding_router().keyword_match("conta corrente no banco")

    assert found.excluded == (KeywordExclusion("billing_invoice_explanation", "conta", "banco", "context"),)


def test_the_decision_records_the_cancelled_keyword_when_another_intent_wins():
    decision = route(excluding_router(), "me conta uma piada")

    assert (decision.intent, decision.method) == ("small_talk_jokes", "keyword")
    assert decision.metadata["excluded_keywords"] == [
        {"intent": "billing_invoice_explanation", "keyword": "conta", "exclusion": "me conta", "kind": "inside"}
    ]


def test_the_decision_records_the_cancelled_keyword_when_it_falls_back():
    decision = route(excluding_router(), "a conta do banco")

    assert decision.method == "fallback"
    assert decision.metadata["excluded_keywords"][0]["exclusion"] == "banco"
    assert excluding_router().route_sync("a conta do banco").metadata["excluded_keywords"][0]["kind"] == "context"


def test_a_decision_where_nothing_was_cancelled_records_no_exclusions():
    assert "excluded_keywords" not in route(excluding_router(), "minha conta veio alta").metadata
    assert (
        "excluded_keywords" not in route(excluding_router(), "me conta", state="WAITING_PAYMENT_CONFIRMATION").metadata
    )


def test_a_supervisor_plan_leaves_out_the_intent_whose_keyword_was_cancelled():
    decision = route(excluding_router(), "me conta uma piada sobre o meu pedido", mode="supervisor")

    assert [step.intent for step in decision.plan] == ["retail_order_tracking", "small_talk_jokes"]
    assert decision.metadata["excluded_keywords"][0]["keyword"] == "conta"


# -- compiled versus the naive loop ----------------------------------------------------


def test_the_compiled_matcher_agrees_with_the_per_keyword_loop_on_random_data():
    rng = random.Random(7)
    vocabulary = [f"palavra{n}" for n in range(400)] + ["cobrança", "segunda via", "não", "atenção"]
    intents = tuple(
        IntentSpec(
            name=f"intent_{n:03d}",
            agent=f"agent_{n % 7}",
            priority=rng.randint(1, 20),
            keywords=tuple(rng.sample(vocabulary, 5)),
        )
        for n in range(120)
    )
    router = make_router(*intents)
    loop = KeywordLoopMatcher(intents)
    for _ in range(300):
        text = " ".join(rng.choice([*vocabulary, "x", "y", "z"]) for _ in range(rng.randint(1, 30)))
        assert router.match(text) == loop.match(text), text


def test_the_compiled_matcher_agrees_with_the_loop_on_exclusions_of_both_kinds():
    rng = random.Random(11)
    vocabulary = [f"palavra{n}" for n in range(60)] + ["cobrança", "segunda via", "não", "atenção"]
    intents = []
    for n in range(40):
        keywords = tuple(rng.sample(vocabulary, 4))
        exclusions = tuple(
            (
                keyword,
                (
                    f"{rng.choice(vocabulary)} {keyword}",  # contains the keyword: cancels it inside
                    f"{keyword} {rng.choice(vocabulary).upper()}",
                    rng.choice(vocabulary),  # a context
                ),
            )
            for keyword in keywords[: rng.randint(0, 3)]
        )
        intents.append(
            IntentSpec(
                name=f"intent_{n:03d}",
                agent=f"agent_{n % 5}",
                priority=rng.randint(1, 10),
                keywords=keywords,
                keyword_exclusions=exclusions,
            )
        )
    router = make_router(*intents)
    loop = KeywordLoopMatcher(tuple(intents))
    cancelled = 0
    for _ in range(600):
        text = " ".join(rng.choice([*vocabulary, "x", "y"]) for _ in range(rng.randint(1, 25)))
        compiled = router.keyword_match(text)
        assert compiled == loop.keyword_match(text), text
        cancelled += bool(compiled.excluded)
    assert cancelled > 100  # the random messages did exercise the exclusions


def test_a_decision_as_data_has_every_field_of_the_decision_with_the_same_values():
    from dataclasses import asdict

    from routing.router import PlanStep, RouteDecision

    decision = RouteDecision(
        route="supervisor",
        agent="billing_agent",
        intent="invoice_question",
        confidence=0.9,
        reason="keywords",
        method="keyword",
        next_state="billing",
        domain="billing",
        mcp_tools=["get_invoice"],
        metadata={"evidence": {"keywords": ["fatura"]}},
        plan=[PlanStep(agent="billing_agent", intent="invoice_question", mcp_tools=("get_invoice",))],
    )

    assert decision.as_dict() == asdict(decision)  # a field added to the decision must be added to its data
