"""Rates as the settings and the tenant page write them: ``"<count>/<period>"`` or ``"off"``."""

from __future__ import annotations

import functools

from django.core.exceptions import ImproperlyConfigured, ValidationError

from common.text import whole_number

PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600, "day": 86400}
PERIOD_NAMES = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}
OFF = {"", "off", "none", "0"}

ERROR_RATE_FORMAT = "A rate is <count>/<second|minute|hour|day> or off; got {rate!r}."


@functools.lru_cache(maxsize=64)
def rate_parse(rate: str) -> tuple[int, int] | None:
    """``"300/minute"`` → ``(300, 60)`` (requests, seconds); ``"off"`` → ``None``. Periods: s, m, h, day (DRF's
    words too: second, min, minute, hour). Raises :class:`ImproperlyConfigured`."""
    text = rate.strip().lower()
    if text in OFF:
        return None
    count, _, period = text.partition("/")
    seconds = PERIODS.get(period.strip())
    requests = whole_number(count.strip())
    if not requests or seconds is None:
        raise ImproperlyConfigured(ERROR_RATE_FORMAT.format(rate=rate))
    return requests, seconds


def rate_text(rate: tuple[int, int]) -> str:
    """``(300, 60)`` → ``"300/minute"``: how a refusal names the limit that bit."""
    count, seconds = rate
    return f"{count}/{PERIOD_NAMES[seconds]}"


def rate_validate(value: str) -> None:
    """A model field's validator: blank (the setting's default), ``off``, or a rate :func:`rate_parse` reads."""
    if not value.strip():
        return
    try:
        rate_parse(value)
    except ImproperlyConfigured:
        raise ValidationError(ERROR_RATE_FORMAT.format(rate=value), code="invalid_rate") from None
