"""The stock-path pass of the test command: for each hand-written piece (its decision record in ``docs/decisions/``),
the test files that exercise what it replaces. ``scripts/test`` runs them a second time with ``STOCK_PATHS=true``,
after the whole suite on the default path, so every commit proves the libraries' own code still passes where the
house would fall back to it. ``tests/test_stock_path_suite.py`` keeps this list in step with the records.

    python -m tests.stock_path_suite        # the files, one a line (what scripts/test passes to pytest)

Plain data, no Django: ``scripts/test`` reads it before any settings are loaded. The tests of a piece's own
behaviour (its equivalence with upstream) are marked ``tests.stock_paths.fast_path_only`` and skip themselves here.
"""

from __future__ import annotations

# The record's file name (docs/decisions/) -> the test files of the behaviour its piece takes over.
STOCK_PATH_SUITE: dict[str, tuple[str, ...]] = {
    "postgresql-backend.md": (
        "common/tests/test_statements.py",
        "conversations/tests/test_ordering.py",
        "conversations/tests/test_ordering_faults.py",
        "conversations/tests/test_graph_connections.py",
    ),
    "resilient-redis-cache.md": (
        "common/tests/test_cache.py",
        "common/tests/test_bus_outage.py",
        "tenants/tests/test_throttles.py",
        "conversations/tests/test_fanout_without_redis.py",
    ),
    "asgi-handler-and-middleware-twins.md": (
        "platform/tests/test_middleware.py",
        "platform/tests/test_errors.py",
    ),
    "adrf-dispatch.md": ("chat/tests/test_api.py",),
    "light-spans-and-otlp-encoder.md": (
        "common/tests/test_tracing_spans.py",
        "conversations/tests/test_tracing.py",
    ),
    "numba-kernels.md": (
        "routing/tests/test_examples.py",
        "common/tests/test_language.py",
    ),
    "a2a-whole-numbers.md": ("chat/tests/test_a2a.py",),
    "offline-model-langchain-hooks.md": ("agents/tests/test_llm.py",),
    "offline-model-quiet-call.md": (
        "agents/tests/test_quiet_call.py",
        "agents/tests/test_llm.py",
        "conversations/tests/test_runtime.py",
    ),
}


def stock_path_files() -> list[str]:
    """Every file of the pass, once, in the order declared."""
    return list(dict.fromkeys(path for paths in STOCK_PATH_SUITE.values() for path in paths))


if __name__ == "__main__":
    print("\n".join(stock_path_files()))
