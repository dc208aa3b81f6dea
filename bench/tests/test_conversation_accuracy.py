"""The conversation set (bench/conversations/) and how bench/conversation_accuracy.py judges a turn.

Only the set's shape is checked here — categories, languages, counts, names the demo has, expectation keys the
runner knows, no copy of another text of the project — and the runner's judgement on answers built by hand. The
benchmark itself talks to the demo and runs by hand (docs/benchmarks.md), never in the suite.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from bench.conversation_accuracy import (
    CATEGORIES,
    DEFAULT_SET,
    FRAME_MOVES,
    LANGUAGES,
    Turn,
    answer_language,
    conversations_load,
    demo_read,
    fixed_read,
    platform_words,
    seen_read,
    set_problems,
    turn_wrongs,
)
from common.text import normalize
from mcp_servers.finance.server import MANIFEST
from releases.calibration import words

MIN_CONVERSATIONS = 150
MIN_PER_LANGUAGE = 50
# The repair each category is about, which some turn of each of its conversations must expect.
REPAIR_OF = {
    "cancel": "cancel",
    "correct": "correct",
    "repeat": "repeat",
    "skip": "skip",
    "already_told": "already_told",
}
# A message sharing this much of its words with another text of the project is a copy of it. Higher than the
# paraphrase set's bar (0.5): a conversation's messages are not measured for generalisation, and the demo's
# businesses have few words ("quero cancelar o pedido P300" shares half of them with a dozen texts).
COPY_OVERLAP = 0.75
MIN_WORDS_COMPARED = 3  # "sim", "no", "nope": every set has them


@pytest.fixture(scope="module")
def conversations():
    loaded, problems = conversations_load(DEFAULT_SET)
    assert problems == []
    return loaded


def test_the_set_names_only_profiles_specialists_intents_states_and_tools_the_demo_has(conversations):
    assert set_problems(conversations, demo_read()) == []


def test_the_set_has_150_conversations_50_per_language_and_every_category_in_every_language(conversations):
    per_language = Counter(c.lang for c in conversations)
    cells = Counter((c.category, c.lang) for c in conversations)

    assert len(conversations) >= MIN_CONVERSATIONS
    assert all(per_language[language] >= MIN_PER_LANGUAGE for language in LANGUAGES), per_language
    assert [(c, lang) for c in CATEGORIES for lang in LANGUAGES if not cells[c, lang]] == []


def test_every_conversation_expects_what_its_category_is_about(conversations):
    def about(conversation) -> bool:
        expected = [turn.expect for turn in conversation.turns]
        if conversation.category in REPAIR_OF:
            return any(e.get("repair") == REPAIR_OF[conversation.category] for e in expected)
        if conversation.category == "digress_resume":
            return any({"pushed", "resumed"} <= set(e.get("events", ())) for e in expected)
        if conversation.category == "multi_topic":
            return any(len(e.get("topics", ())) >= 2 for e in expected)
        if conversation.category == "reply_in_flow":
            return any("bound" in e.get("events", ()) for e in expected)
        aside = conversation.category.removesuffix("_in_flow")  # out_of_scope, small_talk
        return any(turn.aside == aside for turn in conversation.turns)

    assert [c.id for c in conversations if not about(c)] == []


def test_no_message_is_a_copy_of_an_example_a_saved_test_or_another_benchmark_set(conversations):
    others = _project_texts()
    exact = {normalize(text) for text in others}
    index: dict[str, set[int]] = defaultdict(set)
    their_words = [words(text) for text in others]
    for n, theirs in enumerate(their_words):
        for word in theirs:
            index[word].add(n)
    copies = []
    for conversation in conversations:
        for turn in conversation.turns:
            mine = words(turn.say)
            if len(mine) < MIN_WORDS_COMPARED:
                continue
            if normalize(turn.say) in exact:
                copies.append((conversation.id, turn.say, "the same text"))
            shared = Counter(n for word in mine for n in index.get(word, ()))
            for n, common in shared.items():
                if common / len(mine | their_words[n]) >= COPY_OVERLAP:
                    copies.append((conversation.id, turn.say, others[n]))
    assert copies == []


def test_a_set_naming_what_the_demo_lacks_or_keys_the_runner_does_not_know_is_refused(tmp_path):
    (tmp_path / "cancel.yaml").write_text(
        yaml.safe_dump(
            {
                "category": "cancel",
                "conversations": [
                    {
                        "id": "bad-1",
                        "profile": "retail_orders",
                        "lang": "pt",
                        "turns": [
                            {"say": "quero cancelar", "intent": "billing_payment_request", "expect_agent": "x"},
                            {"say": "deixa", "state": "WAITING_PAYMENT_CONFIRMATION", "events": ["popped"]},
                            {"say": "ok", "top": "permission:apagar_tudo", "tool_args": {"apagar_tudo": {}}},
                        ],
                    },
                    {"id": "bad-1", "profile": "finance_assistente", "lang": "de", "turns": [{"say": "hi"}]},
                ],
            }
        ),
        encoding="utf-8",
    )
    (tmp_path / "multi_topic.yaml").write_text(
        "category: multi_topic\nconversations:\n  - {id: bad-3, profile: finance_assistente, lang: en,\n"
        "     turns: [{say: a and b, topics: [finance.GET_QUOTE]}]}\n",
        encoding="utf-8",
    )

    loaded, problems = conversations_load(tmp_path)
    problems += set_problems(loaded, demo_read())

    assert problems == [
        "cancel.yaml[0] bad-1 turn 1: unknown keys ['expect_agent']",
        "cancel.yaml bad-1 turn 1: retail_orders has no intent 'billing_payment_request'",
        "cancel.yaml bad-1 turn 2: retail_orders has no state 'WAITING_PAYMENT_CONFIRMATION'",
        "cancel.yaml bad-1 turn 2: events: no event 'popped'",
        "cancel.yaml bad-1 turn 3: top: no tool 'apagar_tudo'",
        "cancel.yaml bad-1 turn 3: tool_args: no tool 'apagar_tudo'",
        "cancel.yaml bad-1: unknown language 'de'",
        "multi_topic.yaml bad-3: multi-topic messages are measured in router and hybrid mode",
        "id 'bad-1' used 2 times",
    ]


def _answer(*, agent="orders_agent", intent="retail_order_tracking", conversation=None, tools=()):
    """An answer of the gateway as the contract shapes it, with what a check reads."""
    metadata = {
        "route_decision": {"agent": agent, "intent": intent, "method": "keyword", "metadata": {}},
        "mcp_results": [{"tool": tool, "status": "ok", "arguments": arguments} for tool, arguments in tools],
    }
    if conversation is not None:
        metadata["conversation"] = conversation
    return {"agent": agent, "metadata": metadata}


def _frame(kind, name):
    return {"kind": kind, "name": name, "agent": "orders_agent", "intent": "x", "opened_turn": 1, "opened_at": ""}


def _event(event, kind, name):
    return {"event": event, "frame": {"kind": kind, "name": name}, "by": "test"}


def test_a_turn_is_right_when_every_expectation_it_states_holds_and_only_then():
    state = _frame("state", "WAITING_CANCELLATION_CONFIRMATION")
    side = {
        "stack": [state],
        "events": [_event("pushed", "state", state["name"]), _event("resumed", "state", state["name"])],
        "repair": None,
        "topics": [],
    }
    expect = {
        "agent": "orders_agent",
        "intent": "retail_order_tracking",
        "state": "WAITING_CANCELLATION_CONFIRMATION",
        "top": "state:WAITING_CANCELLATION_CONFIRMATION",
        "events": ["pushed", "resumed:state"],
        "no_events": ["closed"],
        "repair": None,
        "tool_args": {"consultar_entrega": {"order_id": "P100"}},
    }
    turn = Turn("e o P100?", {}, "", expect)
    body = _answer(conversation=side, tools=[("consultar_entrega", {"order_id": "P100"})])

    assert turn_wrongs(turn, seen_read(200, body, "WAITING_CANCELLATION_CONFIRMATION", {}), [state]) == []

    other = _answer(
        conversation={**side, "events": side["events"][:1]}, tools=[("consultar_entrega", {"order_id": "P200"})]
    )
    wrongs = turn_wrongs(turn, seen_read(200, other, "", {}), [state])
    assert wrongs == [
        "state '', expected 'WAITING_CANCELLATION_CONFIRMATION'",
        "no resumed:state event (events: pushed:state)",
        "no ok call of consultar_entrega with {'order_id': 'P100'} "
        "(calls: [('consultar_entrega', 'ok', {'order_id': 'P200'})])",
    ]


def test_an_aside_that_moves_a_frame_is_wrong_even_when_it_expects_nothing_else():
    state = _frame("state", "WAITING_PAYMENT_CONFIRMATION")
    turn = Turn("que calor", {}, "small_talk", {})
    kept = _answer(agent="support_agent", intent="", conversation={"stack": [state], "events": [], "topics": []})
    popped = _answer(agent="support_agent", intent="", conversation={"stack": [], "events": [], "topics": []})
    closed = _answer(
        agent="support_agent",
        intent="",
        conversation={"stack": [state], "events": [_event("closed", "state", state["name"])], "topics": []},
    )

    assert turn_wrongs(turn, seen_read(200, kept, "", {}), [("state", state["name"])]) == []
    for moved in (popped, closed):
        [wrong] = turn_wrongs(turn, seen_read(200, moved, "", {}), [("state", state["name"])])
        assert wrong.startswith("the small_talk message moved a frame")
    assert set(FRAME_MOVES) == {"pushed", "closed", "cancelled"}


def test_topics_must_each_be_answered_or_queued_and_a_missing_conversation_block_shows_nothing():
    turn = Turn("a e b", {}, "", {"topics": ["billing_invoice_explanation", "technical_support"]})
    both = {
        "stack": [],
        "events": [],
        "topics": [
            {"intent": "billing_invoice_explanation", "agent": "billing_agent", "text": "a", "status": "answered"},
            {"intent": "technical_support", "agent": "support_agent", "text": "b", "status": "queued"},
        ],
    }
    one = {**both, "topics": both["topics"][:1]}

    assert turn_wrongs(turn, seen_read(200, _answer(conversation=both), "", {}), []) == []
    assert len(turn_wrongs(turn, seen_read(200, _answer(conversation=one), "", {}), [])) == 1
    seen = seen_read(200, _answer(), "", {})
    assert (seen.has_conversation, len(turn_wrongs(turn, seen, []))) == (False, 1)


def test_a_delegated_answer_is_judged_on_the_intent_it_was_delegated_for():
    body = _answer(agent="billing_agent", intent="coordination")
    body["metadata"]["route_decision"].update(
        agent="assistente_virtual",
        method="coordinator",
        metadata={"candidates": [{"intent": "billing_invoice_explanation", "agent": "billing_agent"}]},
    )
    owned = {"orders_agent": {"retail_order_tracking"}}

    assert seen_read(200, body, "", owned).intent == "billing_invoice_explanation"
    body["metadata"]["route_decision"]["metadata"] = {"candidates": []}
    assert seen_read(200, body, "", owned).intent == ""
    assert seen_read(200, body, "", {"billing_agent": {"billing_invoice_explanation"}}).intent == (
        "billing_invoice_explanation"
    )


@pytest.fixture(scope="module")
def fixed():
    return fixed_read()


def test_the_fixed_texts_are_the_catalogues_pieces_in_each_language_and_the_offline_notice_in_each(fixed):
    assert "para seguir preciso da sua autorização para usar" in fixed.texts["pt"]
    assert "para continuar necesito su autorización para usar" in fixed.texts["es"]
    assert "to go on i need your permission to use" in fixed.texts["en"]
    assert {"(offline model)", "(modelo sin conexión)"} <= set(fixed.notices)
    short = [piece for pieces in fixed.texts.values() for piece in pieces if len(piece.split()) < 3]
    assert short == []  # "sim", "Qual": words any answer may hold


def test_the_business_words_quotes_and_identifiers_are_not_read_for_the_answers_language(fixed):
    answer = (
        'Planos e serviços (modelo sin conexión): recibí su mensaje. Usted dijo: "quero trocar o plano".\n'
        "- consultar_fatura: “status: em aberto; valor: 120,00”"
    )

    words = platform_words(answer, fixed.notices)

    assert "Planos" not in words and "quero" not in words and "aberto" not in words and "consultar" not in words
    assert answer_language(answer, "es", fixed).fits("es")
    assert answer_language("1) Nordea Bank, OMX Stockholm, SEK (NDA-SE.ST)", "es", fixed).fits("es")  # names


def test_an_answer_with_a_sentence_or_a_fixed_text_of_another_language_is_not_in_the_customers(fixed):
    consolidated = (
        "[Supervisor] As respostas dos especialistas que a sua mensagem pediu.\n\n"
        "support_agent: Suporte (offline model): "
        'I received your message. You said: "my data is dead". I will look into it as a specialist.'
    )
    asked = 'Para seguir preciso da sua autorização para usar diagnosticar_linha (“Diagnóstico da linha”). Ok? "sim"'

    read = answer_language(consolidated, "en", fixed)
    assert read.others == ("As respostas dos especialistas que a sua mensagem pediu",)
    assert not read.fits("en")
    assert answer_language(asked, "en", fixed).foreign == ("para seguir preciso da sua autorização para usar",)
    assert not answer_language(asked, "en", fixed).fits("en")
    assert answer_language(asked, "pt", fixed).fits("pt")
    assert answer_language("P100: OK", "es", fixed).fits("es")  # nothing that tells a language


def _project_texts() -> list[str]:
    """Every message the project already holds: the demo's examples, keywords and out-of-scope samples, its saved
    routing tests, the finance goals' examples, and the other benchmark sets."""
    root = Path(settings.BASE_DIR)
    texts: list[str] = []
    for path in sorted((root / "config" / "demo").glob("routing.*.yaml")):
        routing = yaml.safe_load(path.read_text(encoding="utf-8"))
        for intent in routing.get("intents") or ():
            texts += [*(intent.get("examples") or ()), *(intent.get("keywords") or ())]
        texts += (routing["router"].get("examples") or {}).get("out_of_scope") or []
    for path in sorted((root / "config" / "demo" / "tests").rglob("*.yaml")):
        texts += [case["message"] for case in yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]]
    texts += [example for goal in MANIFEST["goals"] for example in goal["examples"]]
    for path in sorted((root / "bench" / "paraphrases").glob("*.yaml")):
        texts += [message["text"] for message in yaml.safe_load(path.read_text(encoding="utf-8"))["messages"]]
    for path in (root / "bench" / "out_of_scope.yaml", root / "bench" / "unseen" / "out_of_scope.yaml"):
        texts += [message["text"] for message in yaml.safe_load(path.read_text(encoding="utf-8"))["messages"]]
    unseen = yaml.safe_load((root / "bench" / "unseen" / "in_scope.yaml").read_text(encoding="utf-8"))["profiles"]
    texts += [message["text"] for messages in unseen.values() for message in messages]
    return texts
