"""A mark for the tests of a hand-written fast path itself (its equivalence with upstream, its own behaviour): with
``STOCK_PATHS`` on that path does not run, the library's own code does (docs/decisions/), so they are skipped.
The rest of the suite runs on both paths."""

from __future__ import annotations

import pytest
from django.conf import settings

fast_path_only = pytest.mark.skipif(
    bool(getattr(settings, "STOCK_PATHS", False)),
    reason="tests the hand-written fast path, which STOCK_PATHS replaces with the library's own code",
)
