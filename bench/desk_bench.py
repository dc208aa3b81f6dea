"""The desk under load: a person's reply reaching the customer's socket, against the production server.

    PYTHONPATH=. .venv/bin/python bench/desk_bench.py [--customers 200] [--escalating 20] [--people 10]
        [--replies 5] [--reply-every-s 0.5] [--arrivals-s 10] [--think-s 10] [--latency-ms 300] [--workers N]

Starts everything itself: a throwaway PostgreSQL, Redis (the channel layer every web worker shares) and scratch
VAR_DIR (``scripts/services.py``), ``migrate``, ``seed_demo``, an API key, ``--people`` staff users granted *answer
as a person* over the tenant, then the production server (``python -m platform.serve``, ``DJANGO_DEBUG=false``,
several workers: a person's desk and a customer's socket are usually in different processes) with the offline model
sleeping ``--latency-ms`` per call.

``--customers`` customers open ``/ws/chat/telecom_contas/<session>/`` with the tenant's key; ``--escalating`` of
them ask for a person ("quero falar com um atendente humano", arriving one after another over ``--arrivals-s``) and
wait, the others keep chatting with the assistants for the whole run (invoice questions, each ``--think-s`` seconds
after the last answer, as a person types). ``--people`` people log in (the admin's login form) and open
``/ws/desk/``; each takes conversations from the queue as they arrive (several people racing for the same one: one
gets it, the others are told who has it) and writes ``--replies`` replies to each, one every ``--reply-every-s``,
then hands it back. Every reply carries a token: the benchmark notes when the desk sent it and when the customer's
socket received it (one clock, one process), so the person → customer delivery time is measured end to end — the
desk socket, the database write, the channel layer's Redis, the customer's worker, the socket. A reply the customer
has not received when the hand-back reaches it (pushed after every reply) is lost; one received twice is duplicated.
After the hand-back each escalating customer writes again, and an assistant must answer (routed by the bots). Exits
non-zero on a lost or duplicated reply, an error, or a p95 of 200 ms or more.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "bench"))
import services  # noqa: E402  (scripts/services.py)
from chat_load import _manage, _percentile, _tree  # noqa: E402

AGENT_ID = "telecom_contas"
TENANT = "tenant_a"
ASK = "quero falar com um atendente humano"
CHATTER = ("Minha fatura veio alta", "Quando vence a minha conta?", "Preciso da segunda via do boleto")
TARGET_P95_MS = 200.0
PASSWORD = "desk-bench-only"  # noqa: S105  # the throwaway database's staff, for this run only

PEOPLE_SETUP = """
from django.contrib.auth import get_user_model
from tenants.models import Tenant, TenantGrant
tenant = Tenant.objects.get(slug={tenant!r})
for n in range({people}):
    user, _ = get_user_model().objects.get_or_create(
        username=f"person{{n:02d}}", defaults={{"is_staff": True, "first_name": f"Person {{n:02d}}"}}
    )
    user.set_password({password!r}); user.is_staff = True; user.save()
    TenantGrant.objects.update_or_create(tenant=tenant, user=user, defaults={{"answer_as_person": True}})
"""


async def _open(url: str, headers: dict[str, str]):
    import websockets

    return await websockets.connect(url, additional_headers=headers, max_size=None, open_timeout=30)


async def _login(base: str, username: str) -> str:
    """A staff session's cookie, through the admin's login form (as a browser)."""
    import httpx

    async with httpx.AsyncClient(base_url=base, follow_redirects=False, timeout=30) as client:
        page = await client.get("/admin/login/")
        token = client.cookies["csrftoken"]
        form = {"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token, "next": "/desk/"}
        answer = await client.post("/admin/login/", data=form, headers={"Referer": f"{base}/admin/login/"})
        if answer.status_code != 302 or "sessionid" not in client.cookies:
            raise SystemExit(f"login of {username} failed: {answer.status_code} {page.status_code}")
        return f"csrftoken={token}; sessionid={client.cookies['sessionid']}"


class Run:
    """What the clients saw, in one process (one clock)."""

    def __init__(self) -> None:
        self.sent: dict[str, float] = {}  # reply token → when the desk sent it
        self.acked: list[float] = []  # ms from a reply's frame to the desk's answer (stored)
        self.received: dict[str, list[float]] = {}  # token → when the customer's socket got it
        self.errors: list[str] = []
        self.conflicts = 0
        self.queued: asyncio.Queue[str] = asyncio.Queue()  # escalation ids, as the desks hear of them
        self.heard: set[str] = set()  # ... once each (a snapshot and an event may both name one)
        self.escalations: set[str] = set()
        self.handed_back: dict[str, asyncio.Event] = {}  # conversation key → handed back
        self.chatter_turns = 0
        self.routed_after = 0

    def hear(self, escalation: str) -> None:
        if escalation not in self.heard:
            self.heard.add(escalation)
            self.queued.put_nowait(escalation)


async def _receive(ws, timeout: float = 60) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout=timeout))


async def _turn(ws, text: str) -> dict:
    """Send ``text`` and read the turn's events up to ``done`` (only ``done`` and ``error`` are decoded: the client
    spends its CPU on what it measures, not on the streamed tokens)."""
    await ws.send(json.dumps({"text": text}))
    while True:
        raw = await asyncio.wait_for(ws.recv(), timeout=60)
        if raw.startswith(('{"type": "done"', '{"type": "error"')):
            event = json.loads(raw)
            if event["type"] == "error":
                raise RuntimeError(event.get("error"))
            return event


async def _chatter(ws_base: str, key: str, n: int, think: float, stop: asyncio.Event, run: Run) -> None:
    try:
        ws = await _open(f"{ws_base}/ws/chat/{AGENT_ID}/chat-{n:04d}/", {"Authorization": f"Bearer {key}"})
    except Exception as exc:  # noqa: BLE001 — counted
        run.errors.append(f"customer {n} connect: {type(exc).__name__}: {exc}")
        return
    pace = random.Random(n)  # customers do not write in step: each starts and pauses on its own clock
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=pace.uniform(0, think))
    async with ws:
        for turn in itertools.count():
            if stop.is_set():
                return
            try:
                await _turn(ws, CHATTER[(n + turn) % len(CHATTER)])
                run.chatter_turns += 1
            except Exception as exc:  # noqa: BLE001
                run.errors.append(f"customer {n}: {type(exc).__name__}: {exc}")
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=pace.uniform(0.5 * think, 1.5 * think))


async def _escalating(ws_base: str, key: str, n: int, arrives: float, run: Run) -> None:
    await asyncio.sleep(arrives)
    headers = {"Authorization": f"Bearer {key}"}
    try:
        ws = await _open(f"{ws_base}/ws/chat/{AGENT_ID}/person-{n:04d}/", headers)
    except Exception as exc:  # noqa: BLE001
        run.errors.append(f"escalating {n} connect: {type(exc).__name__}: {exc}")
        return
    async with ws:
        done = await _turn(ws, ASK)
        escalation = (done["metadata"] or {}).get("escalation") or {}
        if escalation.get("status") != "queued":
            run.errors.append(f"escalating {n}: not queued: {escalation}")
            return
        back = run.handed_back.setdefault(done["conversation_key"], asyncio.Event())
        while not back.is_set():
            try:
                event = await _receive(ws, timeout=120)
            except Exception as exc:  # noqa: BLE001
                run.errors.append(f"escalating {n}: {type(exc).__name__}: {exc}")
                return
            now = time.perf_counter()
            if event["type"] == "human":
                token = event["message"]["content"].rsplit(" ", 1)[-1]
                run.received.setdefault(token, []).append(now)
            elif event["type"] == "escalation" and event["escalation"]["status"] == "returned":
                back.set()
        routed = await _turn(ws, CHATTER[n % len(CHATTER)])
        if routed["agent"] in ("", "human"):
            run.errors.append(f"escalating {n}: after the hand-back {routed['agent']!r} answered")
        else:
            run.routed_after += 1


async def _person(
    ws_base: str, cookie: str, index: int, replies: tuple[int, float], run: Run, stop: asyncio.Event
) -> None:
    try:
        ws = await _open(f"{ws_base}/ws/desk/", {"Cookie": cookie})
    except Exception as exc:  # noqa: BLE001
        run.errors.append(f"person {index} connect: {type(exc).__name__}: {exc}")
        return
    ids = itertools.count()
    answers: dict[str, asyncio.Future] = {}

    async def listen() -> None:
        try:
            await frames()
        except Exception as exc:  # noqa: BLE001 — counted
            run.errors.append(f"person {index} desk socket: {type(exc).__name__}: {exc}")

    async def frames() -> None:
        async for raw in ws:
            event = json.loads(raw)
            if event["type"] in ("result", "error") and str(event.get("id")) in answers:
                answers.pop(str(event["id"])).set_result(event)
            elif event["type"] == "snapshot":
                for row in event.get("queues") or []:
                    run.hear(str(row["id"]))
            elif event["type"] == "queued":
                run.hear(str(event["escalation"]["id"]))
            elif event["type"] == "error":
                run.errors.append(f"person {index}: {event.get('error')}")

    async def act(action: str, escalation: str, **fields) -> dict:
        frame_id = f"{index}-{next(ids)}"
        answer = answers[frame_id] = asyncio.get_running_loop().create_future()
        await ws.send(json.dumps({"id": frame_id, "action": action, "escalation": escalation, **fields}))
        return await asyncio.wait_for(answer, timeout=30)

    listener = asyncio.create_task(listen())
    try:
        while not stop.is_set():
            try:
                escalation = await asyncio.wait_for(run.queued.get(), timeout=0.5)
            except TimeoutError:
                continue
            taken = await act("take", escalation)
            if taken["type"] == "error":
                if taken["error"]["code"] == "conflict":
                    run.conflicts += 1
                else:
                    run.errors.append(f"person {index} take: {taken['error']}")
                continue
            run.escalations.add(escalation)
            count, every = replies
            for reply in range(count):
                token = uuid.uuid4().hex
                run.sent[token] = time.perf_counter()
                answer = await act("reply", escalation, text=f"Resposta {reply + 1} da pessoa {index}: {token}")
                run.acked.append((time.perf_counter() - run.sent[token]) * 1000)
                if answer["type"] == "error":
                    run.errors.append(f"person {index} reply: {answer['error']}")
                await asyncio.sleep(every)
            back = await act("hand_back", escalation)
            if back["type"] == "error":
                run.errors.append(f"person {index} hand back: {back['error']}")
    finally:
        listener.cancel()
        await ws.close()


async def _run(args: argparse.Namespace, base: str, key: str) -> tuple[Run, float]:
    ws_base = base.replace("http://", "ws://")
    run = Run()
    cookies = [await _login(base, f"person{n:02d}") for n in range(args.people)]
    stop_people, stop_chatter = asyncio.Event(), asyncio.Event()
    people = [
        asyncio.create_task(_person(ws_base, cookie, n, (args.replies, args.reply_every_s), run, stop_people))
        for n, cookie in enumerate(cookies)
    ]
    await asyncio.sleep(1)  # the desks are open
    chatter = [
        asyncio.create_task(_chatter(ws_base, key, n, args.think_s, stop_chatter, run))
        for n in range(args.customers - args.escalating)
    ]
    started = time.perf_counter()
    await asyncio.sleep(args.think_s)  # the chatting customers are under way
    arrivals = [args.arrivals_s * n / max(args.escalating, 1) for n in range(args.escalating)]
    await asyncio.gather(*(_escalating(ws_base, key, n, arrivals[n], run) for n in range(args.escalating)))
    elapsed = time.perf_counter() - started
    stop_people.set()
    stop_chatter.set()
    await asyncio.gather(*people, *chatter)
    return run, elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--customers", type=int, default=200, help="Customer sockets in all.")
    parser.add_argument("--escalating", type=int, default=20, help="Of them, customers who ask for a person.")
    parser.add_argument("--people", type=int, default=10, help="People answering on the desk.")
    parser.add_argument("--replies", type=int, default=5, help="Replies a person writes to each conversation.")
    parser.add_argument("--reply-every-s", type=float, default=0.5, help="A person's pause between replies.")
    parser.add_argument("--arrivals-s", type=float, default=10.0, help="The escalating customers arrive over this.")
    parser.add_argument("--think-s", type=float, default=10.0, help="A chatting customer's pause between messages.")
    parser.add_argument("--latency-ms", type=int, default=300, help="OFFLINE_LLM_LATENCY_MS of the server.")
    parser.add_argument("--workers", type=int, default=None, help="Server workers (default: platform.serve's).")
    args = parser.parse_args(argv)

    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env.update(stack.enter_context(services.scratch()))
        env.update(stack.enter_context(services.postgres()))
        env.update(stack.enter_context(services.redis()))
        env.update({**services.bench_server_env(ROOT), "OFFLINE_LLM_LATENCY_MS": str(args.latency_ms)})
        _manage(env, "migrate", "--noinput")
        _manage(env, "seed_demo")
        key = _manage(env, "create_api_key", "--tenant", TENANT).strip().splitlines()[-1]
        _manage(env, "shell", "-c", PEOPLE_SETUP.format(tenant=TENANT, people=args.people, password=PASSWORD))
        port = services.free_port()
        base = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "platform.serve", "--host", "127.0.0.1", "--port", str(port)]
        command += ["--no-access-log"] + (["--workers", str(args.workers)] if args.workers else [])
        log = Path(env["VAR_DIR"]) / "server.log"
        with log.open("w") as log_file:
            server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
        stack.callback(services.stop_process, server)
        services.wait_healthy(base, server, log)
        workers = len(_tree(server.pid)) - 1
        run, elapsed = asyncio.run(_run(args, base, key))
        services.stop_process(server)
        complaints = [line for line in log.read_text(errors="replace").splitlines() if "ERROR" in line]

    latencies = [
        (received[0] - run.sent[token]) * 1000 for token, received in run.received.items() if token in run.sent
    ]
    lost = [token for token in run.sent if token not in run.received]
    duplicated = [token for token, received in run.received.items() if len(received) > 1]
    print(
        f"\n{args.customers} customer sockets ({args.escalating} asking for a person, "
        f"{args.customers - args.escalating} chatting with the assistants: {run.chatter_turns} turns), "
        f"{args.people} people on the desk, "
        f"{workers} server workers, OFFLINE_LLM_LATENCY_MS={args.latency_ms}, {os.cpu_count()} cores, "
        f"{elapsed:.1f} s"
    )
    print(
        f"escalations taken: {len(run.escalations)} of {args.escalating} (takes lost to another person: "
        f"{run.conflicts}); replies sent: {len(run.sent)}, received: {len(latencies)}, lost: {len(lost)}, "
        f"duplicated: {len(duplicated)}; routed by the assistants after the hand-back: {run.routed_after}"
    )
    if latencies:
        print(
            f"person → customer delivery, ms: median {statistics.median(latencies):.1f}, "
            f"p95 {_percentile(latencies, 0.95):.1f}, p99 {_percentile(latencies, 0.99):.1f}, max {max(latencies):.1f}"
        )
    if run.acked:
        print(
            f"desk's answer to a reply (stored), ms: median {statistics.median(run.acked):.1f}, "
            f"p95 {_percentile(run.acked, 0.95):.1f}"
        )
    print(f"errors: {len(run.errors)}")
    for error in run.errors[:20]:
        print(f"  {error}")
    print(f"server log errors: {len(complaints)}")
    for line in complaints[:10]:
        print(f"  {line}")
    p95 = _percentile(latencies, 0.95) if latencies else float("inf")
    failed = (
        run.errors
        or lost
        or duplicated
        or p95 >= TARGET_P95_MS
        or len(run.escalations) != args.escalating
        or run.routed_after != args.escalating
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
