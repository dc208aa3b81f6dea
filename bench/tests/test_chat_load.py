"""bench/chat_load.py: its report, and its load generator's HTTP client against a real server."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import socket

from bench.chat_load import ratio_to_ideal


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_rate_is_shown_against_what_the_clients_could_do_waiting_only_for_the_model():
    assert ratio_to_ideal(180.0, 200, 1000) == "90% of 200"
    assert ratio_to_ideal(118.8, 64, 1) == "0% of 64000"


def test_with_no_model_latency_there_is_no_ideal_and_no_division_by_zero():
    assert ratio_to_ideal(400.0, 8, 0) == "— (no model latency)"


async def _app(scope, receive, send):
    """A small ASGI app: echoes the body as JSON (with its length), in chunks on /chunked, closing on /close."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    auth = dict(scope["headers"]).get(b"authorization", b"").decode()
    answer = json.dumps({"path": scope["path"], "got": body.decode(), "auth": auth}).encode()
    if scope["path"] == "/chunked":
        await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"application/json")]})
        for piece in (answer[:5], answer[5:]):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]
    if scope["path"] == "/close":
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


def test_the_load_generators_client_keeps_its_connection_reads_both_framings_and_reconnects_after_a_close():
    import uvicorn

    from bench.chat_load import Client

    port = free_port()

    async def scenario():
        server = uvicorn.Server(uvicorn.Config(_app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
        serving = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        client = Client(f"http://127.0.0.1:{port}", timeout=10)
        try:
            key = {"Authorization": "Bearer k"}
            answers = [await client.post("/echo", f"message {n}".encode(), key) for n in range(3)]
            first = client.connection
            chunked = await client.post("/chunked", b"in chunks", {})
            kept = client.connection is first
            closed = await client.post("/close", b"last on this connection", {})
            await asyncio.sleep(0.05)
            reopened = await client.post("/echo", b"on a new connection", {})
            return answers, kept, chunked, closed, reopened, client.connection is not first
        finally:
            client.close()
            server.should_exit = True
            await serving

    answers, kept, chunked, closed, reopened, new_connection = asyncio.run(scenario())

    assert [(status, json.loads(body)["got"]) for status, body in answers] == [(200, f"message {n}") for n in range(3)]
    assert json.loads(answers[0][1])["auth"] == "Bearer k"
    assert kept and chunked[0] == 201 and json.loads(chunked[1])["got"] == "in chunks"
    assert closed[0] == 200 and json.loads(closed[1])["got"] == "last on this connection"
    assert reopened[0] == 200 and json.loads(reopened[1])["got"] == "on a new connection" and new_connection


def test_features_off_switches_people_in_the_loop_off_and_keeps_the_profiles_other_escalation_settings(telecom):
    from agents.models import AgentProfile
    from bench.chat_load import FEATURE_SWITCHES, FEATURES_OFF, _printed

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(FEATURES_OFF.format(agent_id=telecom.agent_id, switches=FEATURE_SWITCHES), {})  # noqa: S102 (manage.py shell -c)

    profile = AgentProfile.objects.get(pk=telecom.pk)
    assert profile.escalation == {**telecom.escalation, "enabled": False}
    assert (profile.examples_keyword_check, profile.summarise_conversations) == (1.0, False)
    assert "escalation.enabled=False" in _printed(printed.getvalue(), "switched:").split(",")


def manage_in_process(*args: str) -> str:
    """A management command run in this process, on the test's database: what it printed."""
    from django.core.management import call_command

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # shell -c prints with print()
        call_command(*args, stdout=printed)
    return printed.getvalue()


def test_features_off_twice_on_one_database_publishes_once_and_again_only_what_was_switched_back_on(telecom):
    from agents.models import AgentProfile
    from bench.chat_load import features_switched_off
    from routing.models import RoutingVersion

    def versions() -> int:
        return RoutingVersion.objects.filter(profile=telecom).count()

    first = features_switched_off({}, telecom.agent_id, manage_in_process)
    after_first = versions()
    second = features_switched_off({}, telecom.agent_id, manage_in_process)  # a kept database's second run
    after_second = versions()
    AgentProfile.objects.filter(pk=telecom.pk).update(summarise_conversations=True)  # switched on again, and live
    manage_in_process("routing_publish", "--profile", telecom.agent_id, "--note", "summaries on")
    third = features_switched_off({}, telecom.agent_id, manage_in_process)

    assert "escalation.enabled=False" in first and first.endswith("; published)") and after_first >= 1
    assert second.endswith("already off; nothing switched, nothing published)") and "retrieval already false" in second
    assert "escalation.enabled=False" in second and after_second == after_first
    assert "summarise_conversations=False switched" in third and third.endswith("; published)")
    assert versions() == after_first + 2
    assert "escalation.enabled=False" in third.split(" switched")[1]  # already off, not switched again


def test_knowledge_off_twice_on_one_database_publishes_once(telecom):
    from bench.chat_load import knowledge_switched_off
    from routing.models import RoutingVersion

    first = knowledge_switched_off({}, telecom.agent_id, manage_in_process)
    published = RoutingVersion.objects.filter(profile=telecom).count()
    second = knowledge_switched_off({}, telecom.agent_id, manage_in_process)  # a kept database's second run

    assert first.endswith("set to false and published)") and published >= 1
    assert second.endswith("already false; nothing published)")
    assert RoutingVersion.objects.filter(profile=telecom).count() == published


def test_with_people_off_only_the_profiles_tests_of_a_handover_to_a_person_are_set_aside(telecom):
    from bench.chat_load import HANDOVER_TESTS_OFF
    from releases.models import ConversationTest

    def saved(name: str, expect: dict) -> ConversationTest:
        turns = [
            {"user": "Minha fatura veio alta", "expect": {"agent": "billing_agent"}},
            {"user": "…", "expect": expect},
        ]
        return ConversationTest.objects.create(profile=telecom, name=name, turns=turns, language="pt")

    by_person = saved("a person takes over", {"agent": "human"})
    escalated = saved("a rule hands over", {"escalated": True, "agent": "support_agent"})
    kept = saved("no person", {"escalated": False, "agent": "support_agent"})

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(HANDOVER_TESTS_OFF.format(agent_id=telecom.agent_id), {})  # noqa: S102 (manage.py shell -c)

    enabled = dict(ConversationTest.objects.values_list("name", "enabled"))
    assert enabled == {by_person.name: False, escalated.name: False, kept.name: True}
    assert "its 2 tests of a handover to a person disabled" in printed.getvalue()


# A process that, when told, touches pages it has not touched yet and has a thread sleep (give up its core) many
# times, the thread staying alive; it says when it is ready and when it is done.
_FAULTS_AND_SWITCHES = """
import mmap, sys, threading, time
pages = mmap.mmap(-1, 256 * mmap.PAGESIZE)
slept, done = threading.Event(), threading.Event()
def sleeper():
    go.wait()
    for _ in range(50):
        time.sleep(0.0001)
    slept.set()
    done.wait()
go = threading.Event()
threading.Thread(target=sleeper).start()
print("ready", flush=True)
sys.stdin.readline()
for page in range(256):
    pages[page * mmap.PAGESIZE] = 1
go.set()
slept.wait()
print("done", flush=True)
sys.stdin.readline()
done.set()
"""


def test_the_kernel_counters_count_a_processs_page_faults_and_the_switches_of_each_of_its_threads():
    import subprocess
    import sys

    from bench.chat_load import KERNEL_COUNTERS, kernel_counters

    child = subprocess.Popen(
        [sys.executable, "-c", _FAULTS_AND_SWITCHES], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline() == "ready\n"
        before = kernel_counters(child.pid)[child.pid]
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"
        after = kernel_counters(child.pid)[child.pid]
    finally:
        child.stdin.close()
        child.wait()
    grown = dict(zip(KERNEL_COUNTERS, (b - a for a, b in zip(before, after, strict=True)), strict=True))
    assert grown["minor faults"] >= 256  # each page written the first time
    assert grown["major faults"] == 0  # anonymous memory: nothing read from disk
    assert grown["voluntary switches"] >= 50  # the other thread's sleeps, not only the main thread's reads


def test_the_kernel_report_gives_each_counter_a_message_for_the_whole_server_and_each_process_alive_at_both_reads():
    from bench.chat_load import kernel_report

    before = {10: (0, 0, 0, 0), 11: (100, 0, 40, 10), 12: (5, 0, 5, 5)}
    after = {10: (0, 0, 1, 0), 11: (300, 2, 440, 210), 13: (999, 9, 999, 999)}  # 12 ended, 13 started in between
    report = kernel_report(before, after, 100)
    assert report.startswith(
        "kernel, per answered message: minor faults 2.0, major faults 0.0, voluntary switches 4.0, "
        "involuntary switches 2.0; by process"
    )
    assert report.endswith("0.00/0.00/0.01/0.00; 2.00/0.02/4.00/2.00")


# Two samples of a served worker, as py-spy writes them with --subprocesses: the supervisor's and the worker's process
# first (a worker's command line holds a ";" of its own), then the worker's frames.
_WORKER = (
    'process 1:"python -m platform.serve --workers 4";process 2:"python -c from multiprocessing.spawn import '
    'spawn_main; spawn_main(tracker_fd=4) --multiprocessing-fork";<module> (<string>:1);worker (platform/serve.py:98)'
)


def test_the_profile_gives_the_served_workers_cpu_a_message_by_stage_of_the_message_path(tmp_path, capsys):
    from bench.chat_load import print_profile

    (tmp_path / "stacks.txt").write_text(
        f"{_WORKER};persist (conversations/graph.py:725);turn_persist (conversations/turn_store.py:320) 3\n"
        f"{_WORKER};run (uvicorn/server.py:70) 1\n"
    )
    print_profile(tmp_path, 4.0)
    shown = capsys.readouterr().out
    assert "| conversation store (load, persist) | 75.0% | 3.00 ms |" in shown
    assert "| the rest of the request (ASGI, middleware, DRF, JSON, the event loop) | 25.0% | 1.00 ms |" in shown
    assert "| **the whole message** | 4 samples | **4.00 ms** |" in shown
