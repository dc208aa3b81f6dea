"""The facts remembered about one end user of one tenant: kept, read, matched and forgotten.

Every read names the tenant and the user id as the conversations keep it (a keyed pseudonym when the id is personal
data): another tenant's customer with the same id reads nothing. On PostgreSQL a turn reads them in the statement
that takes its ticket (:func:`facts_read`, :func:`facts_parse`): no round trip and no cache of its own. Elsewhere
(SQLite, a turn that waited for its ticket, the desk) they are read through the cache (:func:`facts_of`), cached
whole (``FACTS_CACHE_SECONDS``; a customer with none is cached as none), so a read finds no row to fetch when nothing
changed; every write drops the entry once it commits. A rehearsed turn (a conversation test's,
:mod:`common.rehearsal`) caches nothing: what it reads may be its own writes, which are rolled back, and the cache
would give them to the next test and to the tenant's customer of the same id.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable
from typing import Any, NamedTuple

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from common.rehearsal import rehearsal_current
from common.text import normalize
from conversations.models import CustomerFact, FactSource

FACTS_CACHE_SECONDS = 300
FACTS_KEPT_MAX = 200  # per customer: the oldest go when more are told
# What the specialists are given at most: the newest facts that fit, oldest first.
FACTS_GIVEN_MAX = 20
FACTS_GIVEN_MAX_CHARS = 1500
_MATCH_MIN_CHARS = 3
_MATCH_SKIPPED = frozenset(
    {"the", "that", "and", "for", "you", "que", "uma", "com", "para", "por", "del", "los", "las", "una", "con", "sobre"}
)


class Fact(NamedTuple):
    """A fact as the turn reads it."""

    id: int
    text: str
    agent: str  # "": told by the customer (every specialist reads it)
    created_at: dt.datetime
    expires_at: dt.datetime | None


def _key(tenant_id: int, user_id: str) -> str:
    digest = hashlib.blake2b(user_id.encode(), digest_size=12).hexdigest()
    return f"memory:facts:{tenant_id}:{digest}"


def facts_cache_forget(tenant_id: int, user_id: str) -> None:
    """Drop the customer's cached facts now and again once the transaction commits: a turn that read the rows
    meanwhile may have cached them as they were before."""
    key = _key(tenant_id, user_id)
    cache.delete(key)
    transaction.on_commit(lambda: cache.delete(key))


def facts_of(*, tenant_id: int, user_id: str, now: dt.datetime | None = None) -> tuple[Fact, ...]:
    """The customer's facts that have not expired, oldest first; ``()`` for an anonymous customer (no user id).
    One cache read; one query when the cache has no entry for them."""
    if not user_id:
        return ()
    key = _key(tenant_id, user_id)
    cached = cache.get(key)
    if cached is None:
        rows = CustomerFact.objects.filter(tenant_id=tenant_id, user_id=user_id).order_by("created_at", "id")
        cached = [
            (row["id"], row["text"], row["agent"], row["created_at"], row["expires_at"])
            for row in rows.values("id", "text", "agent", "created_at", "expires_at")
        ]
        if rehearsal_current() is None:  # a rehearsal reads its own facts, which its rollback takes away
            cache.set(key, cached, FACTS_CACHE_SECONDS)
    return _unexpired((Fact(*row) for row in cached), now)


def facts_read(*, tenant_id: int, user_id: str) -> tuple[str, list[Any]] | None:
    """``(sql, params)`` of the customer's facts as one JSON array (``null`` for none), for a statement the turn
    sends anyway (the ticket's, :mod:`conversations.turn_store`): what :func:`facts_of` reads, fresh, with no trip of
    its own. ``None`` where the database has no JSON aggregate of the kind (SQLite) or the customer is anonymous."""
    if connection.vendor != "postgresql" or not user_id:
        return None
    table = connection.ops.quote_name(CustomerFact._meta.db_table)
    sql = (
        "(SELECT json_agg(json_build_array(id, text, agent, created_at, expires_at) ORDER BY created_at, id) "  # noqa: S608  # the model's table; values are parameters
        f"FROM {table} WHERE tenant_id = %s AND user_id = %s)"
    )
    return sql, [tenant_id, user_id]


def facts_parse(read: list[Any] | None, now: dt.datetime | None = None) -> tuple[Fact, ...]:
    """The facts :func:`facts_read` brought that have not expired, oldest first."""
    timestamp = dt.datetime.fromisoformat
    facts = (
        Fact(pk, text, agent, timestamp(created), timestamp(expires) if expires else None)
        for pk, text, agent, created, expires in read or ()
    )
    return _unexpired(facts, now)


def _unexpired(facts: Iterable[Fact], now: dt.datetime | None) -> tuple[Fact, ...]:
    now = now or timezone.now()
    return tuple(fact for fact in facts if fact.expires_at is None or fact.expires_at > now)


def facts_given(facts: tuple[Fact, ...], *, agent: str, shared: bool) -> tuple[Fact, ...]:
    """What ``agent`` is given of the customer's ``facts``: all of them where the profile shares memory, else those
    the customer told and those ``agent`` saved; the newest that fit :data:`FACTS_GIVEN_MAX` and
    :data:`FACTS_GIVEN_MAX_CHARS`, oldest first."""
    readable = [fact for fact in facts if shared or not fact.agent or fact.agent == agent]
    given: list[Fact] = []
    size = 0
    for fact in reversed(readable):
        size += len(fact.text)
        if len(given) == FACTS_GIVEN_MAX or size > FACTS_GIVEN_MAX_CHARS:
            break
        given.append(fact)
    return tuple(reversed(given))


def _words(text: str) -> set[str]:
    return {word for word in normalize(text).split() if len(word) >= _MATCH_MIN_CHARS and word not in _MATCH_SKIPPED}


def facts_matching(facts: tuple[Fact, ...], words: str) -> tuple[Fact, ...]:
    """The facts ``words`` names: each of its words (case and accents ignored; short ones skipped) is in the fact;
    ``""``: the last fact told."""
    if not words:
        return facts[-1:]
    wanted = _words(words)
    if not wanted:
        return ()
    return tuple(fact for fact in facts if wanted <= _words(fact.text))


def fact_remember(
    *,
    tenant_id: int,
    user_id: str,
    text: str,
    source: str = FactSource.TOLD,
    agent: str = "",
    source_message_id: int | None = None,
    expires_at: dt.datetime | None = None,
) -> CustomerFact:
    """Keep ``text`` about the customer (masked already: the caller passes what the store may hold). A customer
    keeps at most :data:`FACTS_KEPT_MAX` facts: the oldest go."""
    with transaction.atomic():
        fact = CustomerFact.objects.create(
            tenant_id=tenant_id,
            user_id=user_id,
            text=text,
            source=source,
            agent=agent,
            source_message_id=source_message_id,
            expires_at=expires_at,
        )
        mine = CustomerFact.objects.filter(tenant_id=tenant_id, user_id=user_id)
        over = list(mine.order_by("-created_at", "-id").values_list("pk", flat=True)[FACTS_KEPT_MAX:])
        if over:
            mine.filter(pk__in=over).delete()
        facts_cache_forget(tenant_id, user_id)
    return fact


def facts_forget(*, tenant_id: int, user_id: str, ids: list[int]) -> int:
    """Forget the customer's facts ``ids`` (another customer's ids are ignored); how many went."""
    if not ids:
        return 0
    with transaction.atomic():
        deleted, _ = CustomerFact.objects.filter(Q(pk__in=ids), tenant_id=tenant_id, user_id=user_id).delete()
        facts_cache_forget(tenant_id, user_id)
    return deleted


def fact_changed(fact: CustomerFact) -> None:
    """A fact was edited, added or deleted elsewhere (the admin): the turns read it again."""
    facts_cache_forget(fact.tenant_id, fact.user_id)
