"""Logs without secrets or personal data: the filters on every handler of the web server, Celery worker and beat.

* :class:`RedactFilter` — on a handler: an absolute URL (``scheme://…``: what HTTP clients — httpx, the MCP SDK's
  httpx2 — log for each request, and what their exceptions quote) loses the credentials before its host and every
  query value (:func:`common.endpoints.endpoints_masked_in`); in a path without a host (an access line) the
  credentials in the query string (``?key=``, ``token=``, ``sig=``, ``api_key=``…) become ``***``; bearer tokens
  become ``***``; personal data (CPF, CNPJ, card, e-mail, phone) becomes the labels the engine stores
  (``[PHONE]``, ``[CARD ••••1111]``), found by the engine's own detectors (:func:`common.masking.redact`).
  A line with no digit, ``@``, ``=`` or token word is let through untouched, so the per-request lines cost one scan;
  so is one whose digits make no number the detectors accept (:func:`nothing_to_mask`: an access line).
  Measured (``bench/log_redaction_cost.py``, a loaded 2-core machine): the URL step costs 2–4 µs on an HTTP
  client's request line, 9–22 µs when the URL has credentials to mask; the whole filter 23–70 µs a line with
  digits (mostly the personal-data detectors), 1–3 µs a line with nothing to look at; writing a line costs a
  handler 6–18 µs.
* :class:`TaskResultFilter` — on Celery's ``celery.app.trace`` logger: "Task X succeeded in N s" keeps its
  name, id and time and drops the task's return value (a specialist's answer and the customer's records).
* :func:`uvicorn_log_config` — uvicorn's own logging configuration with :class:`RedactFilter` on its handlers
  (``platform.serve`` passes it to every worker).

This module stands at the top of ``platform/`` (it masks what the engine's guardrails mask); the settings and the
Celery app name it by its dotted path or import it lazily.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Mapping
from typing import Any

from common.endpoints import endpoints_masked_in
from common.masking import SECRET_MASK, redact

# A query parameter whose value is a credential: key, api_key, apiKey, token, access_token, password, secret…
_SECRET_QUERY = re.compile(
    r"(?i)([?&;](?:key|api[_-]?key|(?:access|refresh|id|auth)?[_-]?token|password|passwd|secret|"
    r"client[_-]?secret|sig|signature|auth|authorization)=)[^&\s\"'#;]*"
)
# What a line needs before the detectors run: a digit or "@" (personal data), "=" (a query string), "://" (a URL)
# or a token word.
_WORTH_A_LOOK = re.compile(r"[\d@=]|://|Bearer|Basic|Token")
# What every step of :func:`redact_line` but the numbers' needs somewhere in a line: the e-mail detector an "@", the
# query's credentials an "=", the URLs "://", the bearer tokens their word, a placeholder of the engine's "[".
_MARKS = ("@", "=", "://", "[", "Bearer", "Basic", "Token")
# A number the detectors accept (phone, CPF, CNPJ, card) holds 8 digits or more and nothing but digits and these
# separators; in an ASCII line with them deleted and every digit read as 0, it is eight 0s in a row.
_NUMBER_SEPARATORS = b" .()/+-"
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_EIGHT_DIGITS = b"00000000"
# Loggers whose formatter reads the record's arguments one by one (uvicorn's AccessFormatter): cleaned in place.
_ARGUMENT_LOGGERS = frozenset({"uvicorn.access"})


def nothing_to_mask(text: str) -> bool:
    """Whether :func:`redact_line` would leave ``text`` as it is, known without running a detector: an ASCII line with
    none of :data:`_MARKS` and no run of digits and number separators holding 8 digits. The detectors' patterns consume
    only digits and :data:`_NUMBER_SEPARATORS` for a number and accept none of fewer than 8 digits (a phone 8–15, a CPF
    11, a CNPJ 14, a card 13–19), so no number is found there; the other steps need a mark. An access line
    (``127.0.0.1:51234 - "POST /v1/… HTTP/1.1" 200``: its runs hold 6, 5, 2 and 3 digits) is answered here: the
    filter takes 3.2 µs a record instead of 12.9 (in process, a record made and filtered). A line with non-ASCII text
    (other scripts' digits) goes to the detectors."""
    if not text.isascii() or any(mark in text for mark in _MARKS):
        return False
    return _EIGHT_DIGITS not in text.encode("ascii").translate(_DIGITS_AS_ZERO, _NUMBER_SEPARATORS)


def redact_line(text: str) -> str:
    """``text`` with URLs' credentials and query values, bearer tokens and personal data replaced."""
    if not _WORTH_A_LOOK.search(text) or nothing_to_mask(text):
        return text
    text = endpoints_masked_in(text)
    text = _SECRET_QUERY.sub(lambda match: match.group(1) + SECRET_MASK, text)
    return str(redact(text))


def _redact_argument(value: Any) -> Any:
    return redact_line(value) if isinstance(value, str) else value


class RedactFilter(logging.Filter):
    """Rewrites a record so that what the handler writes holds no credential and no personal data.

    The formatted message is checked as a whole (personal data may sit in an argument that is an exception); when
    it changes, the record carries the cleaned text and no arguments, except for loggers whose formatter needs
    its arguments, which are cleaned one by one. A traceback's text is cleaned too. Never drops a record.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 — a malformed record is the logging module's to report
            return True
        cleaned = redact_line(message)
        if cleaned != message:
            if record.name in _ARGUMENT_LOGGERS and record.args:
                args = record.args
                if isinstance(args, Mapping):
                    record.args = {key: _redact_argument(value) for key, value in args.items()}
                else:
                    record.args = tuple(_redact_argument(value) for value in args)
            else:
                record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_line(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_line(record.stack_info)
        return True


class TaskResultFilter(logging.Filter):
    """Celery's success line without the task's return value: ``Task name[id] succeeded in 0.5s``.

    Celery logs ``celery.app.trace.LOG_SUCCESS % context`` with the context also in ``record.data``; this
    keeps the format's first part and drops ``return_value`` from both.
    """

    SUCCESS = "Task %(name)s[%(id)s] succeeded in %(runtime)ss"

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, Mapping) and "return_value" in args and "succeeded in" in str(record.msg):
            record.msg = self.SUCCESS
            record.args = {key: value for key, value in args.items() if key != "return_value"}
            data = getattr(record, "data", None)
            if isinstance(data, Mapping):
                record.data = {key: value for key, value in data.items() if key != "return_value"}
        return True


def redact_handlers(logger: logging.Logger) -> None:
    """Put a :class:`RedactFilter` on every handler of ``logger`` that has none (Celery's signals call this)."""
    for handler in logger.handlers:
        if not any(isinstance(existing, RedactFilter) for existing in handler.filters):
            handler.addFilter(RedactFilter())


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's default logging configuration with :class:`RedactFilter` on its two handlers."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact"] = {"()": "platform.logs.RedactFilter"}
    for handler in config["handlers"].values():
        handler["filters"] = [*handler.get("filters", []), "redact"]
    return config
