"""The machine room: the process machinery every app runs on, kept apart from the kernel's domain code.

What is here makes the platform fast or keeps it up, and none of it is a product feature: the circuit breaker for
every outage (:mod:`.circuit`) and the database's (:mod:`.outages`), the resilient cache (:mod:`.cache`), the
PostgreSQL backend and the statement builder (:mod:`.postgresql`, :mod:`.statements`), traces and their encoder
(:mod:`.tracing`, :mod:`.otlp`), metrics (:mod:`.metrics`), the event bus (:mod:`.bus`), the start-up heap
(:mod:`.heap`), JSON by orjson (:mod:`.fastjson`, :mod:`.renderers`), DRF's content negotiation remembering
its choices (:mod:`.negotiation`), the one call to the Kubernetes API (:mod:`.kubernetes`). The ASGI handler and
the middleware's async twins stay with the project (``platform/middleware.py``): they load the project's own middleware.

Some of it copies a library's code or reaches into its private names, each for a gain that was measured. Each such
piece is fenced: a decision record in ``docs/decisions/``, a canary (``common/tests/test_upstream_canary.py``) that
fails when the upstream code it relies on changes, and :func:`stock_paths`: with the ``STOCK_PATHS`` setting on, it
runs the library's own code instead.

Imports no app, nor the rest of ``common``.
"""

from __future__ import annotations

from django.conf import settings


def stock_paths() -> bool:
    """Whether the hand-written fast paths are switched off (the ``STOCK_PATHS`` setting): each then runs the
    library's own code. Asked where each path is chosen, mostly once: the settings (the database and cache
    backends), the ASGI application's start (its handler), tracing's set-up, the async views' classes; the statement
    builder asks per statement (:func:`common.infra.statements.insert_statement`, a setting's read)."""
    return bool(getattr(settings, "STOCK_PATHS", False))
