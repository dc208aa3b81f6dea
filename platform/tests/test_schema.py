"""The OpenAPI schema says what the API does (docs/api.md, Errors), and /api/docs/ loads from the app itself."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from chat.schema_areas import AREAS

pytestmark = pytest.mark.django_db

OPEN_OPERATIONS = {("get", "/api/health"), ("get", "/api/health/live"), ("get", "/api/health/ready")}


@pytest.fixture
def schema() -> dict:
    response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def operations(schema: dict):
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            yield method, path, operation


def test_every_request_body_is_json_only(schema):
    bodies = {(m, p): list(op["requestBody"]["content"]) for m, p, op in operations(schema) if "requestBody" in op}
    assert ("post", "/api/gateway/message") in bodies
    assert all(types == ["application/json"] for types in bodies.values()), bodies


def test_the_chat_completion_and_the_mcp_call_describe_their_bodies(schema):
    completion = schema["paths"]["/v1/chat/completions"]["post"]
    ref = completion["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert set(body["required"]) == {"model", "messages"}
    assert {"stream", "stream_options", "user"} <= set(body["properties"])
    call = schema["paths"]["/api/debug/mcp/call/{tool}"]["post"]
    assert call["requestBody"]["content"]["application/json"]["schema"]["type"] == "object"
    assert {"400", "404"} <= set(call["responses"])


def test_every_operation_documents_the_errors_it_can_answer(schema):
    for method, path, operation in operations(schema):
        statuses = set(operation["responses"])
        if (method, path) in OPEN_OPERATIONS:
            continue
        assert {"401", "503"} <= statuses, (method, path, statuses)
        if "requestBody" in operation:
            assert {"400", "413", "415"} <= statuses, (method, path, statuses)
        if "{" in path:
            assert "404" in statuses, (method, path, statuses)


def test_the_analytics_schema_bounds_days_and_says_it_excludes_start_and_end(schema):
    days = next(p for p in schema["paths"]["/api/analytics/handoffs"]["get"]["parameters"] if p["name"] == "days")
    assert days["schema"]["oneOf"][0] == {"type": "integer", "minimum": 1, "maximum": 366}
    assert days["schema"]["oneOf"][1] == {"type": "string", "maxLength": 0}  # ?days= is read as not given
    assert "not both" in days["description"]


def test_the_swagger_ui_loads_only_from_the_apps_own_static_files(settings):
    settings.WHITENOISE_USE_FINDERS = True  # tests do not collectstatic; production serves the collected copy
    client = Client()
    html = client.get("/api/docs/").content.decode()

    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any(asset.endswith("swagger-ui-bundle.js") for asset in assets)
    assert not re.search(r"https?://", html), "no CDN or other external URL"
    for asset in assets:
        response = client.get(asset)
        assert response.status_code == 200, asset


def test_every_operation_sits_in_one_area_of_the_api_named_in_words_a_developer_knows(schema):
    areas = [name for name, _, _ in AREAS]
    tags = {(method, path): operation["tags"] for method, path, operation in operations(schema)}
    assert {(method, path): tag for (method, path), tag in tags.items() if len(tag) != 1 or tag[0] not in areas} == {}
    assert tags[("get", "/api/sessions")] == ["Sessions"]
    assert tags[("post", "/api/sessions/{conversation_key}/feedback")] == ["Feedback"]
    assert tags[("post", "/v1/chat/completions")] == ["OpenAI-compatible"]
    assert tags[("get", "/api/health")] == ["Health"]
    shown = [tag["name"] for tag in schema["tags"]]
    assert shown == [name for name in areas if name in shown]  # in the areas' order, each with its description
    assert {"Messages", "Sessions", "Feedback", "Escalations", "Analytics", "Debug", "Health"} <= set(shown)
    assert all(tag["description"] for tag in schema["tags"])


def test_no_summary_or_description_carries_a_planning_label(schema):
    labels = re.compile(r"\bseed \d{3}\b|\bW\d+ \d+/\d+\b", re.IGNORECASE)
    texts = [schema["info"].get("description", "")] + [tag["description"] for tag in schema["tags"]]
    for _, _, operation in operations(schema):
        texts += [operation.get("summary", ""), operation.get("description", "")]
        texts += [parameter.get("description", "") for parameter in operation.get("parameters", [])]
    assert [text for text in texts if labels.search(text)] == []
