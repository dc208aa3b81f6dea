"""A profile with a knowledge source, and a few small documents in the platform's three languages."""

from __future__ import annotations

import pytest

from knowledge.models import KnowledgeSource
from tests.factories import AgentProfileFactory

HELP_EN = b"""# Help centre

## Passwords

To reset your password, open Settings, choose Security and then Reset password. A link arrives by email.

## Refunds

Refunds reach your card within five working days of the return being received.
"""

HELP_PT = """# Central de ajuda

## Fatura

A segunda via da fatura fica em Minha conta, na aba Faturas, e pode ser baixada em PDF.

## Portabilidade

Para levar seu número para outra operadora, peça o código de portabilidade ao atendimento.
""".encode()

HELP_ES = """# Centro de ayuda

## Envíos

Los envíos nacionales tardan entre dos y cuatro días hábiles en llegar.
""".encode()


@pytest.fixture
def profile(db):
    return AgentProfileFactory(agent_id="help_desk", name="Help desk", language="en")


@pytest.fixture
def source(profile) -> KnowledgeSource:
    return KnowledgeSource.objects.create(profile=profile, name="Help centre", language="en", tags=["help"])
