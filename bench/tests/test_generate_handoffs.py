"""``bench/generate_handoffs.py``: bench data shaped like what the graph stores, at a small scale."""

from __future__ import annotations

import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest

from agents.models import AgentProfile
from bench.benchdata import ERROR_ALREADY_GENERATED
from bench.generate_handoffs import main
from conversations.models import (
    Conversation,
    ConversationOutcome,
    Escalation,
    EscalationStatus,
    Message,
    MessageFeedback,
    MessageRole,
    Outcome,
    RouteDecisionRecord,
    ToolCall,
    ToolCallStatus,
)
from handoffs.models import PERSON, Handoff, HandoffKind
from tenants.models import Tenant
from tests.demo_snapshot import demo_seed

pytestmark = pytest.mark.django_db

UNTIL = datetime(2025, 6, 1, tzinfo=UTC)
DAYS = 30


@pytest.fixture
def demo(db) -> None:
    """The demo the generator writes for, from this worker's record of ``seed_demo`` (tests/demo_snapshot.py) instead
    of the generator's own seed of several seconds a test (one test leaves it to the generator). Asked for before a
    test's other fixtures: a tenant made first would give the seed another starting point, so a real seed again."""
    demo_seed()


def run(*args: str) -> tuple[int, str, str]:
    """``bench/generate_handoffs.py *args``: its exit status, output and errors."""
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        status = main(list(args))
    return status, out.getvalue(), err.getvalue()


def generate(*args: str) -> str:
    status, out, err = run(*args, "--until", UNTIL.isoformat())
    assert status == 0, err
    return out


def handoff_rows() -> list[tuple]:
    """Everything about the handoffs but their ids, in a stable order."""
    return list(
        Handoff.objects.order_by("conversation__conversation_key", "created_at", "id").values_list(
            "conversation__conversation_key",
            "tenant__slug",
            "profile__agent_id",
            "from_agent",
            "to_agent",
            "kind",
            "status",
            "outcome",
            "reason",
            "context_summary",
            "created_at",
        )
    )


def test_conversations_are_handed_to_people_and_back_as_the_graph_and_the_desk_do(demo):
    from routing import snapshot

    generate("--count", "2500", "--days", "2")  # enough hand-overs in a short range for each way they end
    escalations = Escalation.objects.select_related("conversation", "profile")
    assert escalations.exists()
    statuses = set()
    for escalation in escalations:
        conversation, statuses = escalation.conversation, statuses | {escalation.status}
        # Handed over with a turn (the customer asked, or loop safety stopped a move: the demo profiles' rule).
        assert escalation.reason in ("customer_request", "loop_stop")
        if escalation.reason == "loop_stop":
            assert escalation.profile.agent_id in ("telecom_contas", "retail_orders")
        moves = Handoff.objects.filter(conversation=conversation, kind=HandoffKind.HUMAN).order_by("created_at")
        out = moves.get(to_agent=PERSON)
        assert (out.from_agent, out.outcome) == (escalation.from_agent, escalation.reason)
        assert out.reason.startswith(escalation.reason_text) and out.created_at >= escalation.created_at
        assert escalation.summary.startswith(f"Why: {escalation.reason_text}") and escalation.language
        assert conversation.outcome == Outcome.ESCALATED
        assert conversation.ended.decided_at == escalation.created_at and conversation.ended.agent == out.from_agent
        # The customer's messages after it go to the desk; the people's replies and notes name their author.
        later = RouteDecisionRecord.objects.filter(conversation=conversation, created_at__gt=out.created_at)
        assert set(later.values_list("method", flat=True)) <= {"human"}
        written = Message.objects.filter(conversation=conversation, role__in=(MessageRole.HUMAN, MessageRole.NOTE))
        for metadata in written.values_list("metadata", flat=True):
            assert metadata["escalation"] == str(escalation.pk) and metadata["author"]["kind"] == "human"
            assert metadata["author"]["name"] in ("Ana", "Bruno", "Carla", "Diego", "Elisa", "Fábio")
        if escalation.status == EscalationStatus.RETURNED:
            back = moves.get(from_agent=PERSON)
            fallback = snapshot.current().profiles[escalation.profile.agent_id].fallback_agent
            assert (back.to_agent, back.outcome) == (conversation.active_specialist or fallback, "returned")
            assert timedelta(0) <= back.created_at - escalation.ended_at < timedelta(seconds=1)
            assert escalation.person and escalation.assigned_at and written.filter(role=MessageRole.HUMAN).exists()
        elif escalation.status == EscalationStatus.CLOSED:  # it waited in line, the customer quiet, until the close
            assert not escalation.person and escalation.assigned_at is None and not written.exists()
            assert escalation.ended_at >= conversation.turn_started_at + timedelta(minutes=30)
        assert (conversation.escalation_id == escalation.pk) == (escalation.status not in ("returned", "closed"))
    assert {EscalationStatus.RETURNED, EscalationStatus.CLOSED} <= statuses


def rules_published() -> None:
    """retail_orders hands more to people than the demo does: after two fallback answers in a row, on a rating down,
    and when the customer wants to cancel an order (its exchanges team answers that). Its saved routing and
    conversation tests are switched off rather than forced past the publishing gate (they do not expect people)."""
    from releases.models import ConversationTest, RoutingTestCase
    from releases.versions import version_publish
    from routing.models import Intent

    profile = AgentProfile.objects.get(agent_id="retail_orders")
    profile.escalation = {**profile.escalation, "after_fallbacks": 2, "on_thumbs_down": True}
    profile.save(update_fields=["escalation"])
    Intent.objects.filter(profile=profile, name="retail_order_cancellation").update(escalate_to="trocas")
    RoutingTestCase.objects.filter(profile=profile).update(enabled=False)
    ConversationTest.objects.filter(profile=profile).update(enabled=False)
    version_publish(profile=profile, note="people answer more")


def test_a_profiles_rules_hand_conversations_to_people_as_the_platform_does(demo):
    rules_published()
    generate("--count", "1500", "--days", str(DAYS))

    escalations = Escalation.objects.select_related("conversation")
    retail = escalations.filter(profile__agent_id="retail_orders")
    assert set(retail.values_list("reason", flat=True)) == {
        "customer_request",
        "loop_stop",
        "fallbacks",
        "thumbs_down",
        "intent",
    }
    assert set(escalations.exclude(profile__agent_id="retail_orders").values_list("reason", flat=True)) <= {
        "customer_request",
        "loop_stop",
    }
    for escalation in retail.filter(reason__in=("intent", "fallbacks")):
        answers = Message.objects.filter(conversation=escalation.conversation, role=MessageRole.ASSISTANT)
        turn = answers.filter(metadata__escalation__id=str(escalation.pk)).earliest("id")  # the turn that handed over
        assert (
            turn.metadata["escalation"]["status"] == "queued"
            and turn.metadata["escalation"]["reason"] == escalation.reason
        )
        if escalation.reason == "intent":  # a person of its team answers instead of the assistants
            assert (escalation.intent, turn.metadata["escalation"]["queue"]) == ("retail_order_cancellation", "trocas")
            assert turn.agent == PERSON and not turn.tool_calls.exists()
        else:  # after the fallback's second answer in a row, which stays, the customer's place after it
            decided = RouteDecisionRecord.objects.filter(conversation=escalation.conversation, message_id__lt=turn.pk)
            assert list(decided.order_by("-message_id").values_list("method", flat=True)[:2]) == [
                "fallback",
                "fallback",
            ]
            assert turn.agent != PERSON and turn.content.count("\n\n") == 1
    for escalation in retail.filter(reason="thumbs_down"):  # outside a turn, when an answer was rated down
        rating = MessageFeedback.objects.filter(conversation=escalation.conversation).latest("created_at")
        assert (rating.rating, rating.created_at) == ("down", escalation.created_at)
        move = Handoff.objects.get(conversation=escalation.conversation, to_agent=PERSON)
        assert timedelta(0) < move.created_at - escalation.created_at < timedelta(seconds=1)
        told = Message.objects.filter(conversation=escalation.conversation, metadata__escalation__id=str(escalation.pk))
        assert set(told.filter(role=MessageRole.ASSISTANT).values_list("metadata__route", flat=True)) <= {PERSON}


def test_the_same_seed_gives_the_same_rows_and_clear_removes_them(demo):
    generate("--count", "300", "--seed", "7", "--pool", "40")  # replays too
    first = handoff_rows()
    output = generate("--clear", "--count", "300", "--seed", "7", "--pool", "40")
    assert "Cleared bench data" in output
    assert handoff_rows() == first
    assert Handoff.objects.count() == 300

    generate("--clear", "--count", "300", "--seed", "8")
    assert handoff_rows() != first


def test_replayed_conversations_are_kept_ones_for_other_customers_at_other_moments(demo):
    generate("--count", "500", "--days", str(DAYS), "--pool", "100")
    said: dict[tuple, list[tuple]] = {}
    for conversation in Conversation.objects.prefetch_related("messages"):
        words = tuple(message.content for message in conversation.messages.all())
        said.setdefault((conversation.profile_id, conversation.cohort, words), []).append(
            (conversation.conversation_key, conversation.user_id, conversation.created_at)
        )
    repeated = [group for group in said.values() if len(group) > 1]
    assert sum(len(group) for group in repeated) > Conversation.objects.count() / 2  # most are replays
    for group in repeated:
        assert len({key for key, _, _ in group}) == len(group) and len({when for _, _, when in group}) == len(group)
    for message in Message.objects.filter(role=MessageRole.USER).select_related("conversation")[:200]:
        assert message.metadata["user_id"] == message.conversation.user_id  # the replay's customer, not the original's


def test_clear_leaves_other_tenants_alone(demo, tenant):
    generate("--count", "50")
    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    own = Conversation.objects.create(
        tenant=tenant, profile=profile, session_id="s1", conversation_key=f"{tenant.slug}:telecom_contas:s1"
    )
    Message.objects.create(conversation=own, role=MessageRole.USER, content="oi")
    Handoff.objects.create(
        conversation=own, tenant=tenant, profile=profile, from_agent="a", to_agent="b", kind=HandoffKind.HANDOFF
    )

    assert run("--clear")[0] == 0

    assert list(Conversation.objects.all()) == [own]
    assert Message.objects.get().conversation == own
    assert Handoff.objects.get().conversation == own
    assert Tenant.objects.filter(slug__startswith="bench_tenant_").count() == 3  # the tenants (and keys) stay


def test_generating_the_same_seed_twice_without_clear_says_what_to_do():
    assert not AgentProfile.objects.exists()
    generate("--count", "20")  # seeds the demo itself
    assert set(AgentProfile.objects.values_list("agent_id", flat=True)) >= {"telecom_contas", "retail_orders"}
    status, _, err = run("--count", "20", "--until", UNTIL.isoformat())
    assert status == 1 and "--clear" in err
    assert ERROR_ALREADY_GENERATED.startswith("Conversations of this --seed")


@pytest.mark.slow
def test_it_runs_as_a_script():
    script = Path(__file__).resolve().parents[1] / "generate_handoffs.py"
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "--count" in done.stdout and "bench_tenant_*" in done.stdout


def test_it_asks_for_a_count_or_clear(capsys):
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert "--count" in capsys.readouterr().err


# --- one definition of a turn's rows -----------------------------------------------------------

MSISDN = "5511999999999"
# Conversations through the real graph, each (profile, session, texts), between them every kind of row the
# generator writes: tool calls and a routing handoff; a tool waiting for permission; a delegation, an out-of-scope
# return with its system note and a delegation again (left open); a return whose result waits; a supervisor plan.
GRAPH_CONVERSATIONS = (
    ("telecom_contas", "g-route", ("Minha fatura veio alta", "Meu pedido P100 atrasou")),
    ("telecom_contas", "g-permission", ("Estou sem sinal no celular",)),
    ("telecom_assistente", "g-out-of-scope", ("Minha fatura veio alta", "Meu pedido P100 atrasou")),
    ("telecom_assistente", "g-return", ("Minha fatura veio alta", "Obrigado, resolvido!")),
)
SUPERVISOR_TEXT = "Meu pedido atrasou e minha fatura veio duplicada"
KINDS = {  # what tells rows of one table apart
    Conversation: None,
    Message: "role",
    RouteDecisionRecord: None,
    ToolCall: "status",
    Handoff: "kind",
    Escalation: "status",
    MessageFeedback: "rating",
    ConversationOutcome: "outcome",
}


def graph_turn(tenant, agent_id: str, session: str, text: str) -> None:
    from asgiref.sync import async_to_sync

    from conversations.graph import run_turn
    from conversations.turn import TurnInput
    from routing import snapshot

    data = TurnInput(
        tenant_pk=tenant.pk,
        tenant_slug=tenant.slug,
        profile=snapshot.current().profiles[agent_id],
        text=text,
        session_id=session,
        user_id="u-graph",
        channel="web",
        context={"msisdn": MSISDN, "order_id": "P100"},
        cohort="multi_agent",
    )
    async_to_sync(run_turn)(data)


def shape(conversations) -> dict[tuple[str, str], tuple[set[str], set[str]]]:
    """Per table and kind of row (a message's role, a tool call's status, a move's kind): the columns some row
    has a value in (not NULL), and the columns some row has more than an empty value in."""
    found: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
    for model, kind in KINDS.items():
        columns = [field.attname for field in model._meta.concrete_fields]
        rows = (
            model.objects.filter(pk__in=conversations)
            if model is Conversation
            else model.objects.filter(conversation__in=conversations)
        )
        for row in rows.values(*columns):
            not_null, filled = found.setdefault((model.__name__, row[kind] if kind else ""), (set(), set()))
            not_null.update(column for column, value in row.items() if value is not None)
            filled.update(column for column, value in row.items() if value not in (None, "", [], {}))
    return found


def metadata_keys(conversations, role: str) -> set[frozenset[str]]:
    rows = Message.objects.filter(conversation__in=conversations, role=role).values_list("metadata", flat=True)
    return {frozenset(metadata) for metadata in rows}


def supervisor_mode_published() -> None:
    """The demo is published: a switch to supervisor mode reaches customers once published. The demo's saved
    routing and conversation tests describe router mode (a message hitting two intents is one intent there, a plan
    here), so they are switched off rather than forced past the gate."""
    from releases.models import ConversationTest, RoutingTestCase
    from releases.versions import version_publish

    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    RoutingTestCase.objects.filter(profile=profile).update(enabled=False)
    ConversationTest.objects.filter(profile=profile).update(enabled=False)
    version_publish(profile=profile, note="supervisor mode")


def people_in_the_loop(tenant, user) -> None:
    """What people leave behind, through the graph and the desk's services: a customer asks for a person and writes
    while in line; a person takes the conversation (the customer's next message gets no answer), replies, notes,
    transfers it to another team, takes it again, replies and hands it back with a note. Another customer asks in
    English and waits in line (the periodic close will take it out). Two answers are rated, up and down."""
    from conversations.desk.escalations import (
        desk_note,
        desk_reply,
        escalation_hand_back,
        escalation_take,
        escalation_transfer,
        person_of_user,
    )
    from conversations.feedback import feedback_give

    for text in ("Minha fatura veio alta", "Quero falar com um atendente", "Ainda estou esperando"):
        graph_turn(tenant, "telecom_contas", "g-person", text)
    held = Escalation.objects.get(conversation__session_id="g-person")
    ana = person_of_user(user)
    escalation_take(escalation_id=held.pk, person=ana)
    graph_turn(tenant, "telecom_contas", "g-person", "O número é 11 9****-1234")
    desk_reply(escalation_id=held.pk, person=ana, text="Olá, aqui é Ana. Já estou vendo o seu caso.")
    desk_note(escalation_id=held.pk, person=ana, text="Cliente já entrou em contato ontem pelo mesmo assunto.")
    escalation_transfer(escalation_id=held.pk, person=ana, team="financeiro", note="Assunto do financeiro.")
    escalation_take(escalation_id=held.pk, person=ana)
    desk_reply(escalation_id=held.pk, person=ana, text="Pronto, está resolvido. Posso ajudar em algo mais?")
    escalation_hand_back(escalation_id=held.pk, person=ana, note="Resolvido com o cliente.")
    graph_turn(tenant, "retail_orders", "g-queued", "I want to talk to a real person please")
    for session, rating, comment in (("g-permission", "up", ""), ("g-route", "down", "Não resolveu meu problema.")):
        conversation = Conversation.objects.get(tenant=tenant, session_id=session)
        answer = conversation.messages.filter(role=MessageRole.ASSISTANT).latest("created_at")
        feedback_give(
            conversation=conversation, message_id=answer.pk, rating=rating, comment=comment, user_id="u-graph"
        )


def test_the_generator_writes_the_rows_the_graph_writes(demo, tenant, mcp_servers, desk_person):
    """Both build a turn's rows with conversations.records.turn_rows, the desk's with conversations.desk.escalations,
    the outcomes with conversations.outcomes: a row retyped on either side (a column more or less, another metadata key,
    another text for a supervisor part with no answer) fails here. The graph's side is compared as the periodic
    close leaves it, the generator's as it wrote it (its conversations are closed the way the close closes them)."""
    from datetime import timedelta

    from django.utils import timezone

    from agents.models import McpServer
    from common.config_version import config_version_bump
    from conversations.outcomes import outcomes_close
    from conversations.supervisor import gap_text

    # Every conversation simulated (a replay copies their rows): rare rows (a supervisor part timing out) show; the
    # assertions below on them (the timeouts, three languages, each kind of row the graph makes) fail if one is missing.
    generate("--count", "1000", "--days", str(DAYS), "--pool", "0")
    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    config_version_bump()  # QuerySet.update bypasses the invalidation signals
    for agent_id, session, texts in GRAPH_CONVERSATIONS:
        for text in texts:
            graph_turn(tenant, agent_id, session, text)
    people_in_the_loop(tenant, desk_person)
    AgentProfile.objects.filter(agent_id="telecom_contas").update(routing_mode="supervisor")
    supervisor_mode_published()
    graph_turn(tenant, "telecom_contas", "g-plan", SUPERVISOR_TEXT)

    graph = Conversation.objects.filter(tenant=tenant)
    bench = Conversation.objects.filter(tenant__slug__startswith="bench_tenant_")
    bench_shape = shape(bench)  # before the close below, which would close what the generator left open
    outcomes_close(now=timezone.now() + timedelta(minutes=31))
    graph_shape = shape(graph)
    assert set(graph_shape) <= set(bench_shape)
    assert set(graph_shape) >= {
        ("Conversation", ""),
        *(("Message", role) for role in MessageRole.values),
        ("RouteDecisionRecord", ""),
        ("ToolCall", ToolCallStatus.OK),
        ("ToolCall", ToolCallStatus.PERMISSION_REQUIRED),
        *(("Handoff", kind) for kind in (HandoffKind.ROUTING, HandoffKind.DELEGATION, HandoffKind.RETURN)),
        ("Handoff", HandoffKind.FANOUT),
        ("Handoff", HandoffKind.HUMAN),
        ("Escalation", EscalationStatus.RETURNED),
        ("Escalation", EscalationStatus.CLOSED),
        *(("ConversationOutcome", outcome) for outcome in Outcome.values),
        ("MessageFeedback", "up"),
        ("MessageFeedback", "down"),
    }
    for key, (not_null, filled) in graph_shape.items():
        assert not_null == bench_shape[key][0], key
        assert filled <= bench_shape[key][1], key

    for role in (MessageRole.USER, MessageRole.SYSTEM, MessageRole.AGENT, MessageRole.HUMAN, MessageRole.NOTE):
        assert metadata_keys(graph, role) == metadata_keys(bench, role), role
    # The people's moves: handed over for the same reasons, handed back the same way; the customer sees the same
    # escalation object; the reasons of the outcomes are the close's and the desk's.
    people = Handoff.objects.filter(kind=HandoffKind.HUMAN)
    assert set(people.filter(conversation__in=graph).values_list("from_agent", "to_agent", "outcome")) >= {
        ("billing_agent", PERSON, "customer_request"),
        (PERSON, "billing_agent", "returned"),
    }
    assert set(people.filter(conversation__in=graph).values_list("outcome", flat=True)) <= set(
        people.filter(conversation__in=bench).values_list("outcome", flat=True)
    )
    shown = Message.objects.filter(role=MessageRole.ASSISTANT, metadata__escalation__isnull=False)
    shown = shown.exclude(metadata__escalation=None)
    assert {
        frozenset(each) for each in shown.filter(conversation__in=graph).values_list("metadata__escalation", flat=True)
    } == {
        frozenset(each) for each in shown.filter(conversation__in=bench).values_list("metadata__escalation", flat=True)
    }
    reasons = ConversationOutcome.objects.values_list("outcome", "reason")
    assert set(reasons.filter(conversation__in=graph)) <= set(reasons.filter(conversation__in=bench))
    assert set(Escalation.objects.filter(conversation__in=bench).values_list("language", flat=True)) == {
        "pt",
        "en",
        "es",
    }
    [graph_answer] = metadata_keys(graph, MessageRole.ASSISTANT)  # the graph's answers all carry the same keys
    assert all(keys <= graph_answer for keys in metadata_keys(bench, MessageRole.ASSISTANT))
    note = "[SYSTEM_NOTE: the sub-conversation with "
    for conversations in (graph, bench):
        notes = Message.objects.filter(conversation__in=conversations, role=MessageRole.SYSTEM)
        assert notes.exists() and not notes.exclude(content__startswith=note).exists()

    waiting = ToolCall.objects.filter(status=ToolCallStatus.PERMISSION_REQUIRED)
    assert set(waiting.filter(conversation__in=graph).values_list("error", flat=True)) == set(
        waiting.filter(conversation__in=bench).values_list("error", flat=True)
    )
    gaps = Message.objects.filter(conversation__in=bench, role=MessageRole.AGENT, metadata__status="timeout")
    assert gaps.exists()
    assert set(gaps.values_list("content", flat=True)) == {gap_text("timeout")}


# --- replays made by the database --------------------------------------------------------------

NUMBERED = (RouteDecisionRecord, ToolCall, Handoff, MessageFeedback, ConversationOutcome)  # ids from a sequence


def every_row() -> dict[str, list[tuple]]:
    """Every bench row of every table the generator writes, sorted, its ids made comparable between runs: a
    conversation named by its key, a message by its place among the run's, the ids the database numbers left out."""
    from bench.benchdata import TABLES

    keys = dict(Conversation.objects.values_list("pk", "conversation_key"))
    first = Message.objects.order_by("pk").values_list("pk", flat=True).first() or 0
    found = {}
    for model, _ in TABLES:
        columns, rows = [], []
        for each in model._meta.concrete_fields:
            if each.primary_key and model in NUMBERED:
                continue
            columns.append(each.attname)
        for values in model.objects.values_list(*columns):
            row = []
            for column, value in zip(columns, values, strict=True):
                if value is not None and (column == "conversation_id" or (model is Conversation and column == "id")):
                    value = keys[value]
                elif value is not None and (column == "message_id" or (model is Message and column == "id")):
                    value -= first
                row.append(repr(value))
            rows.append(tuple(row))
        found[model.__name__] = sorted(rows)
    return found


# Four batches; 749 of 901 conversations replayed, 5 of them of one handed to a person; 49 conversations kept to
# replay, 9 of them in the place of an older one: each way a kept conversation reaches (and leaves) the database.
FOUR_BATCHES = {"count": 1000, "days": DAYS, "seed": 5, "batch": 250, "until": UNTIL, "pool": 40}


def totals(report) -> tuple:
    """What a generation's report counted, but its timings."""
    return (
        report.conversations,
        report.messages,
        report.decisions,
        report.tool_calls,
        report.ratings,
        report.endings,
        report.escalations,
        report.desk_messages,
    )


def test_replays_the_database_makes_are_the_rows_python_copies(demo):
    from django.db import connection

    from bench.benchdata import BenchDataError, bench_data_clear, bench_data_generate

    if connection.vendor != "postgresql":
        with pytest.raises(BenchDataError, match="PostgreSQL only"):
            bench_data_generate(count=10, until=UNTIL, in_database=True)
        return

    copied = bench_data_generate(**FOUR_BATCHES, in_database=False)
    in_python = every_row()
    bench_data_clear()
    made = bench_data_generate(**FOUR_BATCHES, in_database=True)

    assert every_row() == in_python
    assert totals(made) == totals(copied)
    assert Escalation.objects.exists() and MessageFeedback.objects.exists()  # replayed with the rest
    assert not dangling()  # written with the foreign keys unchecked (bench.benchdata._references_trusted)


def dangling() -> dict[str, int]:
    """Per table and foreign key of the generator's tables, the rows pointing at a row that does not exist."""
    from bench.benchdata import TABLES

    found = {}
    for model, _ in TABLES:
        for each in model._meta.concrete_fields:
            if each.is_relation:
                rows = model.objects.filter(**{f"{each.attname}__isnull": False}).exclude(
                    **{f"{each.attname}__in": each.related_model._base_manager.values("pk")}
                )
                found[f"{model.__name__}.{each.name}"] = rows.count()
    return {name: count for name, count in found.items() if count}


# --- a bulk load ---------------------------------------------------------------------------------


def index_definitions() -> list[tuple[str, str]]:
    """Every index of the tables the generator writes (a partitioned table's and its partitions'), as defined."""
    from django.db import connection

    from bench.benchdata import TABLES

    tables = [model._meta.db_table for model, _ in TABLES]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND (tablename = ANY(%s) "
            "OR tablename LIKE 'agent_handoffs_%%') ORDER BY indexname",
            [tables],
        )
        return cursor.fetchall()


@pytest.mark.django_db(transaction=True)
def test_a_bulk_load_writes_the_same_rows_and_builds_the_same_indexes_again(demo):
    from django.db import connection

    from bench.benchdata import BenchDataError, bench_data_clear, bench_data_generate

    if connection.vendor != "postgresql":
        with pytest.raises(BenchDataError, match="PostgreSQL"):
            bench_data_generate(count=10, until=UNTIL, bulk=True)
        return
    one_by_one = bench_data_generate(**FOUR_BATCHES)
    expected, indexes = every_row(), index_definitions()  # the months' partitions made, with their indexes
    bench_data_clear()

    bulk = bench_data_generate(**FOUR_BATCHES, bulk=True)

    assert every_row() == expected
    assert totals(bulk) == totals(one_by_one)
    assert index_definitions() == indexes  # dropped for the load (most of them), built again after it
    assert bulk.indexes_built > 0 and one_by_one.indexes_built == 0
    assert not dangling()


def test_a_bulk_load_inside_a_transaction_says_why_it_cannot(demo):
    from bench.benchdata import BenchDataError, bench_data_generate
    from bench.bulk_load import ERROR_IN_TRANSACTION

    with pytest.raises(BenchDataError) as refused:
        bench_data_generate(count=10, until=UNTIL, bulk=True)
    assert ERROR_IN_TRANSACTION in str(refused.value)
    assert not Conversation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_bulk_load_of_a_seed_already_written_says_what_to_do_and_keeps_the_indexes(demo):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("bulk loads are for PostgreSQL (the refusal elsewhere: the test above)")
    generate("--count", "200")
    indexes = index_definitions()
    status, _, err = run("--count", "200", "--bulk", "--until", UNTIL.isoformat())
    assert status == 1 and "--clear" in err
    assert index_definitions() == indexes
    assert Handoff.objects.count() == 200
