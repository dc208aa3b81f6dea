"""The metrics' writes in multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``): each process's own file, no system call a
write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Ten served requests recorded, os.getpid's calls counted (the real function, wrapped); then a forked child records
# one more, in a file of its own; the parent's scrape merges both.
_WRITES = """
import json, os
calls = [0]
real = os.getpid
def counted():
    calls[0] += 1
    return real()
os.getpid = counted
from common.infra import metrics
calls[0] = 0  # the import's own (this process's identifier, made once)
for _ in range(10):
    metrics.http_request_observe("api/probe", "POST", 200, 0.01)
    metrics.turn_observe("probe", "keyword", "keyword", 0.02, [("route", "ok")])
written = calls[0]
child = os.fork()
if child == 0:
    metrics.http_request_observe("api/probe", "POST", 200, 0.01)
    os._exit(0)
os.waitpid(child, 0)
files = sorted(os.listdir(metrics.multiprocess_dir()))
scrape = metrics.metrics_exposition().decode()
found = {"calls": written, "host": metrics._host, "parent": real(), "child": child, "files": files, "scrape": scrape}
print(json.dumps(found))
"""


def test_a_metrics_write_makes_no_system_call_and_a_forked_child_writes_a_file_of_its_own(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _WRITES], env=env, capture_output=True, text=True, check=True)
    found = json.loads(done.stdout)

    assert found["calls"] == 0  # seventy values written: ten requests and ten turns, each a count and a duration
    for pid in (found["parent"], found["child"]):
        assert f"counter_{found['host']}-{pid}.db" in found["files"]
    assert 'platform_http_requests_total{method="POST",route="api/probe",status="200"} 11.0' in found["scrape"]
