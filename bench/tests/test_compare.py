"""bench/compare.py: two checkouts side by side, their runs alternated, the figures and medians reported."""

from __future__ import annotations

import subprocess

import pytest

from bench.compare import ROOT, bench_copied, main, order


def worktrees() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout


def test_each_side_runs_first_as_often_as_the_other():
    assert order(3) == ["base", "head", "head", "base", "base", "head"]
    assert order(2).count("base") == order(2).count("head") == 2


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs this checkout's git repository")
def test_a_benchmark_runs_in_an_older_checkout_and_in_this_one_and_the_medians_are_reported(capsys, tmp_path):
    # The benchmark here is this script's own help, which names a number: it runs from both checkouts' bench/.
    before = worktrees()
    main(
        [
            "--base",
            "HEAD",
            "--runs",
            "2",
            "--figure",
            r"at least (\d+)",
            "--log",
            str(tmp_path),
            "--",
            "compare.py",
            "--help",
        ]
    )
    printed = capsys.readouterr().out
    assert "head / base: 1.000" in printed
    assert printed.count(" base (") == 2 and printed.count(" head (") == 2
    assert sorted(path.name for path in tmp_path.iterdir())[:2] == ["01-base.txt", "02-head.txt"]
    assert worktrees() == before  # the older checkout is gone (a comparison running beside this one keeps its own)


def test_a_run_whose_output_lacks_the_figure_stops_the_comparison_naming_the_run(tmp_path):
    with pytest.raises(SystemExit, match="01-base: exit 0, figure not found"):
        main(["--base", "HEAD", "--runs", "1", "--figure", r"no such figure (\d+)", "--", "compare.py", "--help"])


def test_the_heads_benchmark_files_are_copied_over_the_bases_and_a_missing_one_is_refused(tmp_path):
    head, base = tmp_path / "head", tmp_path / "base"
    for tree, text in ((head, "new"), (base, "old")):
        (tree / "bench").mkdir(parents=True)
        (tree / "bench" / "turn_cpu.py").write_text(text)
        (tree / "bench" / "chat_load.py").write_text(text)

    bench_copied(head, base, ["turn_cpu.py"])

    assert (base / "bench" / "turn_cpu.py").read_text() == "new"
    assert (base / "bench" / "chat_load.py").read_text() == "old"  # only what was named
    with pytest.raises(SystemExit, match="no such file"):
        bench_copied(head, base, ["nowhere.py"])


def test_a_copied_benchmark_brings_the_heads_bench_modules_it_imports_and_theirs(tmp_path):
    head, base = tmp_path / "head", tmp_path / "base"
    (head / "bench").mkdir(parents=True)
    (base / "bench").mkdir(parents=True)
    (head / "bench" / "chat_load.py").write_text(
        "import os\nfrom bench.turn_stages import stages_report  # noqa\n\ndef run():\n    from bench import sampler\n"
    )
    (head / "bench" / "turn_stages.py").write_text("import bench.frames\n")
    (head / "bench" / "frames.py").write_text("from bench import turn_stages\n")  # a circle ends
    (head / "bench" / "sampler.py").write_text("new")
    (head / "bench" / "unrelated.py").write_text("new")
    (base / "bench" / "unrelated.py").write_text("old")

    bench_copied(head, base, ["chat_load.py"])

    copied = {path.name for path in (base / "bench").iterdir() if path.read_text() != "old"}
    assert copied == {"chat_load.py", "turn_stages.py", "frames.py", "sampler.py"}
    assert (base / "bench" / "unrelated.py").read_text() == "old"
