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
