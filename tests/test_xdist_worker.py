"""The order the suite's tests are handed out in (tests/xdist_worker.py): slow files first, transactional tests
after every test that keeps the database's rows."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.xdist_worker import slow_first, unit_of_work


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
