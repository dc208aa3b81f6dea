"""The analytics' filters: who may read which tenant, the date window, the profile, the rollout cohort, the
routing version and the handoff kinds.

:func:`analytics_filters_parse` turns query parameters (the API's, or a page's GET form) into
:class:`AnalyticsFilters`, whose :meth:`~AnalyticsFilters.selector_kwargs` are the keyword arguments every
selector of :mod:`analytics.selectors` takes. Dates are UTC calendar days.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from agents.public import ERROR_UNKNOWN_PROFILE, profile_pk
from analytics.rollups import DRAFT, NO_COHORT
from common.errors import DomainError, NotFound
from common.text import whole_number
from handoffs.models import HandoffKind
from tenants.models import Tenant, TenantRight
from tenants.public import ApiClient, TenantRights, TenantScope

ANALYTICS_PERMISSION = "analytics.view_analytics"

DEFAULT_DAYS = 30
MAX_DAYS = 366
MAX_HOUR_BUCKET_DAYS = 31
DEFAULT_RECENT_LIMIT = 20
MAX_RECENT_LIMIT = 100
BUCKETS = ("day", "hour")
KINDS = tuple(HandoffKind.values)
COHORT_CHOICES = ("multi_agent", "single_agent", NO_COHORT)
MAX_VERSION = 2**31 - 1  # the column is a PostgreSQL integer

ERROR_DAYS = f"days must be a whole number from 1 to {MAX_DAYS}."
ERROR_DATE = "Not a date; use YYYY-MM-DD."
FIRST_DATE = dt.date(1970, 1, 1)
LAST_DATE = dt.date(9998, 12, 31)
ERROR_DATE_RANGE = f"Dates run from {FIRST_DATE} to {LAST_DATE}."
ERROR_DAYS_WITH_DATES = "Give either days or start/end, not both."
ERROR_START_AFTER_END = "start must not be after end."
ERROR_RANGE_TOO_LONG = f"The range covers more than {MAX_DAYS} days."
ERROR_UNKNOWN_KIND = "Unknown kind {kind!r}; one of " + ", ".join(KINDS) + "."
ERROR_COHORT = "cohort must be multi_agent, single_agent or none (turns the flag did not decide)."
ERROR_VERSION = "version must be a published routing version's number (1, 2, ...) or draft (no published version)."
ERROR_TENANT_NOT_FOUND = "No tenant with this slug."
ERROR_BUCKET = "bucket must be day or hour."
ERROR_HOUR_BUCKET_RANGE = f"bucket=hour covers at most {MAX_HOUR_BUCKET_DAYS} days; narrow the range."
ERROR_LIMIT = f"limit must be a whole number from 1 to {MAX_RECENT_LIMIT}."
ERROR_ANALYTICS_FORBIDDEN = (
    "Reading the analytics needs the permission analytics.view_analytics (every tenant), or the right to read a "
    "tenant's conversations (a tenant grant with read_conversations, staff only): that tenant's analytics."
)


class AnalyticsForbidden(DomainError):
    status_code = 403
    code = "permission_denied"


@dataclass(frozen=True)
class AnalyticsFilters:
    """What the analytics count: ``[start, end)`` (aware UTC datetimes), one tenant, the tenants a user is granted
    (a set of ids) or all (``tenant_id`` None),
    one profile or all, the turns of one rollout cohort (multi_agent, single_agent, ``"none"``) or all, those
    served by one routing version (its number, or ``"draft"``) or all, and the handoff kinds asked for
    (``None``: each selector's default)."""

    start: dt.datetime
    end: dt.datetime
    tenant_id: TenantScope
    profile_id: int | None = None
    kinds: tuple[str, ...] | None = None
    cohort: str | None = None
    version: int | str | None = None

    def selector_kwargs(self, *, kinds: bool = False) -> dict[str, Any]:
        """Keyword arguments for a selector; ``kinds=True`` for the selectors that take ``kinds``."""
        kwargs: dict[str, Any] = {
            "start": self.start,
            "end": self.end,
            "tenant_id": self.tenant_id,
            "profile_id": self.profile_id,
            "cohort": self.cohort,
            "version": self.version,
        }
        if kinds:
            kwargs["kinds"] = self.kinds
        return kwargs


def can_view_all_tenants(user: Any) -> bool:
    """A logged-in user with ``analytics.view_analytics`` (an API key never is one)."""
    if user is None or isinstance(user, ApiClient) or not user.is_authenticated:
        return False
    return user.has_perm(ANALYTICS_PERMISSION)


def analytics_tenant_scope(user: Any, *, rights: TenantRights | None = None) -> frozenset[int] | None:
    """The tenants whose analytics the logged-in ``user`` reads: ``None`` — every tenant — with
    ``analytics.view_analytics`` or the right to read every tenant's conversations; otherwise, for staff, the tenants
    whose conversations a grant lets them read (``TenantGrant.read_conversations``); an empty set for anyone else
    (an API key reads its own tenant: :func:`analytics_filters_parse`). ``rights``: the user's, read already (one
    request's, :func:`tenants.selectors.request_tenant_rights`)."""
    if can_view_all_tenants(user):
        return None
    if user is None or isinstance(user, ApiClient) or not getattr(user, "is_staff", False):
        return frozenset()
    granted = (rights or TenantRights(user=user)).ids(TenantRight.READ)
    return None if granted is None else frozenset(granted)


def analytics_may_read(user: Any, *, rights: TenantRights | None = None) -> bool:
    """Whether the logged-in ``user`` reads the analytics of at least one tenant."""
    return analytics_tenant_scope(user, rights=rights) != frozenset()


def _param(params: Mapping[str, Any], name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str):
        return ""
    # Only whitespace (a non-breaking space too) is kept, so it is refused as what it is, not read as absent.
    return value.strip() or value


def _date(params: Mapping[str, Any], name: str, errors: dict[str, list[str]]) -> dt.date | None:
    """A date from :data:`FIRST_DATE` to :data:`LAST_DATE`: the window's arithmetic (a default start 30 days
    back, the day after the end) stays inside Python's calendar."""
    raw = _param(params, name)
    if not raw:
        return None
    try:
        day = dt.date.fromisoformat(raw)
    except ValueError:
        errors[name] = [ERROR_DATE]
        return None
    if not FIRST_DATE <= day <= LAST_DATE:
        errors[name] = [ERROR_DATE_RANGE]
        return None
    return day


def whole_number_between(raw: str, low: int, high: int) -> int | None:
    """``raw`` as a whole number from ``low`` to ``high``; ``None`` for signs, decimals, words or out of range."""
    value = whole_number(raw)
    return value if value is not None and low <= value <= high else None


def _window(params: Mapping[str, Any], errors: dict[str, list[str]], today: dt.date) -> tuple[dt.date, dt.date]:
    """The first and last day (both included). ``days=N``: the last N days, today included."""
    raw_days = _param(params, "days")
    start, end = _date(params, "start", errors), _date(params, "end", errors)
    dates_given = bool(_param(params, "start") or _param(params, "end"))
    if raw_days and dates_given:
        errors["days"] = [ERROR_DAYS_WITH_DATES]
    days = DEFAULT_DAYS
    if raw_days:
        parsed = whole_number_between(raw_days, 1, MAX_DAYS)
        if parsed is None:
            errors.setdefault("days", [ERROR_DAYS])
        else:
            days = parsed
    if not dates_given or errors.keys() & {"start", "end"}:
        return today - dt.timedelta(days=days - 1), today
    end = end or today
    start = start or end - dt.timedelta(days=DEFAULT_DAYS - 1)
    if start > end:
        errors.setdefault("start", [ERROR_START_AFTER_END])
    elif (end - start).days + 1 > MAX_DAYS:
        errors.setdefault("start", [ERROR_RANGE_TOO_LONG])
    return start, end


def _kinds(params: Mapping[str, Any], errors: dict[str, list[str]]) -> tuple[str, ...] | None:
    if hasattr(params, "getlist"):  # a QueryDict: kind=a&kind=b
        raws = params.getlist("kind")
    else:
        value = params.get("kind") or ""
        raws = list(value) if isinstance(value, list | tuple) else [value]
    kinds: list[str] = []
    for raw in raws:
        for kind in (part.strip() for part in str(raw).split(",")):
            if not kind:
                continue
            if kind not in KINDS:
                errors["kind"] = [ERROR_UNKNOWN_KIND.format(kind=kind)]
                return None
            if kind not in kinds:
                kinds.append(kind)
    return tuple(kinds) or None


def _cohort(params: Mapping[str, Any], errors: dict[str, list[str]]) -> str | None:
    raw = _param(params, "cohort")
    if raw and raw not in COHORT_CHOICES:
        errors["cohort"] = [ERROR_COHORT]
        return None
    return raw or None


def _version(params: Mapping[str, Any], errors: dict[str, list[str]]) -> int | str | None:
    raw = _param(params, "version")
    if not raw:
        return None
    if raw == DRAFT:
        return DRAFT
    number = whole_number_between(raw, 1, MAX_VERSION)
    if number is None:
        errors["version"] = [ERROR_VERSION]
    return number


def _tenant_id(params: Mapping[str, Any], user: Any) -> TenantScope:
    """The tenants the request reads: the key's own; or, for a user, the named one or every one they may read
    (:func:`analytics_tenant_scope`).

    A tenant the caller may not read answers exactly like an unknown one (404): nobody learns about other tenants.
    """
    slug = _param(params, "tenant")
    not_found = NotFound(ERROR_TENANT_NOT_FOUND, fields={"tenant": [ERROR_TENANT_NOT_FOUND]})
    if isinstance(user, ApiClient):
        if slug and slug != user.tenant.slug:
            raise not_found
        return user.tenant.pk
    readable = analytics_tenant_scope(user)
    if readable == frozenset():
        raise AnalyticsForbidden(ERROR_ANALYTICS_FORBIDDEN)
    if not slug:
        return readable
    tenant_id = Tenant.objects.filter(slug=slug).values_list("pk", flat=True).first()
    if tenant_id is None or (readable is not None and tenant_id not in readable):
        raise not_found
    return tenant_id


def analytics_filters_parse(
    *, params: Mapping[str, Any], user: Any, kinds_allowed: bool = False, today: dt.date | None = None
) -> AnalyticsFilters:
    """Read ``days`` (1..366, default 30) or ``start``/``end`` (ISO dates from :data:`FIRST_DATE` to
    :data:`LAST_DATE`, ``end`` included), ``profile``
    (agent_id), ``cohort`` (multi_agent, single_agent or none), ``version`` (a number or draft), ``kind``
    (repeated or comma-separated; only when ``kinds_allowed``) and ``tenant`` (slug).

    Raises :class:`AnalyticsForbidden` (403) for a user who may read no tenant's analytics,
    :class:`~common.errors.NotFound` naming ``tenant`` for a tenant the user may not read or that does not
    exist, and :class:`~common.errors.DomainError` (400) naming every bad field at once.
    """
    tenant_id = _tenant_id(params, user)
    errors: dict[str, list[str]] = {}
    first, last = _window(params, errors, today or timezone.now().astimezone(dt.UTC).date())
    kinds = _kinds(params, errors) if kinds_allowed else None
    cohort, version = _cohort(params, errors), _version(params, errors)
    profile_id = None
    agent_id = _param(params, "profile")
    if agent_id:
        profile_id = profile_pk(agent_id)
        if profile_id is None:
            errors["profile"] = [ERROR_UNKNOWN_PROFILE.format(profile=agent_id)]
    if errors:
        raise DomainError(f"Invalid filter: {', '.join(errors)}.", fields=errors)
    return AnalyticsFilters(
        start=dt.datetime.combine(first, dt.time.min, tzinfo=dt.UTC),
        end=dt.datetime.combine(last + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC),
        tenant_id=tenant_id,
        profile_id=profile_id,
        kinds=kinds,
        cohort=cohort,
        version=version,
    )


def bucket_parse(*, params: Mapping[str, Any], filters: AnalyticsFilters) -> str:
    """``bucket``: ``day`` (default) or ``hour`` (ranges of at most 31 days). Raises DomainError naming it."""
    bucket = _param(params, "bucket") or "day"
    if bucket not in BUCKETS:
        raise DomainError(ERROR_BUCKET, fields={"bucket": [ERROR_BUCKET]})
    if bucket == "hour" and (filters.end - filters.start).days > MAX_HOUR_BUCKET_DAYS:
        raise DomainError(ERROR_HOUR_BUCKET_RANGE, fields={"bucket": [ERROR_HOUR_BUCKET_RANGE]})
    return bucket


def limit_parse(*, params: Mapping[str, Any]) -> int:
    """``limit``: 1..100, default 20. Raises DomainError naming it."""
    raw = _param(params, "limit")
    if not raw:
        return DEFAULT_RECENT_LIMIT
    limit = whole_number_between(raw, 1, MAX_RECENT_LIMIT)
    if limit is None:
        raise DomainError(ERROR_LIMIT, fields={"limit": [ERROR_LIMIT]})
    return limit
