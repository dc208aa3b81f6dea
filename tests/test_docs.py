"""The README and the docs a newcomer reads: the README opens with the two commands and stays short, the docs index
lists every page, and every link between them reaches a file and, when it names one, a heading there."""

from __future__ import annotations

import json
import re
from pathlib import Path

from django.conf import settings

from agents.profile_settings import MODEL_DEFAULT, PROFILE_SETTINGS, SCALAR_KINDS, ProfileSetting

BASE = Path(settings.BASE_DIR)
README = BASE / "README.md"
DOCS = BASE / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
README_MAX_LINES = 400

LINK = re.compile(r"\]\(([^)\s]+)\)")
ENV_READ = re.compile(r"\benv\.\w+\(\s*\"([A-Z][A-Z0-9_]+)\"")  # platform/env.py's readers: env.integer("NAME", …)
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces as ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {anchor(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def test_the_readme_opens_with_the_two_commands_and_stays_under_four_hundred_lines():
    text = README.read_text(encoding="utf-8")
    first_block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    assert text.startswith("```sh\n")
    assert [line.split()[0] for line in first_block.splitlines()] == ["scripts/start", "scripts/test"]
    assert len(text.splitlines()) <= README_MAX_LINES


def test_the_readme_links_the_docs_index_and_every_concept_to_its_page():
    text = README.read_text(encoding="utf-8")
    assert "(docs/README.md)" in text
    glossary = text.split("\n## Concepts\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in glossary.splitlines() if line.startswith("| ") and not line.startswith("| term")]
    assert len(rows) >= 10
    assert [row for row in rows[1:] if "](docs/" not in row] == []


def test_the_docs_index_lists_every_page():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    listed = {target.split("#")[0] for target in links(DOCS / "README.md")}
    pages = {page.name for page in DOCS.glob("*.md")} - {"README.md"}
    assert sorted(pages - listed) == []
    assert "(recipes/README.md)" in index and "(decisions/)" in index


def test_every_link_of_the_readme_and_the_docs_reaches_a_file_and_its_heading():
    broken = []
    for page in PAGES:
        for target in links(page):
            path, _, fragment = target.partition("#")
            goal = (page.parent / path).resolve() if path else page
            if not goal.exists():
                broken.append(f"{page.relative_to(BASE)}: {target} (no such file)")
            elif fragment and goal.suffix == ".md" and fragment not in anchors(goal):
                broken.append(f"{page.relative_to(BASE)}: {target} (no such heading)")
    assert broken == []


def product_environment() -> set[str]:
    """The environment variables product code reads through platform/env.py."""
    read = set()
    for app in (
        "platform",
        "common",
        "tenants",
        "handoffs",
        "agents",
        "routing",
        "conversations",
        "releases",
        "chat",
        "analytics",
    ):
        for path in (BASE / app).rglob("*.py"):
            if "tests" not in path.relative_to(BASE).parts:
                read |= set(ENV_READ.findall(path.read_text(encoding="utf-8")))
    return read


def test_every_environment_variable_the_product_reads_is_in_the_settings_pages():
    read = product_environment()
    documented = (DOCS / "settings.md").read_text(encoding="utf-8") + (DOCS / "observability.md").read_text(
        encoding="utf-8"
    )
    assert {"DATABASE_URL", "REDIS_URL", "OPENAI_BASE_URL"} <= read
    assert sorted(name for name in read if f"`{name}`" not in documented) == []


def test_every_environment_variable_the_product_reads_is_in_the_example_environment_file():
    example = (BASE / ".env.example").read_text(encoding="utf-8")
    named = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", example, flags=re.MULTILINE))

    assert sorted(product_environment() - named) == []


def profile_setting_row(setting: ProfileSetting) -> str:
    """A profile setting's row in docs/configuration.md's table, from its declaration (agents/profile_settings.py)."""

    def code(text: str) -> str:
        return f"`{text}`" if text else "—"

    if setting.default == MODEL_DEFAULT:
        default = "see agents/models/"
    elif setting.kind in SCALAR_KINDS:
        default = code("null" if setting.default is None else json.dumps(setting.default))
    else:
        default = code(json.dumps(setting.default))
    kind = f"{setting.kind}: {', '.join(setting.choices)}" if setting.choices else setting.kind
    if setting.nullable:
        kind += " or null"
    section = setting.section or "(calibration writes it)"
    if setting.operator_only:
        section += ", operators only"
    yaml_keys = (
        code(setting.agents_yaml),
        code(f"router.{setting.routing_yaml}" if setting.routing_yaml else ""),
    )
    return f"| `{setting.name}` | {' | '.join(yaml_keys)} | {kind} | {default} | {section} | {setting.description} |"


def test_the_profile_settings_table_of_the_configuration_page_is_the_declarations():
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    table = text.split("\n## Profile settings\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    expected = [profile_setting_row(setting) for setting in PROFILE_SETTINGS]
    assert rows == expected, "docs/configuration.md, Profile settings, should read:\n" + "\n".join(expected)


def test_a_heading_becomes_the_anchor_github_gives_it():
    assert anchor("The `multi_agent` flag") == "the-multi_agent-flag"
    assert anchor("Routing accuracy (`bench/routing_accuracy.py`)") == "routing-accuracy-benchrouting_accuracypy"
    assert anchor("Connections: processes, pools and PostgreSQL's `max_connections`") == (
        "connections-processes-pools-and-postgresqls-max_connections"
    )


def test_the_external_desks_api_table_writes_a_person_as_the_api_takes_it():
    """A desk that sent ``{"person": "Ana"}``, as the table's ``{"person"}`` read, got a 400: the API takes
    ``{"person": {"name", "id"}}`` (chat/desk/apis.py)."""
    rows = [line for line in (DOCS / "external-desk.md").read_text().splitlines() if line.startswith("| `POST /api/")]
    bodies = [row.split("|")[2] for row in rows if '"person"' in row]

    assert bodies
    assert all('"person": {"name", "id"}' in body for body in bodies), bodies
