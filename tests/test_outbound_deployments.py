"""The shipped set-ups let their own internal servers through the outbound policy (common/outbound.py), and nothing
more: the Kubernetes example and docker-compose.yml allow their example MCP servers by name and port, the base
allows nothing, scripts/start allows the ports it starts its servers on. Each is read as it ships (the manifests
rendered by ``kubectl kustomize``) and its list parsed as the platform parses it."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

import yaml

from common.endpoints import ENV_REFERENCE
from common.outbound import Allowance, allowance_parse
from tests.test_kubernetes import DEPLOY, ROOT, compose, container, environment, named, render

DEMO_SERVERS = ROOT / "config" / "demo" / "mcp_servers.yaml"


def demo_endpoints(variables: dict[str, str]) -> list[tuple[str, int]]:
    """``(host, port)`` of each demo MCP endpoint, its ``${NAME:-default}`` expanded from ``variables``."""
    servers = yaml.safe_load(DEMO_SERVERS.read_text(encoding="utf-8"))["servers"]
    found = []
    for server in servers.values():
        url = ENV_REFERENCE.sub(lambda match: variables.get(match.group(1), match.group(2) or ""), server["endpoint"])
        parts = urlsplit(url)
        found.append((str(parts.hostname), int(parts.port or 80)))
    return found


def allows(allowed: Allowance, host: str, port: int) -> bool:
    try:
        return allowed.allows_address(ipaddress.ip_address(host), port)
    except ValueError:
        return allowed.allows_name(host, port)


def test_the_kubernetes_example_allows_its_mcp_servers_and_the_base_allows_nothing():
    base, example = render(DEPLOY), render(DEPLOY / "overlays" / "example")
    assert "OUTBOUND_ALLOWED" not in named(base, "ConfigMap", "platform-config")["data"]
    for name in ("web", "worker"):
        variables = environment(example, container(example, name))
        allowed = allowance_parse(variables["OUTBOUND_ALLOWED"].split(","))
        endpoints = demo_endpoints(variables)
        assert len(endpoints) == 3 and all(allows(allowed, host, port) for host, port in endpoints)
        assert not allows(allowed, "mcp-telecom", 8101) and not allows(allowed, "10.0.0.1", 8100)


def test_compose_allows_its_mcp_servers_by_name_and_port():
    variables = compose()["x-app"]["environment"]
    written = re.fullmatch(r"\$\{OUTBOUND_ALLOWED:-(.*)\}", variables["OUTBOUND_ALLOWED"])
    assert written, variables["OUTBOUND_ALLOWED"]
    allowed = allowance_parse(written.group(1).split(","))
    endpoints = demo_endpoints(variables)
    assert len(endpoints) == 3 and all(allows(allowed, host, port) for host, port in endpoints)
    assert not allows(allowed, "db", 5432) and not allows(allowed, "redis", 6379)


def test_scripts_start_allows_the_ports_it_starts_its_servers_on():
    start = (ROOT / "scripts" / "start").read_text(encoding="utf-8")
    started = re.findall(r'background python -m mcp_servers\.\w+\.server --port "\$(\w+)"', start)
    own = re.search(r'own_servers="([^"]*)"', start)
    assert len(started) == 3 and own is not None
    assert sorted(own.group(1).split(",")) == sorted(f"127.0.0.1:${port}" for port in started)
    assert 'export OUTBOUND_ALLOWED="${OUTBOUND_ALLOWED:+$OUTBOUND_ALLOWED,}$own_servers"' in start
    assert start.index("export OUTBOUND_ALLOWED") < start.index("manage.py first_run")  # before the demo's --sync
