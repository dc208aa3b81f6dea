"""Addresses shown without their credentials, and a masked address sent back keeping them (common/endpoints.py)."""

from __future__ import annotations

import re

import pytest

from common.endpoints import (
    ERROR_MASK_ELSEWHERE,
    ERROR_MASK_NOTHING_STORED,
    endpoint_mask,
    endpoint_unmask,
    endpoints_masked_in,
)

STORED = "https://bot:s3cret@crm.example:8443/mcp?token=t0k&region=eu&sk-bare"


@pytest.mark.parametrize(
    ("address", "shown"),
    [
        (STORED, "https://***@crm.example:8443/mcp?token=***&region=***&***"),
        ("http://127.0.0.1:8100/mcp", "http://127.0.0.1:8100/mcp"),
        ("http://user:p%40ss@[::1]:8100/mcp#access_token=x", "http://***@[::1]:8100/mcp"),
        ("postgres://postgres:pw@db:5432/platform", "postgres://***@db:5432/platform"),
        ("http://***@h/p?token=***", "http://***@h/p?token=***"),
        ("", ""),
        ("None", "None"),
        ("http://h:notaport/", "***"),
    ],
)
def test_an_address_is_shown_with_its_host_and_path_but_no_credential(address, shown):
    assert endpoint_mask(address) == shown


def test_every_url_in_a_text_is_masked_and_the_rest_left_as_it_is():
    line = "HTTP Request: POST http://u:pw@127.0.0.1:9/hook?sig=abc \"HTTP/1.1 200 OK\" then 'ws://h/x?key=k'."

    assert endpoints_masked_in(line) == (
        "HTTP Request: POST http://***@127.0.0.1:9/hook?sig=*** \"HTTP/1.1 200 OK\" then 'ws://h/x?key=***'."
    )
    assert endpoints_masked_in("no address here, a=1") == "no address here, a=1"


def test_the_masked_form_sent_back_keeps_the_stored_address():
    assert endpoint_unmask(endpoint_mask(STORED), STORED) == STORED


def test_a_new_path_and_parameter_keep_the_masked_credentials_of_the_same_host():
    submitted = "https://***@crm.example:8443/v2/mcp?token=***&region=us&sk-bare-new"

    assert (
        endpoint_unmask(submitted, STORED)
        == "https://bot:s3cret@crm.example:8443/v2/mcp?token=t0k&region=us&sk-bare-new"
    )


def test_an_address_without_a_mask_replaces_the_stored_one():
    assert endpoint_unmask("https://new:pw@crm.example/mcp", STORED) == "https://new:pw@crm.example/mcp"
    assert endpoint_unmask("", STORED) == ""


@pytest.mark.parametrize(
    ("submitted", "error"),
    [
        ("https://***@evil.example:8443/mcp?token=***", ERROR_MASK_ELSEWHERE),
        ("http://***@crm.example:8443/mcp", ERROR_MASK_ELSEWHERE),
        ("https://***@crm.example:9999/mcp", ERROR_MASK_ELSEWHERE),
        ("https://crm.example:8443/mcp?password=***", ERROR_MASK_NOTHING_STORED),
        ("https://bot:***@crm.example:8443/mcp", ERROR_MASK_NOTHING_STORED),
    ],
)
def test_a_masked_secret_never_follows_an_address_elsewhere_nor_stands_for_nothing(submitted, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        endpoint_unmask(submitted, STORED)


def test_a_mask_on_a_new_address_is_refused():
    with pytest.raises(ValueError, match="Nothing is stored"):
        endpoint_unmask("https://***@crm.example/mcp", "")
