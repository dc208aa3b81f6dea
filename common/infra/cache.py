"""Redis as a helper, not a dependency: a circuit breaker, and the shared cache built on it.

While Redis cannot be reached, chat goes on without it: the cache answers as a miss and drops writes (the
routing-configuration version is then read from the database, throttles count nothing), the supervisor's
fan-out runs in-process (:mod:`conversations.fanout`). A :class:`~common.infra.circuit.Circuit` keeps every
request from paying a connection timeout during an outage: after a failure it stays *open* (Redis is skipped) for
a few seconds, then every call may try again (a try costs its caller one socket timeout at most); the first
success closes it. An outage is logged twice per circuit, when it is first seen and when it is over, never per
request.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.core.cache.backends.filebased import FileBasedCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from common.infra.circuit import Circuit

logger = logging.getLogger(__name__)

# What an unreachable Redis raises (redis-py wraps socket errors; a Redis still loading its data is one too).
REDIS_DOWN: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError, OSError)

# Seconds a circuit stays open after a failure before calls try Redis again.
DEFAULT_PAUSE_SECONDS = 3.0


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
                _shared[key] = (client, Circuit("Redis (cache)", pause=pause, logger=logger))
            client, self.circuit = _shared[key]
        self.__dict__["_cache"] = client  # RedisCache._cache, a cached_property: the shared client

    def _call(self, work: Any, fallback: Any) -> Any:
        return self.circuit.call(work, fallback, down=REDIS_DOWN)

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call(lambda: super(ResilientRedisCache, self).add(key, value, timeout, version), False)

    def get(self, key, default=None, version=None):
        return self._call(lambda: super(ResilientRedisCache, self).get(key, default, version), default)

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        self._call(lambda: super(ResilientRedisCache, self).set(key, value, timeout, version), None)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call(lambda: super(ResilientRedisCache, self).touch(key, timeout, version), False)

    def delete(self, key, version=None):
        return self._call(lambda: super(ResilientRedisCache, self).delete(key, version), False)

    def get_many(self, keys, version=None):
        return self._call(lambda: super(ResilientRedisCache, self).get_many(keys, version), {})

    def has_key(self, key, version=None):
        return self._call(lambda: super(ResilientRedisCache, self).has_key(key, version), False)

    def incr(self, key, delta=1, version=None):
        missing = object()
        value = self._call(lambda: super(ResilientRedisCache, self).incr(key, delta, version), missing)
        if value is missing:
            raise ValueError(f"Key '{key}' not found (the cache is unreachable)")
        return value

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        keys = list(data)
        return self._call(lambda: super(ResilientRedisCache, self).set_many(data, timeout, version), keys)

    def delete_many(self, keys, version=None):
        self._call(lambda: super(ResilientRedisCache, self).delete_many(keys, version), None)

    def clear(self):
        self._call(lambda: super(ResilientRedisCache, self).clear(), None)


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
