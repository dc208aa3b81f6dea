"""Redis as a helper, not a dependency: a circuit breaker, and the shared cache built on it.

While Redis cannot be reached, chat goes on without it: the cache answers as a miss and drops writes (the
routing-configuration version is then read from the database, throttles count nothing), the supervisor's
fan-out runs in-process (:mod:`conversations.fanout`). A :class:`Circuit` keeps every request from paying a
connection timeout during an outage: after a failure it stays *open* (Redis is skipped) for a few seconds,
then lets calls try again; the first success closes it. An outage is logged twice per circuit, when it is
first seen and when it is over, never per request.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)

T = TypeVar("T")

# What an unreachable Redis raises (redis-py wraps socket errors; a Redis still loading its data is one too).
REDIS_DOWN: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError, OSError)

# Seconds a circuit stays open after a failure before calls try Redis again.
DEFAULT_PAUSE_SECONDS = 3.0


class Circuit:
    """Whether to try a service now, from how the last tries went. Thread-safe.

    :meth:`allows` is false for ``pause`` seconds after :meth:`failed`; :meth:`succeeded` closes the circuit.
    """

    def __init__(self, name: str, *, pause: float = DEFAULT_PAUSE_SECONDS) -> None:
        self.name = name
        self.pause = pause
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._retry_at = 0.0

    @property
    def down(self) -> bool:
        """Whether the last try failed (the service is taken as unreachable)."""
        return self._down_since is not None

    def allows(self) -> bool:
        return time.monotonic() >= self._retry_at

    def failed(self, error: BaseException) -> None:
        with self._lock:
            first = self._down_since is None
            now = time.monotonic()
            if first:
                self._down_since = now
            self._retry_at = now + self.pause
        if first:
            logger.warning(
                "%s unreachable (%s: %s); going on without it, trying again every %gs",
                self.name,
                type(error).__name__,
                error,
                self.pause,
            )

    def succeeded(self) -> None:
        if self._down_since is None:
            return
        with self._lock:
            since, self._down_since, self._retry_at = self._down_since, None, 0.0
        if since is not None:
            logger.warning("%s reachable again after %.1fs", self.name, time.monotonic() - since)

    def call(self, work: Callable[[], T], fallback: T) -> T:
        """``work()``, or ``fallback`` when the circuit is open or the call finds the service unreachable."""
        if not self.allows():
            return fallback
        try:
            result = work()
        except REDIS_DOWN as exc:
            self.failed(exc)
            return fallback
        self.succeeded()
        return result


# The client (with its connection pool) and the circuit of each configured Redis cache, one per process: see
# ResilientRedisCache.
_shared: dict[tuple[str, str, float], tuple[Any, Circuit]] = {}
_shared_lock = threading.Lock()


class ResilientRedisCache(RedisCache):
    """Django's Redis cache that answers as a miss (and drops writes) while Redis cannot be reached.

    ``OPTIONS["outage_pause"]``: seconds to skip Redis after a failure (:class:`Circuit`). The other options go
    to redis-py's connection pool as usual; set a short ``socket_connect_timeout`` and ``socket_timeout`` so a
    host that does not answer at all costs a call little. ``incr`` of an unreachable cache raises
    ``ValueError``, as for a missing key.

    Django builds a cache object per thread, and under ASGI per request (each runs in a context of its own): with
    its own client that was a Redis connection opened and dropped per request, and a circuit that forgot an outage
    from one request to the next. Every object of one configuration shares the process's client (redis-py's pool
    is thread-safe, and starts afresh in a forked child) and circuit.
    """

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        options = dict(params.get("OPTIONS") or {})
        pause = float(options.pop("outage_pause", DEFAULT_PAUSE_SECONDS))
        super().__init__(server, {**params, "OPTIONS": options})
        django: Any = self  # RedisCache's own attributes, which django-stubs does not declare
        key = (repr(django._servers), repr(sorted(django._options.items())), pause)
        with _shared_lock:
            if key not in _shared:
                client = django._class(django._servers, **django._options)
                _shared[key] = (client, Circuit("Redis (cache)", pause=pause))
            client, self.circuit = _shared[key]
        self.__dict__["_cache"] = client  # RedisCache._cache, a cached_property: the shared client

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self.circuit.call(lambda: super(ResilientRedisCache, self).add(key, value, timeout, version), False)

    def get(self, key, default=None, version=None):
        return self.circuit.call(lambda: super(ResilientRedisCache, self).get(key, default, version), default)

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        self.circuit.call(lambda: super(ResilientRedisCache, self).set(key, value, timeout, version), None)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        return self.circuit.call(lambda: super(ResilientRedisCache, self).touch(key, timeout, version), False)

    def delete(self, key, version=None):
        return self.circuit.call(lambda: super(ResilientRedisCache, self).delete(key, version), False)

    def get_many(self, keys, version=None):
        return self.circuit.call(lambda: super(ResilientRedisCache, self).get_many(keys, version), {})

    def has_key(self, key, version=None):
        return self.circuit.call(lambda: super(ResilientRedisCache, self).has_key(key, version), False)

    def incr(self, key, delta=1, version=None):
        missing = object()
        value = self.circuit.call(lambda: super(ResilientRedisCache, self).incr(key, delta, version), missing)
        if value is missing:
            raise ValueError(f"Key '{key}' not found (the cache is unreachable)")
        return value

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        keys = list(data)
        return self.circuit.call(lambda: super(ResilientRedisCache, self).set_many(data, timeout, version), keys)

    def delete_many(self, keys, version=None):
        self.circuit.call(lambda: super(ResilientRedisCache, self).delete_many(keys, version), None)

    def clear(self):
        self.circuit.call(lambda: super(ResilientRedisCache, self).clear(), None)


_made_folders: set[str] = set()


class FileCache(FileBasedCache):
    """Django's file cache (the quick start's, without Redis), its folder made once per process: Django builds a
    cache object per request under ASGI, and each made sure of its folder with a few system calls. A folder removed
    meanwhile is made again by the next write, as by Django's."""

    def __init__(self, dir: str, params: dict[str, Any]) -> None:
        folder = os.path.abspath(dir)
        if folder not in _made_folders:
            super().__init__(dir, params)
            _made_folders.add(folder)
            return
        BaseCache.__init__(self, params)
        self._dir = folder
