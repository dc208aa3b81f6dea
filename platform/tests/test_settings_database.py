"""DATABASE_POOL: psycopg's pool for PostgreSQL by default, sized from the environment; SQLite untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = "import json, platform.settings as s; print(json.dumps(s.DATABASES['default'].get('OPTIONS', {})))"
POSTGRES = "postgres://platform@db.invalid:5432/platform"


def settings_options(tmp_path, **environ: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DATABASE_")}
    env.update({"PYTHONPATH": str(ROOT), "VAR_DIR": str(tmp_path), **environ})
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)


def test_postgres_gets_a_small_pool_by_default(tmp_path):
    result = settings_options(tmp_path, DATABASE_URL=POSTGRES)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["pool"] == {"min_size": 2, "max_size": 5, "timeout": 10.0}


def test_the_pool_is_sized_from_the_environment_or_turned_off(tmp_path):
    sized = settings_options(tmp_path, DATABASE_URL=POSTGRES, DATABASE_POOL_MAX_SIZE="8", DATABASE_POOL_MIN_SIZE="1")
    assert json.loads(sized.stdout)["pool"]["max_size"] == 8
    assert json.loads(sized.stdout)["pool"]["min_size"] == 1
    off = settings_options(tmp_path, DATABASE_URL=POSTGRES, DATABASE_POOL="false")
    assert "pool" not in json.loads(off.stdout)


def test_a_pool_and_persistent_connections_together_refuse_to_start(tmp_path):
    result = settings_options(tmp_path, DATABASE_URL=POSTGRES, DATABASE_CONN_MAX_AGE="60")
    assert result.returncode != 0
    assert "DATABASE_POOL replaces DATABASE_CONN_MAX_AGE" in result.stderr


def test_sqlite_has_no_pool(tmp_path):
    result = settings_options(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "pool" not in json.loads(result.stdout)
