"""Text folded and normalised for matching (common/text.py): the same words whatever the case, accents or marks."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from common.text import fold, normalize, whole_number

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
