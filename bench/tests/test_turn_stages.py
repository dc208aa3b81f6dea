"""bench/turn_stages.py: py-spy's samples folded into the message path's stages."""

from __future__ import annotations

from pathlib import Path

from bench.turn_stages import CLIENT, REST, STAGES, frames, self_time_report, stage_of, stages_report

ROOT = Path(__file__).resolve().parents[2]

PERSIST = (
    "process 1:run (bench/turn_cpu.py:180);_turn_run (conversations/graph.py:850);_timed (conversations/graph.py:170)"
    ";persist (conversations/graph.py:725);turn_persist (conversations/turn_store.py:320)"
    ";execute (psycopg/cursor.py:97) 30"
)
LANGUAGE_IN_JUDGE = (
    "process 1:_timed (conversations/graph.py:170);judge (conversations/graph.py:470)"
    ";evaluate (conversations/judges.py:400);detect_language (common/language.py:40)"
    ";classify (py3langid/langid.py:9) 10"
)
IDEMPOTENT_WRAPPER = (
    "process 1:answer (chat/rest/messages.py:300);idempotent (chat/idempotency.py:190)"
    ";raw_decode (json/decoder.py:353) 5"
)

ASGI_UNDER_TRACING = (
    "process 1:__call__ (channels/routing.py:60);RemoteParentApp.__call__ (common/infra/tracing.py:700)"
    ";ASGIHandler.handle (platform/middleware.py:400) 7"
)
# The benchmark's client in the measured process: its answer decoded, its request sent, and the server under it.
CLIENT_DECODES = (
    "process 1:run (bench/turn_cpu.py:253);Runner.run (asyncio/runners.py:118);_conversation (bench/turn_cpu.py:160)"
    ";loads (json/__init__.py:346);raw_decode (json/decoder.py:353) 4"
)
CLIENT_RECEIVES = (
    "process 1:_conversation (bench/turn_cpu.py:159);_post (bench/turn_cpu.py:148)"
    ";RemoteParentApp.__call__ (common/infra/tracing.py:700);ASGIHandler.read_body (django/core/handlers/asgi.py:200)"
    ";_post.<locals>.receive (bench/turn_cpu.py:131) 2"
)
SERVER_UNDER_CLIENT = (
    "process 1:_conversation (bench/turn_cpu.py:159);_post (bench/turn_cpu.py:148)"
    ";RemoteParentApp.__call__ (common/infra/tracing.py:700);ASGIHandler.handle (platform/middleware.py:400) 3"
)
EVENT_LOOP = "process 1:main (bench/turn_cpu.py:308);run (bench/turn_cpu.py:253);Runner.run (asyncio/runners.py:118) 5"
STAGE_UNDER_CLIENT = (
    "process 1:_conversation (bench/turn_cpu.py:159);_post (bench/turn_cpu.py:148)"
    ";turn_persist (conversations/turn_store.py:320);execute (psycopg/cursor.py:97) 6"
)


def test_the_benchmarks_own_client_is_a_row_of_its_own_and_the_server_under_it_is_not():
    assert stage_of(frames(CLIENT_DECODES)[0]) == CLIENT
    assert stage_of(frames(CLIENT_RECEIVES)[0]) == CLIENT  # the server asking the client for the body: the client
    assert stage_of(frames(SERVER_UNDER_CLIENT)[0]) == REST
    assert stage_of(frames(EVENT_LOOP)[0]) == REST  # the loop that runs the server's tasks
    assert stage_of(frames(STAGE_UNDER_CLIENT)[0]) == "conversation store (load, persist)"


def test_the_clients_row_comes_last_and_the_whole_stays_the_whole(tmp_path):
    stacks = tmp_path / "stacks.txt"
    stacks.write_text("\n".join([CLIENT_DECODES, SERVER_UNDER_CLIENT, EVENT_LOOP, STAGE_UNDER_CLIENT]))
    rows = stages_report(stacks, 18.0).splitlines()
    assert rows[-2] == f"| {CLIENT} | 22.2% | 4.00 ms |"
    assert rows[-3] == f"| {REST} | 44.4% | 8.00 ms |"
    assert rows[-1] == "| **the whole message** | 18 samples | **18.00 ms** |"


def test_a_sample_belongs_to_the_innermost_frame_a_rule_names():
    assert stage_of(frames(PERSIST)[0]) == "conversation store (load, persist)"  # the driver counts as persisting
    assert stage_of(frames(LANGUAGE_IN_JUDGE)[0]) == "language"  # detection counts as language wherever it runs


def test_wrappers_are_read_past_and_what_no_rule_names_is_the_rest_of_the_request():
    assert stage_of(frames(IDEMPOTENT_WRAPPER)[0]) == REST
    assert stage_of(frames(ASGI_UNDER_TRACING)[0]) == REST  # the request's handling, wrapped by tracing


def test_the_self_time_table_names_each_samples_leaf_function(tmp_path):
    stacks = tmp_path / "stacks.txt"
    stacks.write_text("\n".join([PERSIST, LANGUAGE_IN_JUDGE, IDEMPOTENT_WRAPPER]))
    table = self_time_report(stacks, 9.0)
    assert table.splitlines()[2] == "| `psycopg/cursor.py:execute` | 66.7% | 6.000 ms |"
    assert "| `py3langid/langid.py:classify` | 22.2% | 2.000 ms |" in table


def test_the_table_splits_the_cpu_a_message_by_the_share_of_samples(tmp_path):
    stacks = tmp_path / "stacks.txt"
    stacks.write_text("\n".join([PERSIST, LANGUAGE_IN_JUDGE, IDEMPOTENT_WRAPPER, "not a sample line"]))
    table = stages_report(stacks, 9.0)
    assert "| conversation store (load, persist) | 66.7% | 6.00 ms |" in table
    assert "| language | 22.2% | 2.00 ms |" in table
    assert f"| {REST} | 11.1% | 1.00 ms |" in table
    assert "| memory | — | — |" in table
    assert "| **the whole message** | 45 samples | **9.00 ms** |" in table


def test_every_rule_names_a_module_or_folder_of_the_repository():
    """A module moved into a room of its own leaves its stage's rule naming nothing: its samples would fall to the
    rest of the request, unseen."""
    missing = [(stage, module) for stage, module, _ in STAGES if not (ROOT / module).exists()]
    assert missing == []
