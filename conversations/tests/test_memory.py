"""Memory beyond the window, through the message API: facts a customer asks the platform to remember, used in their
next session and forgotten on request, never across tenants; and the conversation's running summary of the turns past
the window, given to the specialists with the recent ones. The specialists' prompts are read where the model receives
them (the suite's scripted OpenAI-compatible server)."""

from __future__ import annotations

import json
from functools import partial

import pytest
from asgiref.sync import SyncToAsync
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import AgentProfile
from conversations import turn_store
from conversations.customer_data import customer_erase, customer_export, customer_for
from conversations.desk.escalations import escalation_get
from conversations.desk.reads import DeskTenant, escalation_detail
from conversations.memory import part, summary
from conversations.memory.facts import facts_of
from conversations.models import Conversation, CustomerFact, Message
from conversations.tests.memory_talk import said, system_notes
from routing import snapshot
from tests.llm_server import Reply

pytestmark = [pytest.mark.django_db, pytest.mark.sqlite_too]

USER = "cust-memory-1"
PREFERENCE = "prefiro ser contatado por e-mail"

say = partial(said, user=USER, session="s-memory-1")


def test_a_fact_told_in_one_session_is_in_the_specialists_prompt_of_the_next(api, telecom, scripted_llm):
    told = say(api, f"lembre que {PREFERENCE}")
    assert told["answer"] == f"Anotado. Vou lembrar: {PREFERENCE}"
    assert told["metadata"]["memory"]["command"] == "remember"
    assert scripted_llm.requests == []  # the platform answered: no model call
    fact = CustomerFact.objects.get()
    assert (fact.text, fact.source_message.content) == (PREFERENCE, f"lembre que {PREFERENCE}")

    scripted_llm.reply("Sua fatura está em R$ 289,90.")
    answer = say(api, "Minha fatura veio alta", session="s-memory-2")

    assert PREFERENCE in system_notes(scripted_llm.requests[-1])
    assert answer["metadata"]["memory"]["facts"] == [PREFERENCE]


def test_the_facts_are_remembered_offline_too_and_recalled_in_the_customers_language(api, telecom):
    say(api, "Remember that my plan is the 20 GB one.")
    say(api, "recuerda que vivo en Madrid")

    english = say(api, "What do you know about me?", session="s-memory-2")["answer"]
    spanish = say(api, "¿Qué sabes de mí?", session="s-memory-3")["answer"]

    assert english.splitlines() == [
        "This is what I remember about you:",
        "- my plan is the 20 GB one",
        "- vivo en Madrid",
    ]
    assert spanish.splitlines()[0] == "Esto es lo que recuerdo de ti:"


def test_forget_that_removes_the_last_fact_and_forget_with_words_removes_what_they_match(api, telecom):
    say(api, f"lembre que {PREFERENCE}")
    say(api, "lembre que meu plano é o de 20 GB")

    forgotten = say(api, "esqueça isso")
    assert forgotten["answer"] == "Pronto, esqueci: meu plano é o de 20 GB"
    assert list(CustomerFact.objects.values_list("text", flat=True)) == [PREFERENCE]

    say(api, "forget that I prefer e-mail")  # matches nothing told: no command, the specialists answer it
    assert CustomerFact.objects.count() == 1
    say(api, "esqueça que prefiro e-mail")
    assert not CustomerFact.objects.exists()
    assert "Ainda não lembro de nada" in say(api, "o que você sabe sobre mim?")["answer"]


def test_another_tenants_customer_with_the_same_user_id_sees_nothing(api, outsider_api, telecom, scripted_llm):
    say(api, f"lembre que {PREFERENCE}")

    theirs = say(outsider_api, "o que você sabe sobre mim?")
    scripted_llm.reply("Sua fatura está em R$ 289,90.")
    asked = say(outsider_api, "Minha fatura veio alta", session="s-memory-2")

    assert theirs["answer"].startswith("Ainda não lembro de nada")
    assert PREFERENCE not in system_notes(scripted_llm.requests[-1])
    assert asked["metadata"]["memory"]["facts"] == []


def test_an_anonymous_customer_is_told_nothing_can_be_remembered(api, telecom):
    answer = say(api, f"lembre que {PREFERENCE}", user="")
    assert answer["answer"].startswith("Só consigo lembrar")
    assert not CustomerFact.objects.exists()


def test_a_message_that_is_no_command_sends_no_statement_of_its_own_for_the_customers_facts(api, telecom):
    """SQLite: once cached, the facts are read from the cache; PostgreSQL: the ticket's statement brings them."""
    say(api, "Minha fatura veio alta")  # the customer's facts (none) are cached, where the cache reads them
    with CaptureQueriesContext(connection) as captured:
        say(api, "Minha fatura veio alta de novo")

    facts_table = CustomerFact._meta.db_table
    statements = [query["sql"] for query in captured.captured_queries if facts_table in query["sql"]]
    if connection.vendor == "postgresql":
        assert len(statements) == 1 and statements[0].startswith('UPDATE "routing_conversation"')
    else:
        assert statements == []


def test_on_postgresql_a_turn_reads_the_customers_facts_in_its_tickets_statement_not_through_the_cache(api, telecom):
    if connection.vendor != "postgresql":
        pytest.skip("elsewhere the turn reads the facts through the cache (the test above)")
    say(api, "Minha fatura veio alta")
    conversation = Conversation.objects.get()
    assert facts_of(tenant_id=conversation.tenant_id, user_id=conversation.user_id) == ()  # cached: none
    CustomerFact.objects.create(tenant_id=conversation.tenant_id, user_id=conversation.user_id, text=PREFERENCE)

    recalled = say(api, "o que você sabe sobre mim?", session="s-memory-2")["answer"]

    assert recalled.splitlines()[1:] == [f"- {PREFERENCE}"]  # a stale cache entry would have said "nothing yet"


def test_past_the_window_a_summary_replaces_the_older_turns_and_reaches_the_specialists(api, telecom, settings):
    settings.CONVERSATION_HISTORY_LIMIT = 4
    first = "Minha fatura de março veio com uma cobrança estranha. Pode ver?"
    say(api, first)
    for number in range(summary.SUMMARY_EVERY // 2 + 1):
        say(api, f"E o pedido {number}, chegou?")

    conversation = Conversation.objects.get()
    assert conversation.memory_summary.startswith("Customer: Minha fatura de março veio com uma cobrança estranha.")
    assert conversation.memory_summary_through > 0
    later = say(api, "e a entrega?")
    assert later["metadata"]["memory"]["summary"] == conversation.memory_summary


@pytest.fixture
def crossings(monkeypatch):
    """The functions each request sends to the request's thread, in order (asgiref's ``SyncToAsync`` calls)."""
    crossed: list[str] = []
    cross = SyncToAsync.__call__

    async def counted(self, *args, **kwargs):
        crossed.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await cross(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counted)
    return crossed


def test_a_message_whose_summary_is_due_reads_what_left_the_window_without_a_trip_or_statement_of_its_own(
    api, telecom, settings, crossings
):
    """The summary's read rides with the turn's load: on PostgreSQL in the ticket's statement (the message keeps its
    two statements), elsewhere in the load's own crossing to the request's thread (one statement more, no trip)."""
    settings.CONVERSATION_HISTORY_LIMIT = 4
    trips, statements, updated = [], [], []
    for number in range(summary.SUMMARY_EVERY + 1):
        crossings.clear()
        with CaptureQueriesContext(connection) as captured:
            body = say(api, f"E o pedido {number}, chegou?", session="s-memory-due")
        trips.append(list(crossings))
        statements.append(len(captured.captured_queries))
        updated.append(body["metadata"]["memory"]["summary_updated"])

    due = updated.index(True)
    assert due > 1 and all(trip == trips[1] for trip in trips[1:]), trips
    if connection.vendor == "postgresql":
        assert statements[due] == statements[due - 1] == 2
    else:
        assert statements[due] == statements[due - 1] + 1
    conversation = Conversation.objects.get()
    assert conversation.memory_summary.startswith("Customer: E o pedido 0, chegou?")


def test_a_profile_that_keeps_no_running_summary_reads_writes_and_gives_none_and_still_gives_the_customers_facts(
    api, telecom, scripted_llm, settings, monkeypatch
):
    settings.CONVERSATION_HISTORY_LIMIT = 4
    scripted_llm.respond_with(
        lambda body: Reply(
            content="Summary: orders." if "running summary" in body["messages"][-1]["content"] else "Ok."
        )
    )
    reads = []  # the summary's reads, counted
    for module, name in ((turn_store, "summary_left_read"), (part, "summary_left")):
        read = getattr(module, name)
        monkeypatch.setattr(
            module, name, lambda *args, read=read, **kwargs: reads.append(read) or read(*args, **kwargs)
        )
    talk = partial(say, session="s-memory-off")
    talk(api, f"lembre que {PREFERENCE}")
    for number in range(summary.SUMMARY_EVERY // 2 + 1):
        talk(api, f"E o pedido {number}, chegou?")
    conversation = Conversation.objects.get()
    assert conversation.memory_summary == "Summary: orders."  # written while the profile kept one
    AgentProfile.objects.filter(pk=telecom.pk).update(summarise_conversations=False)
    snapshot.invalidate()
    talk(api, "e a entrega?")  # the profile compiled again
    assert reads
    scripted_llm.requests.clear()
    reads.clear()

    statements, answers = [], []
    for number in range(summary.SUMMARY_EVERY + 1):
        with CaptureQueriesContext(connection) as captured:
            answers.append(talk(api, f"E a fatura {number}?"))
        statements.append([query["sql"] or "" for query in captured.captured_queries])

    assert all(answer["metadata"]["memory"]["summary"] == "" for answer in answers)
    assert not any(answer["metadata"]["memory"]["summary_updated"] for answer in answers)
    assert all(answer["metadata"]["memory"]["facts"] == [PREFERENCE] for answer in answers)
    assert not [sent for sent in scripted_llm.requests if "running summary" in sent["messages"][-1]["content"]]
    assert all(PREFERENCE in system_notes(request) for request in scripted_llm.requests)
    assert not any("CONVERSATION_SUMMARY" in system_notes(request) for request in scripted_llm.requests)
    assert reads == []  # nothing of the summary is read or worked out
    messages_table = f'"{Message._meta.db_table}"'
    history_reads = [sum(sql.startswith("SELECT") and messages_table in sql for sql in sent) for sent in statements]
    assert history_reads == [0 if connection.vendor == "postgresql" else 1] * len(statements)
    if connection.vendor == "postgresql":
        assert all(len(sent) == 2 for sent in statements), statements
    conversation.refresh_from_db()
    assert (conversation.memory_summary, conversation.message_count) == ("Summary: orders.", 38)


def test_the_profiles_model_writes_the_summary_and_its_tokens_are_counted(api, telecom, scripted_llm, settings):
    settings.CONVERSATION_HISTORY_LIMIT = 4

    def respond(body):
        text = body["messages"][-1]["content"]
        if "running summary" in text:
            return Reply(content="The customer disputes a March invoice charge.", usage=(300, 12))
        return Reply(content="Certo.", usage=(50, 2))

    scripted_llm.respond_with(respond)
    for number in range(summary.SUMMARY_EVERY // 2 + 2):
        answer = say(api, f"Minha fatura {number} veio alta")
        if answer["metadata"]["memory"]["summary_updated"]:
            break
    calls = {call["kind"]: call for call in answer["metadata"]["usage"]["calls"]}
    assert (calls["memory"]["prompt_tokens"], calls["memory"]["completion_tokens"]) == (300, 12)
    assert Conversation.objects.get().memory_summary == "The customer disputes a March invoice charge."

    say(api, "e agora?")
    assert "The customer disputes a March invoice charge." in system_notes(scripted_llm.requests[-1])


def test_the_export_holds_the_facts_and_the_summary_and_erasure_removes_both(api, telecom, settings):
    settings.CONVERSATION_HISTORY_LIMIT = 4
    say(api, f"lembre que {PREFERENCE}")
    for number in range(summary.SUMMARY_EVERY // 2 + 1):
        say(api, f"Minha fatura {number} veio alta")
    tenant_id = Conversation.objects.get().tenant_id
    customer = customer_for(tenant_id=tenant_id, user_id=USER)
    summary_text = Conversation.objects.get().memory_summary
    assert summary_text

    document = json.loads("".join(customer_export(customer=customer, tenant_slug="tenant_a", user_id=USER)))
    assert [fact["text"] for fact in document["facts"]] == [PREFERENCE]
    assert document["conversations"][0]["memory_summary"] == summary_text

    erased = customer_erase(customer=customer, user_id=USER, actor="test")
    assert erased["conversations.CustomerFact"] == 1
    assert not CustomerFact.objects.exists()
    assert Conversation.objects.get().memory_summary == ""
    cache.clear()
    assert "Ainda não lembro" in say(api, "o que você sabe sobre mim?", session="s-after")["answer"]


def test_the_person_who_takes_a_conversation_reads_what_the_platform_remembers_of_the_customer(
    api, outsider_api, telecom
):
    say(api, f"lembre que {PREFERENCE}")
    say(outsider_api, "lembre que moro em Recife")  # another tenant's customer of the same id
    asked = say(api, "quero falar com um atendente", session="s-memory-2")["metadata"]["escalation"]["id"]
    escalation = escalation_get(escalation_id=asked)
    tenant = escalation.conversation.tenant

    detail = escalation_detail(escalation=escalation, tenants={tenant.pk: DeskTenant(tenant.pk, tenant.slug, "")})

    assert [fact["text"] for fact in detail["memory"]["facts"]] == [PREFERENCE]


def _summary_as_read_whole(old: str, messages: tuple) -> str:
    """The offline summary as written before: each message normalised whole, the lines summed again at each drop."""

    def first_sentence(text: str) -> str:
        line = summary._SENTENCE_END.split(" ".join(text.split()), maxsplit=1)[0]
        return line if len(line) <= summary.LINE_MAX_CHARS else line[: summary.LINE_MAX_CHARS - 1].rstrip() + "…"

    lines = [line for line in old.splitlines() if line.strip()]
    lines += [
        f"{summary.SPEAKERS.get(m.role, m.role)}: {first_sentence(m.content)}" for m in messages if m.content.strip()
    ]
    while lines and sum(len(line) + 1 for line in lines) > summary.SUMMARY_MAX_CHARS:
        lines.pop(0)
    return "\n".join(lines)


def test_the_offline_summary_cuts_each_message_at_its_first_sentence_before_reading_its_whitespace():
    import random

    from conversations.history import HistoryEntry

    class Counted(str):
        splits = 0

        def split(self, *args, **kwargs):  # type: ignore[override]
            Counted.splits += 1
            return super().split(*args, **kwargs)

    pieces = ["Olá", "a fatura", "veio alta.", "Why?", "¿Y", "mi pedido?", "ok!", "…", "Sources: [1]", "x" * 170]
    spaces = [" ", "  ", "\n", "\t", "\u00a0", "\u2003", "\x1c", " \n "]
    chance = random.Random(60)
    texts = [
        chance.choice(["", " ", "\n"]) + "".join(chance.choice(pieces) + chance.choice(spaces) for _ in range(n))
        for n in [*range(8), *[chance.randrange(1, 60) for _ in range(300)]]
    ]
    for start in range(0, len(texts), 30):
        messages = tuple(HistoryEntry(chance.choice(["user", "assistant"]), text) for text in texts[start : start + 30])
        old = "\n".join(texts[start - 1].splitlines()[:40]) if start else ""
        assert summary.summary_extracted(old, messages) == _summary_as_read_whole(old, messages)

    whole = "Preciso da segunda via. " + "A fatura deste mês veio com um valor muito alto para o meu plano. " * 30
    summary.summary_extracted("", (HistoryEntry("user", Counted(whole)),))

    assert Counted.splits == 0  # only its first sentence's whitespace read, not a message of 2,000 characters
