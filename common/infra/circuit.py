"""The circuit breaker: whether to call something that may be down, from how the last calls went.

One class for every outage the platform goes on through: the database (:mod:`common.infra.outages`), Redis as the
cache, the broker, the channel layer and the throttles see it, and each remote backend of a gateway profile.

A circuit is *closed* until calls fail ``failures_to_open`` times in a row (once, by default), or until a caller
that recognises the outage *trips* it. Then it is *open* for ``pause`` seconds: callers do not call. After the pause
calls try again; one that succeeds closes the circuit, one that fails opens it for another pause. The outage is
logged once when the circuit opens and once when it closes, never per call, by the logger of the module that owns
the circuit; ``on_open`` and ``on_close`` hear of both.

Two kinds of caller ask it, because their calls differ in length:

* :meth:`allows` (and :meth:`call`) — a short call bounded by its own timeout (a Redis command, a hand-off to the
  broker), whose caller reports each outcome (:meth:`succeeded`, :meth:`failed`). After the pause every caller may
  try: a try that fails costs its caller one socket timeout, and no caller holds a trial it must end.
* :meth:`admit` — a long call (a whole request, a remote agent's answer) refused outright while the circuit is open.
  After the pause one caller at a time is let through as the *trial*, which ends with :meth:`trial_done`,
  :meth:`trial_abandoned` or a failure: a busy process letting all its requests through at once would send every
  one of them to wait on the resource again.

A circuit given a ``check`` (a function that raises while the resource is down) also checks for itself while open,
every :data:`CHECK_INTERVAL_SECONDS` from a thread of its own, and closes as soon as a check passes: a trial request
may take long to tell. Process-local: each process finds an outage out for itself.

Kernel machinery: imports no app.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

_logger = logging.getLogger(__name__)

T = TypeVar("T")

CLOSED = 0  # the admission of an ordinary call
TRIAL = 1  # the admission of the one call that tries the resource while the circuit is open
# How often an open circuit with a check tries its resource: it closes within about this long of its return.
CHECK_INTERVAL_SECONDS = 0.5


def _constant(value: T) -> Callable[[], T]:
    return lambda: value


class Circuit:
    """See the module. Thread-safe; a closed circuit costs :meth:`allows`, :meth:`admit` and :meth:`succeeded` one
    attribute read or two."""

    def __init__(
        self,
        name: str,
        *,
        pause: float | Callable[[], float],
        failures_to_open: int | Callable[[], int] = 1,
        refusal: str = "going on without it",
        check: Callable[[], None] | None = None,
        on_open: Callable[[], None] | None = None,
        on_close: Callable[[], None] | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        """``pause`` and ``failures_to_open`` may be functions, read at each use (a setting, an edited backend);
        ``refusal``: what the callers do while it is open, for the log line; ``check``: raises while the resource is
        down (run from the circuit's own thread while it is open)."""
        self.name = name
        self._pause = pause if callable(pause) else _constant(pause)
        self._failures_to_open = failures_to_open if callable(failures_to_open) else _constant(failures_to_open)
        self._refusal = refusal
        self._check = check
        self._on_open = on_open
        self._on_close = on_close
        self._logger = logger or _logger
        self._lock = threading.Lock()
        self._checker_wakeup = threading.Condition(self._lock)
        # The running checking thread's token, (pid, object): a forked child's inherited one is not its own.
        self._checker: tuple[int, object] | None = None
        self._open = False
        self._opened_at = 0.0
        self._open_until = 0.0
        self._level = logging.WARNING  # the level the opening was logged at: its closing is logged at the same
        self._failures = 0  # in a row
        self._trial_running = False
        self._trips = 0  # bumped by every trip: a trial that ends after a new trip does not close the circuit
        self._trial_trips = 0

    @property
    def is_open(self) -> bool:
        return self._open

    @property
    def failures(self) -> int:
        """Calls failed in a row since the last success."""
        return self._failures

    @property
    def pause(self) -> float:
        return self._pause()

    # -- short calls: every caller reports --------------------------------------------------------------------

    def allows(self) -> bool:
        """Whether to call now: closed, or open with its pause over (every caller may try)."""
        return not self._open or time.monotonic() >= self._open_until

    def call(self, work: Callable[[], T], fallback: T, *, down: tuple[type[BaseException], ...]) -> T:
        """``work()``, or ``fallback`` when the circuit is open or the call raises one of ``down`` (the exceptions
        that mean the service is unreachable; others propagate, the circuit untouched)."""
        if not self.allows():
            return fallback
        try:
            result = work()
        except down as exc:
            self.failed(exc)
            return fallback
        self.succeeded()
        return result

    def succeeded(self) -> None:
        """A call succeeded: the failures in a row are forgotten and an open circuit closes."""
        if not self._open and not self._failures:
            return
        with self._lock:
            self._failures = 0
            self._trial_running = False
            if self._open:
                self._close()

    def failed(self, error: BaseException | str | None = None) -> bool:
        """A call failed (``error``: why, for the log line). The circuit opens at ``failures_to_open`` failures in a
        row, and at once while it is open already or a trial runs. Returns whether it is open."""
        with self._lock:
            self._failures += 1
            if self._open or self._trial_running or self._failures >= self._failures_to_open():
                self._trip(error)
            return self._open

    def trip(self, error: BaseException | str | None = None) -> None:
        """Open the circuit now, whatever the count: the caller saw the outage (and logged it, when ``error`` is
        ``None``: the opening is then logged at INFO)."""
        with self._lock:
            self._trip(error)

    # -- long calls: one trial at a time ----------------------------------------------------------------------

    def admit(self) -> int | None:
        """``CLOSED`` or ``TRIAL`` when the call may go on (a trial must end: :meth:`trial_done`,
        :meth:`trial_abandoned`, or a failure), ``None`` when it is refused."""
        if not self._open:
            return CLOSED
        with self._lock:
            if not self._open:
                return CLOSED
            if self._trial_running or time.monotonic() < self._open_until:
                return None
            self._trial_running = True
            self._trial_trips = self._trips
            return TRIAL

    def trial_done(self) -> None:
        """The trial ended without meeting the outage: unless something tripped the circuit meanwhile, it closes."""
        with self._lock:
            if self._trial_running and self._trips == self._trial_trips:
                self._failures = 0
                self._close()
            self._trial_running = False

    def trial_abandoned(self) -> None:
        """The trial was cut off before it could tell (its client left and the server cancelled it): it proves
        nothing, so the circuit stays open and the next call after the pause is the trial."""
        with self._lock:
            self._trial_running = False

    def seconds_left(self) -> float:
        """How long the circuit may stay open, as far as it knows (a client's ``Retry-After``): to the end of the
        pause, or, for a circuit that checks for itself, to its next check."""
        left = max(self._open_until - time.monotonic(), 0.0)
        return min(left, CHECK_INTERVAL_SECONDS) if self._check is not None else left

    def reset(self) -> None:
        """Closed, as at start (tests)."""
        with self._lock:
            if self._open and self._on_close is not None:
                self._on_close()
            self._open = self._trial_running = False
            self._failures = 0
            self._open_until = 0.0
            self._checker = None
            self._checker_wakeup.notify_all()

    # -- inside the lock --------------------------------------------------------------------------------------

    def _trip(self, error: BaseException | str | None) -> None:
        now = time.monotonic()
        pause = self.pause
        if not self._open:
            self._open, self._opened_at = True, now
            if error is None:
                self._level = logging.INFO
                self._logger.info("%s unavailable: %s, trying again every %gs", self.name, self._refusal, pause)
            else:
                self._level = logging.WARNING
                why = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error
                self._logger.warning(
                    "%s unreachable (%s); %s, trying again every %gs", self.name, why, self._refusal, pause
                )
            if self._on_open is not None:
                self._on_open()
        self._trips += 1
        self._open_until = now + pause
        self._trial_running = False
        if self._check is not None and (self._checker is None or self._checker[0] != os.getpid()):
            self._checker = token = (os.getpid(), object())
            thread = threading.Thread(target=self._checking, args=(token,), name=f"{self.name} check", daemon=True)
            thread.start()

    def _close(self) -> None:
        self._open = False
        self._open_until = 0.0
        self._logger.log(self._level, "%s reachable again after %.1fs", self.name, time.monotonic() - self._opened_at)
        if self._on_close is not None:
            self._on_close()

    def _checking(self, token: tuple[int, object]) -> None:
        """While the circuit is open, check the resource every :data:`CHECK_INTERVAL_SECONDS`; close it on a pass
        (unless something tripped it meanwhile: the next check decides). Ends when the circuit closes, or is reset."""
        assert self._check is not None
        while True:
            with self._lock:
                self._checker_wakeup.wait(CHECK_INTERVAL_SECONDS)
                if self._checker is not token or not self._open:
                    if self._checker is token:
                        self._checker = None
                    return
                trips = self._trips
            try:
                self._check()
            except Exception:  # noqa: BLE001, S112 — still down: the next check tells
                continue
            with self._lock:
                if self._open and self._trips == trips:
                    self._failures = 0
                    self._close()
