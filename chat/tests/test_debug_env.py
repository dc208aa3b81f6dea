"""``GET /api/debug/env``: the effective configuration for debug clients, no secret in it."""

from __future__ import annotations

import json

import pytest

from agents.models import McpServer
from common.errors import ERROR_DEBUG_FORBIDDEN

pytestmark = pytest.mark.django_db

SECRETS = {
    "OPENAI_API_KEY": "sk-platform-0a1b2c",
    "ROUTER_LLM_API_KEY": "sk-router-3d4e5f",
    "ROUTER_EMBEDDINGS_API_KEY": "sk-embed-6a7b8c",
    "KNOWLEDGE_EMBEDDINGS_API_KEY": "sk-knowledge-4e5f6a",
    "EVENTS_WEBHOOK_SECRET": "whsec-9d8e7f",
    "ROLLOUT_WEBHOOK_SECRET": "rollout-secret-5c4b",
    "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20b3RlbC11c2VyOm90ZWwtcHc=",
}
PASSWORDS = ("redis-pw-1f2e", "broker-pw-3c4d", "db-pw-5e6f", "mcp-pw-7a8b", "mcp-token-9c0d", "query-key-1a2b")
PROFILE_KEY = "sk-profile-2b3c4d"


@pytest.fixture
def configured(settings, telecom, monkeypatch):
    for name, value in SECRETS.items():
        setattr(settings, name, value)
    settings.OPENAI_BASE_URL = "https://llm.example.com/v1?api_key=query-key-1a2b"
    settings.LLM_MODEL = "gpt-4o-mini"
    settings.ROUTER_LLM_BASE_URL = "https://router.example.com/v1"
    settings.ROUTER_LLM_MODEL = "router-small"
    settings.ROUTING_MODE = "supervisor"
    settings.REDIS_URL = "redis://:redis-pw-1f2e@cache.internal:6379/0"
    settings.CELERY_BROKER_URL = "redis://worker:broker-pw-3c4d@broker.internal:6379/1"
    settings.EVENTS_WEBHOOK_URL = "https://hooks.example.com/events"
    settings.ROUTER_EMBEDDINGS_QUERY_PREFIX = settings.ROUTER_EMBEDDINGS_DOCUMENT_PREFIX = "query: "
    settings.KNOWLEDGE_EMBEDDINGS_BASE_URL = "https://vectors.example.com/v1"
    settings.KNOWLEDGE_EMBEDDINGS_MODEL = "multilingual-e5-small"
    settings.KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX = "query: "
    settings.KNOWLEDGE_EMBEDDINGS_DOCUMENT_PREFIX = "passage: "
    monkeypatch.setitem(settings.DATABASES["default"], "PASSWORD", "db-pw-5e6f")
    McpServer.objects.filter(name="telecom").update(
        endpoint="https://bot:mcp-pw-7a8b@mcp.example.com/mcp?token=mcp-token-9c0d"
    )
    telecom.llm_base_url = "https://billing-llm.example.com/v1"
    telecom.llm_model = "billing-model"
    telecom.llm_api_key_env = "TELECOM_LLM_API_KEY"
    telecom.save()
    monkeypatch.setenv("TELECOM_LLM_API_KEY", PROFILE_KEY)


def test_the_configuration_is_shown_with_every_secret_masked(debug_api, configured):
    response = debug_api.get("/api/debug/env")

    assert response.status_code == 200, response.content
    text = response.content.decode()
    for secret in (*SECRETS.values(), *PASSWORDS, PROFILE_KEY, "b3RlbC11c2VyOm90ZWwtcHc"):
        assert secret not in text, secret
    body = response.json()
    assert body["routing"] == {"mode_override": "supervisor"}
    assert body["llm"]["base_url"] == "https://llm.example.com/v1?api_key=***"
    assert (body["llm"]["model"], body["llm"]["api_key"], body["llm"]["provider"]) == ("gpt-4o-mini", "***", "openai")
    assert body["router_llm"] == {
        "separate": True,
        "base_url": "https://router.example.com/v1",
        "model": "router-small",
        "api_key": "***",
    }
    assert body["embeddings"]["api_key"] == "***"
    assert (body["embeddings"]["query_prefix"], body["embeddings"]["document_prefix"]) == ("query: ", "query: ")
    assert body["knowledge_embeddings"] == {
        "base_url": "https://vectors.example.com/v1",
        "model": "multilingual-e5-small",
        "api_key": "***",
        "timeout_seconds": 2.0,
        "query_prefix": "query: ",
        "document_prefix": "passage: ",
    }
    servers = {server["name"]: server for server in body["mcp_servers"]}
    assert servers["telecom"]["endpoint"] == "https://***@mcp.example.com/mcp?token=***"
    assert servers["retail"]["endpoint"] == "http://127.0.0.1:8200/mcp"
    assert body["database"]["password"] == "***" and body["database"]["engine"]
    assert body["redis"] == {
        "url": "redis://***@cache.internal:6379/0",
        "broker_url": "redis://***@broker.internal:6379/1",
    }
    observability = body["observability"]
    assert observability["events_webhook_url"] == "https://hooks.example.com/events"
    assert observability["events_webhook_secret"] == observability["otel_exporter_otlp_headers"] == "***"
    assert body["limits"]["max_input_chars"] == 4000
    assert body["throttles"]["wrong_keys_before_lockout"] == 30
    assert body["throttles"]["message_rate_per_session"] == "60/minute"
    assert body["supervisor"]["executor"] == "inprocess"
    (profile,) = body["profiles"]
    assert profile == {
        "agent_id": "telecom_contas",
        "routing_mode": "supervisor",
        "version": None,
        "llm": "openai",
        "base_url": "https://billing-llm.example.com/v1",
        "own_endpoint": True,
        "model": "billing-model",
        "temperature": None,
        "key_variable": "TELECOM_LLM_API_KEY",
        "key_set": True,
    }
    json.dumps(body)  # plain JSON all the way down


def test_an_unset_secret_shows_empty_and_an_unset_key_variable_says_so(debug_api, telecom, settings, monkeypatch):
    settings.OPENAI_API_KEY = ""
    telecom.llm_api_key_env = "TELECOM_LLM_API_KEY"
    telecom.save()
    monkeypatch.delenv("TELECOM_LLM_API_KEY", raising=False)

    body = debug_api.get("/api/debug/env").json()

    assert body["llm"]["api_key"] == ""
    assert (body["profiles"][0]["key_variable"], body["profiles"][0]["key_set"]) == ("TELECOM_LLM_API_KEY", False)


def test_a_key_without_the_debug_right_is_refused(api, telecom):
    response = api.get("/api/debug/env")

    assert response.status_code == 403
    assert response.json()["error"]["message"] == ERROR_DEBUG_FORBIDDEN


def test_tracings_settings_are_shown_with_the_endpoints_credentials_masked(debug_api, telecom, monkeypatch, settings):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel:otel-pw-4e5f@collector.example.com:4318?key=k-9")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "platform-web")
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_PROPAGATORS", raising=False)
    settings.TRACING_NODE_MIN_MS = 1.0

    response = debug_api.get("/api/debug/env")

    assert "otel-pw-4e5f" not in response.content.decode()
    assert response.json()["tracing"] == {
        "enabled": False,  # configured, but this process did not set tracing up (the tests install their own)
        "exporter": "otlp/http-protobuf",
        "endpoint": "https://***@collector.example.com:4318?key=***",
        "sampler": "parentbased_traceidratio",
        "sampler_arg": "0.25",
        "service_name": "platform-web",
        "propagators": "tracecontext,baggage",
        "node_min_ms": 1.0,
    }
