"""The figures of docs/architecture.md, held to what scripts/architecture.py measures now: each app's lines and the
total within 10 % (the doc rounds them to the hundred), the imports between each pair of apps within 10 % or 3, and
exactly the pairs the doc shows. Normal growth passes; a figure left far behind, or a new dependency between apps
missing from the table, fails."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
LINES_MARGIN, LINES_SLACK = 0.10, 100  # the doc rounds to the hundred
IMPORTS_MARGIN, IMPORTS_SLACK = 0.10, 3
TOP_ROW = re.compile(r"^\| \d+ \| `platform/` urls, asgi, wsgi, serve \|.*\| ([^|]*) \|$")
APP_ROW = re.compile(r"^\| \d+ \| `(\w+)/` \| ([\d,]+) \| \d+% \| ([^|]*) \|$")
USE = re.compile(r"(\w+) \((\d+)\)")
TOTALS = re.compile(r"About ([\d,]+) lines of product code; (\d+) imports between apps\.")


def _architecture() -> ModuleType:
    spec = importlib.util.spec_from_file_location("architecture_for_docs", ROOT / "scripts" / "architecture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


architecture = _architecture()


def near(shown: int, measured: int, margin: float, slack: int) -> bool:
    return abs(shown - measured) <= max(margin * measured, slack)


def documented() -> tuple[dict[str, int], dict[tuple[str, str], int], int, int]:
    """The doc's table: lines per app, imports per (importer, imported) — the platform's top files as
    :data:`architecture.TOP` — and the totals."""
    text = DOC.read_text(encoding="utf-8").split("\n## The figures\n", 1)[1].split("\n## ", 1)[0]
    lines: dict[str, int] = {}
    edges: dict[tuple[str, str], int] = {}
    for row in text.splitlines():
        if top := TOP_ROW.match(row):
            importer, uses = architecture.TOP, top.group(1)
        elif app := APP_ROW.match(row):
            importer, uses = app.group(1), app.group(3)
            lines[importer] = int(app.group(2).replace(",", ""))
        else:
            continue
        edges.update({(importer, used): int(count) for used, count in USE.findall(uses)})
    totals = TOTALS.search(text)
    assert totals is not None, "the totals line"
    return lines, edges, int(totals.group(1).replace(",", "")), int(totals.group(2))


@pytest.fixture(scope="module")
def house():
    return architecture.measure(ROOT)


def test_the_doc_lists_every_layer_in_the_scripts_order():
    lines, _, _, _ = documented()
    assert list(lines) == [name for name, _ in architecture.LAYERS]


def test_each_apps_lines_and_the_total_are_within_ten_percent_of_the_measure(house):
    lines, _, total, _ = documented()
    far = {app: (shown, house.lines[app]) for app, shown in lines.items()}
    far = {app: pair for app, pair in far.items() if not near(*pair, LINES_MARGIN, LINES_SLACK)}
    assert far == {}, "update the table from python scripts/architecture.py"
    assert near(total, house.total, LINES_MARGIN, LINES_SLACK), (total, house.total)


def test_the_doc_shows_exactly_the_dependencies_between_apps_with_their_imports_near_the_measure(house):
    _, edges, _, imports = documented()
    assert sorted(edges) == sorted(house.edges), "a dependency between apps appeared or went: update the table"
    far = {pair: (shown, house.edges[pair]) for pair, shown in edges.items()}
    far = {pair: counts for pair, counts in far.items() if not near(*counts, IMPORTS_MARGIN, IMPORTS_SLACK)}
    assert far == {}
    assert near(imports, sum(house.edges.values()), IMPORTS_MARGIN, IMPORTS_SLACK)


def test_the_doc_states_the_share_limit_the_script_enforces():
    assert f"No app holds over {architecture.MAX_SHARE:.0%}".replace("%", " %") in DOC.read_text(encoding="utf-8")


def test_a_figure_is_near_within_its_margin_or_its_slack():
    assert near(15_400, 15_360, LINES_MARGIN, LINES_SLACK) and near(400, 443, LINES_MARGIN, LINES_SLACK)
    assert not near(15_507, 46_718, LINES_MARGIN, LINES_SLACK)
    assert near(2, 4, IMPORTS_MARGIN, IMPORTS_SLACK) and not near(14, 56, IMPORTS_MARGIN, IMPORTS_SLACK)


def test_the_doc_states_the_size_limits_the_script_enforces():
    text = DOC.read_text(encoding="utf-8")
    assert f"no file over {architecture.MAX_FILE_LINES} non-blank lines" in text
    assert f"no function over {architecture.MAX_FUNCTION_LINES} lines" in text
