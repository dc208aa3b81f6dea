"""Check that an interrupted test run leaves no process behind.

    python scripts/interrupt_check.py [--signal TERM|INT] [--group] [--wait-for TEXT] -- scripts/test <pytest args>

Starts the command, waits until one of its descendants' command lines holds ``--wait-for`` (default: an example MCP
server, ``mcp_servers.``), sends the signal to the command (to its process group with ``--group``, as a terminal's
Ctrl-C does), and then lists every descendant it saw that is still running once the command has exited. Exit status
0 when none is, 1 when some are (listed, as ``ps`` would), 2 when the run ended before the awaited process appeared.
Linux only (it reads ``/proc``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> tuple[int, int] | None:
    """``(parent pid, start time)`` of ``pid``, or ``None`` once it is gone (a zombie counts as gone)."""
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return (int(fields[1]), int(fields[19])) if fields[0] != "Z" else None


def _cmdline(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def descendants(root: int) -> dict[tuple[int, int], str]:
    """Every running process under ``root``: ``{(pid, start time): command line}``."""
    children: dict[int, list[int]] = {}
    started: dict[int, int] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            children.setdefault(stat[0], []).append(int(entry.name))
            started[int(entry.name)] = stat[1]
    found, todo = {}, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found[(pid, started[pid])] = _cmdline(pid)
        todo.extend(children.get(pid, []))
    return found


def alive(pid: int, start: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[1] == start  # the same process, not a new one given its number


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signal", default="TERM", choices=["TERM", "INT", "HUP"])
    parser.add_argument("--group", action="store_true", help="signal the command's process group, not only it")
    parser.add_argument("--wait-for", default="mcp_servers.", help="interrupt once a descendant's command has this")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds between that and the signal")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")

    run = subprocess.Popen(command, start_new_session=True)  # its own group: --group reaches it and nothing else
    seen: dict[tuple[int, int], str] = {}
    while run.poll() is None and not any(args.wait_for in line for line in seen.values()):
        seen.update(descendants(run.pid))
        time.sleep(0.2)
    if run.poll() is not None:
        print(f"interrupt_check: the command ended ({run.returncode}) before {args.wait_for!r} ran", file=sys.stderr)
        return 2
    settle_until = time.monotonic() + args.settle
    while time.monotonic() < settle_until:
        seen.update(descendants(run.pid))
        time.sleep(0.2)
    number = getattr(signal, f"SIG{args.signal}")
    print(f"interrupt_check: SIG{args.signal} to {'group' if args.group else 'pid'} {run.pid}", file=sys.stderr)
    (os.killpg if args.group else os.kill)(run.pid, number)
    while run.poll() is None:  # what the run starts while it stops counts too
        seen.update(descendants(run.pid))
        time.sleep(0.2)
    print(f"interrupt_check: the command exited with {run.returncode}", file=sys.stderr)
    give_up = time.monotonic() + 30  # processes killed with it may take a moment to go
    while (left := {key: line for key, line in seen.items() if alive(*key)}) and time.monotonic() < give_up:
        time.sleep(0.2)
    print(f"interrupt_check: {len(seen)} processes seen under the command; still running: {len(left)}")
    for (pid, _start), line in sorted(left.items()):
        print(f"{pid:>8}  {line}")
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
