"""The remembering content negotiation chooses as DRF's does, and parses a request like one it has answered no more."""

from __future__ import annotations

import pytest
from django.http import Http404
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory
from rest_framework.utils import mediatypes

from common.infra import negotiation
from common.infra.negotiation import LONGEST_HEADER, REMEMBERED, RememberingNegotiation
from common.infra.renderers import JSONRenderer

ASKED = [
    (None, ""),
    ("*/*", ""),
    ("application/json", ""),
    ("application/json; indent=4", ""),
    ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", ""),
    ("application/*;q=0.5, text/html", ""),
    ("text/*", ""),
    ("*/*", "json"),
    ("*/*", "api"),
    ("application/json; q=0.1, text/html; q=0.2", "json"),
]
REFUSED = [("image/png", "", NotAcceptable), ("*/*", "xml", Http404), ("text/html", "json", NotAcceptable)]


def request_asking(accept: str | None, format_asked: str) -> Request:
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    return Request(APIRequestFactory().get("/api/agents", {"format": format_asked} if format_asked else {}, **headers))


def chosen(negotiator, accept: str | None, format_asked: str) -> tuple[type, str]:
    renderers = [JSONRenderer(), BrowsableAPIRenderer()]
    renderer, media_type = negotiator.select_renderer(request_asking(accept, format_asked), renderers)
    assert any(renderer is candidate for candidate in renderers)  # one of this request's renderers
    return type(renderer), media_type


@pytest.fixture(autouse=True)
def nothing_remembered():
    negotiation._chosen.clear()
    yield
    negotiation._chosen.clear()


def test_the_remembering_negotiation_chooses_the_renderer_and_media_type_drfs_chooses_first_and_again():
    expected = [chosen(DefaultContentNegotiation(), accept, format_asked) for accept, format_asked in ASKED]

    for _ in range(2):  # the second pass from what the first kept
        assert [chosen(RememberingNegotiation(), accept, format_asked) for accept, format_asked in ASKED] == expected


@pytest.mark.parametrize(("accept", "format_asked", "refusal"), REFUSED)
def test_a_request_no_renderer_suits_is_refused_as_drf_refuses_it_each_time_and_nothing_is_kept(
    accept, format_asked, refusal
):
    for _ in range(2):
        with pytest.raises(refusal):
            chosen(RememberingNegotiation(), accept, format_asked)
    assert negotiation._chosen == {}


def test_a_request_like_one_answered_parses_no_media_type(monkeypatch):
    parsed: list[str] = []

    class Counted(mediatypes._MediaType):
        def __init__(self, text: str) -> None:
            parsed.append(text)
            super().__init__(text)

    monkeypatch.setattr("rest_framework.negotiation._MediaType", Counted)
    indented = "application/json; indent=4"
    chosen(RememberingNegotiation(), indented, "")
    first = len(parsed)

    assert chosen(RememberingNegotiation(), indented, "") == (JSONRenderer, indented)
    assert first > 0
    assert len(parsed) == first


def test_what_is_remembered_stays_bounded_whatever_headers_clients_send():
    for number in range(REMEMBERED * 3):
        chosen(RememberingNegotiation(), f"application/json; v={number}", "")
    chosen(RememberingNegotiation(), "application/json, " + "x" * LONGEST_HEADER, "")

    assert 0 < len(negotiation._chosen) <= REMEMBERED
    assert not any(len(key[0] or "") > LONGEST_HEADER for key in negotiation._chosen)
