"""Text normalisation shared by keyword storage, the compiled matcher and previews."""

from __future__ import annotations

import re
import unicodedata

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalize(text: str) -> str:
    """Fold case and accents and collapse everything that is not a letter or digit.

    ``"COBRANÇA!"`` → ``"cobranca"``; ``"Segunda-via"`` → ``"segunda via"``. Word
    boundaries survive as single spaces, so a phrase keyword matches a phrase and
    ``"conta"`` never matches inside ``"contato"``.
    """
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _NON_WORD.sub(" ", stripped.casefold()).strip()
