"""Adding a domain is publishing a manifest: a brand-new MCP server defined here, registered and synced, is
served end to end in goal mode with no change to the platform's code (goal mode's promise).

The server is built in this file with the official SDK alone (no helper of the example servers), serves its
tools and its manifest over streamable HTTP from a thread, and the platform learns everything it needs about
the domain from ``sync_mcp_tools``: goals, entities, the capability map and the capabilities' hints.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from io import StringIO

import pytest
import uvicorn
from django.core.management import call_command
from mcp.server.mcpserver import MCPServer

from agents.models import AgentProfile, McpServer, Specialist
from routing.models import Capability, Goal

FORECASTS = {"Recife": (31, "sol"), "Curitiba": (14, "chuva")}

MANIFEST = {
    "domain": "weather",
    "description": "Previsão do tempo (demo).",
    "goals": [
        {
            "goal": "FORECAST",
            "description": "A previsão do tempo de uma cidade",
            "examples": ["previsão do tempo em Recife", "vai chover em Curitiba esta semana?"],
            "entities_schema": {
                "city_text": {
                    "type": "string",
                    "required": True,
                    "description": "A cidade, como o usuário disse",
                    "pattern": r"\b(?:em|in|en|de|para)\s+(?P<value>[A-ZÀ-Ú][\w-]+)",
                },
                "period": {
                    "type": "enum",
                    "values": ["TODAY", "WEEK"],
                    "default": "TODAY",
                    "aliases": {"TODAY": ["hoje", "today"], "WEEK": ["semana", "week"]},
                    "capability_map": {"TODAY": "forecast_today", "WEEK": "forecast_week"},
                },
            },
        }
    ],
    "capabilities": [
        {
            "capability": "forecast_today",
            "tool": "forecast_today",
            "metadata": {"intent_hints": {"keywords": ["previsão", "tempo", "chover", "weather"]}},
        },
        {
            "capability": "forecast_week",
            "tool": "forecast_week",
            "metadata": {"intent_hints": {"keywords": ["previsão da semana"]}},
        },
    ],
}


def build() -> MCPServer:
    server = MCPServer("weather", title="Weather (test)", instructions="Forecasts.", version="0.1.0")

    def forecast_today(city_text: str, period: str = "TODAY") -> dict:
        """Today's forecast for a city."""
        degrees, sky = FORECASTS[city_text]
        return {"city": city_text, "degrees": degrees, "explanation": f"Hoje em {city_text}: {degrees} °C, {sky}."}

    def forecast_week(city_text: str, period: str = "WEEK") -> dict:
        """The week's forecast for a city."""
        degrees, sky = FORECASTS[city_text]
        return {"city": city_text, "explanation": f"Semana em {city_text}: {sky}, perto de {degrees} °C."}

    server.add_tool(forecast_today)
    server.add_tool(forecast_week)
    server.resource("manifest://weather", name="manifest", mime_type="application/json")(lambda: json.dumps(MANIFEST))
    return server


@pytest.fixture
def weather_url():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = build().streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a hang guard
    while not server.started:
        assert time.monotonic() < deadline, "the test's MCP server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def weather_profile(db, weather_url):
    """What an operator does in the admin: register the server, sync it, make a goal-mode profile."""
    server = McpServer.objects.create(name="weather", endpoint=weather_url, timeout=10)
    call_command("sync_mcp_tools", "weather", stdout=StringIO())
    profile = AgentProfile.objects.create(agent_id="weather_desk", name="Weather desk", routing_mode="goal")
    profile.goal_domains.add(server)
    general = Specialist.objects.create(profile=profile, name="general_agent", description="Small talk.")
    profile.fallback_specialist = general
    profile.save()
    return profile


def say(api, text, session="w-1"):
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "weather_desk", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_a_new_domains_manifest_is_synced_into_goals_and_capabilities(weather_profile):
    assert list(Goal.objects.filter(domain="weather").values_list("name", flat=True)) == ["FORECAST"]
    capabilities = Capability.objects.filter(domain="weather").select_related("tool")
    assert {c.name: c.tool.name for c in capabilities} == {
        "forecast_today": "forecast_today",
        "forecast_week": "forecast_week",
    }


def test_a_new_domain_is_served_end_to_end_with_no_code_of_its_own(api, weather_profile):
    today = say(api, "previsão do tempo em Recife")

    goal = today["metadata"]["goal"]
    assert goal["status"] == "success"
    assert goal["intent_output"] == {
        "primary_domain": "weather",
        "goal": "FORECAST",
        "entities": {"city_text": "Recife"},
        "confidence": goal["intent_output"]["confidence"],
        "original_query": "previsão do tempo em Recife",
    }
    assert [intent["capability"] for intent in goal["execution_intents"]] == ["forecast_today"]
    assert "31 °C" in today["answer"]

    week = say(api, "e a previsão da semana em Curitiba?", session="w-2")

    assert week["metadata"]["goal"]["execution_intents"][0]["capability"] == "forecast_week"
    assert "Semana em Curitiba" in week["answer"]


def test_a_new_domains_goal_missing_its_city_asks_for_it(api, weather_profile):
    asked = say(api, "previsão do tempo")

    assert asked["metadata"]["goal"]["status"] == "clarification"
    assert "cidade" in asked["answer"].lower()
