"""The embeddings prefixes: none unless set, and the knowledge's never the router's (the routing compares texts of
one kind, the knowledge a question with a passage)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import json, platform.settings as s; print(json.dumps([getattr(s, f'{e}_EMBEDDINGS_{r}_PREFIX') "
    "for e in ('ROUTER', 'KNOWLEDGE') for r in ('QUERY', 'DOCUMENT')]))"
)
ROUTER = "http://embeddings.invalid/v1"


def prefixes(tmp_path, **environ: str) -> list[str]:
    """(router's query, router's document, knowledge's query, knowledge's document) prefixes under ``environ``."""
    env = {k: v for k, v in os.environ.items() if "_EMBEDDINGS_" not in k}
    env.update({"PYTHONPATH": str(ROOT), "VAR_DIR": str(tmp_path), **environ})
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_no_prefix_is_sent_unless_one_is_set(tmp_path):
    assert prefixes(tmp_path, ROUTER_EMBEDDINGS_BASE_URL=ROUTER) == ["", "", "", ""]


def test_the_knowledge_never_takes_the_routers_prefixes_even_on_its_endpoint_and_model(tmp_path):
    e5 = {"ROUTER_EMBEDDINGS_BASE_URL": ROUTER, "ROUTER_EMBEDDINGS_MODEL": "multilingual-e5-small"}
    e5 |= {"ROUTER_EMBEDDINGS_QUERY_PREFIX": "query: ", "ROUTER_EMBEDDINGS_DOCUMENT_PREFIX": "query: "}

    shared = prefixes(tmp_path, **e5)
    own = prefixes(
        tmp_path, **e5, KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX="query: ", KNOWLEDGE_EMBEDDINGS_DOCUMENT_PREFIX="passage: "
    )

    assert shared == ["query: ", "query: ", "", ""]
    assert own == ["query: ", "query: ", "query: ", "passage: "]
