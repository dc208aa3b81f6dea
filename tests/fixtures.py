"""The named cast of fixtures shared by every app's tests."""

from __future__ import annotations

import pytest

from routing import snapshot


@pytest.fixture(autouse=True)
def fresh_routing_snapshot():
    """Each test starts from the database it built, not from a snapshot of an earlier test."""
    snapshot.invalidate()
    yield
    snapshot.invalidate()
