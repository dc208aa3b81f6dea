"""Personal data in a text — CPF, CNPJ, e-mail, phone, payment card — found by :func:`find_personal_data`, and a
user id as it may be stored (:func:`identifier_pseudonym`) and shown to staff (:func:`customer_pseudonym`). Pure
functions over text, no ORM, no settings: the conversation store's masking (:mod:`conversations.guardrails`) and the
field history (:mod:`common.history.registry`) read personal data the same way.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass

CPF = "cpf"
CNPJ = "cnpj"
EMAIL = "email"
PHONE = "phone"
CARD = "card"
PERSONAL_DATA_KINDS = (CPF, CNPJ, EMAIL, PHONE, CARD)
USER = "user"  # the pseudonym's kind for an id that holds no personal data (cust-42, 8812734, a UUID)

# A value must stand on its own: not glued to a word (INV001, RL123456789BR), an
# id's dash (PAG-7001), a decimal or thousands separator (1.234,56) or a date.
_START = r"(?<![\w.,/@+-])"
_END = r"(?![\w@]|[.,/-]\d)"


def _digits(value: str) -> str:
    return "".join(ch for ch in value if ch.isdigit())


def cpf_is_valid(value: str) -> bool:
    """Whether ``value`` (punctuated or not) is a CPF with correct check digits."""
    digits = _digits(value)
    if len(digits) != 11 or len(set(digits)) == 1:
        return False
    for size in (9, 10):
        total = sum(int(digits[i]) * (size + 1 - i) for i in range(size))
        if (total * 10) % 11 % 10 != int(digits[size]):
            return False
    return True


def cnpj_is_valid(value: str) -> bool:
    """Whether ``value`` (punctuated or not) is a CNPJ with correct check digits."""
    digits = _digits(value)
    if len(digits) != 14 or len(set(digits)) == 1:
        return False
    weights = [5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2]
    for size, factors in ((12, weights), (13, [6, *weights])):
        remainder = sum(int(d) * w for d, w in zip(digits[:size], factors, strict=True)) % 11
        if (0 if remainder < 2 else 11 - remainder) != int(digits[size]):
            return False
    return True


def luhn_is_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def card_is_valid(value: str) -> bool:
    """13–19 digits, a card network's first digit (2–6; 13 digits only for Visa's 4), Luhn-valid."""
    digits = _digits(value)
    if not 13 <= len(digits) <= 19 or digits[0] not in "23456":
        return False
    if len(digits) == 13 and digits[0] != "4":
        return False
    return luhn_is_valid(digits)


def _phone_is_valid(value: str) -> bool:
    return 8 <= len(_digits(value)) <= 15


_DDD = r"[1-9][1-9]"
# A look-ahead at the first character, before the look-behind: a position that cannot start a match is left at
# once instead of trying the look-behind and every alternative at each character (with the e-mail scan skipped
# for a text without "@", a 500-character answer is scanned in 35 µs instead of 113 µs).
_DIGIT_FIRST = r"(?=\d)"
_A_DIGIT = re.compile(r"\d")  # what every detector but the e-mail's needs somewhere in the text

# Detection order matters: an earlier detector claims its text first, so an
# e-mail's digits are never a phone and a valid CPF is not read as a phone.
DETECTORS: tuple[tuple[str, re.Pattern[str], Callable[[str], bool]], ...] = (
    (EMAIL, re.compile(r"(?<![\w.%+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}(?![\w@])"), lambda _v: True),
    (
        CARD,
        re.compile(
            _DIGIT_FIRST + _START + r"(?:\d{4}(?:[ -]\d{4}){3}[ -]\d{1,3}|\d{4}(?:[ -]\d{4}){2}[ -]\d{1,7}"
            r"|\d{4}[ -]\d{6}[ -]\d{4,5}|\d{13,19})" + _END
        ),
        card_is_valid,
    ),
    (CNPJ, re.compile(_DIGIT_FIRST + _START + r"(?:\d{2}\.\d{3}\.\d{3}/\d{4}-\d{2}|\d{14})" + _END), cnpj_is_valid),
    (CPF, re.compile(_DIGIT_FIRST + _START + r"(?:\d{3}\.\d{3}\.\d{3}-\d{2}|\d{11})" + _END), cpf_is_valid),
    (
        PHONE,
        re.compile(
            r"(?=[\d(+])(?:"  # a phone starts with a digit, "(" or "+": other positions skip the seven alternatives
            + "|".join(
                (
                    # Brazil with country code: +55 11 99999-9999, +55 (11) 3333-4444, +5511999999999
                    rf"(?<![\w.,/@+-])\+55[ .-]?(?:\({_DDD}\)|{_DDD})[ .-]?9?\d{{4}}[ .-]?\d{{4}}{_END}",
                    # msisdn: 5511999999999 (mobile) or 551133334444 (landline)
                    rf"{_START}55{_DDD}(?:9\d{{8}}|[2-5]\d{{7}}){_END}",
                    # national, formatted: (11) 99999-9999, 11 99999-9999, (11)3333-4444
                    rf"{_START}(?:\({_DDD}\)[ ]?|{_DDD}[ -])9?\d{{4}}[ -]?\d{{4}}{_END}",
                    # national, digits only: 11999999999 (mobile), 1133334444 (landline)
                    rf"{_START}{_DDD}(?:9\d{{8}}|[2-5]\d{{7}}){_END}",
                    # mobile without area code: 99999-9999
                    rf"{_START}9\d{{4}}-\d{{4}}{_END}",
                    # North American: (415) 555-2671, 415-555-2671
                    rf"{_START}(?:\(\d{{3}}\)[ ]?|\d{{3}}-)\d{{3}}-\d{{4}}{_END}",
                    # any other international number: +44 20 7946 0958, +1 415 555 2671
                    rf"(?<![\w.,/@+-])\+[1-9]\d{{0,2}}(?:[ .-]?\(?\d{{1,4}}\)?){{2,6}}{_END}",
                )
            )
            + ")"
        ),
        _phone_is_valid,
    ),
)


@dataclass(frozen=True)
class Finding:
    """One piece of personal data in a text: its kind, where it is, and the value."""

    kind: str
    start: int
    end: int
    value: str


def find_personal_data(text: str) -> list[Finding]:
    """Every CPF, CNPJ, e-mail, phone and card number in ``text``, in reading order.

    CPF, CNPJ and card numbers count only when their check digits are valid, so a
    random 11-digit number, an order id (``P100``), an invoice (``INV001``), a date,
    an amount (``R$ 1.234,56``) or a short number is left alone.
    """
    if not text:
        return []
    # Only an e-mail's scan may find something in a text without a digit: one look for a digit spares the others.
    numbers = _A_DIGIT.search(text) is not None
    taken: list[Finding] = []
    for kind, pattern, accept in DETECTORS:
        if ("@" not in text) if kind == EMAIL else not numbers:  # a scan costs more than these looks
            continue
        for match in pattern.finditer(text):
            start, end = match.span()
            if not accept(match.group()):
                continue
            if any(start < other.end and other.start < end for other in taken):
                continue
            taken.append(Finding(kind=kind, start=start, end=end, value=match.group()))
    return sorted(taken, key=lambda finding: finding.start)


def value_identity(kind: str, value: str) -> str:
    """What makes two spellings the same value (``123.456.789-09`` = ``12345678909``)."""
    if kind == EMAIL:
        return value.casefold()
    digits = _digits(value)
    if kind == PHONE and len(digits) in (12, 13) and digits.startswith("55"):
        return digits[2:]  # +55 11 99999-9999 and (11) 99999-9999 are one line
    return digits


def redact_label(kind: str, value: str) -> str:
    """The irreversible label stored instead of a value: ``[CPF]``, ``[CARD ••••1111]``."""
    if kind == CARD:
        return f"[CARD ••••{_digits(value)[-4:]}]"
    return f"[{kind.upper()}]"


def identifier_pseudonym(identifier: str, *, key: str) -> str:
    """``identifier`` as it may be stored: unchanged, unless it holds personal data (an e-mail, phone or CPF used
    as a user id); then ``<kind>:<20 hex digits>`` (``email:3f9a1c…``), an HMAC-SHA256 of the whole identifier
    under ``key``. Stable for one identifier and key, so one customer's conversations still group; keyed, so
    hashing guesses without the key does not reverse it."""
    findings = find_personal_data(identifier)
    if not findings:
        return identifier
    return f"{findings[0].kind}:{_keyed_digest(identifier, key)}"


def customer_pseudonym(identifier: str, *, key: str) -> str:
    """``identifier`` — an end user's id — as staff may read it wherever they are not entitled to the customer: never
    as written. An id that is personal data reads as :func:`identifier_pseudonym` stores it (``email:3f9a1c…``); any
    other (``cust-42``, ``8812734``, a UUID) as ``user:<20 hex digits>``, the same HMAC-SHA256 of the whole id
    under ``key``. Stable for one id and key, so what concerns one customer still reads as one; keyed, so an id
    guessed and hashed without the key does not match."""
    findings = find_personal_data(identifier)
    return f"{findings[0].kind if findings else USER}:{_keyed_digest(identifier, key)}"


_PSEUDONYM = re.compile(rf"(?:{'|'.join((*PERSONAL_DATA_KINDS, USER))}):[0-9a-f]{{20}}")


def pseudonym_shaped(value: str) -> bool:
    """Whether ``value`` reads as a pseudonym these functions make (``user:`` or a kind, then 20 hex digits)."""
    return _PSEUDONYM.fullmatch(value) is not None


def _keyed_digest(identifier: str, key: str) -> str:
    return hmac.new(key.encode(), identifier.encode(), hashlib.sha256).hexdigest()[:20]
