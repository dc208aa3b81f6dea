"""A vectoriser over an OpenAI-compatible ``/v1/embeddings`` endpoint, through langchain-openai: the routing's
examples tier and the knowledge's vector search both embed through it.

An :class:`EmbeddingsVectoriser` is what :class:`routing.examples.ExampleIndex` builds with when a profile asks
for embeddings and ``ROUTER_EMBEDDINGS_BASE_URL`` is set: ``fit`` embeds the examples in batches when the
router compiles, ``vector`` / ``avector`` embed one message. The knowledge (``knowledge.vectors``) embeds a
document's passages with ``fit`` when it is indexed and a question with ``vector``, through the endpoint of
``KNOWLEDGE_EMBEDDINGS_*``. Rows and vectors are float32 and L2-normalised, so a dense product is the cosine
similarity.

Retrieval models of the e5, bge, nomic and gte families want a text marked by its role — e5 reads ``query: `` before
what is searched for and ``passage: `` before what is searched in — and an OpenAI-compatible endpoint cannot tell the
two apart. A vectoriser prepends ``query_prefix`` to what ``vector`` / ``avector`` embed (a customer's message, a
question) and ``document_prefix`` to what ``fit`` embeds (the routing's examples, a document's passages); both are
empty unless ``<endpoint>_QUERY_PREFIX`` / ``<endpoint>_DOCUMENT_PREFIX`` are set (docs/knowledge.md, "Vectors").

Embeddings are kept in one process-wide cache keyed by (endpoint, model, text as sent, its prefix included),
bounded in bytes and forgetting the least recently used first: recompiling a profile whose examples did not change
makes no HTTP call, and a message seen before is not embedded again.

A call is made once (no retry) within ``timeout``; any failure — the endpoint down or slow, an error status, an
answer of the wrong shape — raises :class:`EmbeddingsUnavailable`: the router goes on to its next tier, the
knowledge search ranks by words alone.

No ORM; the settings are read only by :func:`embeddings_configured` and :func:`embeddings_vectoriser`, for the
routing's endpoint (``ROUTER_EMBEDDINGS_*``) or the knowledge's (``KNOWLEDGE_EMBEDDINGS_*``).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import numpy as np

from common.outbound import AsyncHttpx2GuardedTransport, Httpx2GuardedTransport, origin_entry

CACHE_BYTES = 64 * 2**20  # ~11,000 embeddings of 1,536 dimensions
BATCH_SIZE = 256  # texts per request when the examples are embedded
NO_KEY = "not-needed"  # what a keyless local endpoint gets as the key (the openai client insists on one)

CacheKey = tuple[str, str, str]  # (base URL, model, text as sent: its prefix included)


class Endpoint(NamedTuple):
    """What a vectoriser embeds through, hashable: a memo's key where one vectoriser (one HTTP client) or one index is
    kept per configuration (:meth:`EmbeddingsVectoriser.of`)."""

    base_url: str
    model: str
    api_key: str
    timeout: float
    query_prefix: str = ""
    document_prefix: str = ""


class EmbeddingsUnavailable(Exception):
    """The embeddings endpoint could not embed the texts: unreachable, too slow, an error status, or an answer
    of the wrong shape. The message names the endpoint and the model."""


class HasBytes(Protocol):
    @property
    def nbytes(self) -> int: ...


K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=HasBytes)


class BytesBounded(Generic[K, V]):
    """Values by key; beyond ``max_bytes`` of values (their ``nbytes``) the least recently used are forgotten, and a
    value larger than that is not kept. Thread-safe."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size_bytes = 0
        self._values: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._values)

    def values(self) -> list[V]:
        with self._lock:
            return list(self._values.values())

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        if value.nbytes > self.max_bytes:
            return
        with self._lock:
            old = self._values.pop(key, None)
            if old is not None:
                self.size_bytes -= old.nbytes
            self._values[key] = value
            self.size_bytes += value.nbytes
            while self.size_bytes > self.max_bytes:
                _, dropped = self._values.popitem(last=False)
                self.size_bytes -= dropped.nbytes

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self.size_bytes = 0


class EmbeddingsCache(BytesBounded[CacheKey, np.ndarray]):
    """Embeddings by (base URL, model, text as sent); beyond ``max_bytes`` of vectors the least recently used are
    forgotten. Thread-safe."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        super().__init__(max_bytes)


CACHE = EmbeddingsCache()


def clear_cache() -> None:
    """Forget every cached embedding (tests; after an endpoint's model changed behind the same name)."""
    CACHE.clear()


def _normalised(rows: Any) -> np.ndarray:
    matrix = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


class EmbeddingsVectoriser:
    """Embeds texts through ``langchain_openai.OpenAIEmbeddings`` (see the module docstring).

    ``fit(texts)`` is the examples' dense matrix (float32, one L2-normalised row per text); ``vector(text)`` and
    ``await avector(text)`` a message's vector. All three raise :class:`EmbeddingsUnavailable` when the endpoint
    fails. A blank text is a zero vector and costs no call (once the dimension is known). ``fit`` sends each text
    after ``document_prefix``, ``vector`` and ``avector`` after ``query_prefix`` (a blank text gets none).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout: float = 5.0,
        *,
        batch_size: int = BATCH_SIZE,
        cache: EmbeddingsCache | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.name = f"embeddings:{model}"
        self.remote = True  # one HTTP call per new message: the router awaits avector (routing.examples.Vectoriser)
        self.cache = CACHE if cache is None else cache
        self.dimensions: int | None = None
        self._client: Any = None
        # An async HTTP connection belongs to the event loop that opened it: one client per loop.
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, endpoint: Endpoint, *, cache: EmbeddingsCache | None = None) -> EmbeddingsVectoriser:
        """The vectoriser of ``endpoint``."""
        return cls(**endpoint._asdict(), cache=cache)

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.base_url, self.model, self.api_key, self.timeout, self.query_prefix, self.document_prefix)

    def __repr__(self) -> str:
        return f"EmbeddingsVectoriser({self.base_url!r}, {self.model!r})"

    # -- clients --------------------------------------------------------------

    def _new_client(self, *, for_loop: bool = False) -> Any:
        import openai
        from langchain_openai import OpenAIEmbeddings

        options: dict[str, Any] = {
            "model": self.model,
            "base_url": self.base_url,
            "api_key": self.api_key or NO_KEY,
            "timeout": self.timeout,
            "max_retries": 0,  # the router has a next tier; a retry would only spend the message's time
            "chunk_size": self.batch_size,
            # Send the texts themselves: token arrays need tiktoken's downloaded tables and only OpenAI's own
            # endpoint reads them.
            "check_embedding_ctx_length": False,
        }
        # Under the outbound policy (common/outbound.py); the endpoint is set in the environment
        # (ROUTER_EMBEDDINGS_BASE_URL): its own address is allowed.
        allowed = origin_entry(self.base_url)
        options["http_client"] = openai.DefaultHttpxClient(
            timeout=self.timeout, transport=Httpx2GuardedTransport(allowed=allowed)
        )
        if for_loop:
            # langchain-openai otherwise shares one async HTTP client per endpoint across every event loop: its
            # connections belong to the loop that opened them, and the next loop's calls fail.
            options["http_async_client"] = openai.DefaultAsyncHttpxClient(
                timeout=self.timeout, transport=AsyncHttpx2GuardedTransport(allowed=allowed)
            )
        return OpenAIEmbeddings(**options)

    def _sync_client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = self._new_client()
            return self._client

    def _async_client(self) -> Any:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async_clients.get(loop)
            if client is None:
                client = self._async_clients[loop] = self._new_client(for_loop=True)
            return client

    # -- embedding ------------------------------------------------------------

    def _failure(self, error: BaseException) -> EmbeddingsUnavailable:
        return EmbeddingsUnavailable(
            f"The embeddings endpoint {self.base_url} (model {self.model}) failed: {type(error).__name__}: {error}"
        )

    def _checked(self, texts: Sequence[str], answer: Any) -> np.ndarray:
        """The endpoint's answer as normalised float32 rows, or :class:`EmbeddingsUnavailable` when it is not
        one vector per text, all of the same dimension."""
        try:
            rows = _normalised(answer)
        except (TypeError, ValueError) as error:  # ragged or not numbers
            raise self._failure(error) from error
        if rows.ndim != 2 or len(rows) != len(texts) or not rows.shape[1]:
            raise EmbeddingsUnavailable(
                f"The embeddings endpoint {self.base_url} (model {self.model}) answered {rows.shape} "
                f"for {len(texts)} texts."
            )
        if self.dimensions is not None and rows.shape[1] != self.dimensions:
            raise EmbeddingsUnavailable(
                f"The embeddings endpoint {self.base_url} (model {self.model}) answered vectors of "
                f"{rows.shape[1]} dimensions, not {self.dimensions}."
            )
        self.dimensions = rows.shape[1]
        for text, row in zip(texts, rows, strict=True):
            self.cache.put((self.base_url, self.model, text), row)
        return rows

    def _cached(self, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        """The texts' cached vectors, and the texts to fetch (blank ones are not: see :meth:`_row`)."""
        known: dict[str, np.ndarray] = {}
        missing: list[str] = []
        for text in dict.fromkeys(texts):
            vector = self.cache.get((self.base_url, self.model, text))
            if vector is not None:
                known[text] = vector
                self.dimensions = self.dimensions or len(vector)
            elif text.strip():
                missing.append(text)
        return known, missing

    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        import httpx
        import openai

        try:
            return self._sync_client().embed_documents(list(texts))
        except (openai.OpenAIError, httpx.HTTPError, KeyError, TypeError, ValueError) as error:
            raise self._failure(error) from error

    async def _aembed(self, texts: Sequence[str]) -> list[list[float]]:
        import httpx
        import openai

        try:
            return await self._async_client().aembed_documents(list(texts))
        except (openai.OpenAIError, httpx.HTTPError, KeyError, TypeError, ValueError) as error:
            raise self._failure(error) from error

    def _row(self, text: str, known: dict[str, np.ndarray]) -> np.ndarray:
        """``text``'s vector: fetched or cached, or zeros for a blank text (which endpoints refuse)."""
        vector = known.get(text)
        if vector is not None:
            return vector
        if self.dimensions is None:
            raise EmbeddingsUnavailable(f"Nothing to embed in {text!r}, and no dimension known yet ({self.name}).")
        return np.zeros(self.dimensions, dtype=np.float32)

    @staticmethod
    def _marked(texts: Sequence[str], prefix: str) -> list[str]:
        """``texts`` as sent: after ``prefix``, but a blank one as it is (:meth:`_row` makes it zeros)."""
        return [prefix + text if prefix and text.strip() else text for text in texts]

    def fit(self, texts: Sequence[str]) -> np.ndarray:
        """The texts' embeddings, one L2-normalised float32 row each; only texts not in the cache are sent (after
        ``document_prefix``), in batches of ``batch_size``."""
        texts = self._marked(texts, self.document_prefix)
        known, missing = self._cached(texts)
        if missing:
            known.update(zip(missing, self._checked(missing, self._embed(missing)), strict=True))
        if not texts:
            return np.zeros((0, self.dimensions or 0), dtype=np.float32)
        return np.stack([self._row(text, known) for text in texts])

    def vector(self, text: str) -> np.ndarray:
        """One message's embedding (L2-normalised float32), sent after ``query_prefix``."""
        (text,) = self._marked([text], self.query_prefix)
        known, missing = self._cached([text])
        if missing:
            return self._checked(missing, self._embed(missing))[0]
        return self._row(text, known)

    async def avector(self, text: str) -> np.ndarray:
        """:meth:`vector` without blocking the event loop."""
        (text,) = self._marked([text], self.query_prefix)
        known, missing = self._cached([text])
        if missing:
            return self._checked(missing, await self._aembed(missing))[0]
        return self._row(text, known)


ROUTER = "ROUTER_EMBEDDINGS"  # the examples tier's endpoint
KNOWLEDGE = "KNOWLEDGE_EMBEDDINGS"  # the knowledge's (platform/settings.py: the router's unless set apart)


def embeddings_configured(endpoint: str = ROUTER) -> bool:
    """An embeddings endpoint is configured: ``<endpoint>_BASE_URL`` and ``<endpoint>_MODEL`` (``endpoint``:
    :data:`ROUTER` or :data:`KNOWLEDGE`)."""
    from django.conf import settings

    return bool(getattr(settings, f"{endpoint}_BASE_URL") and getattr(settings, f"{endpoint}_MODEL"))


def embeddings_vectoriser(endpoint: str = ROUTER) -> EmbeddingsVectoriser | None:
    """The vectoriser of the endpoint of ``<endpoint>_*``, its prefixes included, or ``None`` when there is none (the
    examples tier stays offline, the knowledge search ranks by words)."""
    from django.conf import settings

    if not embeddings_configured(endpoint):
        return None
    return EmbeddingsVectoriser(
        base_url=getattr(settings, f"{endpoint}_BASE_URL"),
        model=getattr(settings, f"{endpoint}_MODEL"),
        api_key=getattr(settings, f"{endpoint}_API_KEY"),
        timeout=float(getattr(settings, f"{endpoint}_TIMEOUT")),
        query_prefix=getattr(settings, f"{endpoint}_QUERY_PREFIX"),
        document_prefix=getattr(settings, f"{endpoint}_DOCUMENT_PREFIX"),
    )
