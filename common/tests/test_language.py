"""The language of a customer's message or of an answer: pt, es, en, or None when it cannot be told."""

from __future__ import annotations

import contextvars
from pathlib import Path

import pytest
import yaml

from common import language
from common.language import (
    LANGUAGES,
    detect_language,
    identifier,
    language_clear,
    language_compiled_use,
    language_scores,
)

PARAPHRASES = Path(__file__).resolve().parents[2] / "bench" / "paraphrases"

PORTUGUESE = [
    "minha fatura veio muito alta esse mes",
    "nao consigo acessar minha conta",
    "cade minha encomenda",
    "quero falar com um atendente humano",
    "a internet ta muito lenta desde ontem",
    "vcs cobraram duas vezes no meu cartao",
    "Minha fatura veio alta. Pode consultar?",
    "Onde está meu pedido?",
]
SPANISH = [
    "mi factura llego muy alta este mes",
    "no puedo entrar a mi cuenta",
    "donde esta mi encomienda",
    "quiero hablar con una persona por favor",
    "el internet esta muy lento desde ayer",
    "me cobraron dos veces en la tarjeta",
    "Mi factura llegó muy alta. ¿Puede revisarla?",
    "¿Dónde está mi pedido?",
]
ENGLISH = [
    "my bill was really high this month",
    "i cant log into my account",
    "wheres my package",
    "i want to talk to a real person",
    "the internet is super slow since yesterday",
    "you charged my card twice",
    "my bil is to high",
    "My bill is too high, can you check it?",
]


@pytest.fixture(autouse=True, params=["python", "py3langid", "compiled"])
def scorer(request, monkeypatch, settings):
    """Every test on the three scorers: the plain Python reading (the default), py3langid's own (``STOCK_PATHS``) and
    the compiled loop (a process with numba); all three py3langid's in the test command's stock-path pass."""
    settings.STOCK_PATHS = settings.STOCK_PATHS or request.param == "py3langid"
    monkeypatch.setattr(language, "_compiled", request.param == "compiled")
    monkeypatch.setattr(language, "_scorer", None)
    return request.param


@pytest.mark.parametrize("text", PORTUGUESE)
def test_it_tells_short_portuguese_messages(text):
    assert detect_language(text) == "pt"


@pytest.mark.parametrize("text", SPANISH)
def test_it_tells_short_spanish_messages(text):
    assert detect_language(text) == "es"


@pytest.mark.parametrize("text", ENGLISH)
def test_it_tells_short_english_messages_even_with_typos(text):
    assert detect_language(text) == "en"


@pytest.mark.parametrize("text", ["ok", "👍", "12345", "P100?", "", "  ", "R$ 289,90", "sim", "internet"])
def test_it_cannot_tell_a_word_alone_emoji_or_numbers(text):
    assert detect_language(text) is None


def test_a_word_alone_that_belongs_to_one_language_only_is_told():
    assert detect_language("thanks") == "en"


def test_a_portuguese_answer_quoting_an_english_question_is_portuguese():
    answer = (
        'Faturas e pagamentos (modelo sem conexão): recebi sua mensagem. Você disse: "My bill is too high, can you '
        'check it?". Vou tratar disso como especialista.'
    )
    assert detect_language(answer) == "pt"


def test_an_english_answer_quoting_a_portuguese_question_is_english():
    answer = (
        'Billing (offline model): I received your message. You said: "minha fatura veio muito alta esse mes". '
        "I will look into it as a specialist."
    )
    assert detect_language(answer) == "en"


def test_the_scorer_gives_py3langids_language_and_probability_for_every_kind_of_text():
    """py3langid's own ``classify`` over its model cut to the same three languages is the reference: every message
    of the paraphrase sets (pt, es, en, with and without accents), answers, capitals, one word, symbols, nothing."""
    texts = [
        message["text"]
        for path in sorted(PARAPHRASES.glob("*.yaml"))
        for message in yaml.safe_load(path.read_text(encoding="utf-8"))["messages"]
    ]
    texts += PORTUGUESE + SPANISH + ENGLISH
    texts += ["MINHA FATURA VEIO ALTA", "sim", "ok", "", "👍 ✓", "R$ 289,90", "a" * 2000, "Olá, você está aí?\n\tsim"]
    texts += [  # answers: the longer a text, the more its sums round
        "Sua fatura de novembro ficou em R$ 189,90 porque incluiu a cobrança proporcional do novo plano e um serviço "
        "adicional. Posso abrir uma contestação se você não reconhece algum item.",
        "Tu factura de noviembre subió porque incluye el cargo proporcional del nuevo plan. ¿Quieres que abra un "
        "reclamo por algún cargo que no reconoces?",
        "Your November bill went up because it includes the prorated charge of the new plan and an add-on service. "
        "I can open a dispute for any charge you do not recognise.",
    ]
    assert len(texts) > 300
    reference = identifier()

    for text in texts:
        language, probability = language_scores(text)
        expected_language, expected_probability = reference.classify(text)
        assert language in LANGUAGES
        assert (language, probability) == (expected_language, pytest.approx(expected_probability, abs=1e-5)), text


def test_the_models_arrays_are_kept_once_on_disk_and_mapped_read_only_with_the_same_scores(settings, tmp_path):
    """The first process writes the cut model's arrays under VAR_DIR/cache/language; the next ones map them (shared
    between processes, never written) and score exactly as the arrays made from py3langid's model do."""
    import numpy as np

    settings.VAR_DIR = tmp_path
    made = language._arrays()  # no cache yet: made from the model, written, then mapped
    [directory] = (tmp_path / "cache" / "language").iterdir()
    assert sorted(path.name for path in directory.iterdir()) == sorted(f"{name}.npy" for name in language._ARRAYS)
    mapped = language._arrays()
    assert all(isinstance(array, np.memmap) and not array.flags.writeable for array in (*made, *mapped))

    fresh = language.identifier()
    assert np.array_equal(mapped[0], np.frombuffer(fresh.tk_nextmove, dtype=mapped[0].dtype))
    assert np.array_equal(mapped[3], fresh.nb_ptc.astype(np.float32))
    from common.language_kernel import language_probabilities

    for text in ("Minha fatura veio alta este mês", "Mi factura llegó muy alta", "My order is late", ""):
        data = np.frombuffer(text.encode(), dtype=np.uint8)
        column, probability = language_probabilities(data, *mapped)
        assert (LANGUAGES[column], pytest.approx(probability, abs=1e-6)) == language_scores(text)


def test_py3langids_walk_reads_the_mapped_tables_as_integers_without_copying_them(settings, tmp_path, scorer):
    """The automaton walk indexes its two tables once per byte of the text: as py3langid's own tables (an
    ``array.array``, a list) give Python integers, so do the views it is handed, over the same mapped pages — a
    ``numpy.memmap`` made each index a NumPy scalar through a Python ``__getitem__``."""
    import numpy as np

    if scorer != "py3langid":
        pytest.skip("only py3langid's own scorer is handed the tables")
    settings.VAR_DIR = tmp_path
    nextmove, _, output, *_ = mapped = language._arrays()
    model = language._stock_scorer(mapped).__self__

    for table, array in ((model.tk_nextmove, nextmove), (model.tk_output, output)):
        assert isinstance(table, memoryview) and type(table[0]) is int
        assert np.shares_memory(np.asarray(table), array)
    assert type(model.nb_ptc) is np.ndarray and np.shares_memory(model.nb_ptc, mapped[3])


def test_the_plain_python_walk_reads_every_table_from_the_mapped_pages_and_keeps_no_copy_of_the_automatons_states(
    settings, tmp_path
):
    """The walk's row of each state is read from the mapped array as its other tables are: a list of them made each
    process hold a hundred thousand integer objects (4 MB), and read them from wherever the heap had put them."""
    import tracemalloc

    settings.VAR_DIR = tmp_path
    mapped = language._arrays()
    tracemalloc.start()
    try:
        score = language._python_scorer(mapped)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert held < 64 * 1024  # the states' rows alone would be 104,583 integers: 0.8 MB of list, 3.2 MB of objects
    reference = identifier()
    for text in ("Minha fatura veio alta este mês", "Mi factura llegó muy alta", "My order is late", "", "a" * 500):
        language_told, probability = reference.classify(text)
        assert score(text) == (language_told, pytest.approx(probability, abs=1e-5))


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("precio de Itaú y Vale, avísame", "es"),  # the model: Portuguese, 0.76
        ("¿cuánto cuesta Vale?", "es"),
        ("cuánto vale Petrobras", "es"),
        ("quanto está a Vale e a Petrobras?", "pt"),
        ("cotação da PETR4", "pt"),
        ("busco vuelos a Paris", "es"),  # content words only: the model reads Portuguese, "vuelos" is Spanish
        ("vuelos a Atlántida", "es"),
        ("Vuelos a Atlántida", "es"),  # the first word counts, capital and all
        ("quero informacao do voo", "pt"),
        ("conta bloqueada", "pt"),
        ("meu cliente quer continuar", "pt"),  # "cliente" and "continue" are no Spanish mark
    ],
)
def test_a_short_message_the_model_is_unsure_of_is_told_by_the_marks_of_portuguese_or_spanish(text, language):
    assert detect_language(text) == language


def test_a_portuguese_message_written_without_its_accents_that_the_model_leans_to_english_is_told_by_its_marks():
    text = "qual o numero do whatsapp de voces"  # "qual" and "voces" are Portuguese's alone
    assert language_scores("qual numero do whatsapp de voces")[0] == "en"  # its words, as the model reads them

    assert detect_language(text) == "pt"


@pytest.mark.parametrize("text", ["no e-mail yet", "the sin tax", "hay fever meds", "ok com"])
def test_an_english_message_bearing_one_word_another_language_marks_stays_english(text):
    assert language_scores(text)[1] < language.MARKS_DECIDE_BELOW  # unsure, so the marks are read
    assert detect_language(text) == "en"


def test_the_labelled_paraphrase_sets_are_all_told_right():
    """543 messages of the three languages, written for routing: none misread, none left untold."""
    rows = [
        (message["text"], message["lang"])
        for path in sorted(PARAPHRASES.glob("*.yaml"))
        for message in yaml.safe_load(path.read_text(encoding="utf-8"))["messages"]
    ]

    misread = [(text, language, detect_language(text)) for text, language in rows if detect_language(text) != language]

    assert len(rows) > 500 and misread == []


def test_the_compiled_loop_scores_once_a_process_has_numba_and_never_with_the_stock_paths(settings, monkeypatch):
    settings.STOCK_PATHS = False
    monkeypatch.setattr(language, "_compiled", False)
    monkeypatch.setattr(language, "_scorer", None)
    language_scores("ok")
    assert language._scorer is not None and language._scorer.__qualname__ == "_python_scorer.<locals>.score"

    language_compiled_use()
    assert language._scorer is None
    language_scores("ok")
    assert language._scorer.__qualname__ == "_compiled_scorer.<locals>.score"

    settings.STOCK_PATHS = True
    monkeypatch.setattr(language, "_scorer", None)
    language_scores("ok")
    assert language._scorer.__qualname__ == "LanguageIdentifier.classify"


@pytest.mark.parametrize(
    "text", ["a que hora abre la bolsa de brasil?", "cuando llega la factura", "me cambian la batería?"]
)
def test_la_before_a_feminine_noun_is_a_mark_of_spanish(text):
    """Spanish's article "la" before a noun of a feminine ending ("-a", "-ción", "-dad"): Portuguese writes "a"."""
    assert language._marked(text) == "es"
    assert language_clear(text, "es")


@pytest.mark.parametrize(
    "text",
    [
        "ta chovendo la fora",  # "lá" written without its accent, before an adverb
        "vou la amanha",
        "fui la na loja ontem",
        "ja estive la agora",
        "tem como comprá-la amanha?",  # Portuguese's pronoun after a verb, hyphenated
        "vou ver la",
    ],
)
def test_la_written_for_portuguese_la_or_after_a_hyphen_is_no_mark_of_spanish(text):
    assert language._marked(text) != "es"


@pytest.mark.parametrize(
    ("text", "language"),
    [("conta do Manuel", "pt"), ("quero falar com Manuel Bueno", "pt"), ("mensaje para Vanusa Cunha", "es")],
)
def test_a_name_written_with_a_capital_is_no_mark_of_its_language(text, language):
    assert detect_language(text) == language


def test_a_text_asked_again_after_others_in_the_same_context_is_read_once_and_a_new_context_reads_it_again(
    monkeypatch,
):
    """A turn asks about the customer's message and its answer more than once, other texts between."""
    scored: list[str] = []

    def counted(text: str) -> tuple[str, float]:
        scored.append(text)
        return language_scores(text)

    monkeypatch.setattr(language, "language_scores", counted)
    texts = ["minha fatura veio alta", "where is my order", "quiero hablar con una persona", "cade minha encomenda"]

    def ask() -> list[str | None]:
        return [detect_language(text) for text in (*texts, texts[0], texts[-1])]

    first = contextvars.copy_context().run(ask)
    assert first == ["pt", "en", "es", "pt", "pt", "pt"]
    assert scored == texts  # the last two were told from the context's readings
    contextvars.Context().run(ask)
    assert len(scored) == 2 * len(texts)  # another request reads for itself
