"""Alternate one benchmark between an older commit and this checkout, on the same machine, and report medians.

    PYTHONPATH=. .venv/bin/python bench/compare.py --base d34cf42 --runs 5 \\
        --figure 'median server CPU per message: ([0-9.]+)' -- turn_cpu.py --messages 1600 --rounds 3

A figure from another day, or another machine, says little on a shared two-core machine: what other work runs
beside a benchmark moves it by more than most changes do. So every comparison this project records is made the
same way — both commits checked out side by side and their runs alternated (base, head, head, base, base, head, …),
each run in the checkout it measures with that checkout's own copy of the benchmark. This does it: ``--base`` is
checked out (detached) in a temporary git worktree sharing this checkout's virtual environment, ``--head`` (default:
this checkout as it is, uncommitted changes included) is run in place, and each run's output is searched for
``--figure`` (a regular expression whose first group is the number). It prints every run's figure, the median of
each side, the ratio head / base and a Markdown row for ``docs/benchmarks.md``; with ``--log DIR`` each run's
output is kept there. The worktree is removed at the end.

Both sides use the one virtual environment of this checkout: an old commit that needs a package since removed, or a
version since changed, runs with today's — say so beside a figure where it matters.

``--bench-from-head FILE`` (repeatable) copies the head's ``bench/FILE`` into the base's checkout before its runs,
with the head's bench modules it imports (and theirs), so that both sides are measured by the same benchmark: an
older commit's copy may measure differently (before ``turn_cpu.py`` froze the start-up heap after its warm-up, a full
collection in a round moved its figure by up to a quarter). A copied benchmark must still run on the older tree;
``turn_cpu.py`` (with ``chat_load.py`` and ``turn_stages.py``, which it imports) does back to d34cf42::

    PYTHONPATH=. .venv/bin/python bench/compare.py --base d34cf42 --runs 5 --bench-from-head turn_cpu.py \
        --figure 'median server CPU per message: ([0-9.]+)' -- turn_cpu.py
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def order(runs: int) -> list[str]:
    """The alternation: base, head, head, base, base, head, … — each side first as often as the other, ``runs`` each."""
    pattern = ("base", "head", "head", "base")
    return [pattern[n % 4] for n in range(2 * runs)]


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def checkout(commit: str) -> Iterator[Path]:
    """``commit`` checked out (detached) in a temporary worktree that uses this checkout's ``.venv``."""
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as folder:
        tree = Path(folder) / "tree"
        _git("worktree", "add", "--detach", "--quiet", str(tree), commit)
        try:
            venv = ROOT / ".venv"
            if venv.exists():
                (tree / ".venv").symlink_to(venv)
            yield tree
        finally:
            _git("worktree", "remove", "--force", str(tree))


def measure(tree: Path, command: list[str], figure: re.Pattern[str], log: Path | None, label: str) -> float:
    """One run of ``bench/<command>`` in ``tree``; the figure its output shows (the last match)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    script, *args = command
    done = subprocess.run(
        [sys.executable, str(tree / "bench" / script), *args], cwd=tree, env=env, capture_output=True, text=True
    )
    output = done.stdout + done.stderr
    if log:
        log.mkdir(parents=True, exist_ok=True)
        (log / f"{label}.txt").write_text(output)
    found = figure.findall(output)
    if done.returncode or not found:
        tail = "\n".join(output.splitlines()[-15:])
        raise SystemExit(f"{label}: exit {done.returncode}, figure {'found' if found else 'not found'}\n{tail}")
    value = found[-1]
    return float(value[0] if isinstance(value, tuple) else value)


def bench_copied(head: Path, base: Path, names: list[str]) -> None:
    """The head's ``bench/NAME`` of each of ``names`` written over the base's (``--bench-from-head``), with the head's
    bench modules each imports, and theirs: a copied benchmark runs with the helpers it was written against (the
    head's ``chat_load.py`` reads ``turn_stages.py``'s stage rules, which an older tree may lack)."""
    for name in names:
        if not (head / "bench" / name).is_file():
            raise SystemExit(f"--bench-from-head {name}: no such file in the head's bench/")
    waiting, copied = list(names), set()
    while waiting:
        name = waiting.pop()
        if name in copied:
            continue
        copied.add(name)
        source = head / "bench" / name
        shutil.copyfile(source, base / "bench" / name)
        waiting += [module for module in bench_imports(source.read_text()) if (head / "bench" / module).is_file()]


def bench_imports(code: str) -> list[str]:
    """The files of ``bench`` modules ``code`` imports (``from bench.x import …``, ``from bench import x``, ``import
    bench.x``), at any depth of it."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "bench":
                found += [f"{alias.name}.py" for alias in node.names]
            elif node.module.startswith("bench."):
                found.append(f"{node.module.split('.')[1]}.py")
        elif isinstance(node, ast.Import):
            found += [f"{alias.name.split('.')[1]}.py" for alias in node.names if alias.name.startswith("bench.")]
    return found


def load_average() -> str:
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the older commit (any git revision)")
    parser.add_argument("--head", default="", help="the newer commit; default: this checkout as it is")
    parser.add_argument("--runs", type=int, default=5, help="runs of each side (at least 5 for a recorded figure)")
    parser.add_argument("--figure", required=True, help="regular expression; its first group is the figure")
    parser.add_argument("--log", type=Path, help="keep each run's output in this folder")
    parser.add_argument(
        "--bench-from-head",
        action="append",
        default=[],
        metavar="FILE",
        help="copy the head's bench/FILE into the base's checkout (repeatable)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- SCRIPT [ARGS]: a script of bench/, its args")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("name the benchmark after --, e.g. -- turn_cpu.py --messages 1600")
    figure = re.compile(args.figure)
    base_commit = _git("rev-parse", "--short", args.base)
    head_commit = _git("rev-parse", "--short", args.head or "HEAD") + ("" if args.head else "+worktree")
    figures: dict[str, list[float]] = {"base": [], "head": []}
    # A stopped comparison still removes its checkouts (the worktrees' finally blocks run on SystemExit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with contextlib.ExitStack() as stack:
        trees = {"base": stack.enter_context(checkout(args.base))}
        trees["head"] = stack.enter_context(checkout(args.head)) if args.head else ROOT
        bench_copied(trees["head"], trees["base"], args.bench_from_head)
        for number, side in enumerate(order(args.runs), 1):
            value = measure(trees[side], command, figure, args.log, f"{number:02d}-{side}")
            figures[side].append(value)
            print(
                f"run {number:2d} {side} ({base_commit if side == 'base' else head_commit}): {value:g}  "
                f"load {load_average()}",
                flush=True,
            )
    base, head = (statistics.median(figures[side]) for side in ("base", "head"))
    runs = {side: ", ".join(f"{value:g}" for value in figures[side]) for side in figures}
    print(f"\nbase {base_commit}: {runs['base']} -> median {base:g}")
    print(f"head {head_commit}: {runs['head']} -> median {head:g}")
    print(f"head / base: {head / base:.3f}" if base else "head / base: -")
    print(
        f"\n| `{' '.join(command)}` | {runs['base']} → **{base:g}** | {runs['head']} → **{head:g}** | "
        f"{head / base:.2f}× |"
        if base
        else ""
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
