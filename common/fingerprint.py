"""A fingerprint of JSON content: what a person reviewed, kept to check later that it is still what would be released
(a draft an approval was asked for, a rollout plan's candidate and settings)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def document_fingerprint(document: Mapping[str, Any]) -> str:
    """A short hash of a document's content, the same whatever the order of its keys: a request for approval keeps the
    draft's, and the approval is refused when the draft no longer has it (the approver must not publish what nobody
    reviewed)."""
    canonical = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
