"""Configuration files are parsed by libyaml where PyYAML has it (releases/configio/source.py): the same values and
lines as the pure-Python parser, and its messages for a file that is not YAML."""

from __future__ import annotations

import pytest
import yaml

from releases.configio import source as source_module
from releases.configio.source import FAST_LOADER, Problems, Source, load
from releases.management.commands.import_config import read_sources
from releases.management.commands.seed_demo import DEMO_DIR, TESTS_DIR

BROKEN = "agent_id: telecom_contas\nintents:\n  - name: x\n    agent: [oops\n"


def demo_files() -> list[Source]:
    return read_sources([str(DEMO_DIR), str(TESTS_DIR), str(TESTS_DIR / "with_sync")])


def parsed(text: str) -> tuple[object, dict, list[tuple[int, str]]]:
    source, problems = Source(name="f.yaml", text=text), Problems()
    node = load(source, problems)
    return node.value if node else None, source.lines, [(p.line, p.message) for p in problems.errors]


def test_pyyaml_here_has_libyaml_so_the_fast_parser_is_used():
    assert FAST_LOADER is yaml.CSafeLoader


def test_every_demo_file_parses_to_the_same_values_and_lines_with_either_parser(monkeypatch):
    files = demo_files()
    assert len(files) > 10
    fast = [parsed(each.text) for each in files]
    monkeypatch.setattr(source_module, "FAST_LOADER", yaml.SafeLoader)
    assert [parsed(each.text) for each in files] == fast
    assert all(value is not None and not errors for value, _, errors in fast)


def test_every_demo_file_reads_the_same_with_either_loader():
    for each in demo_files():
        assert yaml.load(each.text, Loader=FAST_LOADER) == yaml.safe_load(each.text), each.name  # noqa: S506


@pytest.mark.parametrize("text", [BROKEN, "a: 1\n a: 2\n", "- [x\n", "a: b: c\n"])
def test_a_file_that_is_not_yaml_gets_the_pure_python_parsers_message_and_line(text, monkeypatch):
    fast = parsed(text)
    monkeypatch.setattr(source_module, "FAST_LOADER", yaml.SafeLoader)
    assert parsed(text) == fast
    assert fast[0] is None and fast[2]
