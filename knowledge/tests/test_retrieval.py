"""What a turn reads of the knowledge: the default relevance bar between the questions a help centre answers and those
it does not, the conversation's language first, and which profiles hold any."""

from __future__ import annotations

import pytest
from django.db import connection

from agents.knowledge_settings import DEFAULT_MIN_SCORE
from agents.passages import HeldShare, asked_words, coverage, words_held
from agents.word_frequency import word_weight
from knowledge.models import KnowledgeSource
from knowledge.retrieval import knowledge_profiles, knowledge_retrieve, knowledge_retrieve_followed
from knowledge.services import document_ingest
from tests.factories import AgentProfileFactory

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

ARTICLES = {
    ("en", "delivery.md"): """# Delivery

## Delivery times

Orders placed before 2 pm ship the same working day. Standard delivery takes three to five working days; express
delivery arrives the next working day.

## Tracking an order

The tracking link is in the confirmation email. It shows where the parcel is once the carrier has scanned it.
""",
    ("en", "account.md"): """# Your account

## Changing your email address

Open Profile, choose Email and type the new address. We send a code to the new address to confirm it.

## Closing your account

Write to us from the address of the account. Orders still on their way are delivered before the account closes.
""",
    ("pt", "pagamentos.md"): """# Pagamentos

## Formas de pagamento

Aceitamos cartão de crédito, Pix e boleto. O boleto vence em três dias úteis e a compra é confirmada após o
pagamento.

## Parcelamento

Compras acima de 200 reais podem ser parceladas em até dez vezes sem juros no cartão de crédito.
""",
    ("pt", "trocas.md"): """# Trocas e devoluções

## Prazo para devolver

Você pode devolver um produto em até 30 dias após o recebimento, na embalagem original. O reembolso sai em até
cinco dias úteis depois que o produto chega ao nosso depósito.
""",
    ("es", "garantia.md"): """# Garantía

## Cobertura

Todos los aparatos tienen un año de garantía contra defectos de fabricación. La garantía no cubre golpes ni
daños por agua.

## Cómo pedir una reparación

Rellene el formulario de garantía con el número de pedido y una foto del defecto; le enviamos una etiqueta de
envío gratuita.
""",
}
ANSWERABLE = [
    ("en", "How long does express delivery take?", "Delivery › Delivery times"),
    ("en", "How do I change the email address of my account?", "Your account › Changing your email address"),
    ("pt", "Posso parcelar a compra no cartão de crédito?", "Pagamentos › Parcelamento"),
    ("pt", "Qual o prazo para devolver um produto?", "Trocas e devoluções › Prazo para devolver"),
    ("es", "¿La garantía cubre daños por agua?", "Garantía › Cobertura"),
    ("es", "¿Cómo pido una reparación en garantía?", "Garantía › Cómo pedir una reparación"),
]
# Questions the articles do not answer, each sharing a word or two with them (an order, an account, a product).
UNANSWERABLE = [
    ("en", "Do you sell gift cards for a birthday order?"),
    ("en", "Can two people share one account?"),
    ("pt", "Vocês têm loja física em Curitiba?"),
    ("pt", "O produto vem com manual em português?"),
    ("es", "¿Tienen descuentos para estudiantes?"),
    ("es", "¿Hacen envíos a Canarias?"),
]


@pytest.fixture
def help_centre(db):
    profile = AgentProfileFactory(agent_id="shop", language="en")
    source = KnowledgeSource.objects.create(profile=profile, name="Help centre", language="en")
    for (language, file_name), text in ARTICLES.items():
        document_ingest(source=source, file_name=file_name, data=text.encode(), language=language)
    return profile


def retrieve(profile, language: str, question: str):
    return knowledge_retrieve(
        profile_pk=profile.pk, tenant_pk=None, query=question, language=language, tags=(), min_score=DEFAULT_MIN_SCORE
    )


def profile_with(agent_id: str, language: str, file_name: str, text: str):
    """A profile whose one source, in ``language``, holds the document ``text``."""
    profile = AgentProfileFactory(agent_id=agent_id, language=language)
    source = KnowledgeSource.objects.create(profile=profile, name="Help", language=language)
    document_ingest(source=source, file_name=file_name, data=text.encode(), language=language)
    return profile


def figures(retrieved) -> list[tuple[str, float, float]]:
    return [(p.hit.heading, p.relevance, round(p.hit.score, 3)) for p in retrieved.considered[:2]]


def test_the_default_bar_lets_in_the_passage_that_answers_and_keeps_out_questions_the_articles_do_not_answer(
    help_centre,
):
    answered = {question: retrieve(help_centre, language, question) for language, question, _ in ANSWERABLE}
    unanswered = {question: retrieve(help_centre, language, question) for language, question in UNANSWERABLE}
    # The figures docs/knowledge.md quotes ("The relevance bar"): pytest -s shows them per engine.
    print(connection.vendor, {question: figures(found) for question, found in {**answered, **unanswered}.items()})

    for _, question, heading in ANSWERABLE:
        used = answered[question].used
        assert used and used[0].hit.heading == heading, (question, figures(answered[question]))
    for _, question in UNANSWERABLE:
        assert not unanswered[question].used, (question, figures(unanswered[question]))


def test_the_conversations_language_comes_first_and_the_others_only_when_it_has_nothing_at_the_bar(help_centre):
    in_spanish = knowledge_retrieve(
        profile_pk=help_centre.pk, tenant_pk=None, query="garantía", language="es", tags=(), min_score=0.01
    )
    elsewhere = knowledge_retrieve(
        profile_pk=help_centre.pk,
        tenant_pk=None,
        query="How long does express delivery take?",
        language="pt",
        tags=(),
        min_score=DEFAULT_MIN_SCORE,
    )

    assert {passage.hit.language for passage in in_spanish.considered} == {"es"}
    assert elsewhere.used and elsewhere.used[0].hit.heading == "Delivery › Delivery times"


def test_a_passages_words_are_read_once_whatever_questions_find_it(help_centre, monkeypatch):
    import agents.passages
    from knowledge import synonym_reading

    read: list[str] = []

    def stems_of(text: str, *, shouted: bool | None = None) -> set[str]:
        read.append(text)
        return agents.passages.stems_of(text, shouted=shouted)

    monkeypatch.setattr(synonym_reading, "stems_of", stems_of)
    synonym_reading.passage_words.cache_clear()
    synonym_reading._part_words.cache_clear()
    # The search reads the words of the passages it re-ranks (their text, their heading path and their own heading
    # apart) and of their documents' titles; the bar, those of the passages it considers: each once.
    questions = ["Posso parcelar a compra no cartão de crédito?", "Posso parcelar no cartão?"]
    first, second = (retrieve(help_centre, "pt", question) for question in questions)
    read_before = len(read)
    again = retrieve(help_centre, "pt", questions[0])

    assert len(read) == read_before == len(set(read))
    considered = {part for p in (*first.considered, *second.considered) for part in (p.hit.heading, p.hit.text)}
    assert considered <= set(read)
    assert [(p.relevance, p.held, p.asked) for p in again.considered] == [
        (p.relevance, p.held, p.asked) for p in first.considered
    ]
    assert [(p.relevance, p.held) for p in first.considered] == [
        (round(coverage(questions[0], text), 6), words_held(questions[0], text)[0])
        for text in (f"{p.hit.heading}\n{p.hit.text}" for p in first.considered)
    ]


def test_the_profiles_holding_knowledge_are_those_with_an_enabled_source_holding_a_document(help_centre):
    empty = AgentProfileFactory(agent_id="empty")
    KnowledgeSource.objects.create(profile=empty, name="Nothing yet", language="en")
    switched_off = AgentProfileFactory(agent_id="switched_off")
    source = KnowledgeSource.objects.create(profile=switched_off, name="Off", language="en", enabled=False)
    document_ingest(source=source, file_name="a.md", data=b"# A\n\nSome text.\n")

    assert knowledge_profiles() == frozenset({help_centre.pk})


def test_a_passage_that_shares_one_word_of_a_question_of_several_is_not_used_however_short_the_question(help_centre):
    shares_a_word = retrieve(help_centre, "en", "Delivery to Iceland?")  # delivery, iceland: the first only
    answers = retrieve(help_centre, "en", "Express delivery?")
    one_word = retrieve(help_centre, "pt", "Parcelamento?")

    assert (shares_a_word.considered[0].held, shares_a_word.considered[0].asked) == (1, 2) and not shares_a_word.used
    assert answers.used[0].hit.heading == "Delivery › Delivery times"
    assert one_word.used[0].hit.heading == "Pagamentos › Parcelamento"


def test_a_question_naming_a_short_name_the_passage_does_not_hold_is_not_used_for_its_other_word(help_centre):
    elsewhere = retrieve(help_centre, "en", "Do you ship to the US?")  # ship, US: the first only
    same_day = retrieve(help_centre, "en", "Do you ship the same day?")  # ship: all the question's words

    assert elsewhere.considered[0].hit.heading == "Delivery › Delivery times"
    assert (elsewhere.considered[0].held, elsewhere.considered[0].asked) == (1, 2) and not elsewhere.used
    assert same_day.used[0].hit.heading == "Delivery › Delivery times"


def test_a_three_letter_word_counts_where_a_passage_found_writes_it_and_a_chat_word_does_not(db):
    """Customers type a document's acronym in lower case ("en pdf"), which the bar, counting words of four letters
    and names in capitals, did not count: the passage writing *PDF* held no more of the question than one writing
    the question's other words."""
    bills = (
        "# Facturas\n\n## Descargar\n\nLas facturas de los últimos 12 meses se descargan en PDF.\n\n"
        "## Vencimiento\n\nEl cambio de la fecha de las facturas se puede hacer cada 6 meses.\n"
    )
    profile = profile_with("bills", "es", "facturas.md", bills)

    asked = retrieve(profile, "es", "necesito la factura de hace 3 meses en pdf")
    chatted = retrieve(profile, "es", "vcs tienen la factura de hace 3 meses?")  # "vcs": no passage writes it

    assert asked.used[0].hit.heading == "Facturas › Descargar"
    assert {(passage.held, passage.asked) for passage in asked.considered} == {(3, 4)}  # pdf one, hace the other
    assert {passage.asked for passage in chatted.considered} == {3}  # factura, hace, meses


def test_a_three_letter_word_counts_where_a_passage_found_writes_a_word_it_is_the_english_stem_of(db):
    """A question's *buy* counts where a passage writes *buying*, its *pay* where one writes *payment* (its verb: the
    English stemmer keeps the noun whole), as where one writes the word itself."""
    help_text = (
        "# Quotes\n\n## Advice\n\nThe assistant does not recommend buying or selling shares.\n\n"
        "## Late bills\n\nA late payment is charged a fine of 2% of the bill.\n"
    )
    profile = profile_with("broker", "en", "quotes.md", help_text)

    bought = retrieve(profile, "en", "should I buy shares?")
    paid = retrieve(profile, "en", "what if I pay my bill late?")

    assert bought.used[0].hit.heading == "Quotes › Advice"
    assert (bought.used[0].held, bought.used[0].asked) == (3, 3)  # shares, buy and the advice asked for: recommend
    assert paid.used[0].hit.heading == "Quotes › Late bills"
    assert (paid.used[0].held, paid.used[0].asked) == (3, 3)  # bill, late, pay


def test_another_language_is_used_beside_the_conversations_only_when_it_holds_more_of_the_question(db):
    profile = AgentProfileFactory(agent_id="carrier", language="es")
    source = KnowledgeSource.objects.create(profile=profile, name="Help centre", language="es")
    articles = {
        ("es", "planes.md"): "# Cambiar de plan\n\nEl saldo de recarga del prepago pasa al plan nuevo.\n",
        ("pt", "recarga.md"): "# Recarga do pré-pago\n\nA recarga mínima do pré-pago é de 15 reais.\n",
    }
    for (language, file_name), text in articles.items():
        document_ingest(source=source, file_name=file_name, data=text.encode(), language=language)

    partly = retrieve(profile, "es", "cual es la recarga minima del prepago")  # recarga, prepago of three in Spanish
    wholly = retrieve(profile, "es", "el saldo de recarga del prepago")  # every word in Spanish

    assert [(p.hit.language, p.relevance) for p in partly.used] == [("pt", 1.0), ("es", 0.666667)]
    assert {p.hit.language for p in wholly.considered} == {"es"}


def test_another_language_holding_more_but_not_all_of_the_question_does_not_displace_the_conversations(db):
    # Languages share words (names and codes, cognates: "alerta", "subir"), so another language's version of the
    # answer holds one word more by its spelling alone: the customer would be quoted a language not theirs where
    # their own answered.
    profile = AgentProfileFactory(agent_id="broker", language="pt")
    source = KnowledgeSource.objects.create(profile=profile, name="Help centre", language="pt")
    articles = {
        ("pt", "alertas.md"): "# Alertas de preço\n\nPara receber um alerta quando a ação subir, diga ao assistente o "
        "código da ação.\n",
        ("es", "alertas.md"): "# Alertas de precio\n\nPara activar una alerta en el celular cuando PETR4 vaya a "
        "subir, dile al asistente el código.\n",  # not "recibir" nor "llegue": of the family of "receber"
    }
    for (language, file_name), text in articles.items():
        document_ingest(source=source, file_name=f"{language}-{file_name}", data=text.encode(), language=language)

    found = retrieve(profile, "pt", "posso receber alerta no celular quando a PETR4 subir?")  # 3 of 5 in pt, 4 in es

    assert [(p.hit.language, p.held, p.asked) for p in found.considered] == [("pt", 3, 5)]
    assert [p.hit.language for p in found.used] == ["pt"]


def test_a_search_reads_its_questions_words_once_for_the_bar_whatever_languages_it_searches(help_centre, monkeypatch):
    from knowledge import retrieval

    question = "Does express delivery take long?"  # no phrase asking for a kind of answer: the bar reads its words
    read: list[str] = []
    monkeypatch.setattr(retrieval, "asked_words", lambda text: read.append(text) or asked_words(text))

    elsewhere = retrieve(help_centre, "pt", question)  # nothing in Portuguese: every language searched too

    assert read == [question]
    assert elsewhere.used and elsewhere.used[0].hit.heading == "Delivery › Delivery times"
    texts = [f"{p.hit.heading}\n{p.hit.text}" for p in elsewhere.considered]
    assert [(p.relevance, p.held, p.asked) for p in elsewhere.considered] == [
        (round(coverage(question, text), 6), *words_held(question, text)) for text in texts
    ]


@pytest.mark.parametrize("prefix", ["/", "/support/"])
def test_a_citations_link_is_the_path_reverse_gives_the_documents_page_under_any_script_prefix(prefix):
    from django.urls import get_script_prefix, reverse, set_script_prefix

    from knowledge.retrieval import DOCUMENT_PAGE, document_link

    before = get_script_prefix()
    set_script_prefix(prefix)
    try:
        links = {document_id: document_link(document_id) for document_id in (1, 42, 7_000_000_001)}
        assert links == {document_id: reverse(DOCUMENT_PAGE, args=[document_id]) for document_id in links}
        assert all(link.startswith(f"{prefix}admin/") for link in links.values())
    finally:
        set_script_prefix(before)


def test_a_citations_link_resolves_the_documents_page_once_for_every_document(monkeypatch):
    import django.urls

    from knowledge import retrieval

    calls: list[object] = []
    monkeypatch.setattr(retrieval, "reverse", lambda *a, **k: calls.append(a) or django.urls.reverse(*a, **k))
    retrieval._document_page.cache_clear()

    links = [retrieval.document_link(document_id) for document_id in (3, 4, 5, 3)]
    retrieval._document_page.cache_clear()  # the pages resolved by the replaced reverse are not kept

    assert len(calls) == 1
    assert links == [django.urls.reverse(retrieval.DOCUMENT_PAGE, args=[document_id]) for document_id in (3, 4, 5, 3)]


def thread_retrieve(profile, language: str, question: str, thread: str):
    return knowledge_retrieve(
        profile_pk=profile.pk,
        tenant_pk=None,
        query=question,
        language=language,
        tags=(),
        min_score=DEFAULT_MIN_SCORE,
        thread=thread,
    )


def test_a_follow_up_searched_with_the_question_before_it_reaches_the_bar_on_that_questions_words(help_centre):
    alone = retrieve(help_centre, "pt", "e o tempo pra isso?")
    followed = thread_retrieve(help_centre, "pt", "e o tempo pra isso?", "posso devolver um produto?")

    assert not alone.used
    assert followed.used[0].hit.heading == "Trocas e devoluções › Prazo para devolver"
    # "tempo" (0.39) not held, "devolver" and "produto" held: 0.8 / (0.39 + 0.8), the thread weighing 0.8 of a word
    assert followed.used[0].relevance == pytest.approx(0.8 / (0.8 + word_weight("tempo")), abs=1e-5)
    assert (followed.used[0].held, followed.used[0].asked) == (2, 3)


def test_a_follow_up_asking_how_long_holds_the_duration_the_section_on_the_subject_before_it_names(help_centre):
    alone = retrieve(help_centre, "pt", "e quanto tempo eu tenho pra isso?")
    followed = thread_retrieve(help_centre, "pt", "e quanto tempo eu tenho pra isso?", "posso devolver um produto?")

    assert not alone.used  # a duration, nothing else named: no passage holds the question
    assert followed.used[0].hit.heading == "Trocas e devoluções › Prazo para devolver"
    # the duration asked for (heading *Prazo*), "devolver" and "produto" held: (1 + 0.8) / (1 + 0.8)
    assert followed.used[0].relevance == 1.0
    assert (followed.used[0].held, followed.used[0].asked) == (2, 2)


def test_a_follow_up_naming_a_subject_no_passage_holds_stays_under_the_bar_whatever_the_thread_holds(help_centre):
    followed = thread_retrieve(help_centre, "pt", "e o cashback?", "posso devolver um produto?")

    assert followed.considered and not followed.used
    assert max(passage.relevance for passage in followed.considered) < DEFAULT_MIN_SCORE


RETURNS = """# Returns

## Swapping for another size or colour

Bring it back within 30 days with the receipt and choose the one you want from the shelf.

## Size guide

Measure your chest and waist and compare them with the chart on each product's page.
"""


def test_the_words_a_sections_own_heading_names_count_twice_when_it_names_two_of_the_questions(db):
    """A heading is its writer's summary of the section: one naming two of the question's words is about what is
    asked, though its text holds none of the customer's circumstances (the jacket, the aunt)."""
    profile = AgentProfileFactory(agent_id="returns", language="en")
    source = KnowledgeSource.objects.create(profile=profile, name="Help centre", language="en")
    document_ingest(source=source, file_name="returns.md", data=RETURNS.encode(), language="en")
    question = "the jacket my aunt bought is too big, can I swap it for a smaller size?"
    share = HeldShare(asked_words(question))

    found = {passage.hit.heading: passage for passage in retrieve(profile, "en", question).considered}
    swapping, guide = found["Returns › Swapping for another size or colour"], found["Returns › Size guide"]

    assert share(["swap", "size"]) < DEFAULT_MIN_SCORE  # its share alone: under the bar
    assert swapping.relevance == pytest.approx(2 * share(["swap", "size"]), abs=1e-5)
    assert guide.relevance == pytest.approx(share(["size"]), abs=1e-5)  # one word named counts once
    assert [passage.hit.heading for passage in retrieve(profile, "en", question).used] == [swapping.hit.heading]


BILLS = """# Bills

## Late payment

A payment after the due date pays a fee of 2 % on the next one.

## Bill copy

Download a copy in the app, under Bills.
"""


def test_one_synonym_standing_for_two_of_the_questions_words_is_not_a_heading_naming_two(db):
    """The question holds the term "overdue bill", whose group's "late payment" heads a section: one term for two
    words, not a heading naming two of them; the section headed with the question's own *bill* and *copy* is."""
    profile = AgentProfileFactory(agent_id="bills", language="en")
    source = KnowledgeSource.objects.create(
        profile=profile, name="Help centre", language="en", synonyms=[["late payment", "overdue bill"]]
    )
    document_ingest(source=source, file_name="bills.md", data=BILLS.encode(), language="en")
    question = "my overdue bill never came, where can I download a copy of it?"
    share = HeldShare(asked_words(question))

    found = {passage.hit.heading: passage for passage in retrieve(profile, "en", question).considered}
    late, copy = found["Bills › Late payment"], found["Bills › Bill copy"]

    assert late.relevance == pytest.approx(share(["overdue", "bill"]), abs=1e-5)
    assert copy.relevance == pytest.approx(share(["bill", "download", "copy"]) + share(["bill", "copy"]), abs=1e-5)


@pytest.mark.django_db(transaction=True)
def test_a_search_gives_its_database_connection_back_so_that_none_is_held_through_the_models_call(help_centre):
    """A turn searches before its model's call and writes after it: a connection the search kept was held through the
    call, and the process's other messages waited for the pool."""
    retrieved = retrieve(help_centre, "en", "Express delivery?")

    assert retrieved.used and connection.connection is None


@pytest.mark.django_db(transaction=True)  # outside a test's transaction, as a turn searches: its connection given back
def test_a_follow_up_found_nowhere_searches_its_thread_in_its_language_once_and_gives_the_connection_back_once(
    help_centre, monkeypatch
):
    """With its thread in Portuguese, alone, then with its thread in every language: the last step starts from the
    first's search, and the sequence holds one connection, given back at its end. What it finds is what the three
    retrievals one by one find."""
    from knowledge import retrieval

    question, thread = "e o cashback?", "posso devolver um produto?"
    scope = {"profile_pk": help_centre.pk, "tenant_pk": None, "tags": (), "min_score": DEFAULT_MIN_SCORE}
    one_by_one = [
        knowledge_retrieve(query=question, language="pt", thread=thread, every_language=False, **scope),
        knowledge_retrieve(query=question, language="pt", **scope),
        knowledge_retrieve(query=question, language="pt", thread=thread, **scope),
    ]
    searched: list[tuple[str, str | None]] = []
    search = retrieval.knowledge_search
    monkeypatch.setattr(
        retrieval,
        "knowledge_search",
        lambda **kwargs: searched.append((kwargs["query"], kwargs.get("language"))) or search(**kwargs),
    )
    closed: list[bool] = []
    close = connection.close
    monkeypatch.setattr(connection, "close", lambda: closed.append(True) or close())

    retrieved, followed = knowledge_retrieve_followed(query=question, language="pt", thread=thread, **scope)

    assert not any(step.used for step in one_by_one)
    assert (retrieved, followed) == (one_by_one[1], False)
    both = f"{question}\n{thread}"
    assert searched == [(both, "pt"), (question, "pt"), (question, None), (both, None)]
    assert closed == [True] and connection.connection is None


def test_a_follow_up_found_with_its_thread_is_what_the_search_with_its_thread_finds(help_centre):
    question, thread = "e quanto tempo eu tenho pra isso?", "posso devolver um produto?"

    retrieved, followed = knowledge_retrieve_followed(
        profile_pk=help_centre.pk, tenant_pk=None, query=question, language="pt", tags=(), min_score=DEFAULT_MIN_SCORE,
        thread=thread,
    )  # fmt: skip

    assert followed is True and retrieved == thread_retrieve(help_centre, "pt", question, thread)
    assert retrieved.used[0].hit.heading == "Trocas e devoluções › Prazo para devolver"


def test_a_word_held_as_itself_outranks_the_same_word_held_only_through_its_family(db):
    # "llegar" is "recibirlo" too (the event a fault tells of), but a section writing "llega" speaks of it itself.
    profile = AgentProfileFactory(agent_id="shop", language="es")
    source = KnowledgeSource.objects.create(profile=profile, name="Help centre", language="es")
    articles = {
        "cancelar.md": "# Cancelar\n\nSe puede cancelar el pedido hasta 7 días después de recibirlo.\n",
        "seguimiento.md": "# Seguimiento\n\nEl pedido llega con un código de seguimiento por correo.\n",
    }
    for file_name, text in articles.items():
        document_ingest(source=source, file_name=file_name, data=text.encode(), language="es")

    found = retrieve(profile, "es", "cuando va a llegar el pedido")

    assert [(p.hit.document_title, p.held) for p in found.used] == [("Seguimiento", 2), ("Cancelar", 2)]
    assert found.used[0].relevance == 1.0 > found.used[1].relevance
