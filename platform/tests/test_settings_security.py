"""Production mode is HTTPS-only by default and `check --deploy` is clean; every part of it is configurable."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import json, platform.settings as s; print(json.dumps({name: getattr(s, name, None) for name in ("
    "'SECURE_SSL_REDIRECT', 'SECURE_HSTS_SECONDS', 'SECURE_HSTS_INCLUDE_SUBDOMAINS', 'SESSION_COOKIE_SECURE', "
    "'CSRF_COOKIE_SECURE', 'SECURE_PROXY_SSL_HEADER')}))"
)


def run(tmp_path, args: list[str], **environ: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_"))}
    env.update({"PYTHONPATH": str(ROOT), "VAR_DIR": str(tmp_path), **environ})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def production(**environ: str) -> dict[str, str]:
    return {"DJANGO_DEBUG": "false", "DJANGO_SECRET_KEY": secrets.token_urlsafe(50), **environ}


def test_check_deploy_finds_nothing_to_warn_about_in_production_mode(tmp_path):
    result = run(tmp_path, ["manage.py", "check", "--deploy", "--fail-level", "WARNING"], **production())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_mode_redirects_to_https_sends_hsts_and_marks_cookies_secure(tmp_path):
    result = run(tmp_path, ["-c", PROBE], **production())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 31_536_000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_PROXY_SSL_HEADER": None,
    }


def test_each_https_setting_can_be_changed_and_the_proxy_header_is_read_as_django_expects(tmp_path):
    environ = production(
        DJANGO_SECURE_SSL_REDIRECT="false",
        DJANGO_SECURE_HSTS_SECONDS="3600",
        DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS="false",
        DJANGO_SECURE_COOKIES="false",
        DJANGO_SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto",
    )
    result = run(tmp_path, ["-c", PROBE], **environ)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 3600,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
    }


def test_debug_mode_stays_on_plain_http(tmp_path):
    result = run(tmp_path, ["-c", PROBE], DJANGO_DEBUG="true")
    assert result.returncode == 0, result.stderr
    settings = json.loads(result.stdout)
    assert settings["SECURE_SSL_REDIRECT"] is False
    assert settings["SECURE_HSTS_SECONDS"] == 0
    assert settings["SESSION_COOKIE_SECURE"] is False


def test_the_https_redirect_spares_the_health_routes_that_load_balancers_probe_over_http(client, settings, db):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/api/health").status_code != 301
    redirected = client.get("/api/agents")
    assert redirected.status_code == 301
    assert redirected["Location"].startswith("https://")
    assert client.get("/api/agents", headers={"X-Forwarded-Proto": "https"}).status_code == 301  # no proxy trusted
