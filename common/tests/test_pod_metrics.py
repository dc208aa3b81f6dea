"""A pod's own metrics port (``METRICS_PORT``, ``common.infra.metrics.metrics_serve``): for the token's bearer only."""

from __future__ import annotations

import socket

import httpx
import pytest

from common.infra.metrics import http_request_observe, metrics_serve

TOKEN = "pod-metrics-token"


@pytest.fixture
def pod_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = metrics_serve(host="127.0.0.1", port=port, token=TOKEN)
    yield port
    server.shutdown()
    server.server_close()


def test_the_pod_port_serves_this_hosts_figures_to_the_token_only(pod_port):
    http_request_observe("api/pod-metrics-probe", "GET", 200, 0.01)
    url = f"http://127.0.0.1:{pod_port}/metrics"

    anonymous = httpx.get(url)
    wrong = httpx.get(url, headers={"Authorization": "Bearer not-the-token"})
    scraped = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
    elsewhere = httpx.get(f"http://127.0.0.1:{pod_port}/api/health", headers={"Authorization": f"Bearer {TOKEN}"})

    assert (anonymous.status_code, anonymous.headers["WWW-Authenticate"]) == (401, 'Bearer realm="metrics"')
    assert wrong.status_code == 403
    assert scraped.status_code == 200 and scraped.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert 'platform_http_requests_total{method="GET",route="api/pod-metrics-probe",status="200"}' in scraped.text
    assert elsewhere.status_code == 404


def test_without_a_token_the_pod_port_serves_nobody():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = metrics_serve(host="127.0.0.1", port=port, token="")
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": "Bearer any"}).status_code == 403
    finally:
        server.shutdown()
        server.server_close()
