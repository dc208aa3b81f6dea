"""The README's Quick start and scripts/start agree: every page it lists is in the banner, every command exists."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.management import get_commands

README = (settings.BASE_DIR / "README.md").read_text(encoding="utf-8")
START = (settings.BASE_DIR / "scripts" / "start").read_text(encoding="utf-8")


def quick_start() -> str:
    return README.split("## Quick start", 1)[1].split("\n## ", 1)[0]


def test_the_banner_lists_every_page_the_quick_start_lists():
    pages = re.findall(r"http://127\.0\.0\.1:8000(/[\w/.-]*)", quick_start())
    assert {"/admin/", "/analytics/", "/chat/", "/api/docs/", "/api/health"} <= set(pages)
    banner = START.split("cat <<EOF", 1)[1]
    assert [page for page in pages if f"$base{page}\n" not in banner] == []


def test_every_manage_py_command_the_readme_shows_exists():
    shown = set(re.findall(r"manage\.py (\w+)", README))
    assert {"first_run", "seed_demo", "create_api_key", "routing_publish", "set_rollout"} <= shown
    assert sorted(shown - set(get_commands())) == []


def test_scripts_start_keeps_its_api_key_and_loads_the_demo_once():
    first_run = re.search(r"manage\.py first_run ([^\n]*\n[^\n]*)", START).group(1)
    assert "--key-file" in first_run and "--new-key" not in first_run
    assert "--demo --sync" in first_run
