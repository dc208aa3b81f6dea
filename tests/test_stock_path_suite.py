"""The stock-path pass (tests/stock_path_suite.py) kept in step with the decision records and the code: every record
of a piece with a stock path has its test files and states the gain that keeps the piece and the threshold below
which it goes back to the library; every product file that switches to a library's own path is named by one of those
records; and the test command runs the pass."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from django.conf import settings

from tests.stock_path_suite import STOCK_PATH_SUITE, stock_path_files

BASE = Path(settings.BASE_DIR)
DECISIONS = BASE / "docs" / "decisions"
APPS = ("platform", "common", "tenants", "handoffs", "agents", "knowledge", "routing", "conversations", "releases")
APPS += ("chat", "analytics")
STOCK_PATH = "`STOCK_PATHS=true`"
GAIN = "## The gain that keeps it"
FIGURE = re.compile(r"\d")


def switches_to_the_stock_path(source: str) -> bool:
    """Whether code (not a docstring or comment) reads the switch: calls ``stock_paths()`` or reads ``STOCK_PATHS``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "stock_paths":
            return True
        if isinstance(node, ast.Name | ast.Attribute) and getattr(node, "id", getattr(node, "attr", "")) == (
            "STOCK_PATHS"
        ):
            return True
    return False


def out_of_step(decisions: Path, suite: dict[str, tuple[str, ...]], root: Path, apps: tuple[str, ...]) -> list[str]:
    """What keeps ``suite`` from matching the records in ``decisions`` and the code under ``root``."""
    found = []
    records = {
        path.name: path.read_text(encoding="utf-8")
        for path in sorted(decisions.glob("*.md"))
        if path.name != "README.md"
    }
    with_stock_path = {name for name, text in records.items() if STOCK_PATH in text}
    found += [f"{name}: a record with a stock path and no test files in STOCK_PATH_SUITE" for name in
              sorted(with_stock_path - set(suite))]  # fmt: skip
    for name, files in suite.items():
        if name not in with_stock_path:
            found.append(f"{name}: in STOCK_PATH_SUITE, but no record of that name names {STOCK_PATH}")
            continue
        gain = records[name].partition(f"\n{GAIN}\n")[2].split("\n## ", 1)[0]
        if not FIGURE.search(gain) or "Threshold" not in gain:
            found.append(f"{name}: no '{GAIN}' section with a measured figure and its Threshold")
        found += [f"{name}: {path} is not a test file" for path in files if not (root / path).is_file()]
        found += [f"{name}: {path} is not a test file" for path in files if not Path(path).name.startswith("test_")]
    named = "\n".join(records[name] for name in with_stock_path & set(suite))
    for app in apps:
        for path in sorted((root / app).rglob("*.py")):
            relative = path.relative_to(root)
            if {"tests", "migrations"} & set(relative.parts) or not switches_to_the_stock_path(path.read_text()):
                continue
            module = relative.as_posix().removesuffix(".py").replace("/", ".")
            if relative.as_posix() not in named and f"`{module}" not in named:
                found.append(f"{relative.as_posix()}: switches to a stock path no record with a suite entry names")
    return found


def test_the_stock_path_suite_is_in_step_with_the_decision_records_and_the_code():
    assert out_of_step(DECISIONS, STOCK_PATH_SUITE, BASE, APPS) == []


def test_the_decisions_index_states_the_threshold_and_lists_every_piece_with_a_stock_path():
    index = (DECISIONS / "README.md").read_text(encoding="utf-8")
    assert "\n## The threshold\n" in index
    assert [name for name in STOCK_PATH_SUITE if f"]({name})" not in index] == []


def test_the_test_command_runs_the_stock_path_suite_after_the_default_pass():
    script = (BASE / "scripts" / "test").read_text(encoding="utf-8")
    assert "python -m pytest" in script.split("pytest_pass() {", 1)[1].split("\n}\n", 1)[0]
    default = script.index('pytest_pass --junitxml="$TEST_OUTPUT_DIR/junit.xml"')
    stock = script.index("STOCK_PATHS=true pytest_pass")
    assert default < stock and "tests.stock_path_suite" in script[default:stock]
    assert len(stock_path_files()) == len(set(stock_path_files())) > 0


def test_the_check_catches_a_record_without_files_a_file_without_a_record_a_missing_gain_and_an_unnamed_switch(
    tmp_path,
):
    decisions = tmp_path / "docs" / "decisions"
    decisions.mkdir(parents=True)
    (decisions / "kept.md").write_text(
        f"# Kept\n\n{STOCK_PATH} is the stock path; `common/fast.py`.\n\n{GAIN}\n\n-20 %. Threshold: 2 %.\n"
    )
    (decisions / "no-gain.md").write_text(f"# No gain\n\n{STOCK_PATH}: `common/other.py`.\n")
    (decisions / "unlisted.md").write_text(f"# Unlisted\n\n{STOCK_PATH}.\n")
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "fast.py").write_text("if stock_paths():\n    pass\n")
    (tmp_path / "common" / "quiet.py").write_text('"""Says STOCK_PATHS in prose only."""\n')
    (tmp_path / "common" / "hidden.py").write_text("from django.conf import settings\nON = settings.STOCK_PATHS\n")
    (tmp_path / "common" / "tests").mkdir()
    (tmp_path / "common" / "tests" / "test_fast.py").write_text("")
    suite = {
        "kept.md": ("common/tests/test_fast.py",),
        "no-gain.md": ("common/tests/test_gone.py",),
        "nowhere.md": ("common/tests/test_fast.py",),
    }

    assert out_of_step(decisions, suite, tmp_path, ("common",)) == [
        "unlisted.md: a record with a stock path and no test files in STOCK_PATH_SUITE",
        "no-gain.md: no '## The gain that keeps it' section with a measured figure and its Threshold",
        "no-gain.md: common/tests/test_gone.py is not a test file",
        f"nowhere.md: in STOCK_PATH_SUITE, but no record of that name names {STOCK_PATH}",
        "common/hidden.py: switches to a stock path no record with a suite entry names",
    ]
