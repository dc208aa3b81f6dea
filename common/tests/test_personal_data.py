"""An end user's id as the places that show it to staff may name it (:func:`common.personal_data.customer_pseudonym`):
never as written, always as a keyed pseudonym, one per id, so what concerns one customer still reads as one."""

from __future__ import annotations

import re
import uuid

from common.personal_data import customer_pseudonym, identifier_pseudonym, pseudonym_shaped

OPAQUE = ("cust-42", "8812734", str(uuid.UUID(int=7)))


def test_an_opaque_customer_id_becomes_a_stable_keyed_user_pseudonym():
    for identifier in OPAQUE:
        pseudonym = customer_pseudonym(identifier, key="k1")

        assert re.fullmatch(r"user:[0-9a-f]{20}", pseudonym), pseudonym
        assert identifier not in pseudonym
        assert customer_pseudonym(identifier, key="k1") == pseudonym  # stable: one customer's entries group
        assert customer_pseudonym(identifier, key="k2") != pseudonym  # keyed: a guess hashed without it fails
    assert len({customer_pseudonym(identifier, key="k1") for identifier in OPAQUE}) == len(OPAQUE)


def test_a_customer_id_that_is_personal_data_reads_as_the_conversation_store_keeps_it():
    for identifier in ("ana.souza@example.com", "(11) 98765-4321", "123.456.789-09"):
        assert customer_pseudonym(identifier, key="k1") == identifier_pseudonym(identifier, key="k1") != identifier


def test_a_pseudonym_is_told_from_an_id_by_its_shape():
    assert all(pseudonym_shaped(customer_pseudonym(identifier, key="k1")) for identifier in (*OPAQUE, "a@b.com"))
    assert not any(pseudonym_shaped(identifier) for identifier in (*OPAQUE, "user:cust-42", "email:3f9a", ""))


def test_a_text_without_a_digit_is_scanned_by_no_detector_of_numbers(monkeypatch):
    """Every detector but the e-mail's needs a digit (a CPF, a CNPJ, a card, a phone): a text without one is looked
    at once for a digit, not scanned by each of them; one with a digit still is, and finds what it holds."""
    from common import personal_data

    scanned: list[str] = []

    class Counting:
        def __init__(self, kind: str, pattern: re.Pattern[str]) -> None:
            self.kind, self.pattern = kind, pattern

        def finditer(self, text: str):
            scanned.append(self.kind)
            return self.pattern.finditer(text)

    counted = tuple((kind, Counting(kind, pattern), accept) for kind, pattern, accept in personal_data.DETECTORS)
    monkeypatch.setattr(personal_data, "DETECTORS", counted)

    assert personal_data.find_personal_data("Minha fatura veio alta, por quê? Falo com (um) atendente +") == []
    assert scanned == []
    assert [f.kind for f in personal_data.find_personal_data("Ligue (11) 98765-4321 ou ana@example.com")] == [
        personal_data.PHONE,
        personal_data.EMAIL,
    ]
    assert scanned == [
        personal_data.EMAIL,
        personal_data.CARD,
        personal_data.CNPJ,
        personal_data.CPF,
        personal_data.PHONE,
    ]
