"""The machine room: the process machinery every app runs on, kept apart from the kernel's domain code.

Some of it copies a library's code or reaches into its private names, each for a gain that was measured. Each such
piece is fenced: a decision record in ``docs/decisions/``, a canary test that fails when the upstream code it relies
on changes, and :func:`stock_paths`: with the ``STOCK_PATHS`` setting on, it runs the library's own code instead.

Imports no app.
"""

from __future__ import annotations

from django.conf import settings


def stock_paths() -> bool:
    """Whether the hand-written fast paths are switched off (the ``STOCK_PATHS`` setting): each then runs the
    library's own code. Asked where each path is chosen, once, not per call: the settings (the database and cache
    backends), the ASGI application's start (its handler), tracing's set-up, the async views' classes."""
    return bool(getattr(settings, "STOCK_PATHS", False))
