"""Throwaway services for one command: start them, run the command, tear them down.

    python scripts/services.py --scratch --postgres --redis -- python -m pytest -x

Each service is a context manager that starts something private to this run
and yields the environment variables that point the project at it; teardown
happens on every way out (normal exit, failure, Ctrl-C, SIGTERM, SIGHUP). The
command's exit status becomes ours.

To add a service (an example MCP server, say), write one more context manager
yielding its variables and register it in ``SERVICES``; the order there is the
start order. Only the standard library is used, so this runs under any python3.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

Env = dict[str, str]

POSTGRES_DATABASE = "platform"
POSTGRES_SUPERUSER = "postgres"
# Speed over durability: the cluster is deleted when the run ends.
POSTGRES_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


def say(message: str) -> None:
    print(f"services: {message}", file=sys.stderr, flush=True)


class ServiceError(RuntimeError):
    """A service could not start; the message says why and what to do."""


def bench_server_env(root: Path) -> Env:
    """What a benchmark serves the platform with: production settings (``DJANGO_DEBUG=false``), but plain HTTP on
    loopback and one key sending far more than a client may: no HTTPS redirect, cookies over HTTP, no rate limits, its
    loopback servers allowed by the outbound policy."""
    return {
        "PYTHONPATH": str(root),
        "DJANGO_SETTINGS_MODULE": "platform.settings",
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": "bench-only-not-a-secret",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "DJANGO_SECURE_COOKIES": "false",
        "API_RATE_PER_KEY": "off",
        "API_MESSAGE_RATE_PER_KEY": "off",
        "API_MESSAGE_RATE_PER_SESSION": "off",
        # The benchmark's MCP servers and receivers listen on loopback, which the outbound policy refuses otherwise.
        "OUTBOUND_ALLOWED": "127.0.0.0/8",
    }


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process(process: subprocess.Popen, timeout: float = 20.0) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_healthy(base_url: str, server: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    """Wait until the platform at ``base_url`` answers ``/api/health``; exit with its log if it dies or hangs."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        health = f"{base_url}/api/health"  # the http URL of the server this script started
        with contextlib.suppress(OSError), urllib.request.urlopen(health, timeout=5) as answer:  # noqa: S310
            if answer.status == 200:
                return
        time.sleep(0.2)
    raise SystemExit(f"the server did not answer /api/health within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def _version_key(path: Path) -> tuple[int, ...]:
    version = path.parent.parent.name  # /usr/lib/postgresql/<version>/bin/<tool>
    return tuple(int(part) for part in version.split(".") if part.isdigit())


def postgres_bindir() -> Path:
    """Where initdb and pg_ctl live: on PATH, else Debian's newest /usr/lib/postgresql/<version>/bin."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    installed = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=_version_key)
    if not installed:
        raise ServiceError("PostgreSQL server binaries not found; run scripts/bootstrap --with-postgres")
    return installed[-1].parent


def _system_tool(name: str) -> str:
    """An administration tool (runuser, useradd), found even when /usr/sbin is not on PATH."""
    for found in (shutil.which(name), f"/usr/sbin/{name}", f"/sbin/{name}"):
        if found and os.access(found, os.X_OK):
            return found
    raise ServiceError(f"{name} not found; it comes with Debian's util-linux / passwd packages")


def _ensure_postgres_user() -> pwd.struct_passwd:
    """PostgreSQL refuses to run as root; the Debian package creates this user, we do if it did not."""
    try:
        return pwd.getpwnam(POSTGRES_SUPERUSER)
    except KeyError:
        say(f"creating system user {POSTGRES_SUPERUSER!r}")
        subprocess.run(
            [
                _system_tool("useradd"),
                "--system",
                "--user-group",
                "--no-create-home",
                "--shell",
                "/bin/false",
                POSTGRES_SUPERUSER,
            ],
            check=True,
        )
        return pwd.getpwnam(POSTGRES_SUPERUSER)


@contextlib.contextmanager
def postgres() -> Iterator[Env]:
    """A fresh PostgreSQL cluster on a free port of 127.0.0.1, trust auth, deleted afterwards.

    Yields ``DATABASE_URL`` for a database named ``platform``. When the
    environment already points ``DATABASE_URL`` at a PostgreSQL server, that
    server is used and nothing is started.
    """
    existing = os.environ.get("DATABASE_URL", "")
    if existing.startswith(("postgres://", "postgresql://")):
        say("using the PostgreSQL server from DATABASE_URL")
        yield {}
        return

    bindir = postgres_bindir()
    as_postgres: list[str] = []
    root = tempfile.mkdtemp(prefix="platform-postgres-")
    data, sockets, log = f"{root}/data", f"{root}/sockets", f"{root}/postgres.log"
    started = False
    try:
        os.mkdir(sockets)
        if os.geteuid() == 0:
            user = _ensure_postgres_user()
            for path in (root, sockets):
                os.chown(path, user.pw_uid, user.pw_gid)
            as_postgres = [_system_tool("runuser"), "-u", POSTGRES_SUPERUSER, "--"]

        def pg(tool: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
            command = [*as_postgres, str(bindir / tool), *args]
            result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
            if result.returncode != 0:
                details = (result.stdout + result.stderr).strip()
                if os.path.exists(log):
                    details += "\n--- postgres.log ---\n" + Path(log).read_text(errors="replace")
                raise ServiceError(f"{tool} failed (exit {result.returncode}):\n{details}")
            return result

        port = free_port()
        pg("initdb", "-D", data, "-U", POSTGRES_SUPERUSER, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
        settings = {**POSTGRES_SETTINGS, "port": str(port), "unix_socket_directories": f"'{sockets}'"}
        with open(f"{data}/postgresql.conf", "a", encoding="utf-8") as conf:
            conf.write("\n# scripts/services.py\n")
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        # Its own session, so a Ctrl-C meant for the tests does not stop the server under them.
        pg("pg_ctl", "-D", data, "-l", log, "-w", "-t", "60", "start", start_new_session=True)
        started = True
        pg("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", POSTGRES_SUPERUSER, POSTGRES_DATABASE)
        say(f"PostgreSQL ready on 127.0.0.1:{port} (binaries from {bindir})")
        yield {"DATABASE_URL": f"postgres://{POSTGRES_SUPERUSER}@127.0.0.1:{port}/{POSTGRES_DATABASE}"}
    finally:
        if started:
            subprocess.run(
                [*as_postgres, str(bindir / "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop"],
                capture_output=True,
                check=False,
            )
            say("PostgreSQL stopped")
        shutil.rmtree(root, ignore_errors=True)


def _redis_command(sock: socket.socket, *args: str) -> bytes:
    """Send one command in RESP and return the first line of the reply (b"+PONG", b"-NOAUTH ...")."""
    encoded = [arg.encode() for arg in args]
    sock.sendall(b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in encoded))
    reply = b""
    while not reply.endswith(b"\r\n"):
        chunk = sock.recv(512)
        if not chunk:
            break
        reply += chunk
    return reply.strip()


def redis_answers(url: str, timeout: float = 2.0) -> bool:
    """Whether the Redis server at ``url`` (redis:// or rediss://) answers PING, after AUTH if it has a password."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        return False
    try:
        sock = socket.create_connection((parts.hostname, parts.port or 6379), timeout=timeout)
    except OSError:
        return False
    try:
        if parts.scheme == "rediss":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=parts.hostname)
        if parts.password:
            credentials = [unquote(parts.username)] if parts.username else []
            if not _redis_command(sock, "AUTH", *credentials, unquote(parts.password)).startswith(b"+OK"):
                return False
        return _redis_command(sock, "PING") == b"+PONG"
    except OSError:
        return False
    finally:
        sock.close()


def _redis_started(process: subprocess.Popen, port: int, log: str, timeout: float = 20.0) -> bool:
    """Wait until the server answers; False if it exited because the port was taken meanwhile."""
    deadline = time.monotonic() + timeout
    while not redis_answers(f"redis://127.0.0.1:{port}/0", timeout=0.5):
        output = Path(log).read_text(errors="replace") if os.path.exists(log) else ""
        if process.poll() is not None:
            if "address already in use" in output.lower():
                return False
            raise ServiceError(f"redis-server exited with status {process.returncode}:\n{output}")
        if time.monotonic() > deadline:
            raise ServiceError(f"redis-server did not answer on 127.0.0.1:{port} within {timeout:g}s:\n{output}")
        time.sleep(0.02)
    return True


@contextlib.contextmanager
def redis() -> Iterator[Env]:
    """A private redis-server on a free port of 127.0.0.1, nothing persisted, stopped afterwards.

    Yields ``REDIS_URL`` for its database 0. When the environment already
    points ``REDIS_URL`` at a Redis server that answers PING, that server is
    used and nothing is started.
    """
    existing = os.environ.get("REDIS_URL", "")
    if existing:
        if redis_answers(existing):
            say("using the Redis server from REDIS_URL")
            yield {}
            return
        say("REDIS_URL does not answer PING; starting a throwaway redis-server instead")

    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not os.access(binary, os.X_OK):
        raise ServiceError("redis-server not found; run scripts/bootstrap --with-redis")
    root = tempfile.mkdtemp(prefix="platform-redis-")
    log = f"{root}/redis.log"
    process: subprocess.Popen | None = None
    try:
        # Another process may take the free port before redis-server binds it: try a few.
        for _attempt in range(3):
            port = free_port()
            # The settings go on the command line (no config file); --save "" turns RDB snapshots off.
            command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", root, "--logfile", log]
            command += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
            # Its own session, so a Ctrl-C meant for the tests does not stop the server under them.
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
            if _redis_started(process, port, log):
                break
            process = None
        else:
            raise ServiceError("redis-server found no free port in three attempts")
        say(f"Redis ready on 127.0.0.1:{port} ({binary})")
        yield {"REDIS_URL": f"redis://127.0.0.1:{port}/0"}
    finally:
        if process is not None and process.poll() is None:
            process.terminate()  # nothing to save, so SIGTERM is a prompt shutdown
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            say("Redis stopped")
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def scratch() -> Iterator[Env]:
    """Private VAR_DIR and CACHE_DIR, so a run never touches the developer's var/."""
    with tempfile.TemporaryDirectory(prefix="platform-scratch-") as root:
        env = {"VAR_DIR": f"{root}/var", "CACHE_DIR": f"{root}/cache"}
        for path in env.values():
            os.mkdir(path)
        yield env


SERVICES: dict[str, Callable[[], contextlib.AbstractContextManager[Env]]] = {
    "scratch": scratch,
    "postgres": postgres,
    "redis": redis,
}


class Stopped(BaseException):
    """SIGTERM or SIGHUP arrived: unwind like Ctrl-C so every service is torn down."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, _frame: object) -> None:
    raise Stopped(signum)


def _hold_further_signals() -> None:
    """Stopping has begun: a second signal (a terminal's Ctrl-C reaches the whole group, and the calling script
    passes its own on) must not cut the stop short and leave the command running."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)


def run(command: list[str], env: Env) -> int:
    """Run ``command`` to completion; if we are interrupted, stop it before tearing services down."""
    child = subprocess.Popen(command, env=env)
    try:
        return child.wait()
    except Stopped:
        _hold_further_signals()
        # Only we were told to stop: pass it on as a Ctrl-C, which pytest answers by stopping its xdist workers and
        # reporting (a SIGTERM would leave the workers running), then stop it outright if it does not end.
        child.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=30)
        stop_process(child, timeout=10)
        raise
    except BaseException:
        _hold_further_signals()
        # A terminal Ctrl-C reached the child too: give it a moment to finish its report.
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
        stop_process(child, timeout=10)
        raise


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in SERVICES:
        parser.add_argument(f"--{name}", action="store_true", help=SERVICES[name].__doc__.splitlines()[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- command to run with the services")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")

    signal.signal(signal.SIGTERM, _raise_stopped)
    signal.signal(signal.SIGHUP, _raise_stopped)
    # Started in the background by a script, this process and its children would ignore SIGINT: pytest would not
    # stop at the Ctrl-C it is passed. A handler of ours is reset to the default in the children.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env = dict(os.environ)
    try:
        with contextlib.ExitStack() as stack:
            for name, service in SERVICES.items():
                if getattr(args, name):
                    env.update(stack.enter_context(service()))
            return run(command, env)
    except ServiceError as exc:
        say(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except Stopped as exc:
        return 128 + exc.signum


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
