"""Goal-mode answers for two tenants, stored through the product's own writer, whose figures the tests work out.

Each answer is a message whose ``metadata["goal"]`` is one of :mod:`conversations.tests.goal_examples`, recorded by
:func:`conversations.goals.records.goal_rows_create` and then dated (``D1`` is yesterday, UTC).

======  =========  =================  =======  =============================================================
tenant  profile    record             when     what the analytics see
======  =========  =================  =======  =============================================================
A       P1         quote_and_notify   D1 10h   success; get_stock_price 120, 80; send_notification failure 40
A       P1         ambiguous_quote    D1 11h   clarification (ambiguous); get_stock_price clarification 30
A       P1         unsure_quote       D2 09h   clarification (low_confidence); no plan
A       P2         failed_movers      D2 10h   failure; get_top_gainers failure 5000; send_notification skipped
A       P1         small_talk         D3 08h   general; no plan
A       P1         quote_and_notify   D40 10h  outside the default 30 days
B       P1         failed_movers ×2   D1 12h   B's own: two failures
B       P1         quote_and_notify   D1 13h   B's own: a success
======  =========  =================  =======  =============================================================

P1 is ``finance_assistente``, P2 ``finance_mercados``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.utils import timezone

from agents.models import AgentProfile
from conversations.goals.records import goal_rows_create
from conversations.models import Conversation, GoalRun, GoalStepRun, Message
from conversations.tests import goal_examples
from tenants.models import Tenant
from tests.factories import AgentProfileFactory


@dataclass
class GoalTraffic:
    today: dt.date
    tenant_a: Tenant
    tenant_b: Tenant
    p1: AgentProfile
    p2: AgentProfile

    def day(self, days_ago: int) -> str:
        return (self.today - dt.timedelta(days=days_ago)).isoformat()


def build_goal_traffic(*, tenant_a: Tenant, tenant_b: Tenant) -> GoalTraffic:
    today = timezone.now().astimezone(dt.UTC).date()
    p1, p2 = AgentProfileFactory(agent_id="finance_assistente"), AgentProfileFactory(agent_id="finance_mercados")
    traffic = GoalTraffic(today=today, tenant_a=tenant_a, tenant_b=tenant_b, p1=p1, p2=p2)
    conversations: dict[tuple[int, int], Conversation] = {}

    def answer(tenant: Tenant, profile: AgentProfile, record: dict, days_ago: int, hour: int) -> None:
        conversation = conversations.get((tenant.pk, profile.pk))
        if conversation is None:
            conversation = Conversation.objects.create(
                tenant=tenant,
                profile=profile,
                session_id="goals",
                conversation_key=f"{tenant.slug}:{profile.agent_id}:goals",
            )
            conversations[(tenant.pk, profile.pk)] = conversation
        message = Message.objects.create(
            conversation=conversation, role="assistant", agent="finance", content="…", metadata={"goal": record}
        )
        run = goal_rows_create(message=message, goal=record, tenant_id=tenant.pk, profile_id=profile.pk)
        when = dt.datetime.combine(today - dt.timedelta(days=days_ago), dt.time(hour), tzinfo=dt.UTC)
        for model, rows in ((Message, {"pk": message.pk}), (GoalRun, {"pk": run.pk}), (GoalStepRun, {"run": run})):
            model.objects.filter(**rows).update(created_at=when)

    answer(tenant_a, p1, goal_examples.quote_and_notify(), 1, 10)
    answer(tenant_a, p1, goal_examples.ambiguous_quote(), 1, 11)
    answer(tenant_a, p1, goal_examples.unsure_quote(), 2, 9)
    answer(tenant_a, p2, goal_examples.failed_movers(), 2, 10)
    answer(tenant_a, p1, goal_examples.small_talk(), 3, 8)
    answer(tenant_a, p1, goal_examples.quote_and_notify(), 40, 10)
    answer(tenant_b, p1, goal_examples.failed_movers(), 1, 12)
    answer(tenant_b, p1, goal_examples.failed_movers(), 1, 12)
    answer(tenant_b, p1, goal_examples.quote_and_notify(), 1, 13)
    return traffic
