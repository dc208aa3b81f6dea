"""Conversation repair patterns, side-question and return marks (routing.repairs), and the frames' own rules
(routing.stack): read with the profile's built-in phrases, in Portuguese, English and Spanish."""

from __future__ import annotations

import datetime as dt

import pytest

from agents.models import (
    DEFAULT_ALREADY_TOLD_WORDS,
    DEFAULT_CANCEL_WORDS,
    DEFAULT_CONFIRMATION_WORDS,
    DEFAULT_CORRECTION_WORDS,
    DEFAULT_DENIAL_WORDS,
    DEFAULT_REPEAT_WORDS,
    DEFAULT_SKIP_WORDS,
)
from common.text import described_example, identifier_shape, identifiers
from routing import stack
from routing.repairs import RepairWords, marks_digression, return_cut, skips_the_question
from routing.replies import ReplyWords
from routing.stack import Frame, StackStep, clauses, clauses_announced, frames_read, is_question, value_corrections

WORDS = RepairWords(
    cancel=tuple(DEFAULT_CANCEL_WORDS),
    correct=tuple(DEFAULT_CORRECTION_WORDS),
    repeat=tuple(DEFAULT_REPEAT_WORDS),
    skip=tuple(DEFAULT_SKIP_WORDS),
    already_told=tuple(DEFAULT_ALREADY_TOLD_WORDS),
)
REPLIES = ReplyWords(yes=tuple(DEFAULT_CONFIRMATION_WORDS), no=tuple(DEFAULT_DENIAL_WORDS))


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("deixa pra lá", "cancel"),
        ("ah, esquece isso, resolvo depois", "cancel"),
        ("never mind, cancel that", "cancel"),
        ("eh, don't bother, forget about it", "cancel"),
        ("olvídalo", "cancel"),
        ("desculpa, digitei errado, o pedido é o P200", "correct"),
        ("o pedido é o P200, digitei errado", "correct"),
        ("sorry, typo: I meant order P200", "correct"),
        ("perdón, me equivoqué, es el pedido P200", "correct"),
        ("pode repetir?", "repeat"),
        ("sorry, can you repeat that?", "repeat"),
        ("¿puedes repetir?", "repeat"),
        ("pula essa", "skip"),
        ("skip that one", "skip"),
        ("prefiero no responder", "skip"),
        ("já te falei isso", "already_told"),
        ("I already told you", "already_told"),
        ("ya te lo dije", "already_told"),
    ],
)
def test_each_pattern_is_read_in_the_three_languages(text, pattern):
    repair = WORDS.read(text)
    assert repair is not None and repair.pattern == pattern


@pytest.mark.parametrize(
    "text",
    [
        "quero cancelar meu plano",  # a request, not a cancel of the flow
        "minha fatura veio alta",
        "I need to know when my order arrives, and please also tell me whether I can still cancel that",
        "¿cuándo vence mi factura?",
    ],
)
def test_a_request_is_no_repair(text):
    assert WORDS.read(text) is None


def test_a_cancel_phrase_deep_inside_a_long_message_is_part_of_a_request():
    assert WORDS.read("quero trocar o endereço de entrega do pedido e depois esquece o cupom") is None


def test_side_question_and_return_marks_lead_the_message():
    assert marks_digression("antes disso, qual o vencimento?") == "antes disso"
    assert marks_digression("by the way, is my order out?") == "by the way"
    assert marks_digression("qual o vencimento, antes disso?") == "antes disso"  # within the lead
    assert marks_digression("hold on, why is there a roaming charge?") == "hold on"
    assert marks_digression("enquanto isso, me diz o valor da fatura") == "enquanto isso"
    assert marks_digression("mientras tanto, dime cuánto debo") == "mientras tanto"
    assert marks_digression("peraí, quanto custa o plano de 20 GB?") == "perai"  # normalised
    assert marks_digression("aprovecho: el módem del pedido llegó roto, ¿cómo lo cambio?") == "aprovecho"
    assert marks_digression("aproveito pra perguntar: o modem tem garantia?") == "aproveito"
    assert marks_digression("while I have you, does the plan include roaming?") == "while i have you"
    assert marks_digression("qual o vencimento da fatura?") == ""
    assert return_cut("voltando ao pagamento: já paguei") == ("já paguei", "voltando ao pagamento:")
    assert return_cut("back to the payment, yes done")[0] == "yes done"
    assert return_cut("volviendo al pago: sí, ya pagué")[0] == "sí, ya pagué"
    assert return_cut("voltando ao pagamento:") == ("voltando ao pagamento:", "")  # nothing follows it
    assert return_cut("já paguei") == ("já paguei", "")


@pytest.mark.parametrize(
    ("text", "reads_as"),
    [
        ("bom, pode rodar o diagnóstico", "yes"),
        ("entendido. sí, ya está pagado", "yes"),
        ("whatever, yes cancel it", "yes"),
        ("ok então. não, ainda não paguei", "no"),  # an opening "ok" acknowledges; the refusal after it answers
        ("ok, pode seguir", "yes"),
        ("bom, você pode me dizer o valor?", None),  # a question is never a reply
        ("hmm, não sei ainda", None),  # unsure stays unsure
    ],
)
def test_a_reply_is_read_past_short_openers(text, reads_as):
    assert REPLIES.read_past_fillers(text).reads_as == reads_as


def test_identifiers_and_their_form():
    assert identifiers("o pedido é o P200, o P-100; linha 5511999999999") == ["P200", "P-100", "5511999999999"]
    assert identifiers("veio no P100, não no P200") == ["P100"]  # the one denied is left out ("no" is "in the")
    assert identifiers("the speaker came in P100, not P200") == ["P100"]
    assert identifiers("vino en el P100, no en el P200") == ["P100"]
    assert identifier_shape("P100") == identifier_shape("p200") == "A1D3"
    assert identifier_shape("INV001") != identifier_shape("P100")
    assert described_example("Número do pedido (ex. P100).") == "P100"
    assert described_example("Order number, e.g. A-12") == "A-12"
    assert described_example("The order's number") == ""


def test_a_correction_replaces_only_the_context_value_of_the_same_form():
    context = {"order_id": "P100", "invoice_id": "INV001", "msisdn": "5511999999999"}
    assert value_corrections("digitei errado, é o P200", context) == {"order_id": "P200"}
    assert value_corrections("era a INV002", context) == {"invoice_id": "INV002"}
    assert value_corrections("o P100 mesmo", context) == {}  # the same value: nothing corrected
    assert value_corrections("P200", {"order_id": "P100", "other": "C100"}) == {}  # two of that form: ambiguous


def test_a_one_word_repair_phrase_inside_a_longer_question_is_no_repair():
    assert WORDS.read("a próxima fatura vem mais cara?") is None  # asks about the next bill
    assert WORDS.read("¿la siguiente factura viene más cara?") is None
    assert WORDS.read("próxima?").pattern == "skip"  # short: the skip
    assert WORDS.read("próxima, por favor").pattern == "skip"
    assert WORDS.read("pode pular essa etapa do teste?").pattern == "skip"  # a phrase of several words


def test_a_two_request_message_is_cut_at_its_joining_words_and_sentences():
    assert clauses("minha internet caiu e ainda veio a conta mais cara") == [
        "minha internet caiu",
        "veio a conta mais cara",
    ]
    assert clauses("My bill is wrong. Also, where is my order?") == ["My bill is wrong", "Also, where is my order"]
    assert clauses("quero pagar. sim") == ["quero pagar"]  # a one-word clause is no request


def test_a_clause_after_words_that_add_a_request_or_a_question_after_a_question_is_announced():
    assert clauses_announced("has order P100 shipped yet? also, which plan has the most data?") == [
        ("has order P100 shipped yet", False),
        ("also, which plan has the most data", True),
    ]
    assert clauses_announced("onde está meu pedido? qual o plano com mais dados?")[1] == (
        "qual o plano com mais dados",
        True,
    )
    assert clauses_announced("mi pedido se atrasó y además la factura vino mal")[1][1]
    # One request told in two clauses: nothing announces the second.
    assert clauses_announced("a internet tá lenta e cai toda hora") == [
        ("a internet tá lenta", False),
        ("cai toda hora", False),
    ]
    assert clauses_announced("my order is late. it was due monday")[1] == ("it was due monday", False)


class CountedPattern:
    def __init__(self, pattern):
        self.pattern, self.read = pattern, []

    def match(self, text):
        self.read.append(text)
        return self.pattern.match(text)


def test_only_the_requests_after_a_messages_first_are_read_for_a_question_or_an_announcement(monkeypatch):
    """Nothing comes before a message's first request, so nothing can announce it as one more: most messages hold
    one request, and none of them is read for a question or joining words."""
    asked: list[str] = []
    is_question_read = stack.is_question
    monkeypatch.setattr(stack, "is_question", lambda text: asked.append(text) or is_question_read(text))
    announces = CountedPattern(stack._ANNOUNCES)
    monkeypatch.setattr(stack, "_ANNOUNCES", announces)

    assert clauses_announced("Por que a minha fatura veio com valor alto este mês?") == [
        ("Por que a minha fatura veio com valor alto este mês", False)
    ]
    assert (asked, announces.read) == ([], [])

    assert clauses_announced("onde está meu pedido? qual o plano com mais dados?") == [
        ("onde está meu pedido", False),
        ("qual o plano com mais dados", True),
    ]
    assert asked == ["qual o plano com mais dados"]
    assert announces.read == ["", "qual o plano com mais dados"]


def test_questions_are_told_in_the_three_languages():
    assert is_question("qual o vencimento")
    assert is_question("¿cuándo vence")
    assert is_question("cadê meu pedido P100")  # "where is", a question without its mark
    assert is_question("is my order out?")
    assert not is_question("já paguei")
    assert is_question("why is there a roaming charge on it? I was only there for 3 days")  # a sentence of it asks
    assert not is_question("o pedido P100?x")


def test_stored_frames_are_read_back_and_what_is_not_one_is_left_out():
    frame = Frame(kind="state", name="WAITING", agent="billing_agent", opened_turn=2, opened_at="2026-01-01T00:00:00")
    odd = {**frame.as_dict(), "opened_turn": "two"}
    assert frames_read([frame.as_dict(), {"kind": "bogus"}, "x", {"kind": "topic"}, odd]) == [frame]
    assert frames_read(None) == []


def test_a_frame_past_the_depth_drops_the_oldest():
    step = StackStep(frames=[], turn=1, now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    for name in ("A", "B", "C"):
        step.open(Frame(kind="state", name=name, agent="a"), "test", depth=2)
    assert [frame.name for frame in step.frames] == ["B", "C"]
    assert [(event["event"], event["frame"]["name"]) for event in step.events][-1] == ("expired", "A")


def test_a_yes_after_a_return_mark_confirms_rather_than_cancels():
    text = "volviendo a la cancelación: sí, cancélalo"
    assert WORDS.read(text) is not None and WORDS.read(text).pattern == "cancel"  # the phrase is there...
    assert REPLIES.read_past_fillers(return_cut(text)[0]).reads_as == "yes"  # ...and the flow's yes wins


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("pode pular esse teste", "skip"),
        ("vamos pular essa parte", "skip"),
        ("let's skip the line check", "skip"),
        ("let's just move on", "skip"),
        ("sáltate esa prueba", "skip"),
        ("mejor omítelo", "skip"),
        ("como eu disse, é o mesmo pedido", "already_told"),
        ("I told you the number", "already_told"),
        ("like I said, same invoice", "already_told"),
        ("como te dije, es la misma factura", "already_told"),
    ],
)
def test_natural_phrasings_of_skip_and_already_told_are_read(text, pattern):
    repair = WORDS.read(text)
    assert repair is not None and repair.pattern == pattern


@pytest.mark.parametrize(
    ("text", "skips"),
    [
        ("pode pular esse teste", True),  # "pode" is the skip's own word, not a yes
        ("sure, skip it", True),
        ("no, sáltate eso", True),
        ("sim, pode rodar, e na próxima vez nem precisa perguntar", False),
        ("yes go ahead, and the next one too if you need it", False),
        ("sí, dale, y la siguiente vez no me preguntes", False),
        ("pode rodar o teste", False),
    ],
)
def test_a_skip_passes_a_yes_no_question_unless_a_yes_of_its_own_answers_it(text, skips):
    assert skips_the_question(WORDS.read(text), REPLIES.read_past_fillers(text), text) is skips


@pytest.mark.parametrize(
    "text",
    ["o sinal pula de 4G pra 3G toda hora", "me salta un error al pagar", "la factura omite el descuento"],
)
def test_a_skip_verb_used_for_something_else_is_no_skip(text):
    assert WORDS.read(text) is None
