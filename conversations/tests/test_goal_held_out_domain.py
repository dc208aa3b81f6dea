"""A held-out check: a small travel domain nobody in the platform wrote code for, registered the way an admin does
(the MCP server's add page, the "Sync tools and domain manifests" action, a goal-mode profile's add page), asked in
Portuguese, English and Spanish.

The server is defined here with the official SDK alone. Its search answers an unknown city with an error, as many
servers do, and its flight search takes the customer's language through the manifest's ``language_param``. Nothing
in the platform names this domain, its goal, its entities or its tools.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from agents.models import AgentProfile, McpServer, McpTool
from common.language import detect_language
from tests.adminkit import add_url, changelist_url, form_data

CITIES = [
    {"code": "LIS", "name": "Lisboa", "country": "Portugal", "also": ["lisbon"]},
    {"code": "MAD", "name": "Madrid", "country": "España", "also": []},
    {"code": "CDG", "name": "Paris", "country": "France", "also": []},
    {"code": "SCL", "name": "Santiago", "country": "Chile", "also": []},
    {"code": "SCQ", "name": "Santiago de Compostela", "country": "España", "also": []},
]
FARES = {"LIS": 89.0, "MAD": 64.5, "CDG": 120.0, "SCL": 910.0, "SCQ": 75.0}
DEPARTURES = ("08:05", "11:40", "19:20")
SAYS = {
    "pt": "Voos para {city}: a partir de {fare:.2f} EUR, {n} opções hoje.",
    "en": "Flights to {city}: from {fare:.2f} EUR, {n} options today.",
    "es": "Vuelos a {city}: desde {fare:.2f} EUR, {n} opciones hoy.",
}

MANIFEST = {
    "domain": "travel",
    "description": "Voos (flights). Demo.",
    "goals": [
        {
            "goal": "FIND_FLIGHTS",
            "description": "Voos para um destino (flights to a destination).",
            "examples": [
                "quero voos para Paris",
                "tem voo para Madrid amanhã?",
                "find me flights to Paris",
                "are there flights to Madrid?",
                "busco vuelos a Paris",
                "¿hay vuelos a Madrid?",
            ],
            "capabilities": ["search_flights"],
            "entities_schema": {
                "destination_text": {
                    "type": "string",
                    "required": True,
                    "label": {"pt": "o destino", "en": "the destination", "es": "el destino"},
                    "description": "the destination city, as the user wrote it",
                    "pattern": r"(?i:\b(?:para|to|a|hacia|for)\s+)"
                    r"(?P<value>[A-ZÀ-Ý][\w-]*(?:\s+(?:de\s+)?[A-ZÀ-Ý][\w-]*)*)",
                }
            },
        }
    ],
    "capabilities": [
        {
            "capability": "search_flights",
            "tool": "search_flights",
            "metadata": {
                "language_param": "language",
                "intent_hints": {"keywords": ["voo", "voos", "flight", "flights", "vuelo", "vuelos"]},
                "flow": {
                    "pre": [
                        {
                            "type": "resolve",
                            "param": "destination",
                            "from_param": "destination_text",
                            "search_capability": "find_city",
                            "candidates": "matches",
                            "value": "code",
                            "label": ["name", "country"],
                            "question": {
                                "pt": "Qual '{query}'? {choices}",
                                "en": "Which '{query}' do you mean? {choices}",
                                "es": "¿Qué '{query}'? {choices}",
                            },
                            "not_found": {
                                "pt": "Não conheço nenhuma cidade chamada '{query}'.",
                                "en": "I know no city called '{query}'.",
                                "es": "No conozco ninguna ciudad llamada '{query}'.",
                            },
                        }
                    ]
                },
            },
        },
        {"capability": "find_city", "tool": "find_city"},
    ],
}


def build(manifest: dict = MANIFEST) -> MCPServer:
    server = MCPServer("travel", title="Travel (held-out test)", instructions="Flights.", version="0.1.0")

    def find_city(query: str) -> dict:
        """Cities whose name starts like ``query``; an error when none does."""
        wanted = query.strip().casefold()
        matches = [
            {key: city[key] for key in ("code", "name", "country")}
            for city in CITIES
            if city["name"].casefold().startswith(wanted) or wanted in city["also"]
        ]
        if not matches:
            raise ToolError(f"no city named {query}")
        return {"matches": matches}

    def search_flights(destination: str, language: str = "pt") -> dict:
        """Today's flights to a city (by its code)."""
        city = next(city for city in CITIES if city["code"] == destination)
        fare = FARES[destination]
        said = SAYS.get(language, SAYS["pt"]).format(city=city["name"], fare=fare, n=3)
        flights = [
            {"flight": f"TX{100 + n}", "departs": departs, "price": fare + 10 * n, "currency": "EUR"}
            for n, departs in enumerate(DEPARTURES)
        ]
        return {"destination": destination, "cheapest": fare, "options": 3, "flights": flights, "explanation": said}

    server.add_tool(find_city)
    server.add_tool(search_flights)
    server.resource("manifest://travel", name="manifest", mime_type="application/json")(lambda: json.dumps(manifest))
    return server


# The same domain from a server that speaks Portuguese only: its manifest names no language parameter, so its flight
# search explains itself in Portuguese whoever asks.
PORTUGUESE_ONLY = {
    **MANIFEST,
    "capabilities": [
        {
            **MANIFEST["capabilities"][0],
            "metadata": {k: v for k, v in MANIFEST["capabilities"][0]["metadata"].items() if k != "language_param"},
        },
        *MANIFEST["capabilities"][1:],
    ],
}


@pytest.fixture(params=[MANIFEST], ids=["speaks the customer's language"])
def travel_url(request):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = build(request.param).streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True)
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
def travel_desk(staff_client, travel_url):
    """An admin registers the server, syncs it and makes a goal-mode profile serving it, in the admin's pages."""
    page = staff_client.get(add_url(McpServer))
    data = {**form_data(page), "name": "travel", "endpoint": travel_url, "timeout": "10", "enabled": "on"}
    added = staff_client.post(add_url(McpServer), data)
    assert added.status_code == 302, added.content.decode()[:2000]
    server = McpServer.objects.get(name="travel")
    synced = staff_client.post(
        changelist_url(McpServer), {"action": "sync_tools", "_selected_action": [server.pk]}, follow=True
    )
    assert synced.status_code == 200
    assert set(McpTool.objects.filter(server=server).values_list("name", flat=True)) == {"find_city", "search_flights"}
    page = staff_client.get(add_url(AgentProfile))
    data = {
        **form_data(page),
        "agent_id": "travel_desk",
        "name": "Travel desk",
        "routing_mode": "goal",
        "goal_domains": [str(server.pk)],
    }
    made = staff_client.post(add_url(AgentProfile), data)
    assert made.status_code == 302, made.content.decode()[:3000]
    return AgentProfile.objects.get(agent_id="travel_desk")


def ask(api, text: str, session: str) -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "travel_desk", "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
def test_a_domain_served_with_no_code_answers_in_the_customers_language(api, travel_desk):
    found = {
        "en": ask(api, "find me flights to Madrid", "t-en"),
        "pt": ask(api, "quero voos para Lisboa", "t-pt"),
        "es": ask(api, "busco vuelos a Paris", "t-es"),
    }
    missing = {
        "en": ask(api, "flights to Atlantis please", "u-en"),
        "pt": ask(api, "voos para Atlântida", "u-pt"),
    }

    assert "64.50 EUR" in found["en"]["answer"] and "89.00 EUR" in found["pt"]["answer"]
    assert "120.00 EUR" in found["es"]["answer"]
    assert missing["en"]["answer"].endswith("I know no city called 'Atlantis'.")
    assert missing["pt"]["answer"].endswith("Não conheço nenhuma cidade chamada 'Atlântida'.")
    for language, body in [*found.items(), *missing.items()]:
        checks = body["metadata"]["judges"]["rule_based"]["checks"]
        assert checks["language_matches"] == "passed", (language, body["answer"])
        assert body["metadata"]["review"]["action"] == "accept", (language, body["answer"])
        assert "[" not in body["answer"], body["answer"]  # no platform line such as "[search_flights: …]"


@pytest.mark.django_db
def test_a_domain_served_with_no_code_answers_a_spanish_message_of_content_words_only_in_spanish(api, travel_desk):
    found = ask(api, "busco vuelos a Paris", "t-es")
    missing = ask(api, "vuelos a Atlántida", "u-es")

    assert "Vuelos a Paris: desde 120.00 EUR" in found["answer"]
    assert missing["answer"].endswith("No conozco ninguna ciudad llamada 'Atlántida'.")


@pytest.mark.django_db
def test_a_domain_served_with_no_code_asks_in_the_customers_language_and_keeps_it(api, travel_desk):
    what = ask(api, "can you find me a flight?", "q-1")
    which = ask(api, "flights to Santiago", "q-2")
    chosen = ask(api, "2", "q-2")
    cual = ask(api, "¿hay vuelos a Santiago?", "q-3")

    assert what["metadata"]["goal"]["status"] == "clarification"
    assert detect_language(what["answer"]) == "en" and "destination" in what["answer"]
    assert which["answer"].startswith("Which 'Santiago' do you mean?")
    assert "Flights to Santiago de Compostela: from 75.00 EUR" in chosen["answer"]
    assert cual["answer"].startswith("¿Qué 'Santiago'?")


@pytest.mark.django_db
@pytest.mark.parametrize("travel_url", [PORTUGUESE_ONLY], ids=["speaks Portuguese only"], indirect=True)
def test_flights_a_portuguese_only_server_found_are_listed_in_the_customers_language(api, travel_desk):
    asked = {
        "en": ask(api, "find me flights to Madrid", "p-en"),
        "es": ask(api, "busco vuelos a Madrid", "p-es"),
        "pt": ask(api, "quero voos para Madrid", "p-pt"),
    }

    for language in ("en", "es"):
        answer = asked[language]["answer"]
        assert "Voos para" not in answer, answer  # not the server's Portuguese sentence
        for flight, departs in (("TX100", "08:05"), ("TX101", "11:40"), ("TX102", "19:20")):
            assert flight in answer and departs in answer, (language, answer)
        assert detect_language(answer) == language, answer
        checks = asked[language]["metadata"]["judges"]["rule_based"]["checks"]
        assert checks["language_matches"] == "passed", (language, answer)
    assert "Voos para Madrid: a partir de 64.50 EUR, 3 opções hoje." in asked["pt"]["answer"]
