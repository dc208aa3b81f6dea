"""A specialist answers from its profile's knowledge: the passages retrieved before it answers, the answer quoting and
citing them (offline: extractively), "I don't know" in the customer's language below the bar, tools first (a run
offered MCP tools searches through the search_knowledge tool when none of them answers), another tenant's passages
never read, and nothing asked of the knowledge by a profile that holds none."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import AsyncClient
from django.test.utils import CaptureQueriesContext

from agents.knowledge_settings import DEFAULT_MIN_SCORE
from agents.passages import SEARCH_KNOWLEDGE, passages_read
from common.i18n import say
from conversations import knowledge_turn
from conversations.knowledge_turn import DONT_KNOW, SOURCES, KnowledgeUse, knowledge_settle
from knowledge.models import KnowledgeSource
from knowledge.retrieval import Considered, Retrieved, document_link
from knowledge.search import PASSAGE_TABLE, Hit
from knowledge.services import document_ingest
from releases.versions import version_publish
from routing.documents import profile_documents
from tests.demo_snapshot import demo_seed
from tests.streaming import run, sse_events

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too, pytest.mark.usefixtures("multi_agent_for_everyone")]

PLANS = b"""# Plans and internet

## Internet speed

The fibre plan delivers up to 500 megabits per second. Speed tests should be run over a cable, not over Wi-Fi.

## Changing plan

You can change your plan once a month in the app, under My plan. The new price applies from the next invoice.
"""
PLANOS = """# Planos e internet

## Velocidade da internet

O plano de fibra entrega até 500 megabits por segundo. Os testes de velocidade devem ser feitos com cabo.
""".encode()
SECRET = b"""# Partner deals

## Internet speed

Partner staff get the fibre plan at 900 megabits per second for the price of the basic one.
"""
FATURAS = """# Faturas

## Segunda via

A segunda via do boleto sai no aplicativo, em Faturas, a qualquer hora. Ela também chega por e-mail cinco dias antes
do vencimento.

## Débito automático

O débito automático é ativado no aplicativo, em Pagamentos, e vale a partir da fatura seguinte.
""".encode()
UNANSWERABLE_BILLING = "Posso pagar a conta com vale-presente de aniversário?"  # billing's; it names none of its tools
# Messages no document answers, in each language: the fallback specialist (no tool) takes them.
UNANSWERABLE = {
    "en": "Do you sell gift cards for birthdays?",
    "pt": "Vocês vendem cartões-presente para aniversários?",
    "es": "¿Venden tarjetas de regalo para cumpleaños?",
}


def ask(api, text: str, **payload) -> dict:
    response = api.post(
        "/api/chat/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "user_id": "u-knowledge", **payload}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def help_centre(telecom):
    """The profile's shared help centre, uploaded and the profile's draft published with it."""
    source = KnowledgeSource.objects.create(profile=telecom, name="Help centre", language="en")
    plans = document_ingest(source=source, file_name="plans.md", data=PLANS)
    document_ingest(source=source, file_name="planos.md", data=PLANOS, language="pt")
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="help centre")
    return plans.document_id


def test_a_customer_question_is_answered_from_the_published_help_centre_with_a_citation(api, help_centre):
    body = ask(api, "How fast is the internet on the fibre plan?")

    knowledge = body["metadata"]["knowledge"]
    assert body["agent"] == "product_agent"
    assert "“The fibre plan delivers up to 500 megabits per second.” [1]" in body["answer"]
    link = document_link(help_centre)
    assert body["answer"].endswith(f"{SOURCES} [1] Plans and internet")
    assert "/admin/" not in body["answer"]  # the admin's page is the business's, in the metadata; not the customer's
    (citation,) = knowledge["citations"]
    assert (citation["document"], citation["title"], citation["link"]) == (help_centre, "Plans and internet", link)
    assert citation["quote"] == "The fibre plan delivers up to 500 megabits per second."
    assert citation["score"] >= DEFAULT_MIN_SCORE
    assert citation["passage"] in [row["passage"] for row in knowledge["retrieved"] if row["used"]]
    assert knowledge["answered_from_knowledge"] is True


def test_the_conversations_language_is_searched_first(api, help_centre):
    body = ask(api, "Qual a velocidade da internet no plano de fibra?")

    (citation,) = body["metadata"]["knowledge"]["citations"]
    assert body["metadata"]["language"] == "pt"
    assert citation["title"] == "Planos e internet"
    assert "“O plano de fibra entrega até 500 megabits por segundo." in body["answer"]
    assert "” [1]\n\nFontes: [1] Planos e internet" in body["answer"]


@pytest.mark.parametrize("language", sorted(UNANSWERABLE))
def test_a_question_the_documents_do_not_answer_gets_i_dont_know_in_the_customers_language(api, help_centre, language):
    body = ask(api, UNANSWERABLE[language])

    knowledge = body["metadata"]["knowledge"]
    assert body["metadata"]["language"] == language
    assert body["answer"] == say(language, DONT_KNOW)
    assert language == "en" or body["answer"] != str(DONT_KNOW)  # translated, not the English message id
    assert knowledge["citations"] == [] and knowledge["answered_from_knowledge"] is False
    assert knowledge["unknown"] is True


def test_another_tenants_passages_are_never_retrieved(api, telecom, help_centre, outsider):
    private = KnowledgeSource.objects.create(profile=telecom, tenant=outsider, name="Partners", language="en")
    secret = document_ingest(source=private, file_name="partners.md", data=SECRET)

    body = ask(api, "Partner staff price for 900 megabits?")

    retrieved = body["metadata"]["knowledge"]["retrieved"]
    assert secret.document_id not in {row["document"] for row in retrieved}
    assert "900" not in body["answer"]


@pytest.fixture
def invoices(telecom, help_centre):
    """The help centre with an article on invoices, which billing (a specialist with MCP tools) is asked about,
    published (a version answers from the documents it was published with)."""
    source = KnowledgeSource.objects.get(profile=telecom, name="Help centre")
    invoices = document_ingest(source=source, file_name="faturas.md", data=FATURAS, language="pt").document_id
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="invoices")
    return invoices


def test_a_help_centre_question_to_a_specialist_whose_tools_cannot_answer_is_answered_by_search_knowledge(
    api, invoices
):
    body = ask(api, "Como eu tiro a segunda via do boleto pelo aplicativo?")

    knowledge = body["metadata"]["knowledge"]
    assert body["agent"] == "billing_agent"
    assert body["metadata"]["mcp_results"] == [], "no line given: consultar_fatura cannot run"
    (citation,) = knowledge["citations"]
    assert (citation["document"], citation["title"], citation["number"]) == (invoices, "Faturas", 1)
    assert "“A segunda via do boleto sai no aplicativo, em Faturas, a qualquer hora.” [1]" in body["answer"]
    assert body["answer"].endswith("Fontes: [1] Faturas")
    assert knowledge["answered_from_knowledge"] is True


@pytest.mark.parametrize(
    "text",
    [
        "O débito automático já vale para a próxima fatura?",
        "Paguei minha fatura hoje. O débito automático vale a partir de quando?",  # a clause of its own asks
        "O que acontece com a minha fatura se eu ativar o débito automático?",  # what follows, whatever it names
        "Quero ativar o débito automático na minha fatura",  # a wish to do, which the documents explain
    ],
    ids=[
        "naming none of the customer's things",
        "naming the customer's bill besides",
        "asking what follows",
        "wishing to do something",
    ],
)
def test_a_question_in_general_to_a_tools_specialist_is_searched_whether_or_not_it_names_the_customers_own_bill(
    api, invoices, text
):
    body = ask(api, text)

    knowledge = body["metadata"]["knowledge"]
    assert body["agent"] == "billing_agent"
    assert body["metadata"]["mcp_results"] == []
    (citation,) = knowledge["citations"]
    assert (citation["document"], citation["title"]) == (invoices, "Faturas")
    assert "vale a partir da fatura seguinte" in body["answer"]


def test_a_request_to_a_tools_specialist_whose_tools_cannot_run_yet_is_answered_from_the_passage_that_answers_it(
    api, invoices
):
    body = ask(api, "Quero ativar o débito automático na fatura")  # a request, not a question: no search asked

    knowledge = body["metadata"]["knowledge"]
    assert body["agent"] == "billing_agent"
    assert body["metadata"]["mcp_results"] == []
    (citation,) = knowledge["citations"]
    assert (citation["document"], citation["title"]) == (invoices, "Faturas")
    assert "“O débito automático é ativado no aplicativo, em Pagamentos" in body["answer"]
    assert body["answer"].endswith("Fontes: [1] Faturas")


def test_a_request_about_the_customers_own_bill_is_not_answered_from_a_passage_sharing_half_its_words(api, invoices):
    body = ask(api, "A minha fatura chega com valor errado")  # fatura and chega: the copy's article, half its words

    assert body["agent"] == "billing_agent"
    assert body["metadata"]["knowledge"] is None and "Faturas" not in body["answer"]  # its tools', not searched
    assert body["answer"] != say("pt", DONT_KNOW)


def test_a_statement_that_the_customers_own_bill_did_not_arrive_is_answered_from_the_passage_saying_what_to_do(
    api, invoices
):
    """A fault or a thing missing, stated, asks what to do: searched before the tools specialist answers, and
    answered from the passage at the bar while its tools cannot run (the line unknown)."""
    body = ask(api, "A minha fatura não chegou por e-mail")

    assert body["agent"] == "billing_agent"
    assert body["metadata"]["mcp_results"] == []
    (citation,) = body["metadata"]["knowledge"]["citations"]
    assert citation["document"] == invoices
    assert "A segunda via do boleto sai no aplicativo" in body["answer"]


def test_a_statement_that_the_customers_own_bill_did_not_arrive_is_answered_by_its_tools_once_they_can_run(
    api, invoices
):
    body = ask(api, "A minha fatura não chegou por e-mail", context={"msisdn": "11999990000"})

    assert body["agent"] == "billing_agent"
    assert body["metadata"]["mcp_results"], "the tool was called, not replaced by the documents"
    assert not body["metadata"]["knowledge"]["citations"] and "Faturas" not in body["answer"]


def test_a_question_about_the_customers_own_bill_that_no_passage_answers_is_not_said_i_dont_know(api, invoices):
    for number, text in enumerate(("Quando vence a minha fatura?", "Por que a minha fatura veio tão alta?")):
        body = ask(api, text, session_id=f"own-{number}")

        knowledge = body["metadata"]["knowledge"] or {}  # nothing searched for a request about the bill itself
        assert body["agent"] == "billing_agent", text
        assert not knowledge.get("citations") and "unknown" not in knowledge, text
        assert body["answer"] != say(body["metadata"]["language"], DONT_KNOW), text


def test_a_specialist_whose_tools_cannot_answer_and_whose_search_finds_nothing_says_it_does_not_know(api, invoices):
    body = ask(api, UNANSWERABLE_BILLING)

    knowledge = body["metadata"]["knowledge"]
    assert body["agent"] == "billing_agent"
    assert body["answer"] == say("pt", DONT_KNOW)
    assert knowledge["unknown"] is True and knowledge["citations"] == []
    assert all(not row["used"] for row in knowledge["retrieved"])


@pytest.mark.django_db(transaction=True)
def test_a_stream_whose_search_finds_nothing_sends_i_dont_know_and_nothing_its_model_wrote(tenant_key, invoices):
    async def streamed() -> bytes:
        response = await AsyncClient().post(
            "/api/gateway/message/stream",
            {"agent_id": "telecom_contas", "payload": {"text": UNANSWERABLE_BILLING, "session_id": "sse-unknown"}},
            content_type="application/json",
            headers={"Authorization": f"Bearer {tenant_key.raw}"},
        )
        return b"".join([chunk async for chunk in response.streaming_content])

    events = sse_events(run(streamed()))

    tokens = "".join(data["text"] for name, data in events if name == "token")
    assert tokens == say("pt", DONT_KNOW) == events[-1][1]["answer"]


def test_search_knowledge_numbers_its_passages_on_across_calls_and_the_answer_cites_what_it_names(
    api, invoices, scripted_llm
):
    scripted_llm.reply_tool_call(SEARCH_KNOWLEDGE, {"query": "segunda via do boleto no aplicativo"})
    scripted_llm.reply_tool_call(SEARCH_KNOWLEDGE, {"query": "ativar débito automático em pagamentos"})
    scripted_llm.reply("O débito automático é ativado no aplicativo [2].")

    body = ask(api, "Duas coisas sobre a conta, por favor")  # nothing at the bar before the model: its own searches

    first, _, last = scripted_llm.requests
    assert SEARCH_KNOWLEDGE in [tool["function"]["name"] for tool in first["tools"]]
    found = [passages_read(message["content"]) or [] for message in last["messages"] if message["role"] == "tool"]
    assert [[(p.number, p.heading) for p in passages] for passages in found] == [
        [(1, "Faturas › Segunda via")],
        [(2, "Faturas › Débito automático")],
    ]
    (citation,) = body["metadata"]["knowledge"]["citations"]
    assert (citation["number"], citation["document"]) == (2, invoices)
    assert body["answer"].endswith("Fontes: [2] Faturas")


def test_a_request_about_the_customers_own_bill_to_a_tools_specialist_searches_nothing_before_its_model(api, invoices):
    """Its tools answer it ("Minha fatura veio alta": consultar_fatura's; the line is not known yet): retrieved before
    the model, it would cost a search on most of a tools specialist's messages for passages no answer uses."""
    with CaptureQueriesContext(connection) as queries:
        body = ask(api, "Minha fatura veio alta")

    assert body["agent"] == "billing_agent"
    assert body["metadata"]["mcp_results"] == [] and body["metadata"]["knowledge"] is None
    assert body["answer"] != say("pt", DONT_KNOW)
    assert not [query for query in queries if PASSAGE_TABLE in query["sql"]]


def test_a_question_the_model_searches_after_the_message_was_retrieved_is_not_searched_again(api, invoices):
    with CaptureQueriesContext(connection) as queries:
        body = ask(api, UNANSWERABLE_BILLING)  # retrieved before the model, then searched by it: the same words

    assert body["answer"] == say("pt", DONT_KNOW)
    rankings = [query for query in queries if PASSAGE_TABLE in query["sql"] and "heading" in query["sql"]]
    assert len(rankings) == 2, "the message's language, then every language: once each"


def test_a_run_offered_tools_answers_a_request_about_the_customers_own_bill_from_its_tools(api, help_centre):
    body = ask(api, "Minha fatura veio alta", context={"msisdn": "11999990000"})

    assert body["agent"] == "billing_agent"
    assert body["metadata"]["mcp_results"], "the tool was called, not replaced by the documents"
    assert body["metadata"]["knowledge"] is None


def test_a_specialist_with_tools_that_searches_anyway_never_says_it_does_not_know(api, telecom, help_centre):
    telecom.specialists.filter(name="billing_agent").update(knowledge={"with_tools": True})
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="billing searches too")

    body = ask(api, "Minha fatura veio alta", context={"msisdn": "11999990000"})

    assert body["agent"] == "billing_agent"
    assert body["answer"] != say("pt", DONT_KNOW)
    assert body["metadata"]["knowledge"]["answered_from_knowledge"] is False
    assert body["metadata"]["mcp_results"], "the tool was called, not replaced by the documents"


def test_a_profile_that_turns_retrieval_off_answers_without_its_documents_once_published(api, telecom, help_centre):
    telecom.knowledge = {"retrieval": False}
    telecom.save(update_fields=["knowledge"])
    before = ask(api, "How fast is the internet on the fibre plan?", session_id="before")
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="retrieval off")
    after = ask(api, "How fast is the internet on the fibre plan?", session_id="after")

    assert before["metadata"]["knowledge"]["citations"]  # the published version still searches
    assert after["metadata"]["knowledge"] is None and "500 megabits" not in after["answer"]


@pytest.mark.parametrize("turned_off_by", ["profile", "specialist"])
def test_a_tools_specialist_whose_retrieval_is_off_searches_nothing_for_a_request_its_documents_answer(
    api, telecom, invoices, monkeypatch, turned_off_by
):
    """The issue's way out for a feature's cost: switched off, it costs nothing. With retrieval on, this request is
    searched before billing's model and answered from the invoices article (the test above); off — the profile's
    or the specialist's —, no search runs, none is offered to the model and no passage is read."""
    if turned_off_by == "profile":
        telecom.knowledge = {"retrieval": False}
        telecom.save(update_fields=["knowledge"])
    else:
        telecom.specialists.filter(name="billing_agent").update(knowledge={"retrieval": False})
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="retrieval off")
    searches: list[str] = []
    monkeypatch.setattr(knowledge_turn, "knowledge_retrieve", lambda **kwargs: searches.append(kwargs["query"]))
    ask(api, "Quero ativar o débito automático na fatura", session_id="warm")  # the snapshot compiled

    with CaptureQueriesContext(connection) as queries:
        body = ask(api, "Quero ativar o débito automático na fatura", session_id="measured")

    assert body["agent"] == "billing_agent"
    assert body["metadata"]["knowledge"] is None and "débito automático é ativado" not in body["answer"]
    assert searches == []
    assert not [query["sql"] for query in queries.captured_queries if "knowledge_" in query["sql"]]


def test_a_specialist_kept_to_tags_no_document_holds_reads_none_of_them(api, telecom, help_centre):
    product = telecom.specialists.get(name="product_agent")
    product.knowledge = {"tags": ["billing"]}
    product.save(update_fields=["knowledge"])
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="billing only")

    body = ask(api, "How fast is the internet on the fibre plan?")

    assert body["metadata"]["knowledge"]["retrieved"] == []
    assert body["answer"] == say("en", DONT_KNOW)


def test_a_profile_without_knowledge_asks_nothing_of_it(api, telecom):
    ask(api, "How fast is the internet on the fibre plan?", session_id="warm")  # the snapshot compiled

    with CaptureQueriesContext(connection) as queries:
        body = ask(api, "How fast is the internet on the fibre plan?", session_id="measured")

    assert body["metadata"]["knowledge"] is None
    assert not [query["sql"] for query in queries.captured_queries if "knowledge_" in query["sql"]]


def test_i_dont_know_counts_as_a_fallback_answer_for_the_profiles_escalation_rule(api, telecom, help_centre):
    telecom.escalation = {"enabled": True, "after_fallbacks": 2}
    telecom.save(update_fields=["escalation"])
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="people after two")

    first = ask(api, UNANSWERABLE["en"], session_id="twice")
    second = ask(api, "Can I pay with a voucher from your sister shop?", session_id="twice")

    assert first["answer"] == say("en", DONT_KNOW) and first["metadata"]["escalation"] is None
    assert second["metadata"]["escalation"]["reason"] == "fallbacks"


LINE_SERVICES = """# Atendimento

## Serviços na linha

Para qualquer serviço na linha agora, traga um documento com foto a uma loja.
""".encode()


@pytest.fixture
def demo_line(db):
    """The demo, its help centre holding an article that shares words with a refusal of the line's diagnosis."""
    demo_seed()
    source = KnowledgeSource.objects.filter(profile__agent_id="telecom_contas").first()
    document_ingest(source=source, file_name="atendimento.md", data=LINE_SERVICES, language="pt")


def test_a_no_to_the_permission_question_said_twice_moves_nothing_and_is_not_what_is_searched(api, demo_line):
    line = {"context": {"msisdn": "5511999999999"}, "session_id": "declined-diagnosis"}
    asked = ask(api, "Meu celular está sem sinal desde ontem", **line)
    assert "diagnosticar_linha" in asked["answer"], (asked["agent"], asked["answer"])

    body = ask(api, "não, não quero que mexa na minha linha agora", **line)

    assert body["metadata"]["permission"] == {"tool": "diagnosticar_linha", "reply": "denied"}
    assert body["agent"] == "support_agent", "the refusal's words hand the conversation to no one"
    assert "documento com foto" not in body["answer"], body["answer"]
    # The request the question was asked for is what the specialist answers and searches for, without the tool.
    citations = (body["metadata"].get("knowledge") or {}).get("citations") or []
    assert "Atendimento" not in [citation["title"] for citation in citations]
    assert "não usei diagnosticar_linha" in body["answer"]


def test_a_cited_answers_sources_line_is_translated_once_a_language_and_reads_as_before(monkeypatch):
    said: list[str | None] = []

    def counted(language, message, /, **values):
        said.append(language)
        return say(language, message, **values)

    monkeypatch.setattr(knowledge_turn, "say", counted)
    knowledge_turn.sources_said.cache_clear()
    hit = Hit(1, 7, "Plans and internet", "plans.md", "help", "en", "Internet speed", 0, "Up to 500 megabits.", 0.5)
    use = KnowledgeUse.before(Retrieved((Considered(hit, 1.0, 3, 3),), 0.2), "fibre plan speed?", tools_offered=False)

    settled = [
        knowledge_settle(use, "Up to 500 megabits [1].", answered=True, language=language)
        for language in ("pt", "pt", "es", "pt", "xx")
    ]

    assert said == ["pt", "es"]  # "xx" is said in the default language, pt
    expected = [say(language, SOURCES) for language in ("pt", "pt", "es", "pt", "xx")]
    assert [part.answer for part in settled] == [
        f"Up to 500 megabits [1].\n\n{words} [1] Plans and internet" for words in expected
    ]


def test_a_follow_up_naming_nothing_the_article_holds_is_answered_from_the_article_of_the_question_before_it(
    api, help_centre
):
    first = ask(api, "Can I change my plan?", session_id="follow-up")
    body = ask(api, "how often can I do that?", session_id="follow-up")  # "often" alone: no passage holds it

    knowledge = body["metadata"]["knowledge"]
    assert first["metadata"]["knowledge"]["citations"][0]["document"] == help_centre
    assert [citation["document"] for citation in knowledge["citations"]] == [help_centre]
    assert knowledge["follows_up"] is True
    assert "once a month" in knowledge["citations"][0]["quote"]


def test_a_follow_up_of_a_follow_up_is_answered_from_the_article_of_the_question_that_named_the_subject(
    api, help_centre
):
    ask(api, "Can I change my plan?", session_id="follow-up-twice")
    ask(api, "how often can I do that?", session_id="follow-up-twice")
    body = ask(api, "and where do I do it?", session_id="follow-up-twice")  # nothing of its own; "often" held nowhere

    knowledge = body["metadata"]["knowledge"]
    assert [citation["document"] for citation in knowledge["citations"]] == [help_centre]
    assert knowledge["follows_up"] is True


RETURNS = b"""# Returns

## Returning an item

The deadline to return an item is 30 days after it arrives, in its box.
"""
DELIVERY = b"""# Delivery

## Delivery deadline

The delivery deadline is 5 working days; the deadline of express delivery is 2 days.
"""


def test_a_follow_up_whose_word_another_article_holds_is_answered_from_the_article_of_the_conversation(api, telecom):
    source = KnowledgeSource.objects.create(profile=telecom, name="Shop help", language="en")
    returns = document_ingest(source=source, file_name="returns.md", data=RETURNS)
    document_ingest(source=source, file_name="delivery.md", data=DELIVERY)
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="shop help")
    first = ask(api, "Can I return an item?", session_id="follow-up-word")
    body = ask(api, "and the deadline?", session_id="follow-up-word")  # "deadline": held by both, twice by delivery

    knowledge = body["metadata"]["knowledge"]
    assert [citation["document"] for citation in first["metadata"]["knowledge"]["citations"]] == [returns.document_id]
    assert knowledge["citations"][0]["document"] == returns.document_id
    assert knowledge["follows_up"] is True


def test_a_follow_up_naming_a_subject_the_article_does_not_hold_still_gets_i_dont_know(api, help_centre):
    ask(api, "Can I change my plan?", session_id="follow-up")
    body = ask(api, "and roaming?", session_id="follow-up")

    knowledge = body["metadata"]["knowledge"]
    assert body["answer"] == str(DONT_KNOW)
    assert knowledge["citations"] == [] and knowledge["unknown"] is True


def test_a_new_question_naming_things_of_its_own_is_searched_alone_and_drags_no_earlier_subject_in(
    api, help_centre, monkeypatch
):
    ask(api, "Can I change my plan?", session_id="topic-change")
    searched = []
    retrieve = knowledge_turn.knowledge_retrieve
    monkeypatch.setattr(
        knowledge_turn, "knowledge_retrieve", lambda **kwargs: searched.append(kwargs) or retrieve(**kwargs)
    )

    body = ask(api, "What are the opening hours of your stores?", session_id="topic-change")

    assert body["answer"] == str(DONT_KNOW)
    assert [kwargs.get("thread", "") for kwargs in searched] == [""]


def test_thanks_after_an_answer_cites_nothing(api, help_centre):
    ask(api, "Can I change my plan?", session_id="thanks")
    body = ask(api, "thanks!", session_id="thanks")

    assert not (body["metadata"].get("knowledge") or {}).get("citations")


def test_the_question_a_message_follows_up_is_the_customers_message_before_it_when_it_names_less_than_two_words():
    history = [("user", "posso trocar um produto?"), ("assistant", "Sim [1]"), ("user", "ok"), ("assistant", "…", 7)]
    assert knowledge_turn.asked_before(history) == ("ok", "posso trocar um produto?")
    assert knowledge_turn.asked_before([("assistant", "Olá!")]) == ()

    earlier = ("posso trocar um produto?",)
    assert knowledge_turn.follow_up_of("e quanto tempo eu tenho pra isso?", earlier) == earlier[0]
    assert knowledge_turn.follow_up_of("e se for pelo app?", earlier) == earlier[0]  # no content word at all
    assert knowledge_turn.follow_up_of("qual o horário da loja de vocês?", earlier) == ""  # two words: its own
    assert knowledge_turn.follow_up_of("e quanto tempo?", ("obrigado!", *earlier)) == ""  # thanks closed it
    assert knowledge_turn.follow_up_of("e quanto tempo?", ()) == ""


def test_a_follow_up_of_a_follow_up_reads_back_to_the_message_that_named_the_subject():
    earlier = ("e quanto tempo eu tenho pra isso?", "posso trocar um produto?", "qual o frete pra manaus?")

    assert knowledge_turn.follow_up_of("e se for pelo app?", earlier) == (
        "e quanto tempo eu tenho pra isso?\nposso trocar um produto?"
    )
    assert knowledge_turn.follow_up_of("e pelo site?", ("e se for pelo app?", *earlier[:2])) == "\n".join(
        ("e se for pelo app?", *earlier[:2])
    )
    assert knowledge_turn.follow_up_of("e pelo site?", ("e se for pelo app?", "valeu", earlier[1])) == ""


CHANNELS = b"""# Ways to reach us

## Phone

The call centre answers every day from 8:00 to 22:00 on 0800 123 456.

## Calls abroad

Calls to Europe are charged by the minute, at US$ 0.50.
"""


@pytest.fixture
def channels(telecom):
    """A help centre saying when the call centre answers, under a heading that names neither."""
    source = KnowledgeSource.objects.create(profile=telecom, name="Channels", language="en")
    document_ingest(source=source, file_name="channels.md", data=CHANNELS)
    version_publish(profile=telecom, document=profile_documents()["telecom_contas"], note="channels")


def test_a_question_asking_what_time_is_answered_from_the_sentence_holding_a_time_beside_its_words(api, channels):
    body = ask(api, "What time does the call centre close on Sundays?")

    knowledge = body["metadata"]["knowledge"]
    (citation,) = knowledge["citations"]
    assert citation["title"] == "Ways to reach us"
    assert citation["quote"] == "The call centre answers every day from 8:00 to 22:00 on 0800 123 456."


def test_a_how_much_question_about_a_thing_the_help_centre_does_not_hold_still_gets_i_dont_know(api, channels):
    body = ask(api, "How much does a call to Argentina cost?")  # a price is held beside *call*, not Argentina's

    knowledge = body["metadata"]["knowledge"]
    assert body["answer"] == str(DONT_KNOW)
    assert knowledge["citations"] == [] and knowledge["unknown"] is True
