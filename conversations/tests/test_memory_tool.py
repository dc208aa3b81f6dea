"""What the platform learns of a customer without being told "remember that …": the built-in ``remember`` tool a
specialist may be given (its model calls it; offline, a stated preference calls it), and the facts the summary's
rewrite reads from a conversation where the profile allows it. Through the message API, the model being the suite's
scripted OpenAI-compatible server, or the offline model; the facts are read where the next session's model receives
them, and in the admin on SQLite too."""

from __future__ import annotations

import json
from functools import partial

import pytest
from django.core.cache import cache

from agents.models import AgentProfile, Specialist
from conversations.memory import part as memory_part
from conversations.memory import summary
from conversations.memory.facts import FACTS_KEPT_MAX
from conversations.models import Conversation, CustomerFact, Message, ToolCall
from conversations.tests.memory_talk import said, system_notes
from routing import snapshot
from tests.adminkit import change_url, error_messages, form_data
from tests.llm_server import Reply, tool_call_reply

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

USER = "cust-remember-1"
SAVED = "prefere ser contatado por e-mail"


@pytest.fixture(autouse=True)
def sessions_unthrottled():
    """Every test starts with no message counted against its sessions' rate (they reuse the same ids, and SQLite's
    file cache keeps them from one test to the next)."""
    cache.clear()


say = partial(said, user=USER, session="s-remember-1")


def offered(request: dict) -> dict[str, dict]:
    """The functions a chat completion request offered the model, by name."""
    return {tool["function"]["name"]: tool["function"] for tool in request.get("tools") or ()}


def remembering(telecom, **which) -> None:
    """Give the profile's specialists (``which``: those of these fields; else billing_agent) the remember tool."""
    Specialist.objects.filter(profile=telecom, **(which or {"name": "billing_agent"})).update(remember_tool=True)
    snapshot.invalidate()


def model_saving(*facts: str):
    """A scripted model that, offered ``remember``, calls it once with ``facts`` and then answers."""

    def respond(body: dict) -> Reply:
        if "remember" in offered(body) and not any(m["role"] == "tool" for m in body["messages"]):
            calls = [tool_call_reply("remember", {"fact": fact}).tool_calls[0] for fact in facts]
            return Reply(content=None, tool_calls=calls)
        return Reply(content="Certo, anotado.")

    return respond


def test_a_specialist_is_not_offered_the_remember_tool_unless_given_it(api, telecom, scripted_llm):
    say(api, "Minha fatura veio alta")
    assert "remember" not in offered(scripted_llm.requests[-1])

    remembering(telecom)
    say(api, "Minha fatura veio alta", session="s-remember-2")
    function = offered(scripted_llm.requests[-1])["remember"]
    assert function["parameters"]["required"] == ["fact"]
    assert function["parameters"]["properties"]["fact"]["maxLength"] == 500


def test_a_fact_the_model_saves_is_kept_and_the_next_sessions_specialist_reads_it(api, telecom, scripted_llm):
    remembering(telecom)
    scripted_llm.respond_with(model_saving(SAVED))

    answer = say(api, "Minha fatura veio alta, e prefiro ser contatado por e-mail")

    fact = CustomerFact.objects.get()
    asked = Message.objects.get(role="user", content="Minha fatura veio alta, e prefiro ser contatado por e-mail")
    assert (fact.text, fact.source, fact.agent, fact.source_message_id) == (SAVED, "saved", "billing_agent", asked.pk)
    told = [m for m in scripted_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "Saved" in told[0]["content"]
    call = ToolCall.objects.get(tool="remember")
    assert (call.status, call.arguments, call.agent) == ("ok", {"fact": SAVED}, "billing_agent")
    assert [(r["tool"], r["status"]) for r in answer["metadata"]["mcp_results"]] == [("remember", "ok")]

    say(api, "Minha fatura veio alta de novo", session="s-remember-2")
    assert SAVED in system_notes(scripted_llm.requests[-1])
    assert CustomerFact.objects.count() == 1  # the model saving it again keeps it once


def test_an_anonymous_conversation_is_told_nothing_can_be_remembered(api, telecom, scripted_llm):
    remembering(telecom)
    scripted_llm.respond_with(model_saving(SAVED))

    answer = say(api, "Minha fatura veio alta", user="")

    told = [m for m in scripted_llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "nothing can be remembered" in told[0]["content"]
    assert answer["metadata"]["mcp_results"][0]["status"] == "error"
    assert not CustomerFact.objects.exists()


def test_a_fact_past_the_bound_or_not_text_is_refused_and_a_run_saves_three_at_most(api, telecom, scripted_llm):
    remembering(telecom)
    scripted_llm.respond_with(model_saving("x" * 501, "um", "dois", "três", "quatro"))

    answer = say(api, "Minha fatura veio alta")

    statuses = [r["status"] for r in answer["metadata"]["mcp_results"]]
    assert statuses == ["invalid_arguments", "ok", "ok", "ok", "error"]
    assert list(CustomerFact.objects.values_list("text", flat=True)) == ["um", "dois", "três"]


def test_personal_data_the_model_writes_into_a_fact_is_masked(api, telecom, scripted_llm):
    remembering(telecom)
    scripted_llm.respond_with(model_saving("prefere contato por joao.silva@example.com"))

    say(api, "Minha fatura veio alta")

    text = CustomerFact.objects.get().text
    assert "joao.silva@example.com" not in text
    assert text.startswith("prefere contato por [")


def test_the_saved_facts_keep_to_the_customers_cap(api, telecom, scripted_llm):
    remembering(telecom)
    say(api, "Minha fatura veio alta")
    tenant_id = Conversation.objects.get().tenant_id
    stored_user = Conversation.objects.get().user_id
    CustomerFact.objects.bulk_create(
        CustomerFact(tenant_id=tenant_id, user_id=stored_user, text=f"fato {n}") for n in range(FACTS_KEPT_MAX)
    )
    scripted_llm.respond_with(model_saving(SAVED))

    say(api, "Minha fatura veio alta", session="s-remember-2")

    assert CustomerFact.objects.count() == FACTS_KEPT_MAX
    assert CustomerFact.objects.filter(text=SAVED, source="saved").exists()


def test_another_tenants_customer_with_the_same_id_does_not_read_a_saved_fact(api, outsider_api, telecom, scripted_llm):
    remembering(telecom)
    scripted_llm.respond_with(model_saving(SAVED))
    say(api, "Minha fatura veio alta")

    scripted_llm.respond_with(None)
    theirs = say(outsider_api, "Minha fatura veio alta", session="s-remember-2")

    assert SAVED not in system_notes(scripted_llm.requests[-1])
    assert theirs["metadata"]["memory"]["facts"] == []


@pytest.mark.parametrize(
    ("text", "fact", "noted"),
    [
        (
            "Minha fatura veio alta. Prefiro ser contatado por e-mail.",
            "Prefiro ser contatado por e-mail",
            "Anotei para as suas próximas conversas",
        ),
        (
            "My invoice is too high. I prefer to be contacted by e-mail.",
            "I prefer to be contacted by e-mail",
            "I have noted it for your next conversations",
        ),
        (
            "Mi factura vino alta. Prefiero que me llamen por la tarde.",
            "Prefiero que me llamen por la tarde",
            "Lo he anotado para tus próximas conversaciones",
        ),
    ],
)
def test_offline_a_stated_preference_to_a_specialist_given_the_tool_is_saved(api, telecom, text, fact, noted):
    remembering(telecom, enabled=True)

    answer = say(api, text)

    saved = CustomerFact.objects.get()
    assert (saved.text, saved.source, saved.agent) == (fact, "saved", answer["agent"])
    assert f"{noted}: “{fact}”." in answer["answer"]
    assert say(api, "o que você sabe sobre mim?", session="s-remember-2")["answer"].endswith(f"- {fact}")


def test_offline_a_preference_to_a_specialist_without_the_tool_keeps_nothing(api, telecom):
    answer = say(api, "Minha fatura veio alta. Prefiro ser contatado por e-mail.")

    assert answer["agent"] == "billing_agent"
    assert not CustomerFact.objects.exists()
    assert "próximas conversas" not in answer["answer"]


def extracting(telecom) -> None:
    AgentProfile.objects.filter(pk=telecom.pk).update(extract_customer_facts=True)
    snapshot.invalidate()


def talk_past_the_window(api, settings, first: str) -> dict:
    """``first``, then messages until the summary is rewritten; the answer of the turn that rewrote it."""
    settings.CONVERSATION_HISTORY_LIMIT = 4
    say(api, first)
    for number in range(summary.SUMMARY_EVERY + 2):
        answer = say(api, f"Minha fatura {number} veio alta")
        if answer["metadata"]["memory"]["summary_updated"]:
            return answer
    raise AssertionError("the summary was never rewritten")


def summarising(reply: str):
    def respond(body: dict) -> Reply:
        if "running summary" in body["messages"][-1]["content"]:
            return Reply(content=reply, usage=(300, 40))
        return Reply(content="Certo.", usage=(50, 2))

    return respond


def test_where_the_profile_allows_the_summarys_one_call_also_reads_lasting_facts(api, telecom, scripted_llm, settings):
    extracting(telecom)
    reply = {"summary": "The customer disputes a March charge.", "facts": ["Prefers e-mail contact", 7, ""]}
    scripted_llm.respond_with(summarising(json.dumps(reply)))

    answer = talk_past_the_window(api, settings, "Prefiro contato por e-mail. Minha fatura de março veio alta.")

    memory_calls = [r for r in scripted_llm.requests if "running summary" in r["messages"][-1]["content"]]
    assert len(memory_calls) == 1 and '"facts"' in memory_calls[0]["messages"][-1]["content"]
    assert Conversation.objects.get().memory_summary == "The customer disputes a March charge."
    fact = CustomerFact.objects.get()
    assert (fact.text, fact.source, fact.agent) == ("Prefers e-mail contact", "extracted", "")
    assert fact.source_message.content.startswith("Prefiro contato por e-mail.")
    assert answer["metadata"]["memory"]["extracted"] == ["Prefers e-mail contact"]
    calls = {call["kind"]: call for call in answer["metadata"]["usage"]["calls"]}
    assert (calls["memory"]["prompt_tokens"], calls["memory"]["completion_tokens"]) == (300, 40)


@pytest.mark.parametrize(
    ("reply", "kept"),
    [
        ("The customer disputes a March charge.", "The customer disputes a March charge."),  # plain text: the summary
        ('{"facts": ["Prefers e-mail contact"]}', ""),  # JSON without a summary: the old one (none yet) stays
        (
            '{"summary": "The customer disputes a March charge.", "facts": "e-mail"}',
            "The customer disputes a March charge.",
        ),
    ],
)
def test_a_reply_of_another_shape_keeps_a_summary_and_no_fact(api, telecom, scripted_llm, settings, reply, kept):
    extracting(telecom)
    scripted_llm.respond_with(summarising(reply))
    settings.CONVERSATION_HISTORY_LIMIT = 4
    say(api, "Prefiro contato por e-mail.")
    for number in range(summary.SUMMARY_EVERY + 2):
        say(api, f"Minha fatura {number} veio alta")

    assert any("running summary" in r["messages"][-1]["content"] for r in scripted_llm.requests)
    assert Conversation.objects.get().memory_summary == kept
    assert not CustomerFact.objects.exists()


def test_without_the_profiles_leave_the_summary_asks_for_no_fact(api, telecom, scripted_llm, settings):
    scripted_llm.respond_with(summarising("The customer disputes a March charge."))

    talk_past_the_window(api, settings, "Prefiro contato por e-mail.")

    memory_calls = [r for r in scripted_llm.requests if "running summary" in r["messages"][-1]["content"]]
    assert '"facts"' not in memory_calls[0]["messages"][-1]["content"]
    assert not CustomerFact.objects.exists()


def test_offline_the_summarys_rewrite_keeps_the_preferences_the_customer_stated(api, telecom, settings):
    extracting(telecom)

    answer = talk_past_the_window(api, settings, "Olá. Prefiro ser atendido em português, por favor.")

    fact = CustomerFact.objects.get()
    assert (fact.text, fact.source) == ("Prefiro ser atendido em português, por favor", "extracted")
    assert fact.source_message.content == "Olá. Prefiro ser atendido em português, por favor."
    assert answer["metadata"]["memory"]["extracted"] == [fact.text]


def keeping_no_summary(telecom) -> None:
    """The profile reads the customer's facts from its conversations but keeps no running summary."""
    AgentProfile.objects.filter(pk=telecom.pk).update(extract_customer_facts=True, summarise_conversations=False)
    snapshot.invalidate()


def talk_until_extracted(api, settings, first: str, talk=say) -> list[dict]:
    """``first``, then messages past the window until a turn reads a fact from what left it; every answer."""
    settings.CONVERSATION_HISTORY_LIMIT = 4
    answers = [talk(api, first)]
    for number in range(summary.SUMMARY_EVERY + 2):
        answers.append(talk(api, f"Minha fatura {number} veio alta"))
        if answers[-1]["metadata"]["memory"]["extracted"]:
            return answers
    raise AssertionError("no fact was ever read from the conversation")


def test_offline_a_profile_that_keeps_no_summary_still_reads_the_preferences_the_customer_stated(
    api, telecom, settings
):
    keeping_no_summary(telecom)

    answers = talk_until_extracted(api, settings, "Olá. Prefiro ser atendido em português, por favor.")

    fact = CustomerFact.objects.get()
    assert (fact.text, fact.source) == ("Prefiro ser atendido em português, por favor", "extracted")
    assert fact.source_message.content == "Olá. Prefiro ser atendido em português, por favor."
    assert answers[-1]["metadata"]["memory"]["extracted"] == [fact.text]
    assert all(answer["metadata"]["memory"]["summary"] == "" for answer in answers)
    assert not any(answer["metadata"]["memory"]["summary_updated"] for answer in answers)
    conversation = Conversation.objects.get()
    assert conversation.memory_summary == ""  # nothing summarised
    assert conversation.memory_summary_through >= fact.source_message_id  # read once: the next read starts after it


def test_a_profile_that_keeps_no_summary_asks_its_model_for_the_facts_alone(api, telecom, scripted_llm, settings):
    keeping_no_summary(telecom)

    def respond(body: dict) -> Reply:
        if "lasting facts" in body["messages"][-1]["content"]:
            return Reply(content=json.dumps({"facts": ["Prefers e-mail contact", 3]}), usage=(120, 12))
        return Reply(content="Certo.", usage=(50, 2))

    scripted_llm.respond_with(respond)

    answers = talk_until_extracted(api, settings, "Prefiro contato por e-mail. Minha fatura de março veio alta.")

    asked = [
        r["messages"][-1]["content"] for r in scripted_llm.requests if "lasting facts" in r["messages"][-1]["content"]
    ]
    assert len(asked) == 1 and "running summary" not in asked[0] and '{"facts": ["…"]}' in asked[0]
    assert "Prefiro contato por e-mail." in asked[0]
    fact = CustomerFact.objects.get()
    assert (fact.text, fact.source) == ("Prefers e-mail contact", "extracted")
    assert fact.source_message.content.startswith("Prefiro contato por e-mail.")
    assert Conversation.objects.get().memory_summary == ""
    assert not any("CONVERSATION_SUMMARY" in system_notes(r) for r in scripted_llm.requests)
    calls = {call["kind"]: call for call in answers[-1]["metadata"]["usage"]["calls"]}
    assert (calls["memory"]["prompt_tokens"], calls["memory"]["completion_tokens"]) == (120, 12)


@pytest.mark.parametrize("reply", ["The customer prefers e-mail.", '{"summary": "e-mail"}', "[1, 2]"])
def test_a_facts_reply_of_another_shape_gives_no_fact_and_no_summary(api, telecom, scripted_llm, settings, reply):
    keeping_no_summary(telecom)
    scripted_llm.respond_with(
        lambda body: Reply(content=reply if "lasting facts" in body["messages"][-1]["content"] else "Certo.")
    )
    settings.CONVERSATION_HISTORY_LIMIT = 4
    say(api, "Prefiro contato por e-mail.")
    for number in range(summary.SUMMARY_EVERY + 2):
        say(api, f"Minha fatura {number} veio alta")

    assert any("lasting facts" in r["messages"][-1]["content"] for r in scripted_llm.requests)
    assert not CustomerFact.objects.exists()
    assert Conversation.objects.get().memory_summary == ""


def test_an_anonymous_conversation_of_a_profile_that_keeps_no_summary_reads_nothing_that_left_the_window(
    api, telecom, settings, monkeypatch
):
    keeping_no_summary(telecom)
    reads = []
    monkeypatch.setattr(
        memory_part, "summary_left", lambda *args, **kwargs: reads.append(kwargs) or summary.summary_left(**kwargs)
    )
    settings.CONVERSATION_HISTORY_LIMIT = 4
    for number in range(summary.SUMMARY_EVERY + 6):
        payload = {"text": f"Prefiro e-mail. Minha fatura {number} veio alta", "session_id": "s-remember-anonymous"}
        response = api.post("/api/gateway/message", {"agent_id": "telecom_contas", "payload": payload}, format="json")
        assert response.status_code == 200, response.content
        assert response.json()["metadata"]["memory"]["extracted"] == []

    assert reads == []
    assert not CustomerFact.objects.exists()


def test_the_remember_tool_is_given_on_the_specialists_admin_page_and_its_calls_show_on_the_conversation(
    staff_client, api, telecom
):
    billing = Specialist.objects.get(profile=telecom, name="billing_agent")
    data = form_data(staff_client.get(change_url(billing)))
    assert "remember_tool" not in data  # off by default
    data["remember_tool"] = "on"
    response = staff_client.post(change_url(billing), data)
    assert response.status_code == 302, error_messages(response)
    assert Specialist.objects.get(pk=billing.pk).remember_tool

    say(api, "Minha fatura veio alta. Prefiro ser contatado por e-mail.")

    page = staff_client.get(change_url(Conversation.objects.get())).content.decode()
    assert "remember" in page and "Prefiro ser contatado por e-mail" in page
