"""Publish propagation benchmark: how long after a publish every serving process answers with the new version.

    PYTHONPATH=. .venv/bin/python bench/publish_bench.py [--processes 4] [--runs 10] [--cache redis|file]

(Figures in the docs/benchmarks.md; the target: every process within 1 s.)

Starts everything itself, as ``bench/chat_load.py`` does: a throwaway PostgreSQL and scratch VAR_DIR
(``scripts/services.py``), with ``--cache redis`` a throwaway Redis (production's shared cache), with ``--cache
file`` none (the embedded default's file cache, shared by the processes of one machine); ``migrate``,
``seed_demo``, a key that may call ``/api/debug/*``; then ``--processes`` production servers (``python -m
platform.serve --workers 1``), each its own process with its own compiled snapshot, on its own port.

Each run changes telecom_contas's draft (a keyword added to an intent) and publishes it with
:func:`releases.versions.version_publish` in this process, as the admin's Publish button does, while one poller per
server asks ``POST /api/debug/route`` (the live version) again and again. A server has seen the publish at the
first answer that names the new version number. Reported per run: how long the publish itself took (the saved
routing tests gate it), and from its commit until the slowest server answered with the new version; then the
median and the worst over the runs.

Every answer after the first with the new number must name it too (a server never goes back to the old version):
the benchmark exits non-zero otherwise, or when a server has not seen a publish within 10 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import services  # noqa: E402  (scripts/services.py: the throwaway PostgreSQL and Redis)

AGENT_ID = "telecom_contas"
TENANT = "tenant_a"
INTENT = "billing_invoice_explanation"
GIVE_UP_SECONDS = 10.0


def _manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


async def _poll(client, url: str, key: str, box: dict, stop: asyncio.Event) -> None:
    """Ask one server for the live decision until ``stop``; note when it first names ``box['expected']``."""
    body = {"agent_id": AGENT_ID, "payload": {"text": "Minha fatura veio alta", "session_id": "publish-bench"}}
    headers = {"Authorization": f"Bearer {key}"}
    while not stop.is_set():
        answer = await client.post(url, json=body, headers=headers)
        answer.raise_for_status()
        version, at = answer.json()["version"], time.perf_counter()
        expected = box.get("expected")
        if expected is None:
            continue
        if version == expected and box.get("seen") is None:
            box["seen"] = at
        elif version != expected and box.get("seen") is not None:
            box["went_back"] = (expected, version)


async def _runs(args: argparse.Namespace, urls: list[str], key: str) -> list[tuple[float, float]]:
    import httpx
    from asgiref.sync import sync_to_async

    from agents.models import AgentProfile
    from releases.versions import version_publish
    from routing.models import Intent, Keyword

    profile = await AgentProfile.objects.aget(agent_id=AGENT_ID)
    intent = await Intent.objects.aget(profile=profile, name=INTENT)
    boxes: list[dict] = [{} for _ in urls]
    stop = asyncio.Event()
    figures: list[tuple[float, float]] = []
    async with httpx.AsyncClient(timeout=10) as client:
        pollers = [
            asyncio.create_task(_poll(client, url, key, box, stop)) for url, box in zip(urls, boxes, strict=True)
        ]
        try:
            await asyncio.sleep(1.0)  # every server answering
            for run in range(args.runs):
                await Keyword.objects.acreate(intent=intent, text=f"publish bench {os.getpid()} {run}")
                started = time.perf_counter()
                version = await sync_to_async(version_publish)(profile=profile, note=f"publish_bench run {run + 1}")
                committed = time.perf_counter()
                for box in boxes:
                    box.clear()
                    box["expected"] = version.number
                deadline = committed + GIVE_UP_SECONDS
                while any(box.get("seen") is None for box in boxes):
                    if time.perf_counter() > deadline:
                        raise SystemExit(f"run {run + 1}: a server had not seen version {version.number} in 10 s")
                    await asyncio.sleep(0.001)
                # A poll answered between the commit and ``expected`` being set counts from the commit.
                slowest = max(max(box["seen"], committed) for box in boxes) - committed
                figures.append((committed - started, slowest))
                print(
                    f"run {run + 1}: version {version.number}: publish {1000 * (committed - started):.0f} ms, "
                    f"every process serving it {1000 * slowest:.1f} ms after the commit"
                )
                await asyncio.sleep(args.pause)
                went_back = [box["went_back"] for box in boxes if "went_back" in box]
                if went_back:
                    raise SystemExit(f"run {run + 1}: a server went back to an older version: {went_back}")
        finally:
            stop.set()
            await asyncio.gather(*pollers, return_exceptions=True)
    return figures


def run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        env = dict(os.environ)
        env.pop("REDIS_URL", None)
        env.update(stack.enter_context(services.scratch()))
        env.update(stack.enter_context(services.postgres()))
        if args.cache == "redis":
            env.update(stack.enter_context(services.redis()))
        env.update(
            {
                **services.bench_server_env(ROOT),
            }
        )
        _manage(env, "migrate", "--noinput")
        _manage(env, "seed_demo")
        key = _manage(env, "create_api_key", "--tenant", TENANT, "--debug").strip().splitlines()[-1]

        urls = []
        for n in range(args.processes):
            port = services.free_port()
            log = Path(env["VAR_DIR"]) / f"server-{n}.log"
            command = ["platform.serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
            with log.open("w") as log_file:
                server = subprocess.Popen(
                    [sys.executable, "-m", *command], cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT
                )
            stack.callback(services.stop_process, server)
            services.wait_healthy(f"http://127.0.0.1:{port}", server, log)
            urls.append(f"http://127.0.0.1:{port}/api/debug/route")

        os.environ.update(env)
        import django

        django.setup()
        import logging

        logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per poll otherwise
        figures = asyncio.run(_runs(args, urls, key))

    publishes = [publish for publish, _ in figures]
    seen = [slowest for _, slowest in figures]
    print(
        f"\n{args.processes} server processes, cache {args.cache}, {len(figures)} publishes: "
        f"every process serving the new version {1000 * statistics.median(seen):.1f} ms after the commit "
        f"(median; worst {1000 * max(seen):.1f} ms); the publish itself {1000 * statistics.median(publishes):.0f} ms "
        f"(median, saved routing tests included)"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=4, help="server processes, each with its own snapshot")
    parser.add_argument("--runs", type=int, default=10, help="publishes measured")
    parser.add_argument("--pause", type=float, default=0.5, help="seconds between publishes")
    parser.add_argument(
        "--cache", choices=("redis", "file"), default="redis", help="redis (production) or the embedded file cache"
    )
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
