"""deploy/kubernetes/ and docker-compose.yml hold to the code: rendered by ``kubectl kustomize``, validated against
the Kubernetes schemas offline (kubernetes-validate ships them), and read for the facts an operator relies on.

The Prometheus Operator's PodMonitor is a custom resource whose schema kubernetes-validate does not ship: it is
skipped there by name (:data:`CUSTOM_KINDS`) and its shape is checked here instead.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from django.core.management import get_commands
from django.urls import resolve

from chat import health
from mcp_servers.common import HEALTH_PATH
from platform.celery import HEARTBEAT_FILE, HEARTBEAT_SECONDS

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "kubernetes"
# The Kubernetes version the manifests are validated against: one kubernetes-validate ships (its -local-strict
# schemas), old enough for the clusters most operators run.
KUBERNETES_VERSION = "1.32.0"
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "PodMonitor")}
SECRET_NAME = "platform-secrets"
SECRET_KEYS = {"DJANGO_SECRET_KEY", "DATABASE_URL", "REDIS_URL", "METRICS_TOKEN", "ADMIN_PASSWORD"}
FIRST_RUN_SECRET = "first-run"


def render(path: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.fail("kubectl (with its built-in kustomize) is needed to render deploy/kubernetes/")
    done = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return [document for document in yaml.safe_load_all(done.stdout) if document]


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return render(DEPLOY)


@pytest.fixture(scope="module")
def example() -> list[dict[str, Any]]:
    return render(DEPLOY / "overlays" / "example")


def named(resources: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [r for r in resources if r["kind"] == kind and r["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def pod_specs(resources: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for resource in resources:
        if resource["kind"] in ("Deployment", "StatefulSet", "Job"):
            yield resource, resource["spec"]["template"]["spec"]


def containers(resources: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for resource, spec in pod_specs(resources):
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            yield resource, container


def container(resources: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The main (first) container of the Deployment ``name``."""
    return named(resources, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]


def environment(resources: list[dict[str, Any]], item: dict[str, Any]) -> dict[str, str]:
    """A container's variables as the pod sees them: its ConfigMaps' data, then its own ``env`` values."""
    values: dict[str, str] = {}
    for source in item.get("envFrom", []):
        if "configMapRef" in source:
            values.update(named(resources, "ConfigMap", source["configMapRef"]["name"])["data"])
    values.update({variable["name"]: variable.get("value", "") for variable in item.get("env", [])})
    return values


@pytest.mark.parametrize("overlay", ["base", "example"])
def test_the_manifests_render_and_hold_to_the_kubernetes_schemas(overlay, request):
    resources = request.getfixturevalue(overlay)
    skipped = []
    for resource in resources:
        if (resource["apiVersion"], resource["kind"]) in CUSTOM_KINDS:
            skipped.append(resource["kind"])
            continue
        try:
            kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{resource['kind']}/{resource['metadata']['name']}: {error.message} at {list(error.path)}")
    assert skipped == ["PodMonitor"]


def test_the_web_probes_ask_the_health_routes_with_a_host_django_answers(base):
    web = container(base, "web")
    probes = {kind: web[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert probes["readinessProbe"]["path"] == "/api/health/ready"
    assert probes["livenessProbe"]["path"] == probes["startupProbe"]["path"] == "/api/health/live"
    assert resolve("/api/health/ready").func.view_class is health.HealthReadyApi  # type: ignore[attr-defined]
    assert resolve("/api/health/live").func.view_class is health.HealthLiveApi  # type: ignore[attr-defined]
    allowed = environment(base, web)["DJANGO_ALLOWED_HOSTS"].split(",")
    ports = {port["name"]: port["containerPort"] for port in web["ports"]}
    for probe in probes.values():
        assert {"name": "Host", "value": "localhost"} in probe["httpHeaders"] and "localhost" in allowed
        assert ports[probe["port"]] == 8000
    assert web["command"] == compose()["services"]["web"]["command"]


# A liveness command that reads a file's age and nothing else (no broker, no database, no Python start):
# `find <dir> -maxdepth 1 -name <name> -mmin -<minutes> | grep -q .`.
FRESH_FILE = re.compile(
    r"find (?P<dir>/\S+) -maxdepth 1 -name '?(?P<name>[\w.*-]+)'? -mmin -(?P<minutes>\d+) \| grep -q \."
)


def liveness_facts(probe: dict[str, Any]) -> tuple[str, str]:
    """What a liveness probe asks: ("http", path) or ("file", name) — any other kind fails the test."""
    if "httpGet" in probe:
        return "http", probe["httpGet"]["path"]
    command = probe["exec"]["command"]
    assert command[:2] == ["sh", "-c"], command
    found = FRESH_FILE.fullmatch(command[2])
    assert found is not None, command
    return "file", found["name"]


def test_liveness_probes_test_the_process_never_redis_nor_postgresql(example):
    asked = {}
    for resource, item in containers(example):
        if "livenessProbe" in item:
            asked[resource["metadata"]["name"]] = liveness_facts(item["livenessProbe"])
    assert asked.pop("web") == ("http", "/api/health/live")  # the view touches nothing (chat/tests/test_health.py)
    assert asked.pop("worker") == ("file", HEARTBEAT_FILE.name)
    assert asked.pop("beat") == ("file", "celerybeat-schedule*")
    assert set(asked.values()) == {("http", HEALTH_PATH)} and sorted(asked) == [
        "mcp-finance",
        "mcp-retail",
        "mcp-telecom",
    ]


def test_the_worker_probes_read_the_heartbeat_file_where_the_worker_writes_it(example):
    worker = container(example, "worker")
    assert "TMPDIR" not in environment(example, worker)  # the worker's temporary directory is /tmp, then
    compose_test = compose()["services"]["worker"]["healthcheck"]["test"]
    for command in (worker["livenessProbe"]["exec"]["command"][2], compose_test[1]):
        found = FRESH_FILE.fullmatch(command)
        assert found is not None and (found["dir"], found["name"]) == ("/tmp", HEARTBEAT_FILE.name)
        # Stale only after many missed touches: a busy node does not restart a worker that runs.
        assert int(found["minutes"]) * 60 >= 10 * HEARTBEAT_SECONDS
    mounts = {mount["mountPath"] for mount in worker["volumeMounts"]}
    assert "/tmp" in mounts  # writable: the root file system is read-only


def test_web_drains_before_its_graceful_stop_and_the_worker_has_time_for_a_step(base):
    web = container(base, "web")
    assert web["lifecycle"]["preStop"]["exec"]["command"][0] == "sleep"
    pause = int(web["lifecycle"]["preStop"]["exec"]["command"][1])
    for name in ("web", "worker"):
        spec = named(base, "Deployment", name)["spec"]
        # The pause, then the longest a step or a model call may take (30 s by default) must fit in the grace.
        assert spec["template"]["spec"]["terminationGracePeriodSeconds"] >= pause + 30
        assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_there_is_exactly_one_beat_and_a_rollout_never_runs_two(base, example):
    for resources in (base, example):
        beats = [
            (resource, c)
            for resource, spec in pod_specs(resources)
            for c in spec["containers"]
            if c["command"][:4] == ["celery", "-A", "platform", "beat"]
        ]
        assert len(beats) == 1
        deployment, _ = beats[0]
        assert deployment["kind"] == "Deployment"
        assert deployment["spec"]["replicas"] == 1
        assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_every_process_runs_a_command_the_code_has(example):
    commands = get_commands()
    for resource, item in containers(example):
        command = item["command"]
        if command[:2] == ["python", "-m"]:
            module = command[2]
            assert (ROOT / (module.replace(".", "/") + ".py")).is_file(), f"{resource['metadata']['name']}: {module}"
        elif command[:2] == ["python", "manage.py"]:
            assert command[2] in commands
        elif command[0] == "celery":
            assert command[1:3] == ["-A", "platform"] and command[3] in ("worker", "beat")
        else:
            assert command[:2] == ["sh", "-c"] and "manage.py migrate --check" in command[2]
    services = compose()["services"]
    for name in ("worker", "beat"):
        assert container(example, name)["command"] == services[name]["command"]


def test_web_worker_and_beat_wait_for_the_migrations_and_the_jobs_run_them_once(base):
    assert named(base, "Job", "migrate")["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "python",
        "manage.py",
        "migrate",
        "--noinput",
    ]
    for name in ("web", "worker", "beat"):
        spec = named(base, "Deployment", name)["spec"]["template"]["spec"]
        assert [c["name"] for c in spec["initContainers"]] == ["wait-for-migrations"]
    first_run = named(base, "Job", "first-run")["spec"]["template"]["spec"]
    assert first_run["containers"][0]["command"] == ["python", "manage.py", "first_run"]
    assert first_run["restartPolicy"] == "OnFailure"


def test_secrets_are_referenced_never_written(base, example):
    for resources in (base, example):
        # The one Secret declared is first-run's, empty: its Job fills it.
        assert [
            (r["metadata"]["name"], set(r) & {"data", "stringData"}) for r in resources if r["kind"] == "Secret"
        ] == [(FIRST_RUN_SECRET, set())]
        for _resource, item in containers(resources):
            references = [source["secretRef"]["name"] for source in item.get("envFrom", []) if "secretRef" in source]
            assert references in ([], [SECRET_NAME])
            assert not set(environment(resources, item)) & SECRET_KEYS


def test_first_run_writes_what_it_makes_to_its_secret_with_a_token_that_may_patch_only_that(base, example):
    for resources in (base, example):
        job = named(resources, "Job", "first-run")["spec"]["template"]["spec"]
        args = job["containers"][0]["args"]
        # The option that keeps the password and the key out of the log (tenants/tests/test_first_run_secret.py).
        assert args[args.index("--output-secret") + 1] == FIRST_RUN_SECRET
        account = named(resources, "ServiceAccount", job["serviceAccountName"])
        assert job["automountServiceAccountToken"] is True and account["automountServiceAccountToken"] is False
        bindings = [
            binding
            for binding in resources
            if binding["kind"] in ("RoleBinding", "ClusterRoleBinding")
            and {"kind": "ServiceAccount", "name": account["metadata"]["name"]}.items()
            <= {key: value for key, value in binding["subjects"][0].items() if key != "namespace"}.items()
        ]
        assert [binding["kind"] for binding in bindings] == ["RoleBinding"]
        role = named(resources, bindings[0]["roleRef"]["kind"], bindings[0]["roleRef"]["name"])
        assert role["rules"] == [
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [FIRST_RUN_SECRET], "verbs": ["patch"]}
        ]
        for resource, spec in pod_specs(resources):
            if resource is not named(resources, "Job", "first-run"):
                assert spec["automountServiceAccountToken"] is False and "serviceAccountName" not in spec


def test_every_variable_the_manifests_set_is_one_the_platform_reads(example):
    documented = (ROOT / ".env.example").read_text(encoding="utf-8")
    names = set(named(example, "ConfigMap", "platform-config")["data"])
    for _resource, item in containers(example):
        names |= {variable["name"] for variable in item.get("env", [])}
    names -= {"FIRST_TENANT", "MCP_HOST"}  # the first run's argument; the MCP servers' address (mcp_servers/common.py)
    undocumented = sorted(name for name in names if name not in documented)
    assert not undocumented, f"not in .env.example: {undocumented}"


def test_each_web_and_worker_pod_serves_its_own_metrics_on_the_port_the_pod_monitor_scrapes(base):
    monitor = named(base, "PodMonitor", "platform")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    selector = monitor["spec"]["selector"]["matchLabels"]
    [endpoint] = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    assert endpoint["authorization"]["credentials"] == {"name": SECRET_NAME, "key": "METRICS_TOKEN"}
    scraped = [
        resource["metadata"]["name"]
        for resource in base
        if resource["kind"] == "Deployment"
        and selector.items() <= resource["spec"]["template"]["metadata"]["labels"].items()
    ]
    assert sorted(scraped) == ["web", "worker"]
    for name in scraped:
        item = container(base, name)
        variables = environment(base, item)
        ports = {port["name"]: port["containerPort"] for port in item["ports"]}
        assert ports[endpoint["port"]] == int(variables["METRICS_PORT"])
        # The pod's processes share their figures in a directory of the pod's own.
        mounts = {mount["mountPath"]: mount["name"] for mount in item["volumeMounts"]}
        volumes = {v["name"]: v for v in named(base, "Deployment", name)["spec"]["template"]["spec"]["volumes"]}
        assert "emptyDir" in volumes[mounts[variables["PROMETHEUS_MULTIPROC_DIR"]]]


def test_the_disruption_budgets_and_services_select_pods_that_exist(example):
    labels = {
        resource["metadata"]["name"]: resource["spec"]["template"]["metadata"]["labels"]
        for resource in example
        if resource["kind"] == "Deployment"
    }

    def selected(selector: dict[str, str]) -> list[str]:
        return sorted(name for name, pod in labels.items() if selector.items() <= pod.items())

    budgets = {r["metadata"]["name"]: r for r in example if r["kind"] == "PodDisruptionBudget"}
    assert {name: selected(b["spec"]["selector"]["matchLabels"]) for name, b in budgets.items()} == {
        "web": ["web"],
        "worker": ["worker"],
    }
    for service in (r for r in example if r["kind"] == "Service"):
        [target] = selected(service["spec"]["selector"])
        named_ports = {
            p["name"]
            for c in named(example, "Deployment", target)["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])
        }
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= named_ports


def test_the_example_mcp_servers_are_a_component_the_base_runs_without(base, example):
    servers = sorted(r["metadata"]["name"] for r in example if r["metadata"]["name"].startswith("mcp-"))
    assert servers == sorted(["mcp-telecom", "mcp-retail", "mcp-finance"] * 2)  # a Deployment and a Service each
    assert not [r for r in base if r["metadata"]["name"].startswith("mcp-")]
    config = named(example, "ConfigMap", "platform-config")["data"]
    demo = (ROOT / "config" / "demo" / "mcp_servers.yaml").read_text(encoding="utf-8")
    for name, port in (("telecom", "8100"), ("retail", "8200"), ("finance", "8300")):
        assert config[f"MCP_{name.upper()}_HOST"] == f"mcp-{name}"
        assert f"${{MCP_{name.upper()}_HOST:-127.0.0.1}}:${{MCP_{name.upper()}_PORT:-{port}}}" in demo
        server = container(example, f"mcp-{name}")
        assert server["command"] == ["python", "-m", f"mcp_servers.{name}.server"]
        assert {"name": f"MCP_{name.upper()}_PORT", "value": port} in server["env"]
        assert server["readinessProbe"]["httpGet"]["path"] == "/health"
    args = named(example, "Job", "first-run")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["--demo", "--sync"]


# -- network policies ---------------------------------------------------------------------------------------------

ANYONE = "anyone"  # a rule with no peers: every address
PROMETHEUS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
}
PLATFORM = ["first-run", "migrate", "beat", "web", "worker"]  # every process of the platform's image


def selected(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels and matchExpressions) selects a pod with ``labels``."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        holds = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not holds:
            return False
    return True


def pod_labels(resources: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {
        resource["metadata"]["name"]: resource["spec"]["template"]["metadata"]["labels"]
        for resource, _ in pod_specs(resources)
    }


def pod_ports(resources: list[dict[str, Any]], name: str) -> dict[str, int]:
    [(_, spec)] = [(r, spec) for r, spec in pod_specs(resources) if r["metadata"]["name"] == name]
    return {port["name"]: port["containerPort"] for c in spec["containers"] for port in c.get("ports", [])}


def opened(resources: list[dict[str, Any]], pod: str, direction: str) -> list[tuple[dict[str, Any], list[Any]]]:
    """The rules of every policy that selects ``pod`` in ``direction`` ("ingress" or "egress"): (rule, peers)."""
    labels = pod_labels(resources)[pod]
    rules = []
    for policy in (r for r in resources if r["kind"] == "NetworkPolicy"):
        spec = policy["spec"]
        if direction.capitalize() in spec["policyTypes"] and selected(spec["podSelector"], labels):
            for rule in spec.get(direction, []):
                rules.append((rule, rule.get("from" if direction == "ingress" else "to") or [ANYONE]))
    return rules


def port_matches(rule: dict[str, Any], port: int | str, ports_of_pod: dict[str, int], protocol: str = "TCP") -> bool:
    """Whether ``rule`` lets ``port`` (a number, or a name of ``ports_of_pod``) through."""
    if "ports" not in rule:
        return True
    number = ports_of_pod.get(port, port) if isinstance(port, str) else port
    return any(
        allowed.get("protocol", "TCP") == protocol and ports_of_pod.get(allowed["port"], allowed["port"]) == number
        for allowed in rule["ports"]
    )


def peers_in(resources: list[dict[str, Any]], pod: str, port: str) -> list[Any]:
    """Who may open ``port`` (a port name) of ``pod``."""
    ports = pod_ports(resources, pod)
    return [
        peer for rule, peers in opened(resources, pod, "ingress") if port_matches(rule, port, ports) for peer in peers
    ]


def pods_of(resources: list[dict[str, Any]], peers: list[Any]) -> list[str]:
    """The pods of this namespace that ``peers`` name (peers with a pod selector and no namespace selector)."""
    assert all(peer != ANYONE and set(peer) == {"podSelector"} for peer in peers), peers
    return sorted(
        name for name, labels in pod_labels(resources).items() if any(selected(p["podSelector"], labels) for p in peers)
    )


def reaches(
    resources: list[dict[str, Any]], pod: str, port: int | str, *, to: str | None = None, protocol: str = "TCP"
) -> bool:
    """Whether ``pod`` may open ``port`` anywhere (``to`` None: a rule with no peers, or an ipBlock of the whole
    internet) or on the pod ``to`` of this namespace."""
    target_ports = pod_ports(resources, to) if to else {}
    for rule, peers in opened(resources, pod, "egress"):
        if not port_matches(rule, port, target_ports, protocol):
            continue
        for peer in peers:
            if to is None and (peer == ANYONE or peer.get("ipBlock", {}).get("cidr") == "0.0.0.0/0"):
                return True
            if to is not None and (
                peer == ANYONE
                or (set(peer) == {"podSelector"} and selected(peer["podSelector"], pod_labels(resources)[to]))
            ):
                return True
    return False


@pytest.mark.parametrize("overlay", ["base", "example"])
def test_every_pod_is_closed_both_ways_by_a_network_policy(overlay, request):
    resources = request.getfixturevalue(overlay)
    closing = [
        r
        for r in resources
        if r["kind"] == "NetworkPolicy"
        and r["spec"]["podSelector"] == {}
        and sorted(r["spec"]["policyTypes"]) == ["Egress", "Ingress"]
        and not r["spec"].get("ingress")
        and not r["spec"].get("egress")
    ]
    assert [policy["metadata"]["name"] for policy in closing] == ["default-deny"]
    assert sorted(pod_labels(resources)) == sorted(
        PLATFORM + (["mcp-finance", "mcp-retail", "mcp-telecom"] if overlay == "example" else [])
    )


@pytest.mark.parametrize("overlay", ["base", "example"])
def test_each_port_opens_only_to_who_needs_it(overlay, request):
    resources = request.getfixturevalue(overlay)
    monitor = named(resources, "PodMonitor", "platform")
    for pod in pod_labels(resources):
        for port in pod_ports(resources, pod):
            peers = peers_in(resources, pod, port)
            if (pod, port) == ("web", "http"):
                assert peers == [ANYONE]  # the ingress controller, wherever it runs
            elif port == monitor["spec"]["podMetricsEndpoints"][0]["port"]:
                assert selected(monitor["spec"]["selector"], pod_labels(resources)[pod])
                assert peers == [PROMETHEUS]
            else:
                assert (pod, port) in [(f"mcp-{name}", "mcp") for name in ("telecom", "retail", "finance")]
                assert pods_of(resources, peers) == ["first-run", "web", "worker"]
        # Nothing else comes in: a rule without ports would open every port.
        assert all("ports" in rule for rule, _ in opened(resources, pod, "ingress")), pod


@pytest.mark.parametrize("overlay", ["base", "example"])
def test_each_process_reaches_what_it_needs_and_the_mcp_servers_reach_nothing(overlay, request):
    resources = request.getfixturevalue(overlay)
    for pod in PLATFORM:
        assert reaches(resources, pod, 53, protocol="UDP") and reaches(resources, pod, 53), pod
        assert reaches(resources, pod, 5432) and reaches(resources, pod, 6379), pod
        assert reaches(resources, pod, 443) == (pod in ("web", "worker", "first-run")), pod  # models; first-run: API
        assert not reaches(resources, pod, 8000) and not reaches(resources, pod, 9100), pod
    web_and_workers = [rule for rule, _ in opened(resources, "worker", "egress") if port_matches(rule, 443, {})]
    # Never the link-local addresses, where a cloud's instance metadata answers.
    assert {
        (peer["ipBlock"]["cidr"], *peer["ipBlock"]["except"]) for rule in web_and_workers for peer in rule["to"]
    } == {
        ("0.0.0.0/0", "169.254.0.0/16"),
        ("::/0", "fe80::/10"),
    }
    if overlay == "example":
        for name in ("telecom", "retail", "finance"):
            assert opened(resources, f"mcp-{name}", "egress") == []
            clients = [pod for pod in PLATFORM if reaches(resources, pod, "mcp", to=f"mcp-{name}")]
            assert sorted(clients) == ["first-run", "web", "worker"]


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))


def test_compose_web_starts_without_the_example_mcp_servers():
    depends = compose()["services"]["web"]["depends_on"]
    assert sorted(depends) == ["db", "migrate", "redis"]


def test_the_example_environment_file_is_safe_for_production():
    lines = (ROOT / ".env.example").read_text(encoding="utf-8").splitlines()
    settings = dict(line.split("=", 1) for line in lines if line and not line.startswith("#") and "=" in line)
    assert settings["DJANGO_DEBUG"] == "false"
    # Empty, so that production refuses to start until it is set (platform/settings.py).
    assert settings["DJANGO_SECRET_KEY"] == ""
