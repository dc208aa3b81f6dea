"""The examples tier's embeddings vectoriser over real HTTP: langchain-openai against the scripted server's
``/v1/embeddings`` (tests/llm_server.py)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from common.embeddings import (
    EmbeddingsCache,
    EmbeddingsUnavailable,
    EmbeddingsVectoriser,
    clear_cache,
    embeddings_configured,
    embeddings_vectoriser,
)
from routing.examples import ExampleIndex
from tests.llm_server import EMBEDDING_DIMENSIONS, ScriptedLLMServer, embed_text

EXAMPLES = [
    ("billing_invoice", ["quero pagar minha fatura", "segunda via da conta de luz", "minha fatura veio alta"]),
    ("order_tracking", ["onde está meu pedido", "rastrear minha encomenda", "o pedido não chegou"]),
    ("plan_change", ["quero mudar de plano", "trocar meu plano de internet"]),
]
EXAMPLE_COUNT = sum(len(texts) for _, texts in EXAMPLES)


@pytest.fixture
def server():
    clear_cache()  # the cache is process-wide: every test starts without it
    running = ScriptedLLMServer().start()
    yield running
    running.stop()
    clear_cache()


def vectoriser_for(server: ScriptedLLMServer, **options) -> EmbeddingsVectoriser:
    return EmbeddingsVectoriser(base_url=server.base_url, model="embed-small", api_key="emb-key", **options)


def test_the_examples_are_embedded_over_http_and_the_right_intent_ranks_first(server):
    vectoriser = vectoriser_for(server)

    index = ExampleIndex.build(EXAMPLES, vectoriser)

    assert index is not None
    assert isinstance(index.matrix, np.ndarray) and index.matrix.dtype == np.float32
    assert index.matrix.shape == (EXAMPLE_COUNT, EMBEDDING_DIMENSIONS)
    assert np.allclose(np.linalg.norm(index.matrix, axis=1), 1.0, atol=1e-5)
    assert len(server.embedding_requests) == 1  # one batch for all the examples
    assert server.embedding_inputs == [text for _, texts in EXAMPLES for text in texts]
    assert np.allclose(index.matrix[0], embed_text("quero pagar minha fatura"), atol=1e-6)

    match = index.match(vectoriser.vector("preciso pagar a fatura deste mês"))
    assert match.best[0] == "billing_invoice"
    assert match.nearest[0].example == "quero pagar minha fatura"
    assert match.vectoriser == "embeddings:embed-small"
    assert index.match(vectoriser.vector("meu pedido ainda não chegou")).best[0] == "order_tracking"
    assert len(server.embedding_requests) == 3  # one call per new message


def test_the_examples_are_sent_in_batches(server):
    vectoriser = vectoriser_for(server, batch_size=3)

    matrix = vectoriser.fit([text for _, texts in EXAMPLES for text in texts])

    assert [len(request.inputs) for request in server.embedding_requests] == [3, 3, 2]
    assert matrix.shape == (EXAMPLE_COUNT, EMBEDDING_DIMENSIONS)


def test_each_request_carries_the_api_key_as_a_bearer_token_and_the_model_name(server):
    vectoriser_for(server).vector("onde está meu pedido")

    (request,) = server.embedding_requests
    assert request.authorization == "Bearer emb-key"
    assert request.model == "embed-small"
    assert request.inputs == ["onde está meu pedido"]  # text, not token arrays


def test_recompiling_unchanged_examples_makes_no_http_call(server):
    ExampleIndex.build(EXAMPLES, vectoriser_for(server))
    calls = len(server.embedding_requests)

    again = ExampleIndex.build(EXAMPLES, vectoriser_for(server))  # a new vectoriser: the cache is the process's
    assert len(server.embedding_requests) == calls
    assert again is not None and again.match(again.vectoriser.vector("quero pagar minha fatura")).best[0] == (
        "billing_invoice"
    )

    grown = [*EXAMPLES, ("cancellation", ["quero cancelar meu pedido"])]
    ExampleIndex.build(grown, vectoriser_for(server))
    assert len(server.embedding_requests) == calls + 1
    assert server.embedding_requests[-1].inputs == ["quero cancelar meu pedido"]  # only the new example is sent


def test_the_cache_is_per_endpoint_and_model(server):
    vectoriser_for(server).fit(["quero mudar de plano"])

    EmbeddingsVectoriser(base_url=server.base_url, model="embed-large", api_key="emb-key").fit(["quero mudar de plano"])

    assert [request.model for request in server.embedding_requests] == ["embed-small", "embed-large"]


def test_the_cache_forgets_the_least_recently_used_embeddings_beyond_its_size():
    vector = np.ones(4, dtype=np.float32)
    cache = EmbeddingsCache(max_bytes=3 * vector.nbytes)
    for text in ["a", "b", "c"]:
        cache.put(("url", "model", text), vector)
    assert cache.get(("url", "model", "a")) is not None  # "a" is now the most recently used

    cache.put(("url", "model", "d"), vector)

    assert cache.get(("url", "model", "b")) is None
    assert all(cache.get(("url", "model", text)) is not None for text in ["a", "c", "d"])
    assert cache.size_bytes == 3 * vector.nbytes


def test_a_vectoriser_refits_over_http_once_its_cache_no_longer_holds_the_examples(server):
    texts = [text for _, texts in EXAMPLES for text in texts]
    small = EmbeddingsCache(max_bytes=2 * EMBEDDING_DIMENSIONS * 4)  # two embeddings
    vectoriser = vectoriser_for(server, cache=small)

    vectoriser.fit(texts)
    vectoriser.fit(texts)

    assert len(server.embedding_requests) == 2
    assert server.embedding_requests[-1].inputs == texts[:-2]  # the cache kept the two last, sends the rest again
    assert len(small) == 2


def test_avector_embeds_a_message_from_any_event_loop(server):
    vectoriser = vectoriser_for(server)
    index = ExampleIndex.build(EXAMPLES, vectoriser)
    assert index is not None

    first = asyncio.run(vectoriser.avector("quero trocar de plano de celular"))
    second = asyncio.run(vectoriser.avector("rastrear o pedido"))  # a new loop: a client of its own

    assert index.match(first).best[0] == "plan_change"
    assert index.match(second).best[0] == "order_tracking"
    assert first.dtype == np.float32 and np.allclose(first, embed_text("quero trocar de plano de celular"), atol=1e-6)
    assert server.embedding_inputs[-2:] == ["quero trocar de plano de celular", "rastrear o pedido"]
    assert np.array_equal(vectoriser.vector("rastrear o pedido"), second)  # cached: no further call
    assert len(server.embedding_requests) == 3


def test_a_blank_message_scores_nothing_without_a_call(server):
    vectoriser = vectoriser_for(server)
    index = ExampleIndex.build(EXAMPLES, vectoriser)
    assert index is not None
    calls = len(server.embedding_requests)

    match = index.match(vectoriser.vector("   "))

    assert match.ranking == () and len(server.embedding_requests) == calls


def test_examples_are_sent_after_the_document_prefix_and_messages_after_the_query_prefix(server):
    vectoriser = vectoriser_for(server, query_prefix="query: ", document_prefix="passage: ")

    matrix = vectoriser.fit(["quero mudar de plano", "  "])
    message = vectoriser.vector("quero mudar de plano")

    assert server.embedding_inputs == ["passage: quero mudar de plano", "query: quero mudar de plano"]
    assert np.allclose(matrix[0], embed_text("passage: quero mudar de plano"), atol=1e-6)
    assert not matrix[1].any()  # a blank text is no prefix alone: zeros, not sent
    assert np.allclose(message, embed_text("query: quero mudar de plano"), atol=1e-6)
    assert not vectoriser.vector("   ").any() and len(server.embedding_requests) == 2


def test_the_cache_never_hands_a_prefixed_texts_vector_for_the_text_alone(server):
    prefixed = vectoriser_for(server, query_prefix="query: ").vector("onde está meu pedido")

    plain = vectoriser_for(server).vector("onde está meu pedido")
    again = vectoriser_for(server, query_prefix="query: ").vector("onde está meu pedido")

    assert server.embedding_inputs == ["query: onde está meu pedido", "onde está meu pedido"]
    assert not np.allclose(prefixed, plain) and np.array_equal(again, prefixed)  # the prefixed one cached as such


def test_an_endpoint_answering_500_raises_embeddings_unavailable(server):
    vectoriser = vectoriser_for(server)
    server.embeddings_error(500, times=3)

    with pytest.raises(EmbeddingsUnavailable, match="embed-small"):
        vectoriser.fit(["quero pagar minha fatura"])
    with pytest.raises(EmbeddingsUnavailable):
        vectoriser.vector("quero pagar minha fatura")
    with pytest.raises(EmbeddingsUnavailable):
        asyncio.run(vectoriser.avector("quero pagar minha fatura"))

    assert len(server.embedding_requests) == 3  # no retry: the router falls through to its next tier instead
    assert vectoriser.vector("quero pagar minha fatura").shape == (EMBEDDING_DIMENSIONS,)  # a failure is not cached


def test_a_slow_endpoint_raises_embeddings_unavailable_after_the_timeout(server):
    vectoriser = vectoriser_for(server, timeout=0.2)
    server.embeddings_slowly(2.0)

    with pytest.raises(EmbeddingsUnavailable, match="APITimeoutError"):
        vectoriser.vector("quero pagar minha fatura")


def test_an_endpoint_that_is_not_running_raises_embeddings_unavailable():
    stopped = ScriptedLLMServer().start()
    base_url = stopped.base_url
    stopped.stop()

    with pytest.raises(EmbeddingsUnavailable):
        EmbeddingsVectoriser(base_url=base_url, model="embed-small", api_key="").fit(["quero pagar minha fatura"])


def test_the_settings_configure_the_vectoriser(settings, server):
    settings.ROUTER_EMBEDDINGS_BASE_URL = ""
    assert not embeddings_configured()
    assert embeddings_vectoriser() is None

    settings.ROUTER_EMBEDDINGS_BASE_URL = server.base_url
    settings.ROUTER_EMBEDDINGS_API_KEY = "settings-key"
    settings.ROUTER_EMBEDDINGS_MODEL = "settings-model"
    settings.ROUTER_EMBEDDINGS_TIMEOUT = 3.0

    vectoriser = embeddings_vectoriser()
    assert embeddings_configured() and vectoriser is not None
    assert (vectoriser.name, vectoriser.base_url, vectoriser.timeout) == (
        "embeddings:settings-model",
        server.base_url,
        3.0,
    )
    vectoriser.vector("oi")
    assert server.embedding_requests[-1].authorization == "Bearer settings-key"


# --- through the router: a profile whose examples tier uses the endpoint ----------------------------------


@pytest.fixture
def embedding_profile(server, settings, db, telecom):
    from agents.models import AgentProfile
    from common.config_version import config_version_bump
    from routing.models import Intent

    settings.ROUTER_EMBEDDINGS_BASE_URL = server.base_url
    settings.ROUTER_EMBEDDINGS_MODEL = "embed-small"
    settings.ROUTER_EMBEDDINGS_API_KEY = "emb-key"
    Intent.objects.filter(profile=telecom, name="billing_invoice_explanation").update(examples=EXAMPLES[0][1])
    Intent.objects.filter(profile=telecom, name="retail_order_tracking").update(examples=EXAMPLES[1][1])
    AgentProfile.objects.filter(pk=telecom.pk).update(
        examples_vectoriser="embeddings", examples_threshold=0.3, examples_margin=0.05
    )
    config_version_bump()
    return telecom


def gateway(api, text: str) -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": text, "session_id": f"s-{abs(hash(text))}"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()["metadata"]["route_decision"]


def test_a_profile_with_the_embeddings_tier_routes_a_paraphrase_by_embedding_it_over_http(
    api, embedding_profile, server
):
    decision = gateway(api, "quero rastrear minha encomenda")  # no keyword of the profile

    assert (decision["method"], decision["intent"]) == ("examples", "retail_order_tracking")
    assert decision["metadata"]["examples"]["vectoriser"] == "embeddings:embed-small"
    assert "quero rastrear minha encomenda" in server.embedding_inputs  # the message went over HTTP
    assert all(request.authorization == "Bearer emb-key" for request in server.embedding_requests)


def test_the_router_sends_its_examples_and_messages_after_the_routers_prefixes(
    api, embedding_profile, server, settings
):
    # A message and an example are compared alike: e5 wants "query: " on both sides.
    settings.ROUTER_EMBEDDINGS_QUERY_PREFIX = settings.ROUTER_EMBEDDINGS_DOCUMENT_PREFIX = "query: "

    decision = gateway(api, "quero rastrear minha encomenda")

    assert (decision["method"], decision["intent"]) == ("examples", "retail_order_tracking")
    assert "query: quero rastrear minha encomenda" in server.embedding_inputs
    assert "query: rastrear minha encomenda" in server.embedding_inputs  # an example
    assert all(text.startswith("query: ") for text in server.embedding_inputs)  # the background's too


def test_an_embeddings_endpoint_failing_on_a_message_leaves_it_to_the_fallback(api, embedding_profile, server):
    gateway(api, "quero rastrear minha encomenda")  # compiles the tier (the examples embedded)
    server.embeddings_error(500)

    failed = gateway(api, "rastrear a encomenda")
    again = gateway(api, "rastrear a encomenda")  # the endpoint answers again

    assert failed["method"] == "fallback"
    assert (again["method"], again["intent"]) == ("examples", "retail_order_tracking")
