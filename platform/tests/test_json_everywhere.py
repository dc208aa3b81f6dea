"""Everywhere a program talks to the platform — ``/api/``, ``/v1/``, ``/a2a/`` — a wrong path or method is answered in
JSON, in debug mode too (what ``scripts/start`` runs), over real HTTP against uvicorn serving ``platform.asgi``.

The crawl reads the routes from the URL resolver, so a route added under one of these prefixes is crawled too.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import httpx
import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from chat.unknown_paths import OpenAIPathNotFoundApi, PathNotFoundApi
from platform.errors import PAGE_PREFIXES

PREFIXES = ("api/", "v1/", "a2a/")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
# What a route's parameter stands for in the crawl (its converter's name, else its own).
SAMPLES = {"int": "1", "uuid": str(uuid.uuid4()), "conversation_key": "tenant_a:telecom_contas:crawl"}
UNKNOWN_PATHS = (
    "/api",
    "/api/",
    "/api/nothing",
    "/api/nothing/deeper/",
    "/api/sessions/a/b/c",
    "/v1",
    "/v1/",
    "/v1/nothing",
    "/v1/responses/nothing/deeper",
    "/a2a",
    "/a2a/",
    "/a2a/nothing/deeper",
)


@pytest.fixture
def served(asgi_server, settings) -> str:
    """The app under uvicorn with ``DEBUG`` on, as ``scripts/start`` runs it."""
    settings.DEBUG = True
    return asgi_server


@pytest.fixture
def http(served) -> Iterator[httpx.Client]:
    """A key of ``tenant_a`` that may do everything a key may (debug, preview, answer as a person)."""
    from tenants.services import api_key_create

    _, raw = api_key_create(tenant_slug="tenant_a", name="crawl", is_debug=True, can_preview=True, can_answer=True)
    with httpx.Client(base_url=served, headers={"Authorization": f"Bearer {raw}"}, timeout=30) as client:
        yield client


def routes() -> list[tuple[str, type]]:
    """Every route under :data:`PREFIXES` as a concrete path (its parameters filled in), with its view class."""
    found: list[tuple[str, type]] = []

    def walk(patterns, prefix: str) -> None:
        for entry in patterns:
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, prefix + str(entry.pattern))
            elif isinstance(entry, URLPattern):
                route = prefix + str(entry.pattern)
                view = getattr(entry.callback, "cls", None) or getattr(entry.callback, "view_class", None)
                if not route.startswith(PREFIXES) or view in (PathNotFoundApi, OpenAIPathNotFoundApi):
                    continue
                if ("/" + route).startswith(PAGE_PREFIXES):  # the API docs page is a page, for browsers
                    continue
                assert not route.startswith("^"), f"a regular expression route to crawl by hand: {route}"
                filled = re.sub(r"<(?:(\w+):)?(\w+)>", lambda m: SAMPLES.get(m[1], SAMPLES.get(m[2], "crawl")), route)
                found.append(("/" + filled, view))

    walk(get_resolver().url_patterns, "")
    return found


def allowed(view: type) -> set[str]:
    return {method.upper() for method in view.http_method_names if hasattr(view, method)} | {"OPTIONS"}


def assert_json_error(response: httpx.Response, status: int) -> dict:
    where = f"{response.request.method} {response.request.url.path}"
    assert response.status_code == status, (where, response.status_code, response.text[:200])
    assert response.headers["content-type"].startswith("application/json"), (where, response.headers["content-type"])
    error = response.json()["error"]
    if response.request.url.path.startswith("/v1"):  # OpenAI's shape
        assert set(error) == {"message", "type", "param", "code"}, (where, error)
        assert status != 404 or error["type"] == "invalid_request_error", (where, error)
    else:
        assert set(error) == {"code", "message", "fields"}, (where, error)
    return error


def test_every_route_answers_a_wrong_method_with_a_json_405_in_debug_mode(http):
    crawled = routes()
    assert {"/api/gateway/message", "/api/sessions", "/v1/chat/completions"} <= {path for path, _ in crawled}

    closed = 0
    for path, view in crawled:
        # A route closed to API keys (staff only) refuses the key before it looks at the method: 403 for every one.
        status = 405 if http.request(min(allowed(view) - {"OPTIONS"}), path).status_code != 403 else 403
        closed += status == 403
        for method in sorted(set(METHODS) - allowed(view)):
            error = assert_json_error(http.request(method, path, json={}), status)
            assert status == 403 or method in error["message"], (method, path, error)
    assert 0 < closed < len(crawled) / 4


def test_a_trailing_slash_too_many_or_too_few_is_a_json_404_naming_the_route(http):
    for path, _ in routes():
        variant = path[:-1] if path.endswith("/") else path + "/"
        error = assert_json_error(http.get(variant), 404)
        assert f"the route is {path} " in error["message"], (variant, error)
        if not variant.startswith("/v1"):
            assert error["fields"] == {"path": [error["message"]]}


def test_an_unknown_path_is_a_json_404_whatever_the_method(http):
    for path in UNKNOWN_PATHS:
        for method in METHODS:
            assert_json_error(http.request(method, path, json={}), 404)


def test_the_api_docs_page_keeps_its_redirect_from_the_path_without_its_slash(http):
    response = http.get("/api/docs")
    assert (response.status_code, response.headers["location"]) == (301, "/api/docs/")


def test_without_a_key_an_unknown_path_is_still_json(served):
    with httpx.Client(base_url=served, timeout=30) as anonymous:
        assert_json_error(anonymous.get("/v1/nothing"), 404)
        assert_json_error(anonymous.post("/v1/nothing", json={"model": "x"}), 401)  # the gate, before the body
        assert_json_error(anonymous.post("/api/health/", json={}), 401)
        assert_json_error(anonymous.get("/api/health/"), 404)
