"""No planning labels in the product: its code, templates, static files, configuration and migrations say what a
thing is in plain words or link a docs page, never which planning step made it ("W2 4/8", "seed 002"). The README and
the docs use none as a heading either. tests/test_ui_words.py checks the words the admin and the pages show."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

BASE = Path(settings.BASE_DIR)
PLANNING = re.compile(r"W[0-9] [0-9]+/[0-9]+|[Ss]eed 00[0-4]|seeds? [0-9]{3}")
SUFFIXES = {".py", ".html", ".txt", ".js", ".css", ".yaml", ".yml", ".toml", ".json", ".cfg", ".ini"}
OUTSIDE = {".venv", ".venv-peer", "var", "test-output", "node_modules", "docs", "__pycache__"}
# The tests hold planning labels as the data they test; the migration finds the old text in a database to reword it.
HOLDING_LABELS = {
    Path("tests/test_ui_words.py"),
    Path("tests/test_planning_labels.py"),
    Path("routing/migrations/0031_multi_agent_flag_description_in_plain_words.py"),
}


def product_files() -> list[Path]:
    found = []
    for path in BASE.rglob("*"):
        relative = path.relative_to(BASE)
        if relative.parts[0].startswith(".") or OUTSIDE & set(relative.parts) or relative in HOLDING_LABELS:
            continue
        if path.is_file() and (path.suffix in SUFFIXES or path.parent.name == "scripts"):
            found.append(path)
    return found


def labelled(text: str) -> list[str]:
    return [match.group() for match in PLANNING.finditer(text)]


def test_the_label_pattern_finds_planning_steps_and_leaves_plain_words():
    assert labelled("Rollout plans (W2 5/8): seed 002's goal mode, seeds 003 and seed 004") == [
        "W2 5/8",
        "seed 002",
        "seeds 003",
        "seed 004",
    ]
    assert labelled("HTTP/2 2/8 of the seeds, a seed of 100, W2 alone, Seed 005") == []


def test_no_product_file_holds_a_planning_label():
    files = product_files()
    assert any(path.name == "graph.py" for path in files) and any(path.suffix == ".html" for path in files)
    found = [
        f"{path.relative_to(BASE)}:{number}: {label}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        for label in labelled(line)
    ]
    assert found == []


def test_no_heading_of_the_readme_or_the_docs_is_a_planning_label():
    pages = [BASE / "README.md", *sorted((BASE / "docs").rglob("*.md"))]
    found = [
        f"{page.relative_to(BASE)}: {line}"
        for page in pages
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("#") and labelled(line)
    ]
    assert found == []
