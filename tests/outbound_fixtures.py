"""Fixtures for the tests of the outbound policy (common/outbound.py):

* ``receiver`` — a webhook receiver on loopback answering 204 (tests/webhook_receiver.py), stopped afterwards;
* ``nothing_allowed`` — the operator's allow-list emptied for the test (the suite allows loopback:
  tests/suite_environment.py); the test sets ``OUTBOUND_ALLOWED`` on what it returns to allow more.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def receiver():
    from tests.webhook_receiver import Receiver

    server = Receiver(status=204)
    yield server
    server.stop()


@pytest.fixture
def nothing_allowed(settings):
    settings.OUTBOUND_ALLOWED = []
    return settings
