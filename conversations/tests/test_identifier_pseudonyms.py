"""A user id that is personal data (e-mail, phone, CPF) is stored as a keyed pseudonym, from every face."""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.conf import settings
from django.db import models

from conversations.guardrails import identifier_pseudonym
from conversations.models import Conversation, Message
from routing.rollout import bucket

EMAIL = "joao.silva@example.com"


def test_an_email_phone_or_cpf_becomes_a_stable_keyed_pseudonym_naming_its_kind():
    for identifier, kind in ((EMAIL, "email"), ("(11) 98765-4321", "phone"), ("123.456.789-09", "cpf")):
        pseudonym = identifier_pseudonym(identifier, key="k1")
        assert re.fullmatch(rf"{kind}:[0-9a-f]{{20}}", pseudonym)
        assert identifier_pseudonym(identifier, key="k1") == pseudonym  # stable: conversations still group
        assert identifier_pseudonym(identifier, key="k2") != pseudonym  # keyed: a guess hashed without it fails


def test_an_identifier_without_personal_data_is_kept_as_it_is():
    assert identifier_pseudonym("customer-42", key="k1") == "customer-42"
    assert identifier_pseudonym("", key="k1") == ""


@pytest.mark.django_db
def test_a_gateway_user_id_that_is_an_email_is_stored_only_as_its_pseudonym(api, telecom):
    for session in ("p-1", "p-2"):
        response = api.post(
            "/api/gateway/message",
            {"agent_id": "telecom_contas", "payload": {"text": "oi", "session_id": session, "user_id": EMAIL}},
            format="json",
        )
        assert response.status_code == 200, response.content

    stored = set(Conversation.objects.values_list("user_id", flat=True))
    assert len(stored) == 1 and next(iter(stored)).startswith("email:")  # both conversations under one pseudonym
    user_messages = Message.objects.filter(role="user")
    assert [m.metadata["user_id"] for m in user_messages] == [next(iter(stored))] * 2
    assert not Conversation.objects.filter(user_id__icontains="example.com").exists()


@pytest.mark.django_db
def test_the_openai_user_field_that_is_a_phone_is_stored_only_as_its_pseudonym(api, telecom):
    response = api.post(
        "/v1/chat/completions",
        {"model": "telecom_contas", "messages": [{"role": "user", "content": "oi"}], "user": "11987654321"},
        format="json",
        HTTP_X_SESSION_ID="o-1",
    )
    assert response.status_code == 200, response.content

    conversation = Conversation.objects.get()
    assert conversation.user_id.startswith("phone:")
    assert Message.objects.get(role="user").metadata["user_id"] == conversation.user_id


def rows_holding(text: str) -> list[str]:
    """``model.field`` of every stored text or JSON value, in every table of the project, that holds ``text``."""
    found = []
    for model in apps.get_models():
        for model_field in model._meta.concrete_fields:
            if isinstance(model_field, models.CharField | models.TextField | models.JSONField):
                lookup = {f"{model_field.name}__icontains": text}
                if model._default_manager.filter(**lookup).exists():
                    found.append(f"{model._meta.label}.{model_field.name}")
    return found


@pytest.mark.django_db
def test_no_answer_nor_stored_row_holds_the_raw_user_id_that_the_rollout_flag_buckets(
    api, telecom, multi_agent_for_everyone
):
    answers = [
        api.post(
            path,
            {
                "agent_id": "telecom_contas",
                "payload": {"text": "Qual o melhor plano?", "session_id": path, "user_id": EMAIL},
            },
            format="json",
        )
        for path in ("/api/gateway/message", "/api/chat/message")
    ]
    answers.append(
        api.post(
            "/v1/chat/completions",
            {
                "model": "telecom_contas",
                "messages": [{"role": "user", "content": "Qual o melhor plano?"}],
                "user": EMAIL,
            },
            format="json",
        )
    )
    pseudonym = identifier_pseudonym(EMAIL, key=settings.SECRET_KEY)
    for answer in answers:
        assert answer.status_code == 200, answer.content
        assert "joao.silva" not in answer.content.decode()
    flag = answers[1].json()["metadata"]["flags"]["multi_agent"]
    assert (flag["reason"], flag["stickiness_value"]) == ("bucket", pseudonym)  # the user's id as the store keeps it
    assert flag["bucket"] == bucket("multi_agent", EMAIL)  # the cohort the Unleash SDKs give that user
    assert rows_holding("joao.silva") == []


@pytest.mark.django_db
def test_a_turn_makes_its_user_id_a_pseudonym_once_however_often_the_store_reads_it(api, telecom, monkeypatch):
    import conversations.turn

    made: list[str] = []

    def counted(identifier: str, *, key: str) -> str:
        made.append(identifier)
        return identifier_pseudonym(identifier, key=key)

    monkeypatch.setattr(conversations.turn, "identifier_pseudonym", counted)
    response = api.post(
        "/api/gateway/message",
        {"agent_id": "telecom_contas", "payload": {"text": "oi", "session_id": "once-1", "user_id": EMAIL}},
        format="json",
    )

    assert response.status_code == 200, response.content
    assert made == [EMAIL]
    conversation = Conversation.objects.get()
    assert conversation.user_id == identifier_pseudonym(EMAIL, key=settings.SECRET_KEY)
    assert Message.objects.get(role="user").metadata["user_id"] == conversation.user_id
