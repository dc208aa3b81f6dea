"""Every test file the repository holds is collected: a folder of tests outside pyproject's ``testpaths`` runs in no
suite, and nothing says so (the knowledge app's tests ran nowhere for a while)."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_test_file_in_the_repository_is_under_a_folder_the_suite_collects():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    collected = [ROOT / folder for folder in config["tool"]["pytest"]["ini_options"]["testpaths"]]
    tracked = subprocess.run(["git", "ls-files", "*test_*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    files = [ROOT / line for line in tracked.stdout.splitlines() if Path(line).name.startswith("test_")]

    assert files, "git lists the repository's test files"
    assert [str(path.relative_to(ROOT)) for path in files if not any(path.is_relative_to(f) for f in collected)] == []
