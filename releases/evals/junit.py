"""A conversation tests run as a JUnit XML report that CI tools read: one testsuite, one testcase per test, a failure
naming each failed check (turn, key, expected, actual) with the answers of the play shown."""

from __future__ import annotations

from xml.etree import ElementTree

from releases.evals.run import SuiteRun


def junit_xml(run: SuiteRun, *, suite: str) -> bytes:
    """``run`` as JUnit XML; ``suite`` names the testsuite and each testcase's class."""
    root = ElementTree.Element("testsuites", tests=str(run.total), failures=str(run.failed))
    tests = ElementTree.SubElement(
        root, "testsuite", name=suite, tests=str(run.total), failures=str(run.failed), errors="0", skipped="0"
    )
    for result in run.results:
        case = ElementTree.SubElement(tests, "testcase", classname=suite, name=result.case.name)
        if result.passed:
            continue
        failure = ElementTree.SubElement(case, "failure", message=result.failure_text())
        lines = list(result.failure_lines())
        for turn in result.shown.turns:
            lines += [f"turn {turn.number}: {turn.turn.user}", f"  answer ({turn.seen.agent}): {turn.seen.answer}"]
        failure.text = "\n".join(lines)
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
