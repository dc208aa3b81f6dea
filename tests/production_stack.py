"""A production-like stack of the platform, private to the tests that use it, with switches to break its parts.

    def test_something(production_stack):
        stack = production_stack
        stack.stop_redis() ... stack.start_redis()
        stack.stop_postgres() ... stack.start_postgres()
        stack.kill_worker(); stack.start_worker()
        stack.freeze_mcp("telecom"); stack.thaw_mcp("telecom"); stack.kill_mcp("telecom"); stack.start_mcp("telecom")
        await send_message(client, stack.keys["tenant_a"], agent_id=..., session_id=..., text=...)
        stack.conversation_messages(key), stack.unbalanced_conversations()

Everything the reliability probe started, started again for this test session alone: a PostgreSQL cluster and
a redis-server of their own (``scripts/services.py``'s context managers, on free ports), the two example MCP
servers, one Celery worker (prefork, 4 children, as docker-compose runs it) and the production web server
``python -m platform.serve --workers 2`` with ``DJANGO_DEBUG=false``. The database is prepared as an operator
would: ``migrate``, ``collectstatic`` and ``seed_demo`` in one ``manage.py shell``, then the admin's edits and
``create_api_key`` in another. Every process writes its stdout and stderr to its own log
file under the stack's directory (``log_files()``); a test that fails gets them copied to
``$TEST_OUTPUT_DIR/production-stack/<test>/``.

Secrets are planted as an operator would hold them (:data:`CANARIES`, ``stack.canaries``): the settings'
(``DJANGO_SECRET_KEY``, the database password, ``METRICS_TOKEN``, ``OTEL_EXPORTER_OTLP_HEADERS``, the events
webhook's URL and signing key, model keys) and the data's (the telecom MCP endpoint's user, password and token; a
remote backend's credentials and key on ``retail_orders``, reached by the word ``canario``; ``finance_assistente``'s own
model endpoint, in router mode, and the external desk its escalations are posted to: its URL's credentials and its
signing secret). The webhook, the backend and that model endpoint are ``stack.sink``, a receiver in
the test process. Celery beat runs too.

The ``telecom_contas`` profile runs in supervisor mode (its specialists fan out to the Celery worker), the other
demo profiles in router mode (specialists in the web process), so one stack exercises both paths. The model is
the offline one, sleeping ``OFFLINE_LLM_LATENCY_MS`` per call.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from scripts import services
from tests.celery_processes import CeleryWorkerProcess, CeleryWorkerStartError
from tests.platform_instance import restore_migrated
from tests.webhook_receiver import Receiver

PROJECT_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"

OFFLINE_LLM_LATENCY_MS = 300
# SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS: a lost Celery step is given up on soon, yet a specialist whose two tool
# calls both wait for a frozen MCP server's timeout still answers itself, naming the tool's timeout.
SPECIALIST_TIMEOUT_SECONDS = 12.0
MCP_TIMEOUT_SECONDS = 3.0  # each example MCP server's timeout (admin field)
DATABASE_POOL_TIMEOUT_SECONDS = 10.0  # the product's default, said here because the fault tests bound by it
WEB_WORKERS = 2
WORKER_CONCURRENCY = 4
SUPERVISOR_PROFILE = "telecom_contas"
ROUTER_PROFILE = "retail_orders"
STARTUP_TIMEOUT = 90.0
# A test on the stack: its own minutes, plus the stack's start (several processes, each up to STARTUP_TIMEOUT on a
# busy machine) when it is the session's first. A guard against a hang, not a measure.
STACK_TEST_TIMEOUT = 420
# What each planted secret is; its value is made per stack (``stack.canaries``) and must appear in no log.
CANARIES = (
    "database password",
    "metrics token",
    "OTLP header",
    "webhook user",
    "webhook password",
    "webhook query secret",
    "webhook signing key",
    "OpenAI key",
    "profile model key",
    "MCP user",
    "MCP password",
    "MCP token",
    "backend user",
    "backend password",
    "backend token",
    "backend key",
    "profile model user",
    "profile model password",
    "profile model query key",
    "desk user",
    "desk password",
    "desk token",
    "desk secret",
)
BACKEND_WORD = "canario"  # a message with it goes to retail_orders' remote backend
DESK_NAME = "canary_desk"  # finance_assistente's escalations go to this external desk (the sink)
MODEL_KEY_VARIABLE = "STACK_MODEL_API_KEY"  # finance_assistente's model key variable
# The operator's preparation of the database, each command as ``manage.py <command>`` runs it (migrate's system checks
# included), in one start of Django: each start costs seconds of imports.
PREPARE = (
    "from django.core.management import call_command\n"
    "call_command('migrate', interactive=False, skip_checks=False)\n"
    "call_command('collectstatic', interactive=False)\n"
    "call_command('seed_demo')\n"
)


class StackError(RuntimeError):
    """A part of the stack did not start or stop; the message carries its log."""


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str, interval: float = 0.1) -> float:
    """Poll ``condition`` until it holds; the seconds it took. :class:`StackError` naming ``what`` after ``timeout``."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            raise StackError(f"{what}: not true within {timeout:g} s")
        time.sleep(interval)
    return time.monotonic() - began


def _http_status(url: str, timeout: float = 2.0) -> int | None:
    """The status of ``GET url`` (any answer counts), ``None`` when nothing answered."""
    import http.client

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or HOST, parts.port, timeout=timeout)
    try:
        connection.request("GET", parts.path or "/")
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


def _tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-chars:] if path.exists() else "(no log)"


class LoggedProcess:
    """A subprocess in a session of its own, writing stdout and stderr to ``<log_dir>/<name>-<n>.log`` (n per start)."""

    def __init__(self, name: str, command: list[str], *, env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.command = command
        self.env = env
        self.log_dir = log_dir
        self.starts = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, ready: Callable[[], bool], timeout: float = STARTUP_TIMEOUT) -> None:
        if self.alive():
            raise StackError(f"{self.name} is already running (pid {self.pid})")
        self.starts += 1
        self.log_path = self.log_dir / f"{self.name}-{self.starts}.log"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command,
                cwd=PROJECT_ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # signals reach the whole group (uvicorn's spawned workers too)
            )
        began = time.monotonic()
        while not ready():
            if self.process.poll() is not None:
                raise StackError(f"{self.name} exited with {self.process.returncode}:\n{_tail(self.log_path)}")
            if time.monotonic() - began > timeout:
                self.kill()
                raise StackError(f"{self.name} was not ready within {timeout:g} s:\n{_tail(self.log_path)}")
            time.sleep(0.1)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process and everything it started (its session)."""
        assert self.process is not None, f"{self.name} is not running"
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def kill(self) -> None:
        """SIGKILL the process group, as a machine that loses the process would."""
        if self.process is None:
            return
        self.signal(signal.SIGKILL)
        self.process.wait()
        self.process = None

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM (after SIGCONT, in case it is frozen), then SIGKILL what is left after ``grace`` seconds."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.signal(signal.SIGCONT)
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=grace)
        self.kill()


class StackCeleryWorker(CeleryWorkerProcess):
    """The tests' Celery worker, asked whether it is up through the stack's own broker, not the suite's."""

    def __init__(self, *, broker_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.broker_url = broker_url

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        while not self._answers_ping():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise CeleryWorkerStartError(
                    f"Celery worker {self.hostname} did not come up (exit status {self.process.poll()}).\n"
                    f"--- its log ({self.log_path}) ---\n{self.output()}"
                )

    def _answers_ping(self) -> bool:
        from celery import Celery

        pinger = Celery("production-stack-ping", broker=self.broker_url)
        try:
            return bool(pinger.control.ping(destination=[self.hostname], timeout=0.5))
        except Exception:  # noqa: BLE001 — a broker connection from before a Redis restart: ask again
            return False
        finally:
            pinger.close()


@dataclass
class PostgresCluster:
    """The cluster ``services.postgres()`` started, addressed by data directory so it can be stopped and started."""

    url: str
    data_dir: Path
    log_path: Path

    def _pg_ctl(self, *args: str) -> None:
        command = [str(services.postgres_bindir() / "pg_ctl"), "-D", str(self.data_dir), *args]
        if os.geteuid() == 0:  # services.postgres() runs the cluster as the postgres user
            runuser = shutil.which("runuser") or "/usr/sbin/runuser"
            command = [runuser, "-u", services.POSTGRES_SUPERUSER, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, check=False, start_new_session=True)
        if result.returncode != 0:
            raise StackError(f"pg_ctl {' '.join(args)} failed:\n{result.stdout}{result.stderr}\n{_tail(self.log_path)}")

    def stop(self) -> None:
        """``pg_ctl stop -m fast``: sessions are terminated, the server is down when this returns."""
        self._pg_ctl("-m", "fast", "-w", "-t", "60", "stop")

    def start(self) -> None:
        """Start again on the same port and data directory; returns once it accepts connections."""
        self._pg_ctl("-l", str(self.log_path), "-w", "-t", "60", "start")


class ProductionStack:
    """Everything the probe ran, started for the tests; see the module docstring."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log_dir = root / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._exit = contextlib.ExitStack()
        self.env: dict[str, str] = {}
        self.keys: dict[str, str] = {}
        self.postgres: PostgresCluster | None = None
        self.redis_url = ""
        self._redis_dir = Path()
        self._redis_restarted: subprocess.Popen[bytes] | None = None
        self.mcp: dict[str, LoggedProcess] = {}
        self.mcp_ports: dict[str, int] = {}
        self.worker: StackCeleryWorker | None = None
        self.web: LoggedProcess | None = None
        self.beat: LoggedProcess | None = None
        self.port = 0
        self.canaries: dict[str, str] = {}
        self.sink: Receiver | None = None

    # ---- start and stop the whole stack

    def start(self) -> ProductionStack:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        # services.postgres() and services.redis() reuse a server the environment names (the suite's own):
        # these tests stop and start theirs, so they must get servers nobody else uses.
        with _environment_without("DATABASE_URL", "REDIS_URL"):
            database = self._exit.enter_context(services.postgres())
            redis_env = self._exit.enter_context(services.redis())
        self.redis_url = redis_env["REDIS_URL"]
        self.postgres = self._cluster(database["DATABASE_URL"])
        self._exit.callback(self._stop_restarted_redis)
        import redis

        with contextlib.closing(redis.Redis.from_url(self.redis_url)) as client:
            self._redis_dir = Path(client.config_get("dir")["dir"])

        self.mcp_ports = {name: services.free_port() for name in ("telecom", "retail")}
        self.port = services.free_port()
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(("OPENAI_", "ROUTER_LLM_", "LLM_", "DATABASE_", "REDIS_", "ROUTING_MODE"))
        }
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")])),
            PYTHONUNBUFFERED="1",
            DJANGO_SETTINGS_MODULE="platform.settings",
            DJANGO_DEBUG="false",
            DJANGO_SECRET_KEY="production-stack-" + os.urandom(16).hex(),
            # Plain HTTP on 127.0.0.1, as behind a TLS-terminating proxy; the redirect to https is not under test.
            DJANGO_SECURE_SSL_REDIRECT="false",
            DATABASE_URL=self.postgres.url,
            DATABASE_POOL_TIMEOUT=str(DATABASE_POOL_TIMEOUT_SECONDS),
            REDIS_URL=self.redis_url,
            LOG_LEVEL="INFO",
            OFFLINE_LLM_LATENCY_MS=str(OFFLINE_LLM_LATENCY_MS),
            SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS=str(SPECIALIST_TIMEOUT_SECONDS),
            SUPERVISOR_EXECUTOR="auto",
            MCP_TELECOM_PORT=str(self.mcp_ports["telecom"]),
            MCP_RETAIL_PORT=str(self.mcp_ports["retail"]),
            VAR_DIR=str(self.root / "var"),
            CACHE_DIR=str(self.root / "cache"),
            WEB_CONCURRENCY=str(WEB_WORKERS),
            # The throttles stay on (their cache round trip is part of every request, Redis down included) with
            # rates these few clients, all on one key, never reach: a 429 here would hide what a fault did.
            API_RATE_PER_KEY="100000/minute",
            API_MESSAGE_RATE_PER_KEY="100000/minute",
            API_MESSAGE_RATE_PER_SESSION="100000/minute",
        )
        env.update(self._planted_settings(env["DJANGO_SECRET_KEY"]))
        self.env = env
        self._prepare_database()
        self._configure()
        for name in self.mcp_ports:
            self.start_mcp(name)
        self.worker = StackCeleryWorker(
            broker_url=self.redis_url,
            env={**env, "CELERY_SKIP_CHECKS": "1"},
            log_dir=self.log_dir,
            concurrency=WORKER_CONCURRENCY,
            startup_timeout=STARTUP_TIMEOUT,
        )
        self.worker.start()
        self._exit.callback(self.worker.stop)
        beat = ["-m", "celery", "-A", "platform", "beat", "--loglevel=INFO", "--schedule", str(self.root / "beat")]
        self.beat = LoggedProcess("celery-beat", [sys.executable, *beat], env=env, log_dir=self.log_dir)
        self._exit.callback(self.beat.stop)
        self.beat.start(self._beat_started)
        serve = ["platform.serve", "--host", HOST, "--port", str(self.port), "--workers", str(WEB_WORKERS)]
        self.web = LoggedProcess("web", [sys.executable, "-m", *serve], env=env, log_dir=self.log_dir)
        self._exit.callback(self.web.stop)
        # Up once it answers liveness; whether it is ready (the database, Redis) is for the tests to check.
        self.web.start(lambda: _http_status(f"{self.base_url}/api/health/live") == 200)

    def close(self) -> None:
        self._exit.close()

    def _beat_started(self) -> bool:
        log = self.beat.log_path if self.beat is not None else None
        return log is not None and "beat: Starting" in _tail(log)

    def _planted_settings(self, secret_key: str) -> dict[str, str]:
        """The settings that hold secrets, each a canary (``self.canaries``); the receiver they post to started."""
        self.sink = Receiver()
        self._exit.callback(self.sink.stop)
        self.canaries = {name: f"{name.replace(' ', '-')}-{os.urandom(8).hex()}" for name in CANARIES}
        self.canaries["Django secret key"] = secret_key
        canary, sink = self.canaries, urlsplit(self.sink.url)
        assert self.postgres is not None
        database = urlsplit(self.postgres.url)  # trust authentication: the password is sent to no one
        return {
            "DATABASE_URL": database._replace(
                netloc=f"{database.username}:{canary['database password']}@{database.hostname}:{database.port}"
            ).geturl(),
            "METRICS_TOKEN": canary["metrics token"],
            "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer {canary['OTLP header']}",  # no endpoint: tracing off
            "EVENTS_WEBHOOK_URL": f"http://{canary['webhook user']}:{canary['webhook password']}@{sink.netloc}"
            f"{sink.path}?sig={canary['webhook query secret']}",
            "EVENTS_WEBHOOK_SECRET": canary["webhook signing key"],
            "OPENAI_API_KEY": canary["OpenAI key"],  # no OPENAI_BASE_URL: the offline model still answers
            MODEL_KEY_VARIABLE: canary["profile model key"],
        }

    def _configure(self) -> None:
        """What an operator does in the admin, and the keys it hands out, in one ``manage.py shell`` (each start of
        ``manage.py`` costs seconds of imports; one start instead of five):

        * one profile fans out to the workers (published), each MCP server has a short timeout (the fault tests wait
          for it; servers are not versioned);
        * the secrets an operator keeps in the admin: the telecom MCP endpoint's credentials, a remote backend's on
          retail_orders, finance_assistente's own model endpoint (router mode, published). The values go to the
          shell through its environment, so that manage.log does not carry them;
        * the API keys of ``self.keys``, made by ``create_api_key`` (its stdout, which holds them, is not logged)."""
        canary = self.canaries
        assert self.sink is not None
        sink = urlsplit(self.sink.url)
        planted = {
            "STACK_MCP_ENDPOINT": f"http://{canary['MCP user']}:{canary['MCP password']}@{HOST}:"
            f"{self.mcp_ports['telecom']}/mcp?token={canary['MCP token']}",
            "STACK_BACKEND_URL": f"http://{canary['backend user']}:{canary['backend password']}@{sink.netloc}"
            f"/remote/?token={canary['backend token']}",
            "STACK_BACKEND_KEY": canary["backend key"],
            "STACK_MODEL_URL": f"http://{canary['profile model user']}:{canary['profile model password']}@"
            f"{sink.netloc}/v1?api_key={canary['profile model query key']}",
            "STACK_DESK_URL": f"http://{canary['desk user']}:{canary['desk password']}@{sink.netloc}"
            f"/desk?token={canary['desk token']}",
            "STACK_DESK_SECRET": canary["desk secret"],
        }
        keys = {
            "tenant_a": ["--tenant", "tenant_a"],
            "tenant_a_debug": ["--tenant", "tenant_a", "--debug", "--preview"],
            "tenant_b": ["--tenant", "tenant_b"],
        }
        made = self.manage(
            "shell",
            "-c",
            "import io, os\n"
            "from django.core.management import call_command\n"
            "from agents.models import AgentProfile, ExternalDesk, McpServer, RemoteBackend\n"
            "from common.config_version import config_version_bump\n"
            "from releases.versions import version_publish\n"
            f"AgentProfile.objects.filter(agent_id={SUPERVISOR_PROFILE!r}).update(routing_mode='supervisor')\n"
            f"version_publish(profile=AgentProfile.objects.get(agent_id={SUPERVISOR_PROFILE!r}), note='supervisor')\n"
            f"McpServer.objects.update(timeout={MCP_TIMEOUT_SECONDS})\n"
            "config_version_bump()\n"
            "server = McpServer.objects.get(name='telecom')\n"
            "server.endpoint = os.environ['STACK_MCP_ENDPOINT']\n"
            "server.save()\n"
            f"RemoteBackend.objects.create(profile=AgentProfile.objects.get(agent_id={ROUTER_PROFILE!r}), "
            "name='canary_backend', base_url=os.environ['STACK_BACKEND_URL'], api_key=os.environ['STACK_BACKEND_KEY'], "
            f"remote_agent_id='anything', keywords=[{BACKEND_WORD!r}], priority=1, timeout=5, failures_to_open=100)\n"
            "finance = AgentProfile.objects.get(agent_id='finance_assistente')\n"
            "finance.routing_mode = 'router'\n"
            "finance.llm_base_url = os.environ['STACK_MODEL_URL']\n"
            "finance.llm_model = 'canary-model'\n"
            f"finance.llm_api_key_env = {MODEL_KEY_VARIABLE!r}\n"
            f"ExternalDesk.objects.create(name={DESK_NAME!r}, url=os.environ['STACK_DESK_URL'], "
            "secret=os.environ['STACK_DESK_SECRET'])\n"
            f"finance.escalation = {{**finance.escalation, 'desk': {DESK_NAME!r}}}\n"
            "finance.save()\n"
            "version_publish(profile=finance, note='own model endpoint')\n"
            "config_version_bump()\n"
            f"for name, args in {keys!r}.items():\n"
            "    out = io.StringIO()\n"
            "    call_command('create_api_key', *args, '--name', f'stack {name}', stdout=out)\n"
            "    print(name, out.getvalue().strip().splitlines()[-1])\n",
            env=planted,
            secret_output=True,
        )
        for line in made.strip().splitlines()[-len(keys) :]:
            name, key = line.split()
            self.keys[name] = key
        assert set(self.keys) == set(keys), f"keys made: {sorted(self.keys)}"

    @staticmethod
    def _cluster(url: str) -> PostgresCluster:
        import psycopg

        with psycopg.connect(url, autocommit=True) as connection:
            data_dir = Path(connection.execute("SHOW data_directory").fetchone()[0])
        # services.postgres() logs to postgres.log beside the data directory; a restart appends there too.
        return PostgresCluster(url=url, data_dir=data_dir, log_path=data_dir.parent / "postgres.log")

    def manage(self, *args: str, secret_output: bool = False, env: dict[str, str] | None = None) -> str:
        """``manage.py <args>`` against the stack's database, with ``env`` added to the stack's environment; its
        stdout. :class:`StackError` if it fails.

        Its output goes to ``manage.log`` with the others, but for ``secret_output`` (a new key) stderr only.
        """
        result = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=PROJECT_ROOT,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        with (self.log_dir / "manage.log").open("a", encoding="utf-8") as log:
            log.write(f"$ manage.py {' '.join(args)}\n{'' if secret_output else result.stdout}{result.stderr}\n")
        if result.returncode != 0:
            raise StackError(f"manage.py {' '.join(args)} failed:\n{result.stderr}")
        return result.stdout

    def _prepare_database(self) -> None:
        """The suite's migrated database restored, then the operator's ``migrate`` (with the system checks its
        ``manage.py`` runs), ``collectstatic`` and ``seed_demo`` in one start of Django, their output logged."""
        restore_migrated(self.env["DATABASE_URL"])
        self.manage("shell", "-c", PREPARE)

    # ---- addresses

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{HOST}:{self.port}"

    # ---- PostgreSQL

    def stop_postgres(self) -> None:
        assert self.postgres is not None
        self.postgres.stop()

    def start_postgres(self) -> None:
        assert self.postgres is not None
        self.postgres.start()

    # ---- Redis

    def redis_answers(self) -> bool:
        return services.redis_answers(self.redis_url, timeout=0.5)

    def stop_redis(self) -> None:
        """SIGTERM the redis-server (nothing is persisted); returns once it no longer answers."""
        import redis

        with contextlib.closing(redis.Redis.from_url(self.redis_url)) as client:
            pid = int(client.info("server")["process_id"])
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not self.redis_answers(), timeout=20, what="redis-server stopped")
        if self._redis_restarted is not None and self._redis_restarted.pid == pid:
            self._redis_restarted.wait(timeout=10)
            self._redis_restarted = None

    def start_redis(self) -> None:
        """A new redis-server on the same port and directory; returns once it answers PING."""
        port = urlsplit(self.redis_url).port
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        command = [binary, "--port", str(port), "--bind", HOST, "--dir", str(self._redis_dir)]
        command += ["--logfile", str(self._redis_dir / "redis.log"), "--save", "", "--appendonly", "no"]
        self._redis_restarted = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
        wait_for(self.redis_answers, timeout=20, what="redis-server answering again")

    def _stop_restarted_redis(self) -> None:
        process, self._redis_restarted = self._redis_restarted, None
        if process is not None:
            services.stop_process(process, timeout=10)

    # ---- Celery

    def kill_worker(self) -> None:
        """SIGKILL the worker's main process and its pool children at once."""
        assert self.worker is not None
        self.worker.kill()

    def start_worker(self) -> None:
        """A new worker (a new node name); returns once it answers a ping."""
        assert self.worker is not None
        self.worker.start()

    # ---- MCP servers

    def start_mcp(self, name: str) -> None:
        """Start (or start again) the example server ``name`` on its port; returns once ``/health`` answers."""
        server = self.mcp.get(name)
        if server is None:
            command = [sys.executable, "-m", f"mcp_servers.{name}.server", "--host", HOST]
            command += ["--port", str(self.mcp_ports[name])]  # its default log level, INFO, as docker-compose runs it
            server = self.mcp[name] = LoggedProcess(f"mcp-{name}", command, env=self.env, log_dir=self.log_dir)
            self._exit.callback(server.stop)
        server.start(lambda: _http_status(f"http://{HOST}:{self.mcp_ports[name]}/health", timeout=1) == 200)

    def freeze_mcp(self, name: str) -> None:
        self.mcp[name].signal(signal.SIGSTOP)

    def thaw_mcp(self, name: str) -> None:
        self.mcp[name].signal(signal.SIGCONT)

    def kill_mcp(self, name: str) -> None:
        self.mcp[name].kill()
        wait_for(lambda: _port_closed(self.mcp_ports[name]), timeout=10, what=f"MCP server {name} gone")

    # ---- the database, read directly

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        import psycopg

        assert self.postgres is not None
        with psycopg.connect(self.postgres.url, autocommit=True, connect_timeout=10) as connection:
            return connection.execute(sql, params).fetchall()

    def conversation_messages(self, conversation_key: str) -> list[tuple[str, str, str, int]]:
        """The conversation's messages in stored order: ``(role, agent, content, step)``."""
        return [
            (role, agent, content, step)
            for role, agent, content, step in self.query(
                "SELECT m.role, m.agent, m.content, m.step FROM routing_message m"
                " JOIN routing_conversation c ON c.id = m.conversation_id"
                " WHERE c.conversation_key = %s ORDER BY m.created_at, m.id",
                conversation_key,
            )
        ]

    def unbalanced_conversations(self) -> dict[str, tuple[int, int]]:
        """Conversations holding a turn ticket: ``{key: (issued, done)}`` where issued ≠ done."""
        rows = self.query(
            "SELECT conversation_key, turn_tickets_issued, turn_tickets_done FROM routing_conversation"
            " WHERE turn_tickets_issued <> turn_tickets_done"
        )
        return {key: (issued, done) for key, issued, done in rows}

    # ---- logs

    def log_files(self) -> list[Path]:
        """Every log the stack's processes wrote: web, Celery workers and beat, MCP servers, manage.py, PostgreSQL,
        Redis."""
        files = sorted(self.log_dir.glob("*.log"))
        if self.postgres is not None:
            files.append(self.postgres.log_path)
        files.append(self._redis_dir / "redis.log")
        return [path for path in files if path.exists()]

    def copy_logs(self, destination: Path) -> None:
        destination.mkdir(parents=True, exist_ok=True)
        for path in self.log_files():
            with contextlib.suppress(OSError):
                shutil.copyfile(path, destination / path.name)


def _port_closed(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) != 0


@contextlib.contextmanager
def _environment_without(*names: str) -> Iterator[None]:
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def test_output_dir() -> Path:
    return Path(os.environ.get("TEST_OUTPUT_DIR") or PROJECT_ROOT / "test-output")


def write_figures(name: str, figures: dict[str, Any]) -> Path:
    """Print the figures a fault test measured and keep them in ``$TEST_OUTPUT_DIR/fault-figures/<name>.json``."""
    path = test_output_dir() / "fault-figures" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"fault figures {name}: {json.dumps(figures, sort_keys=True)}")
    return path


# ---- clients


@dataclass
class Reply:
    """One HTTP request's outcome as the client saw it (``status`` ``None``: no HTTP answer at all)."""

    text: str
    conversation_key: str
    started: float  # time.monotonic() when sent
    seconds: float
    status: int | None
    content_type: str = ""
    retry_after: str | None = None
    body: Any = None
    error: str = ""

    @property
    def ended(self) -> float:
        return self.started + self.seconds

    @property
    def answer(self) -> str:
        return self.body.get("answer", "") if isinstance(self.body, dict) else ""

    def overlaps(self, start: float, end: float) -> bool:
        return self.started <= end and self.ended >= start


def conversation_key(agent_id: str, session_id: str, tenant: str = "tenant_a") -> str:
    return f"{tenant}:{agent_id}:{session_id}"


async def post_message(
    client: Any,
    key: str,
    *,
    agent_id: str,
    session_id: str,
    text: str,
    context: dict[str, Any] | None = None,
    path: str = "/api/gateway/message",
    timeout: float = 60.0,
) -> Reply:
    """POST one message (``client`` an ``httpx.AsyncClient`` on the stack); never raises for the answer it gets."""
    import httpx

    payload: dict[str, Any] = {"text": text, "session_id": session_id}
    if context is not None:
        payload["context"] = context
    began = time.monotonic()
    reply = Reply(
        text=text, conversation_key=conversation_key(agent_id, session_id), started=began, seconds=0.0, status=None
    )
    try:
        response = await client.post(
            path,
            json={"channel": "web", "agent_id": agent_id, "payload": payload},
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
        )
    except httpx.HTTPError as exc:
        reply.error = f"{type(exc).__name__}: {exc}"
    else:
        reply.status = response.status_code
        reply.content_type = response.headers.get("content-type", "")
        reply.retry_after = response.headers.get("retry-after")
        try:
            reply.body = response.json()
        except ValueError:
            reply.body = response.text[:500]
    reply.seconds = time.monotonic() - began
    return reply


def status_counts(replies: list[Reply]) -> dict[str, int]:
    """``{"200": 12, "503": 3, "no answer": 1}``."""
    counts: dict[str, int] = {}
    for reply in replies:
        name = str(reply.status) if reply.status is not None else "no answer"
        counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def stored_once_problems(stack: ProductionStack, answered: dict[str, list[tuple[str, str]]]) -> list[str]:
    """What is wrong with the stored conversations, given ``{key: [(text, answer), ...]}`` the clients got.

    Every conversation holds user messages and answers strictly alternating (each user message directly
    followed by its one answer, supervisor parts aside), no user message twice, and every answered text once,
    followed by exactly the answer the client got.
    """
    problems: list[str] = []
    for key, turns in answered.items():
        stored = [(role, content) for role, _agent, content, _step in stack.conversation_messages(key)]
        dialogue = [(role, content) for role, content in stored if role in ("user", "assistant")]
        roles = [role for role, _ in dialogue]
        if roles != ["user", "assistant"] * (len(roles) // 2) or len(roles) % 2:
            problems.append(f"{key}: user messages and answers do not alternate: {roles}")
        users = [content for role, content in dialogue if role == "user"]
        duplicates = sorted({text for text in users if users.count(text) > 1})
        if duplicates:
            problems.append(f"{key}: user messages stored twice: {duplicates}")
        for text, answer in turns:
            positions = [n for n, (role, content) in enumerate(dialogue) if role == "user" and content == text]
            if len(positions) != 1:
                problems.append(f"{key}: answered message {text!r} stored {len(positions)} times")
                continue
            after = dialogue[positions[0] + 1 : positions[0] + 2]
            if after != [("assistant", answer)]:
                problems.append(f"{key}: the answer stored after {text!r} is not the one the client got: {after}")
    return problems


# ---- fixtures


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        item.stash.setdefault(_FAILED, set()).add(report.when)
    return report


_FAILED = pytest.StashKey[set]()


# The files that use the stack run on one worker of a parallel run (tests/xdist_worker.py), so it starts once.
ON_THE_STACKS_WORKER = pytest.mark.xdist_group("production_stack")


@pytest.fixture(scope="session")
def _production_stack_session(tmp_path_factory):
    for tool in ("redis-server",):
        if not (shutil.which(tool) or os.access(f"/usr/bin/{tool}", os.X_OK)):
            pytest.fail(f"{tool} is needed for the production stack; run scripts/bootstrap --with-redis")
    stack = ProductionStack(tmp_path_factory.mktemp("production-stack")).start()
    try:
        yield stack
    finally:
        stack.close()


@pytest.fixture
def production_stack(request, _production_stack_session):
    """The session's stack; its logs are copied to test-output/ when the test fails."""
    yield _production_stack_session
    if request.node.stash.get(_FAILED, set()):
        _production_stack_session.copy_logs(test_output_dir() / "production-stack" / request.node.name)
