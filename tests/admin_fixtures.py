"""Logged-in admin clients for the cast of ``tests/fixtures.py``.

* ``staff_client`` — the test client logged in as ``staff_user`` (a superuser);
* ``editor_client`` — the test client logged in as ``editor`` (a member of "Routing editors").

Both log in the same ``client``: a test uses one of them.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


@pytest.fixture
def editor_client(client, editor):
    client.force_login(editor)
    return client
