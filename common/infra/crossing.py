"""A synchronous function called from the event loop on the request's thread: asgiref's ``sync_to_async``, made once
per function.

``sync_to_async(func)`` builds a wrapper at every call site it is written at (``functools.update_wrapper``, two
coroutine-function checks: about 4 µs), and the message path wrote it inline, so every message built the turn's write
again, and every searched message its search. :func:`on_the_request_thread` keeps one wrapper a function: asgiref's
wrapper holds only the function and its options, and each call works out its thread and context anew, as the
``@sync_to_async`` decorator's single wrapper does. Keyed by the function object, so a module-level function patched
in a test gets a wrapper of its own; for the functions of modules and classes only (a bound method or a closure would
be kept for good).

Pure: imports no app.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async

P = ParamSpec("P")
R = TypeVar("R")


_MADE: dict[Callable[..., Any], Callable[..., Awaitable[Any]]] = {}


def on_the_request_thread(func: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """``sync_to_async(func)`` (thread-sensitive: the request's own thread), the same wrapper at every call. Two
    threads asking at once may each make one; either serves."""
    made = _MADE.get(func)
    if made is None:
        made = _MADE[func] = sync_to_async(func)
    return made
