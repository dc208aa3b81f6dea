"""Where a message's CPU goes, by pipeline stage: py-spy samples of the measuring process, folded into stages.

``bench/turn_cpu.py --stages`` samples its own process with py-spy (``--nonblocking``: the process is not paused)
over the measured rounds and calls :func:`stages_report` with the CPU a message it measured. Each sample is one
thread's Python stack while it ran on a CPU (py-spy leaves idle threads out). A sample belongs to the stage of the
*innermost* frame that a rule of :data:`STAGES` names, read from the leaf up — so the database work of
``turn_persist`` counts as persisting, and the language detection a judge calls counts as the judge — and a stage's
share of the samples times the CPU a message is its cost a message. The benchmark's own client runs in the measured
process too (``bench/turn_cpu.py``: its requests built, its answers decoded and counted): its samples are a row of
their own (:data:`CLIENT`), so the whole stays the whole and no stage is charged with them. Samples no rule names (the
event loop, the ASGI server, Django's request handling, DRF) are "the rest of the request".
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

RATE = 200  # samples a second
ROOT = str(Path(__file__).resolve().parent.parent) + "/"


@contextlib.contextmanager
def sampling(output: Path, *, gil: bool = False) -> Iterator[None]:
    """py-spy samples this process, every thread, while the block runs, as collapsed stacks in ``output``; with
    ``gil``, only the thread holding the GIL (the one running Python: a thread waiting for a core on a busy machine
    is not counted as working)."""
    spy = Path(sys.executable).with_name("py-spy")
    process = subprocess.Popen(
        [
            str(spy),
            "record",
            "--pid",
            str(os.getpid()),
            "--rate",
            str(RATE),
            "--nonblocking",
            "--threads",
            *(["--gil"] if gil else []),
            "--format",
            "raw",
            "--output",
            str(output),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield
    finally:
        process.send_signal(signal.SIGINT)
        _, errors = process.communicate(timeout=120)
        if not output.exists():
            raise RuntimeError(f"py-spy wrote no samples: {errors.decode(errors='replace')[-500:]}")


def frames(line: str) -> tuple[list[str], int]:
    """One line of py-spy's raw output: its frames, root first, as ``path/to/module.py:function``, and its count."""
    path, _, count = line.rpartition(" ")
    if not count.isdigit():
        return [], 0
    names = []
    for frame in path.split(";"):
        name, _, where = frame.partition(" (")
        names.append(f"{where.split(':')[0]}:{name}" if where else name)
    return names, int(count)


# Frames that only wrap the work of others: read past them. The tracing middleware wraps the whole request (the ASGI
# handler's own work under it is the rest of the request, not tracing's).
WRAPPERS = frozenset(
    {
        "chat/idempotency.py:idempotent",
        "conversations/graph.py:_timed",
        "common/infra/tracing.py:RemoteParentApp.__call__",
    }
)

# (stage, a module of the repository, its functions — None: any), in the order of the table.
STAGES: tuple[tuple[str, str, frozenset[str] | None], ...] = (
    ("authentication and tenant", "tenants/auth.py", None),
    ("throttles", "tenants/throttles.py", None),
    ("idempotency", "chat/idempotency.py", None),
    ("conversation order (one turn at a time)", "conversations/ordering.py", None),
    ("guardrails", "conversations/guardrails.py", None),
    ("guardrails", "conversations/graph.py", frozenset({"input_guardrails", "output_guardrails"})),
    ("language", "common/language.py", None),
    ("language", "conversations/language.py", None),
    ("small talk", "routing/small_talk.py", None),
    ("replies", "routing/replies.py", None),
    ("keywords", "routing/router.py", None),
    ("examples and none-of-these", "routing/examples.py", None),
    ("examples and none-of-these", "routing/examples_kernel.py", None),
    ("examples and none-of-these", "routing/examples_stock.py", None),
    ("conversation stack", "routing/stack.py", None),
    ("conversation stack", "routing/repairs.py", None),
    ("conversation stack", "conversations/stack_turn.py", None),
    ("goal mode (reading, plan, engine)", "routing/goals/decide.py", None),
    ("goal mode (reading, plan, engine)", "routing/goals/intent.py", None),
    ("goal mode (reading, plan, engine)", "routing/planner.py", None),
    ("goal mode (reading, plan, engine)", "conversations/goals/engine.py", None),
    ("goal mode (reading, plan, engine)", "conversations/goals/turn.py", None),
    ("goal mode (reading, plan, engine)", "conversations/goals/records.py", None),
    ("other routing", "routing/decide.py", None),
    ("other routing", "conversations/graph.py", frozenset({"routing_decision"})),
    ("other routing", "conversations/backend_turn.py", None),
    ("MCP tool calls", "agents/mcp.py", None),
    ("MCP tool calls", "agents/mcp_wire.py", None),
    ("specialist and model", "conversations/runtime.py", None),
    ("specialist and model", "conversations/chain.py", None),
    ("specialist and model", "agents/llm.py", None),
    ("judge", "conversations/judges.py", None),
    ("judge", "conversations/graph.py", frozenset({"judge", "supervisor_review"})),
    ("escalation and outcomes", "conversations/escalation.py", None),
    ("escalation and outcomes", "conversations/outcomes.py", None),
    ("memory", "conversations/memory/", None),
    ("knowledge", "knowledge/", None),
    ("knowledge", "conversations/knowledge_turn.py", None),
    ("knowledge", "agents/passages.py", None),
    ("conversation store (load, persist)", "conversations/turn_store.py", None),
    ("conversation store (load, persist)", "conversations/records.py", None),
    ("conversation store (load, persist)", "conversations/graph.py", frozenset({"persist"})),
    ("events and metrics", "common/events.py", None),
    ("events and metrics", "common/infra/tracing.py", None),
    ("events and metrics", "chat/metrics.py", None),
)
REST = "the rest of the request (ASGI, middleware, DRF, JSON, the event loop)"
CLIENT = "the benchmark's own client (requests built, answers read)"

# The client's frames in bench/turn_cpu.py: a sample whose innermost frame of that file is one of these belongs to
# the client — but for ``_post`` awaiting the application, whose frames below it are the server's. ``run`` and
# ``main`` hold the event loop that runs the server's tasks too: what runs under them alone is the rest.
CLIENT_MODULE = "bench/turn_cpu.py"
CLIENT_FUNCTIONS = frozenset(
    {"_conversation", "_post", "_post.<locals>.receive", "_post.<locals>.send", "_round", "run.<locals>.main"}
)


def _client_frame(names: list[str], index: int) -> bool | None:
    """Whether ``names[index]``, a frame of the benchmark's file, makes the sample the client's (``None``: not a
    frame of that file)."""
    module, _, function = names[index].rpartition(":")
    if not module.endswith(CLIENT_MODULE):
        return None
    if function == "_post" and index + 1 < len(names):  # its callee: the application (the client's own closures
        return False  # are frames of this file, met first from the leaf)
    return function in CLIENT_FUNCTIONS


def stage_of(names: list[str]) -> str:
    """The stage of one sample: the innermost frame a rule names (root-first ``names``, as :func:`frames` gives), or
    the benchmark's client when the innermost frame of its file is the client's own (:func:`_client_frame`)."""
    for index in range(len(names) - 1, -1, -1):
        name = names[index]
        if name in WRAPPERS:
            continue
        client = _client_frame(names, index)
        if client is not None:
            return CLIENT if client else REST
        module, _, function = name.rpartition(":")
        function = function.split(".")[-1] if "<locals>" not in function else function.split(".")[0]
        for stage, prefix, functions in STAGES:
            in_module = module.endswith(prefix) or (prefix.endswith("/") and f"/{prefix}" in f"/{module}")
            if in_module and (functions is None or function in functions):
                return stage
    return REST


def stages_report(stacks: Path, ms_per_message: float) -> str:
    """A Markdown table: each stage's share of the samples and its CPU a message (``ms_per_message`` × share)."""
    counts: Counter[str] = Counter()
    for line in stacks.read_text().splitlines():
        names, count = frames(line)
        if count:
            counts[stage_of(names)] += count
    total = sum(counts.values()) or 1
    order = [*dict.fromkeys(stage for stage, *_ in STAGES), REST, CLIENT]
    rows = ["| stage | share of samples | CPU a message |", "| --- | ---: | ---: |"]
    for stage in order:
        share = counts[stage] / total
        rows.append(
            f"| {stage} | {share:.1%} | {ms_per_message * share:.2f} ms |" if counts[stage] else f"| {stage} | — | — |"
        )
    rows.append(f"| **the whole message** | {total} samples | **{ms_per_message:.2f} ms** |")
    return "\n".join(rows)


def self_time_report(stacks: Path, ms_per_message: float, top: int = 15) -> str:
    """A Markdown table of the functions that ran themselves (the leaf of each sample) most, product and library."""
    counts: Counter[str] = Counter()
    for line in stacks.read_text().splitlines():
        names, count = frames(line)
        if count:
            counts[names[-1]] += count
    total = sum(counts.values()) or 1
    rows = ["| function (self time) | share of samples | CPU a message |", "| --- | ---: | ---: |"]
    for name, count in counts.most_common(top):
        module, _, function = name.rpartition(":")
        where = module.split("site-packages/")[-1] if "site-packages/" in module else module.removeprefix(ROOT)
        rows.append(f"| `{where}:{function}` | {count / total:.1%} | {ms_per_message * count / total:.3f} ms |")
    return "\n".join(rows)
