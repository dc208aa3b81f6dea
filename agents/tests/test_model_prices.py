"""The model price table in the admin: staff edit it, "Routing editors" do not see it (as MCP servers and flags)."""

from __future__ import annotations

import pytest

from agents.models import ModelPrice
from tests.adminkit import add_url, changelist_url, form_data

pytestmark = pytest.mark.django_db


def test_staff_add_a_price_per_million_tokens(staff_client):
    data = form_data(staff_client.get(add_url(ModelPrice)))
    data.update({"model": "gpt-4o-mini", "prompt_per_million": "0.15", "completion_per_million": "0.6"})

    assert staff_client.post(add_url(ModelPrice), data).status_code == 302

    price = ModelPrice.objects.get(model="gpt-4o-mini")
    assert (str(price.prompt_per_million), str(price.completion_per_million), price.currency) == (
        "0.150000",
        "0.600000",
        "USD",
    )


def test_a_routing_editor_can_neither_see_nor_add_prices(editor_client):
    assert editor_client.get(changelist_url(ModelPrice)).status_code == 403
    assert editor_client.get(add_url(ModelPrice)).status_code == 403
