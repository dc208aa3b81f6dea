"""Model settings per profile (issue 20, item 11): a profile's own endpoint, model and key variable answer its
messages, read at each call; the admin switches them without a restart and never shows the key."""

from __future__ import annotations

import logging

import pytest

from agents.checks import model_key_variables_check
from agents.llm import ERROR_ANSWER
from agents.models import AgentProfile
from common.i18n import say as say_in
from conversations import runtime
from releases.checks import rolled_out_model_key_variables_check
from releases.models import RolloutPlan, RolloutPlanStatus
from releases.versions import version_publish
from routing.checks import served_model_key_variables_check
from tests.adminkit import change_url, error_messages, form_data
from tests.llm_server import ScriptedLLMServer

pytestmark = pytest.mark.django_db

KEY_VARIABLE = "RETAIL_LLM_API_KEY"
KEY_VALUE = "sk-retail-7f3a9c1e2b"


def say(api, text: str, *, agent_id: str, session: str = "s-model") -> dict:
    response = api.post(
        "/api/gateway/message",
        {"agent_id": agent_id, "payload": {"text": text, "session_id": session}},
        format="json",
    )
    assert response.status_code == 200, response.content
    return response.json()


def on_own_endpoint(profile: AgentProfile, server: ScriptedLLMServer, *, model: str = "retail-model") -> None:
    profile.llm_base_url = server.base_url
    profile.llm_model = model
    profile.llm_api_key_env = KEY_VARIABLE
    profile.save()


def test_each_profile_answers_from_its_own_endpoint_with_its_own_key(
    api, telecom, retail, scripted_llm, own_server, monkeypatch
):
    monkeypatch.setenv(KEY_VARIABLE, KEY_VALUE)
    on_own_endpoint(retail, own_server)

    theirs = say(api, "Quero trocar um produto", agent_id="retail_loja")
    ours = say(api, "Minha fatura veio alta", agent_id="telecom_contas")

    assert theirs["answer"] == "answer from the retail endpoint"
    assert (theirs["metadata"]["llm"], theirs["metadata"]["model"]["model"]) == ("openai", "retail-model")
    assert [request["model"] for request in own_server.requests] == ["retail-model"]
    assert own_server.authorizations == [f"Bearer {KEY_VALUE}"]
    assert ours["answer"] == "scripted answer"
    assert {request["model"] for request in scripted_llm.requests} == {"scripted-model"}
    assert set(scripted_llm.authorizations) == {"Bearer test-key"}


def test_a_profile_with_its_own_endpoint_answers_through_it_when_the_platform_has_none(
    api, telecom, retail, own_server, monkeypatch, settings
):
    settings.OPENAI_BASE_URL = ""
    monkeypatch.setenv(KEY_VARIABLE, KEY_VALUE)
    on_own_endpoint(retail, own_server)

    theirs = say(api, "Oi", agent_id="retail_loja")
    ours = say(api, "Minha fatura veio alta", agent_id="telecom_contas")

    assert (theirs["answer"], theirs["metadata"]["llm"]) == ("answer from the retail endpoint", "openai")
    assert ours["metadata"]["llm"] == "offline"


def test_the_key_is_read_at_each_call_so_a_rotated_key_needs_no_restart(api, retail, own_server, monkeypatch, settings):
    settings.OPENAI_BASE_URL = ""
    monkeypatch.setenv(KEY_VARIABLE, KEY_VALUE)
    on_own_endpoint(retail, own_server)
    say(api, "Oi", agent_id="retail_loja")

    monkeypatch.setenv(KEY_VARIABLE, "sk-rotated")
    say(api, "Oi de novo", agent_id="retail_loja")

    assert own_server.authorizations == [f"Bearer {KEY_VALUE}", "Bearer sk-rotated"]


def test_a_missing_key_variable_gives_the_error_answer_a_warning_naming_it_and_a_check_warning(
    api, retail, own_server, monkeypatch, settings, caplog
):
    settings.OPENAI_BASE_URL = ""
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    on_own_endpoint(retail, own_server)

    with caplog.at_level(logging.WARNING, logger="agents.llm"):
        body = say(api, "Oi", agent_id="retail_loja")

    assert body["answer"] == say_in(body["metadata"]["language"], ERROR_ANSWER)
    assert own_server.requests == []
    assert any(KEY_VARIABLE in record.getMessage() for record in caplog.records if record.name == "agents.llm")
    (warning,) = model_key_variables_check(None, databases=["default"])
    assert (warning.id, warning.obj) == ("agents.W002", retail)
    assert KEY_VARIABLE in warning.msg
    monkeypatch.setenv(KEY_VARIABLE, KEY_VALUE)
    assert model_key_variables_check(None, databases=["default"]) == []


def test_a_missing_key_variables_messages_leave_one_entry_in_the_bound_tools_map_however_many_they_are(
    api, retail, own_server, monkeypatch, settings
):
    settings.OPENAI_BASE_URL = ""
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    on_own_endpoint(retail, own_server)
    monkeypatch.setattr(runtime, "_bound_tools", {})

    entries = []
    for n in range(12):
        body = say(api, "Oi", agent_id="retail_loja", session=f"s-missing-{n}")
        entries.append(len(runtime._bound_tools))

    assert body["answer"] == say_in(body["metadata"]["language"], ERROR_ANSWER) and own_server.requests == []
    assert entries == [1] * 12  # the model that stands for the missing key is one: its binding is found again


def test_a_served_version_reading_a_key_variable_that_is_not_set_is_warned_of_until_the_edit_is_published(
    retail, own_server, monkeypatch
):
    monkeypatch.setenv(KEY_VARIABLE, KEY_VALUE)
    on_own_endpoint(retail, own_server)
    version_publish(profile=retail, note="own endpoint")
    retail.llm_api_key_env = "RETAIL_NEW_LLM_API_KEY"  # the key moved; the edit is not published yet
    retail.save()
    monkeypatch.setenv("RETAIL_NEW_LLM_API_KEY", "sk-new")
    monkeypatch.delenv(KEY_VARIABLE)

    assert model_key_variables_check(None, databases=["default"]) == []  # the rows are fine
    (warning,) = served_model_key_variables_check(None, databases=["default"])
    assert (warning.id, warning.obj) == ("routing.W001", retail)
    assert "Version 1 of profile retail_loja is served" in warning.msg and KEY_VARIABLE in warning.msg
    assert "sk-" not in warning.msg + warning.hint
    version_publish(profile=retail, note="the new key")
    assert served_model_key_variables_check(None, databases=["default"]) == []
    assert served_model_key_variables_check(None) == []  # without the database: nothing to read

    retail.llm_api_key_env = KEY_VARIABLE  # a candidate rolled out on the old variable
    retail.save()
    candidate = version_publish(profile=retail, note="candidate", release=False)
    retail.llm_api_key_env = "RETAIL_NEW_LLM_API_KEY"
    retail.save()
    plan = RolloutPlan.objects.create(name="old key", profile=retail, candidate=candidate)
    assert rolled_out_model_key_variables_check(None, databases=["default"]) == []  # a plan not started serves nothing
    plan.status = RolloutPlanStatus.RUNNING
    plan.save()
    assert served_model_key_variables_check(None, databases=["default"]) == []  # the released version is fine
    (warning,) = rolled_out_model_key_variables_check(None, databases=["default"])
    assert "Version 3 of profile retail_loja is rolled out by the plan 'old key'" in warning.msg


def test_switching_the_model_in_the_admin_and_publishing_changes_the_next_answer_without_a_restart(
    api, admin_client, retail, scripted_llm, own_server, monkeypatch
):
    monkeypatch.setenv(KEY_VARIABLE, KEY_VALUE)
    version_publish(profile=retail, note="first")
    assert say(api, "Oi", agent_id="retail_loja")["answer"] == "scripted answer"

    data = form_data(admin_client.get(change_url(retail)))
    data.update({"llm_base_url": own_server.base_url, "llm_model": "retail-model", "llm_api_key_env": KEY_VARIABLE})
    saved = admin_client.post(change_url(retail), data)
    assert saved.status_code == 302, error_messages(saved)
    assert say(api, "Oi", agent_id="retail_loja")["answer"] == "scripted answer"  # the draft is not live yet
    published = admin_client.post(
        f"/admin/agents/agentprofile/{retail.pk}/publish/", {"note": "own model", "based_on": "1"}
    )
    assert published.status_code == 302

    body = say(api, "Oi", agent_id="retail_loja")

    assert (body["answer"], body["metadata"]["version"]) == ("answer from the retail endpoint", 2)
    assert own_server.authorizations == [f"Bearer {KEY_VALUE}"]


def test_the_admin_says_whether_the_key_variable_is_set_and_never_shows_its_value(admin_client, retail, monkeypatch):
    retail.llm_api_key_env = KEY_VARIABLE
    retail.save()
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    assert f"no ({KEY_VARIABLE}, in this web process)" in admin_client.get(change_url(retail)).content.decode()

    monkeypatch.setenv(KEY_VARIABLE, KEY_VALUE)
    page = admin_client.get(change_url(retail)).content.decode()

    assert f"yes ({KEY_VARIABLE}, in this web process)" in page
    assert KEY_VALUE not in page
