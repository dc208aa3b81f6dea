"""Text folded and normalised for matching (common/text.py): the same words whatever the case, accents or marks."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from common import text as text_module
from common.text import fold, identifiers, normalize, whole_number

# What normalising meant before the byte table and the marks' regular expression: decomposed, every combining mark
# of the Basic Multilingual Plane dropped, case folded, every run of non-letters and non-digits one space.
_MARKS = dict.fromkeys(cp for cp in range(0x10000) if unicodedata.combining(chr(cp)))
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def reference(text: str) -> str:
    folded = text.casefold() if text.isascii() else unicodedata.normalize("NFKD", text).translate(_MARKS).casefold()
    return _NON_WORD.sub(" ", folded).strip()


def test_case_accents_and_punctuation_are_folded_and_words_kept_apart():
    assert normalize("COBRANÇA!") == "cobranca"
    assert normalize("Segunda-via  do_boleto") == "segunda via do boleto"
    assert normalize("Straße ﬁnal Ｆｕｌｌ") == "strasse final full"
    assert fold("Ação!") == "acao!"


texts = st.text(
    st.one_of(
        st.characters(codec="ascii"),
        st.sampled_from("áéíóúãõçâêñüÁÇÑ ßﬁＦ\u0301\u0327"),
        st.characters(max_codepoint=0xFFFF, blacklist_categories=["Cs"]),
        st.characters(blacklist_categories=["Cs"]),
    ),
    max_size=40,
)


@settings(max_examples=3000, deadline=None)
@given(texts)
def test_it_normalises_every_text_as_the_reference_does(text):
    normalize.cache_clear()
    assert normalize(text) == reference(text)


def test_a_whole_number_is_ascii_digits_only():
    assert [whole_number(raw) for raw in ("0", "42", "007")] == [0, 42, 7]
    assert [whole_number(raw) for raw in ("", "-3", "+3", "4.0", " 4", "thirty", "²", "٣", "³4")] == [None] * 9


def test_a_text_without_a_digit_is_never_scanned_for_identifiers(monkeypatch):
    """The offline model reads each customer message of a turn's history for identifiers, once per tool it may call:
    a text with no digit holds none, and costs one search for a digit instead of the identifier scan."""
    pattern = text_module._IDENTIFIER
    scanned: list[str] = []

    class Counted:
        def finditer(self, value: str):
            scanned.append(value)
            return pattern.finditer(value)

    monkeypatch.setattr(text_module, "_IDENTIFIER", Counted())

    assert identifiers("Quero contestar uma cobrança que não reconheço na fatura") == []
    assert identifiers("Meu pedido P200 veio errado, não o P100") == ["P200"]
    assert scanned == ["Meu pedido P200 veio errado, não o P100"]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("aP1٣ -_ção,é")))
def test_identifiers_are_the_full_scans_whatever_the_text(value):
    scanned = [
        found.group(0)
        for found in text_module._IDENTIFIER.finditer(value)
        if not text_module._DENIED.search(value[: found.start()])
    ]
    assert identifiers(value) == scanned
