"""Impact preview benchmark: 100,000 stored user messages of one profile replayed against its live version and
its draft.

    PYTHONPATH=. DJANGO_SETTINGS_MODULE=platform.settings .venv/bin/python scripts/services.py --scratch \
        --postgres -- .venv/bin/python bench/impact_bench.py [--messages 100000] [--per-conversation 5] [--runs 3]

(Figures in the docs/benchmarks.md.)

Migrates the database the settings point at (a throwaway PostgreSQL with the command above), builds a profile
like the tests' ``telecom_contas`` (4 specialists, 4 intents of 4 keywords, a state policy), and stores
``--messages`` user messages in conversations of ``--per-conversation`` messages over the last 6 days
(``bulk_create``), each with its route decision (the intent its keywords give, the next state it leaves) and the
assistant's answer. The texts are a pool of customer phrases with an order or line number appended, so nearly
every message is a different text (the preview decides each distinct input once per side). Publishes version 1,
then adds two keywords to the draft so some messages move, and times ``releases.impact.impact_preview``
``--runs`` times: median and range. The target: under 15 s.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

PHRASES = {
    "billing_invoice_explanation": [
        "minha fatura veio com valor alto",
        "preciso da segunda via do boleto",
        "quero contestar a cobrança deste mês",
        "qual o vencimento da minha conta",
    ],
    "retail_order_tracking": [
        "quero rastrear meu pedido",
        "a entrega está com atraso",
        "onde está meu pedido",
        "meu rastreio não atualiza",
    ],
    "product_information": [
        "quero saber do plano de internet",
        "qual produto vocês recomendam",
        "o serviço de internet tem fidelidade",
    ],
    "support_request": ["quero fazer uma troca", "o aparelho veio com defeito", "como funciona a garantia"],
    "": ["meu modem não liga", "o roteador pisca vermelho", "oi, bom dia", "sim", "obrigado", "12345"],
}
KEYWORDS = {
    "billing_invoice_explanation": ["fatura", "conta", "cobrança", "boleto", "vencimento", "segunda via"],
    "retail_order_tracking": ["pedido", "entrega", "rastreio", "atraso"],
    "product_information": ["produto", "plano", "serviço", "internet"],
    "support_request": ["troca", "devolução", "garantia", "defeito"],
}
AGENTS = {
    "billing_invoice_explanation": "billing_agent",
    "retail_order_tracking": "orders_agent",
    "product_information": "product_agent",
    "support_request": "support_agent",
}


def build_profile():
    from agents.models import AgentProfile, Specialist
    from routing.models import Intent, Keyword, StatePolicy
    from tenants.models import Tenant

    tenant, _ = Tenant.objects.get_or_create(slug="impact_bench", defaults={"name": "Impact bench"})
    AgentProfile.objects.filter(agent_id="impact_bench").delete()
    profile = AgentProfile.objects.create(agent_id="impact_bench", name="Impact bench", domain="telecom")
    specialists = {name: Specialist.objects.create(profile=profile, name=name) for name in AGENTS.values()}
    profile.fallback_specialist = specialists["support_agent"]
    profile.save(update_fields=["fallback_specialist"])
    for priority, (intent_name, words) in enumerate(KEYWORDS.items(), start=1):
        intent = Intent.objects.create(
            profile=profile,
            name=intent_name,
            specialist=specialists[AGENTS[intent_name]],
            priority=priority * 10,
            next_state="AWAITING_ORDER_ID" if intent_name == "retail_order_tracking" else "",
        )
        for word in words:
            Keyword.objects.create(intent=intent, text=word)
    StatePolicy.objects.create(
        profile=profile,
        state="AWAITING_ORDER_ID",
        specialist=specialists["orders_agent"],
        intent=profile.intents.get(name="retail_order_tracking"),
    )
    return tenant, profile


def store(tenant, profile, messages: int, per_conversation: int, rng: random.Random) -> float:
    from conversations.models import Conversation, Message, RouteDecisionRecord

    started = time.perf_counter()
    now = timezone.now()
    intents = list(PHRASES)
    batch = 2000  # conversations per transaction
    conversations_total = -(-messages // per_conversation)
    written = 0
    for first in range(0, conversations_total, batch):
        with transaction.atomic():
            conversations = Conversation.objects.bulk_create(
                Conversation(
                    tenant=tenant,
                    profile=profile,
                    session_id=f"s-{n}",
                    conversation_key=f"{tenant.slug}:{profile.agent_id}:s-{n}",
                )
                for n in range(first, min(first + batch, conversations_total))
            )
            user_rows, plans = [], []
            for conversation in conversations:
                for _ in range(min(per_conversation, messages - written)):
                    intent = rng.choice(intents)
                    text = f"{rng.choice(PHRASES[intent])} {rng.randint(10_000, 99_999_999)}"
                    user_rows.append(Message(conversation=conversation, tenant=tenant, role="user", content=text))
                    plans.append(intent)
                    written += 1
            stored = Message.objects.bulk_create(user_rows)
            RouteDecisionRecord.objects.bulk_create(
                RouteDecisionRecord(
                    conversation_id=message.conversation_id,
                    tenant=tenant,
                    message=message,
                    mode="router",
                    route=AGENTS.get(intent, "support_agent"),
                    agent=AGENTS.get(intent, "support_agent"),
                    intent=intent or "fallback",
                    method="keyword" if intent else "fallback",
                    next_state="AWAITING_ORDER_ID" if intent == "retail_order_tracking" else "",
                )
                for message, intent in zip(stored, plans, strict=True)
            )
            Message.objects.bulk_create(
                Message(
                    conversation_id=message.conversation_id,
                    tenant=tenant,
                    role="assistant",
                    agent=AGENTS.get(intent, "support_agent"),
                    content="Certo, vou verificar.",
                )
                for message, intent in zip(stored, plans, strict=True)
            )
    # Spread over the last 6 days (auto_now_add stamped them all now): one UPDATE per table.
    with connection.cursor() as cursor:
        for table in ("routing_message", "routing_routedecisionrecord"):
            cursor.execute(
                f"UPDATE {table} SET created_at = %s - (conversation_id %% 8640) * interval '1 minute' "  # noqa: S608
                f"+ id * interval '1 millisecond' WHERE conversation_id IN "
                "(SELECT id FROM routing_conversation WHERE profile_id = %s)",
                [now - timedelta(hours=1), profile.pk],
            )
        cursor.execute("VACUUM ANALYZE routing_message")
        cursor.execute("VACUUM ANALYZE routing_routedecisionrecord")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--per-conversation", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()

    from releases.impact import impact_preview
    from releases.versions import version_publish
    from routing.models import Keyword

    call_command("migrate", "--noinput", verbosity=0)
    tenant, profile = build_profile()
    seconds = store(tenant, profile, args.messages, args.per_conversation, random.Random(args.seed))
    print(f"stored {args.messages:,} user messages (+ decisions and answers) in {seconds:.0f} s")
    version_publish(profile=profile, note="bench v1")
    Keyword.objects.create(intent=profile.intents.get(name="retail_order_tracking"), text="modem")
    Keyword.objects.create(intent=profile.intents.get(name="support_request"), text="roteador")

    timings, result = [], None
    for _ in range(args.runs):
        t0 = time.perf_counter()
        result = impact_preview(agent_id=profile.agent_id, days=7)
        timings.append(time.perf_counter() - t0)
    assert result is not None
    print(
        f"{result['messages']:,} messages replayed, {result['changed']:,} would route differently "
        f"({result['share_changed']:.1%}) in {len(result['groups'])} group(s):"
    )
    for group in result["groups"]:
        print(
            f"  {group['old_intent']} ({group['old_agent']}) → {group['new_intent']} ({group['new_agent']}): "
            f"{group['count']:,}"
        )
    median = statistics.median(timings)
    print(
        f"impact_preview: median {median:.2f} s (range {min(timings):.2f}–{max(timings):.2f} s over {args.runs} "
        f"runs), {result['messages'] / median:,.0f} messages/s — target under 15 s: "
        f"{'met' if median < 15 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
