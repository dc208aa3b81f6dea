"""The order the suite's tests are handed out in (tests/xdist_worker.py): slow files first, transactional tests
after every test that keeps the database's rows; the test modules' assertions rewritten once before the workers
start; bytecode written by the suite's processes (tests/suite_environment.py)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from _pytest.assertion import rewrite

from tests.xdist_worker import assertions_rewritten_ahead, modules_collected, slow_first, unit_of_work


@dataclass
class Item:
    """What the ordering reads of a pytest item: its node id, marks and fixtures."""

    nodeid: str
    marks: dict[str, pytest.Mark] = field(default_factory=dict)
    fixturenames: tuple[str, ...] = ()
    cls: type | None = None

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return self.marks.get(name)

    def iter_markers(self, name: str):
        return iter([self.marks[name]] if name in self.marks else [])


def mark(name: str, **kwargs) -> dict[str, pytest.Mark]:
    return {name: getattr(pytest.mark, name)(**kwargs).mark}


def test_slow_files_come_first_and_transactional_tests_after_every_test_that_keeps_the_rows():
    items = [
        Item("a/test_fast.py::test_one", mark("django_db")),
        Item("a/test_fast.py::test_two", mark("django_db")),
        Item("a/test_flush.py::test_one", mark("django_db", transaction=True)),
        Item("a/test_live.py::test_one", fixturenames=("live_server",)),
        Item("a/test_slow_flush.py::test_one", {**mark("django_db", transaction=True), **mark("slow")}),
        Item("tests/test_plain.py::test_one"),
        Item("tests/test_fuzz.py::test_one", mark("slow")),
        Item("tests/test_fuzz.py::test_two", mark("slow")),
    ]

    slow_first(items)  # type: ignore[arg-type]

    assert [item.nodeid for item in items] == [
        "tests/test_fuzz.py::test_one",
        "tests/test_fuzz.py::test_two",
        "a/test_fast.py::test_one",
        "a/test_fast.py::test_two",
        "tests/test_plain.py::test_one",
        "a/test_slow_flush.py::test_one",
        "a/test_flush.py::test_one",
        "a/test_live.py::test_one",
    ]


def test_a_files_transactional_tests_are_a_unit_of_their_own_and_a_group_one_unit():
    assert unit_of_work(Item("a/test_x.py::test_one", mark("django_db"))) == "a/test_x.py"  # type: ignore[arg-type]
    flushing = Item("a/test_x.py::test_two", mark("django_db", transaction=True))
    assert unit_of_work(flushing) == "a/test_x.py (transactional)"  # type: ignore[arg-type]
    grouped = Item("b/test_y.py::test_one", {"xdist_group": pytest.mark.xdist_group("stack").mark})
    assert unit_of_work(grouped) == "stack"  # type: ignore[arg-type]


def test_the_suites_processes_write_their_bytecode_whatever_the_environment_said():
    assert not sys.dont_write_bytecode
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ  # the servers and workers a test starts inherit it


def test_the_test_modules_of_a_run_are_those_its_paths_name_outside_the_folders_not_collected(tmp_path):
    for name in ("app/tests/test_a.py", "app/tests/helpers.py", "app/.venv/test_b.py", "other/test_c.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    ini = {"python_files": ["test_*.py"], "norecursedirs": [".*"]}
    config = SimpleNamespace(
        args=["app", "other/test_c.py::test_x"], getini=ini.__getitem__, invocation_params=SimpleNamespace(dir=tmp_path)
    )

    assert modules_collected(config) == [tmp_path / "app/tests/test_a.py", tmp_path / "other/test_c.py"]  # type: ignore[arg-type]


def test_a_module_rewritten_ahead_is_cached_as_pytest_would_rewrite_it_and_only_once(pytestconfig, tmp_path):
    module = tmp_path / "test_ahead.py"
    module.write_text("def test_it():\n    assert 1 + 1 == 3\n", encoding="utf-8")
    cached = rewrite.get_cache_dir(module) / ("test_ahead" + rewrite.PYC_TAIL)

    written = assertions_rewritten_ahead(pytestconfig, [module])
    again = assertions_rewritten_ahead(pytestconfig, [module])

    code = rewrite._read_pyc(module, cached)  # what a worker importing it reads instead of rewriting it
    assert (written, again) == (1, 0)
    assert code is not None and code == rewrite._rewrite_test(module, pytestconfig)[1]
    namespace: dict[str, object] = {}
    exec(code, namespace)  # noqa: S102 — the test module written above, as pytest runs it
    with pytest.raises(AssertionError, match=r"assert \(1 \+ 1\) == 3"):  # pytest's explanation: rewritten
        namespace["test_it"]()  # type: ignore[operator]
