"""``bench/generate_handoffs.py``: bench data shaped like what the graph stores, at a small scale."""

from __future__ import annotations

import re
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.db.models import Count, F, Max, Min, Q

from agents.models import AgentProfile
from bench.benchdata import ERROR_ALREADY_GENERATED
from bench.generate_handoffs import main
from conversations.models import Conversation, Message, MessageRole, RouteDecisionRecord, ToolCall, ToolCallStatus
from handoffs.models import Handoff, HandoffKind, HandoffStatus
from tenants.models import Tenant

pytestmark = pytest.mark.django_db

UNTIL = datetime(2025, 6, 1, tzinfo=UTC)
DAYS = 30


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


@pytest.fixture
def generated() -> str:
    return generate("--count", "500", "--days", str(DAYS), "--batch", "200")


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


def test_it_writes_exactly_the_handoffs_asked_for_in_batches_and_says_how_long_it_took(generated):
    assert Handoff.objects.count() == 500
    assert "500 / 500 handoffs" in generated
    assert re.search(r"Generated 500 handoffs in [\d,]+ conversations .* in \d+ min [\d.]+ s\.", generated)


def test_it_creates_the_bench_tenants_and_uses_the_demo_profiles(generated):
    assert set(Tenant.objects.filter(conversations__isnull=False).values_list("slug", flat=True)) == {
        "bench_tenant_1",
        "bench_tenant_2",
        "bench_tenant_3",
    }
    assert set(Conversation.objects.values_list("profile__agent_id", flat=True)) == {
        "telecom_contas",
        "retail_orders",
        "telecom_assistente",
    }


def test_handoffs_repeat_their_conversations_tenant_and_profile(generated):
    assert not Handoff.objects.exclude(tenant_id=F("conversation__tenant_id")).exists()
    assert not Handoff.objects.exclude(profile_id=F("conversation__profile_id")).exists()
    for key, tenant, agent_id, session in Conversation.objects.values_list(
        "conversation_key", "tenant__slug", "profile__agent_id", "session_id"
    ):
        assert key == f"{tenant}:{agent_id}:{session}"


def test_every_row_lies_in_the_range_and_within_its_conversation(generated):
    start = UNTIL - timedelta(days=DAYS)
    for model in (Conversation, Message, RouteDecisionRecord, ToolCall, Handoff):
        bounds = model.objects.aggregate(first=Min("created_at"), last=Max("created_at"))
        assert start <= bounds["first"] and bounds["last"] <= UNTIL, model.__name__
    assert not Handoff.objects.filter(created_at__lt=F("conversation__created_at")).exists()
    # The last turn's moves are stored microseconds after the conversation row's update, as in _persist.
    assert not Handoff.objects.filter(created_at__gt=F("conversation__updated_at") + timedelta(seconds=1)).exists()
    assert not Message.objects.filter(created_at__lt=F("conversation__created_at")).exists()


def test_turns_are_stored_as_the_graph_stores_them(generated):
    per_conversation = Conversation.objects.annotate(
        stored=Count("messages", distinct=True),
        users=Count("messages", filter=Q(messages__role=MessageRole.USER), distinct=True),
        answers=Count("messages", filter=Q(messages__role=MessageRole.ASSISTANT), distinct=True),
        decisions=Count("route_decisions", distinct=True),
    ).values_list("message_count", "stored", "turn_tickets_done", "users", "answers", "decisions")
    for message_count, stored, turns, users, answers, decisions in per_conversation:
        assert message_count == stored
        assert turns == users == answers == decisions
        assert 1 <= turns <= 8
    answers = Message.objects.filter(role=MessageRole.ASSISTANT)
    assert not answers.filter(latency_ms__isnull=True).exists()
    assert not answers.filter(judge_score__lt=0).exists() and not answers.filter(judge_score__gt=1).exists()
    assert not answers.exclude(cohort=F("conversation__cohort")).exists()
    # A routing handoff is exactly a decision that moved the conversation (CompiledRouter.mark_handoff), unless the
    # move went to or from a remote backend: then it is the gateway's backend_handoff (conversations/graph.py).
    assert (
        Handoff.objects.filter(kind__in=[HandoffKind.ROUTING, HandoffKind.BACKEND]).count()
        == RouteDecisionRecord.objects.filter(handoff=True).count()
    )


def test_the_single_agent_cohort_never_moves_between_agents(generated):
    cohorts = dict(Conversation.objects.values_list("cohort").annotate(n=Count("id")))
    assert cohorts["multi_agent"] > cohorts["single_agent"] > 0
    assert not Handoff.objects.filter(conversation__cohort="single_agent").exists()


def test_every_kind_and_status_and_the_tool_errors_are_there(generated):
    assert set(Handoff.objects.values_list("kind", flat=True)) == set(HandoffKind.values)
    assert set(Handoff.objects.values_list("status", flat=True)) == set(HandoffStatus.values)
    routing = Handoff.objects.filter(kind=HandoffKind.ROUTING).count()
    assert all(
        routing > Handoff.objects.filter(kind=kind).count()
        for kind in HandoffKind.values
        if kind != HandoffKind.ROUTING
    )
    assert set(Handoff.objects.filter(kind=HandoffKind.RETURN).values_list("outcome", flat=True)) >= {
        "completed",
        "out_of_scope",
    }
    assert Handoff.objects.filter(status=HandoffStatus.STOPPED).exclude(outcome="").exists()
    assert {"ok", "error"} <= set(ToolCall.objects.values_list("status", flat=True))
    methods = set(RouteDecisionRecord.objects.values_list("method", flat=True))
    assert {"keyword", "state", "llm", "fallback", "coordinator", "sub_conversation"} <= methods


def test_delegations_and_returns_belong_to_the_coordinated_profile(generated):
    for kind in (HandoffKind.DELEGATION, HandoffKind.RETURN):
        assert set(Handoff.objects.filter(kind=kind).values_list("profile__agent_id", flat=True)) == {
            "telecom_assistente"
        }
    fanouts = Handoff.objects.filter(kind=HandoffKind.FANOUT)
    assert set(fanouts.values_list("from_agent", flat=True)) == {"supervisor_agent"}


def test_the_same_seed_gives_the_same_rows_and_clear_removes_them():
    generate("--count", "300", "--seed", "7")
    first = handoff_rows()
    output = generate("--clear", "--count", "300", "--seed", "7")
    assert "Cleared bench data" in output
    assert handoff_rows() == first
    assert Handoff.objects.count() == 300

    generate("--clear", "--count", "300", "--seed", "8")
    assert handoff_rows() != first


def test_clear_leaves_other_tenants_alone(tenant):
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
    generate("--count", "20")
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
    routing tests describe router mode (a message hitting two intents is one intent there, a plan here), so they
    are switched off rather than forced past the gate."""
    from routing.models import RoutingTestCase
    from routing.versions import version_publish

    profile = AgentProfile.objects.get(agent_id="telecom_contas")
    RoutingTestCase.objects.filter(profile=profile).update(enabled=False)
    version_publish(profile=profile, note="supervisor mode")


def test_the_generator_writes_the_rows_the_graph_writes(tenant, mcp_servers):
    """Both build a turn's rows with conversations.records.turn_rows: a row retyped on either side (a column
    more or less, another metadata key, another text for a supervisor part with no answer) fails here."""
    from agents.models import McpServer
    from common.config_version import config_version_bump
    from conversations.supervisor import GAP_TEXT

    generate("--count", "2000", "--days", str(DAYS))  # loads the demo profiles
    for name, url in mcp_servers.items():
        McpServer.objects.filter(name=name).update(endpoint=url)
    config_version_bump()  # QuerySet.update bypasses the invalidation signals
    for agent_id, session, texts in GRAPH_CONVERSATIONS:
        for text in texts:
            graph_turn(tenant, agent_id, session, text)
    AgentProfile.objects.filter(agent_id="telecom_contas").update(routing_mode="supervisor")
    supervisor_mode_published()
    graph_turn(tenant, "telecom_contas", "g-plan", SUPERVISOR_TEXT)

    graph = Conversation.objects.filter(tenant=tenant)
    bench = Conversation.objects.filter(tenant__slug__startswith="bench_tenant_")
    graph_shape, bench_shape = shape(graph), shape(bench)
    assert set(graph_shape) <= set(bench_shape)
    assert set(graph_shape) >= {
        ("Conversation", ""),
        *(("Message", role) for role in MessageRole.values),
        ("RouteDecisionRecord", ""),
        ("ToolCall", ToolCallStatus.OK),
        ("ToolCall", ToolCallStatus.PERMISSION_REQUIRED),
        *(("Handoff", kind) for kind in (HandoffKind.ROUTING, HandoffKind.DELEGATION, HandoffKind.RETURN)),
        ("Handoff", HandoffKind.FANOUT),
    }
    for key, (not_null, filled) in graph_shape.items():
        assert not_null == bench_shape[key][0], key
        assert filled <= bench_shape[key][1], key

    for role in (MessageRole.USER, MessageRole.SYSTEM, MessageRole.AGENT):
        assert metadata_keys(graph, role) == metadata_keys(bench, role), role
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
    assert set(gaps.values_list("content", flat=True)) == {GAP_TEXT.format(reason="timeout")}
