"""Canaries: each hand-written fast path that copies a library's code or reaches into its private names fails here
when that library's code changes, before it misbehaves in production.

For each piece: the source of every upstream function or class it copies or relies on, hashed and compared with
the hash recorded when the piece was last verified against it, and the private names it uses, which must still
exist. A failure names the decision record that says what to re-read and how to re-verify the gain; once done,
record the new hash here (``python -m common.tests.test_upstream_canary`` prints them) together with the version in
the record. ``STOCK_PATHS=true`` runs every library's own code meanwhile.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass(frozen=True)
class Piece:
    record: str  # the decision record under docs/decisions/
    sources: dict[str, str]  # "module:qualified.name" -> the first 16 hex digits of its source's SHA-256
    names: tuple[str, ...] = ()  # "module:qualified.name" private names used, which must exist


PIECES = {
    "the ASGI handler and the middleware's async twins (platform/middleware.py)": Piece(
        "asgi-handler-and-middleware-twins.md",
        {
            "django.core.handlers.asgi:ASGIHandler.__call__": "f756809e9c9308dc",
            "django.core.handlers.asgi:ASGIHandler.handle": "98faeb5bef800331",
            "django.core.handlers.base:BaseHandler.load_middleware": "a1fb7ee5f8586195",
            "django.utils.deprecation:MiddlewareMixin.__init__": "cd0d3fd41f9408eb",
            "django.utils.deprecation:MiddlewareMixin.__acall__": "adf8cbcaf9f11e45",
            "django.dispatch.dispatcher:Signal.connect": "5566cc62eb59eec9",
            "asgiref.sync:SyncToAsync.__call__": "6376e33c6d3d94c5",
            "auditlog.context:_set_extra_data": "baa0368de5b2b78d",
            "auditlog.middleware:AuditlogMiddleware.__call__": "13ed5221613e8987",
            "whitenoise.middleware:WhiteNoiseMiddleware.__call__": "538b06958308b801",
        },
        (
            "asgiref.sync:SyncToAsync.context_to_thread_executor",
            "auditlog.context:_set_extra_data",
            "auditlog.context:auditlog_value",
        ),
    ),
    "the PostgreSQL backend and the statement builder (common/infra/postgresql/, common/infra/statements.py)": Piece(
        "postgresql-backend.md",
        {
            "psycopg._queries:_query2pg_nocache": "a57458f5b0a7ae99",
            "psycopg._queries:PostgresQuery.convert": "6238407fdceabf0b",
            "psycopg_pool.pool:ConnectionPool._get_ready_connection": "99b699260c88e9e6",
            "psycopg_pool.pool:ConnectionPool.schedule_task": "70f90a285d0221b3",
            "django.db.backends.postgresql.base:DatabaseWrapper.pool": "e5c2654fdf2d5090",
            "django.db.backends.base.base:BaseDatabaseWrapper._prepare_cursor": "92079d0eed95d59d",
            "django.db.backends.postgresql.compiler:SQLInsertCompiler.assemble_as_sql": "6b43aad0d7de36cf",
            "django.db.models.sql.compiler:SQLInsertCompiler.as_sql": "497ecc56a0916746",
        },
        (
            "psycopg._queries:PostgresQuery",
            "psycopg.pq:Format",
            "psycopg_pool.pool:AddConnection",
            "django.db.backends.postgresql.base:ServerBindingCursor",
            "django.db.backends.postgresql.base:DatabaseWrapper._connection_pools",
            "django.db.backends.postgresql.base:DatabaseWrapper._configure_connection",
        ),
    ),
    "the light spans and the OTLP encoder (common/infra/tracing.py, common/infra/otlp.py)": Piece(
        "light-spans-and-otlp-encoder.md",
        {
            "opentelemetry.sdk.trace:TracerProvider.__init__": "c3fff9449af02d3c",
            "opentelemetry.sdk.trace:ReadableSpan.__init__": "9fd2a50ea3546706",
            "opentelemetry.sdk.trace.export:BatchSpanProcessor.on_end": "0f0a7d0eb4f998a4",
            "opentelemetry.exporter.otlp.proto.http.trace_exporter:OTLPSpanExporter.export": "0968825cd72fb0bd",
            "opentelemetry.exporter.otlp.proto.common._internal.trace_encoder:encode_spans": "b16bb6d715f5acf0",
        },
    ),
    "adrf's dispatch and throttle check, copied (chat/rest/messages.py, chat/asyncapi.py)": Piece(
        "adrf-dispatch.md",
        {
            "adrf.views:APIView.async_dispatch": "5926f734eb685633",
            "adrf.views:APIView.check_throttles": "ace65f7d9db5d5d3",
        },
    ),
    "the resilient Redis cache (common/infra/cache.py)": Piece(
        "resilient-redis-cache.md",
        {"django.core.cache.backends.redis:RedisCache.__init__": "40131bec6169f7fa"},
        ("django.core.cache.backends.redis:RedisCache._cache",),
    ),
    "the A2A dispatcher's whole numbers (chat/a2a_rpc.py)": Piece(
        "a2a-whole-numbers.md",
        {
            "a2a.server.routes.jsonrpc_dispatcher:JsonRpcDispatcher._create_response": "8c8e71c72b8d7e0d",
            "a2a.server.routes.jsonrpc_dispatcher:JsonRpcDispatcher.handle_requests": "365d2c1e4578f20f",
        },
        ("a2a.server.routes.jsonrpc_dispatcher:JsonRpcDispatcher._create_response",),
    ),
    "the offline model's langchain hooks (agents/llm.py)": Piece(
        "offline-model-langchain-hooks.md",
        {
            "langchain_core.language_models.chat_models:BaseChatModel._serialized": "ea58b0baa85acd6b",
            "langchain_core.language_models.chat_models:BaseChatModel._get_invocation_params": "213a64073dcf6db4",
            "langchain_core.language_models.chat_models:BaseChatModel._get_ls_params": "0f99b21c2caebb16",
        },
        ("langchain_core.language_models.chat_models:BaseChatModel._serialized",),
    ),
    "the offline model's quiet call (agents/quiet_call.py)": Piece(
        "offline-model-quiet-call.md",
        {
            "langchain_core.language_models.chat_models:BaseChatModel.ainvoke": "4fbf67083db60575",
            "langchain_core.language_models.chat_models:BaseChatModel.agenerate": "f4304f6ddc44aee6",
            "langchain_core.language_models.chat_models:BaseChatModel._agenerate_with_cache": "d03a5d3c0ad649a0",
            "langchain_core.language_models.chat_models:BaseChatModel._should_stream": "7b78b2e7881968ee",
            "langchain_core.language_models.chat_models:_gen_info_and_msg_metadata": "965fbb380f052092",
            "langchain_core.callbacks.manager:_configure": "f682e52f6cc38b94",
            "langchain_core.tracers.context:_tracing_v2_is_enabled": "e5fd76e6c3b76048",
            "langchain_core.tracers.context:register_configure_hook": "90b4d8a4a03624cb",
        },
        (
            "langchain_core.language_models.chat_models:_gen_info_and_msg_metadata",
            "langchain_core.tracers.context:_tracing_v2_is_enabled",
            "langchain_core.tracers.context:_configure_hooks",
        ),
    ),
}


def resolve(path: str) -> Any:
    module, _, qualified = path.partition(":")
    found: Any = importlib.import_module(module)
    for part in qualified.split("."):
        found = getattr(found, part)
    if isinstance(found, functools.cached_property):
        return found.func
    return found.fget if isinstance(found, property) else found


def source_hash(path: str) -> str:
    return hashlib.sha256(inspect.getsource(resolve(path)).encode()).hexdigest()[:16]


@pytest.mark.parametrize("piece", PIECES, ids=[p.record.removesuffix(".md") for p in PIECES.values()])
def test_the_upstream_code_a_fast_path_copies_or_reaches_into_is_the_code_it_was_verified_against(piece):
    fence = PIECES[piece]
    changed = [path for path, recorded in fence.sources.items() if source_hash(path) != recorded]
    assert not changed, (
        f"Upstream code under {piece} changed: {', '.join(changed)}. Re-read its diff against the copy, re-run "
        f"the equivalence tests and the benchmark named in docs/decisions/{fence.record}, then record the new "
        "hashes here and the version there (or set STOCK_PATHS=true until then)."
    )


@pytest.mark.parametrize("piece", PIECES, ids=[p.record.removesuffix(".md") for p in PIECES.values()])
def test_the_private_names_a_fast_path_uses_still_exist(piece):
    fence = PIECES[piece]
    missing = []
    for path in fence.names:
        try:
            resolve(path)
        except (AttributeError, ImportError):
            missing.append(path)
    assert not missing, (
        f"Private names that {piece} uses are gone: {', '.join(missing)}. It no longer works with this version; "
        f"see docs/decisions/{fence.record} (STOCK_PATHS=true runs the library's own code)."
    )


def test_every_fenced_piece_has_its_decision_record():
    decisions = Path(__file__).resolve().parents[2] / "docs" / "decisions"
    assert [fence.record for fence in PIECES.values() if not (decisions / fence.record).is_file()] == []


if __name__ == "__main__":
    import django

    django.setup()
    for fence in PIECES.values():
        for path in fence.sources:
            print(f'"{path}": "{source_hash(path)}",')
