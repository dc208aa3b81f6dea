"""The knowledge stage's own CPU at a turn, in this process: a search and its settling for the message benchmark's
searched messages, and a follow-up found nowhere, thread CPU a call.

    PYTHONPATH=. .venv/bin/python bench/knowledge_stage_cost.py [--blocks 9] [--calls 200]

Seeds the demo on a throwaway PostgreSQL (``scripts/services.py``), as ``bench/turn_cpu.py`` does, and calls on this
thread what a turn calls on the request's thread for ``telecom_contas`` (``bench/chat_load.py``'s profile and
tenant): :func:`knowledge.retrieval.knowledge_retrieve` for the two of its five messages that are searched, with
the answer's settling (:func:`conversations.knowledge_turn.knowledge_settle`: the citation's quote and link), and
``conversations.knowledge_turn._thread_retrieved`` for a follow-up whose searches find nothing at the bar (with its
thread, alone, with its thread in every language). The configuration version is pinned as a request pins it. Each
block times ``--calls`` of each; the median block is reported. Figures in docs/benchmarks.md ("The knowledge stage
profiled again").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT))
import services  # noqa: E402  (scripts/services.py: the throwaway PostgreSQL)

from bench.chat_load import AGENT_ID, TENANT, _manage  # noqa: E402

SEARCHED = ("Preciso da segunda via do boleto", "Quero contestar uma cobrança que não reconheço na fatura")
FOLLOW_UP = ("e quanto tempo eu tenho pra isso?", "posso trocar um produto?")  # the message, the one it follows


def run(args: argparse.Namespace) -> None:
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env.update(stack.enter_context(services.scratch()))
        env.update(stack.enter_context(services.postgres()))
        env.update({**services.bench_server_env(ROOT), "OFFLINE_LLM_LATENCY_MS": "0"})
        _manage(env, "migrate", "--noinput")
        _manage(env, "seed_demo")
        _manage(env, "create_api_key", "--tenant", TENANT)
        os.environ.update(env)
        import django

        django.setup()
        from common.config_version import config_version_pinned
        from conversations.knowledge_turn import KnowledgeUse, _thread_retrieved, knowledge_settle
        from knowledge.retrieval import knowledge_retrieve
        from routing.snapshot import current
        from tenants.models import Tenant

        profile = current().profile(AGENT_ID)
        assert profile is not None, AGENT_ID
        scope = {
            "profile_pk": profile.pk,
            "tenant_pk": Tenant.objects.get(slug=TENANT).pk,
            "tags": (),
            "min_score": profile.knowledge.min_score,
            "documents": profile.knowledge_documents,
            "vector_bar": profile.knowledge.vector_bar,
            "synonyms": profile.knowledge_synonyms,
        }

        def searched(text: str) -> None:
            retrieved = knowledge_retrieve(query=text, language="pt", every_language=False, **scope)
            knowledge_settle(KnowledgeUse(retrieved, text, True, retrieved.used), "[1]", answered=True, language="pt")

        def followed() -> None:
            _thread_retrieved(query=FOLLOW_UP[0], thread=FOLLOW_UP[1], language="pt", **scope)

        stack.enter_context(config_version_pinned())
        for text in SEARCHED:
            searched(text)
        followed()
        searches, follow_ups = [], []
        for _ in range(args.blocks):
            began = time.thread_time()
            for _ in range(args.calls):
                for text in SEARCHED:
                    searched(text)
            searches.append((time.thread_time() - began) / (args.calls * len(SEARCHED)) * 1e6)
            began = time.thread_time()
            for _ in range(args.calls // 2):
                followed()
            follow_ups.append((time.thread_time() - began) / (args.calls // 2) * 1e6)
    for name, blocks in (("a search and its settling", searches), ("a follow-up found nowhere", follow_ups)):
        shown = ", ".join(f"{block:.0f}" for block in blocks)
        print(f"{name}: {statistics.median(blocks):.1f} µs (thread CPU, blocks {shown})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=9, help="timed blocks (the median is reported)")
    parser.add_argument("--calls", type=int, default=200, help="calls of each message a block")
    run(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
