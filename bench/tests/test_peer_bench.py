"""bench/peer_bench.py and its LangGraph peer (bench/peer_app.py), where they can be checked without a server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from bench.peer_app import load_profile, parse_message
from bench.peer_bench import Measured, count_peer, database_url, parse_args, requirements_hash, verdict


@pytest.fixture(scope="module")
def profile():
    return load_profile()


def test_by_default_both_servers_get_64_clients_for_three_rounds_of_20_seconds_with_four_workers():
    args = parse_args([])
    assert (args.clients, args.duration, args.warmup, args.rounds, args.workers) == (64, 20, 5, 3, 4)
    assert args.knowledge == "on"  # ours as the demo is seeded; off: the flow the peer serves, no help centre
    assert args.latency_ms == 0 and args.target == 2.0 and args.access_log


def test_the_options_of_a_smoke_run_are_read_and_nonsense_is_refused(capsys):
    args = parse_args(["--clients", "8", "--duration", "3", "--warmup", "1", "--rounds", "1", "--latency-ms", "200"])
    assert (args.clients, args.duration, args.warmup, args.rounds, args.latency_ms) == (8, 3, 1, 1, 200)
    assert not parse_args(["--no-access-log"]).access_log
    with pytest.raises(SystemExit):
        parse_args(["--clients", "0"])
    assert "--clients must be at least 1" in capsys.readouterr().err


def test_an_invoice_question_goes_to_the_billing_agent_by_the_profiles_keywords(profile):
    decided = profile.route("Minha fatura veio alta")
    assert (decided.agent, decided.intent) == ("billing_agent", "billing_invoice_explanation")
    assert decided.topic.startswith("Dúvidas sobre fatura")


def test_keywords_match_folded_text_and_the_lower_priority_number_wins(profile):
    assert profile.route("QUERO CONTESTAR UMA COBRANCA").agent == "billing_agent"  # "cobrança", accent folded
    assert profile.route("Meu pedido não chegou, cadê a entrega?").agent == "orders_agent"
    # "internet lenta" (technical_support, priority 25) beats "internet" (product_information, 30).
    assert profile.route("minha internet lenta de novo").intent == "technical_support"
    # "pix" (billing_payment_request, 5) beats "fatura" (billing_invoice_explanation, 10).
    assert profile.route("quero pagar a fatura no pix").intent == "billing_payment_request"


def test_a_keyword_matches_whole_words_only_and_no_keyword_means_the_fallback_agent(profile):
    assert profile.route("Qual é o contato de vocês?").agent == "support_agent"  # "conta" is not in "contato"
    decided = profile.route("Bom dia!")
    assert (decided.agent, decided.intent, decided.topic) == ("support_agent", "", "")


def test_each_specialist_answers_with_the_profiles_policy_then_its_own_prompt(profile):
    prompt = profile.prompts["billing_agent"]
    assert prompt.startswith("Você faz parte da equipe de atendimento digital da Conecta Telecom")
    assert "Você é o especialista de faturas e pagamentos" in prompt
    assert profile.display_names["billing_agent"] == "Faturas e pagamentos"


def test_the_peers_model_loads_and_answers_in_a_process_that_has_no_django_of_its_own():
    # The peer's workers start with no settings module: the model module's imports (the handoffs door) must find
    # every app they need in the registry the peer configures, or each worker fails at start-up.
    script = (
        "from bench.peer_app import configure_django\n"
        "configure_django(0)\n"
        "from langchain_core.messages import HumanMessage, SystemMessage\n"
        "from agents.llm import OfflineChatModel\n"
        "model = OfflineChatModel(display_name='Faturas', topic='fatura', latency_ms=0, agent='billing_agent')\n"
        "print(model.invoke([SystemMessage('Você é o especialista.'), HumanMessage('minha fatura veio alta')]).text)\n"
    )
    env = {name: value for name, value in os.environ.items() if not name.startswith("DJANGO_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "minha fatura veio alta" in done.stdout


def test_the_peer_takes_our_message_body_and_refuses_what_ours_would():
    body = {"channel": "web", "agent_id": "telecom_contas", "payload": {"text": "Oi", "session_id": "s1"}}
    assert parse_message(body, "telecom_contas") == ("Oi", "s1")
    assert "agent_id" in parse_message({**body, "agent_id": "retail_orders"}, "telecom_contas")
    assert "payload.text" in parse_message({**body, "payload": {"session_id": "s1"}}, "telecom_contas")
    assert "payload" in parse_message([], "telecom_contas")


def test_the_peers_database_is_another_database_on_the_same_server():
    url = "postgres://postgres@127.0.0.1:5999/platform"
    assert database_url(url, "peer") == "postgres://postgres@127.0.0.1:5999/peer"


def test_the_peer_virtualenv_is_refilled_when_either_requirements_file_changes(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("langgraph==1.2.22\n")
    second.write_text("starlette==1.10.0\n")
    before = requirements_hash([first, second])
    assert requirements_hash([first, second]) == before
    second.write_text("starlette==1.10.1\n")
    assert requirements_hash([first, second]) != before


def test_a_peer_thread_short_of_two_messages_per_accepted_answer_counts_as_lost():
    run = Measured(server="peer", round=1, duration=1.0, sessions=["a", "b"], accepted=Counter(a=3, b=2))
    count_peer(run, {"k:a": 6, "k:b": 3}, "k:{session}")
    assert (run.lost, run.beyond) == (1, 0)


def _run(server: str, rate: float, p99_s: float) -> Measured:
    return Measured(server=server, round=1, duration=1.0, sessions=[], latencies=[p99_s] * int(rate))


def test_the_target_needs_twice_the_throughput_and_a_p99_no_higher_than_the_peers():
    lines, met = verdict([_run("ours", 200, 0.05)], [_run("peer", 90, 0.1)], 2.0)
    assert met and "2.22×" in lines[-1] and "**met**" in lines[-1]
    _, met = verdict([_run("ours", 200, 0.2)], [_run("peer", 90, 0.1)], 2.0)
    assert not met
    lines, met = verdict([_run("ours", 150, 0.05)], [_run("peer", 90, 0.1)], 2.0)
    assert not met and "below 2×" in lines[-1]
