"""What a client reads of a profile's specialists — the A2A card's skills and ``GET /api/agents``' display names and
descriptions — in the language it asks for (``Accept-Language``), else in the profile's language."""

from __future__ import annotations

import httpx
import pytest

from agents.models import Specialist
from common.config_version import config_version_bump

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

PRODUCT = {
    "en": {"display_name": "Plans and services", "description": "Questions about plans and devices."},
    "es": {"display_name": "Planes y servicios"},
}


@pytest.fixture
def product(telecom) -> Specialist:
    specialist = Specialist.objects.get(profile=telecom, name="product_agent")
    specialist.display_name, specialist.description = "Planos e serviços", "Dúvidas sobre planos e aparelhos."
    specialist.translations = PRODUCT
    specialist.save(update_fields=["display_name", "description", "translations"])
    config_version_bump()
    return specialist


def card(asgi_server: str, accept: str | None) -> httpx.Response:
    headers = {"Accept-Language": accept} if accept else {}
    return httpx.get(f"{asgi_server}/a2a/telecom_contas/.well-known/agent-card.json", headers=headers, timeout=10)


@pytest.mark.parametrize(
    ("accept", "language", "name", "description"),
    [
        ("es-ES,es;q=0.9,en;q=0.5", "es", "Planes y servicios", "Dúvidas sobre planos e aparelhos."),
        ("en-GB", "en", "Plans and services", "Questions about plans and devices."),
        (None, "pt", "Planos e serviços", "Dúvidas sobre planos e aparelhos."),
        ("fr-FR", "pt", "Planos e serviços", "Dúvidas sobre planos e aparelhos."),
    ],
)
def test_the_cards_skills_are_named_in_the_language_the_client_asks_else_the_profiles(
    asgi_server, product, accept, language, name, description
):
    response = card(asgi_server, accept)

    assert response.status_code == 200
    skills = {skill["id"]: skill for skill in response.json()["skills"]}
    assert (skills["product_agent"]["name"], skills["product_agent"]["description"]) == (name, description)
    assert response.headers["content-language"] == language
    assert "accept-language" in response.headers["vary"].lower()  # a cache keeps one card per language


@pytest.mark.parametrize(
    ("accept", "language", "name", "description"),
    [
        ("en", "en", "Plans and services", "Questions about plans and devices."),
        ("es-MX", "es", "Planes y servicios", "Dúvidas sobre planos e aparelhos."),
        (None, "pt", "Planos e serviços", "Dúvidas sobre planos e aparelhos."),
    ],
)
def test_the_agents_list_names_specialists_in_the_language_the_client_asks(
    api, product, accept, language, name, description
):
    response = api.get("/api/agents", **({"HTTP_ACCEPT_LANGUAGE": accept} if accept else {}))

    (profile,) = response.json()["agents"]
    specialists = {specialist["name"]: specialist for specialist in profile["specialists"]}
    assert (specialists["product_agent"]["display_name"], specialists["product_agent"]["description"]) == (
        name,
        description,
    )
    assert profile["language"] == language
    assert "accept-language" in response.headers["Vary"].lower()


@pytest.fixture
def named(telecom):
    telecom.name, telecom.description = "Agente de contas", "Atendimento de contas e planos."
    telecom.translations = {
        "en": {"name": "Accounts agent", "description": "Bills and plans."},
        "es": {"name": "Agente de cuentas"},
    }
    telecom.save(update_fields=["name", "description", "translations"])
    config_version_bump()
    return telecom


@pytest.mark.parametrize(
    ("accept", "name", "description"),
    [
        ("en-US", "Accounts agent", "Bills and plans."),
        ("es", "Agente de cuentas", "Atendimento de contas e planos."),
        (None, "Agente de contas", "Atendimento de contas e planos."),
    ],
)
def test_the_card_and_the_agents_list_name_the_profile_itself_in_the_language_the_client_asks(
    asgi_server, api, named, accept, name, description
):
    response = card(asgi_server, accept)
    assert (response.json()["name"], response.json()["description"]) == (name, description)

    listed = api.get("/api/agents", **({"HTTP_ACCEPT_LANGUAGE": accept} if accept else {}))
    (profile,) = listed.json()["agents"]
    assert profile["name"] == name
