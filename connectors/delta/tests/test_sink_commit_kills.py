"""The sink's commit killed with SIGKILL at lines of its own code, in real processes: the
batch is then wholly in the table or not at all, and a replay leaves it there exactly once.

The testkit's own check forks the test process, which delta-rs refuses (its runtime panics in
a forked child): here each commit runs in a spawned interpreter, on a copy of a table that
holds batch 0 and the files of batch 1 (the commit's lines are counted once in the test's
own process, on another copy). ``MICROBATCH_DELTA_COMMIT_KILLS`` sets how many kill
points are tried (default 3, spread over the commit's lines, plus its last two; ``all`` for
every line).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _delta_sink_testing import (
    SCHEMA,
    commit_in_child,
    make_writer,
    read_ids,
    rows,
    run_batch,
    transactions,
    write,
)

ENV_KILLS = "MICROBATCH_DELTA_COMMIT_KILLS"
WIDER = pa.schema([*SCHEMA, pa.field("score", pa.float64())])


def kill_points(events: int) -> list[int]:
    raw = os.environ.get(ENV_KILLS, "3").strip().lower()
    if raw == "all":
        return list(range(1, events + 1))
    count = min(int(raw), events)
    spread = {1 + round(i * (events - 1) / max(count - 1, 1)) for i in range(count)}
    return sorted(spread | {max(1, events - 1), events})


def start_child(table: Path, messages: list, kill_at: int | None, report: Path, mode: str) -> Any:
    context = multiprocessing.get_context("spawn")
    schema, options = writer_setup(mode)
    child = context.Process(
        target=commit_in_child,
        args=(str(table), messages, 1, kill_at, str(report), schema, options),
    )
    child.start()
    return child


def ended(child: Any) -> int:
    child.join(60)
    assert child.exitcode is not None, "the commit did not end within 60 s"
    return int(child.exitcode)


def writer_setup(mode: str) -> tuple[pa.Schema, dict[str, Any]]:
    """The schema and options of the writer that commits batch 1."""
    if mode == "evolve":
        return WIDER, {"mergeSchema": "true"}
    return SCHEMA, {}


def batch_one(mode: str) -> list[pa.Table]:
    schema = writer_setup(mode)[0]
    return [rows([3, 4], schema), rows([5], schema)]


@pytest.mark.parametrize("mode", ["append", "create", "evolve"])
def test_a_commit_killed_at_any_line_is_all_or_nothing(tmp_path: Path, mode: str) -> None:
    # append: batch 1 adds files; create: batch 1 creates the table; evolve: batch 1 adds a
    # column (mergeSchema: staged files rewritten by write_deltalake)
    origin = tmp_path / "origin"
    before = [] if mode == "create" else [1, 2]
    if before:
        run_batch(make_writer(origin), 0, rows(before))
    schema, options = writer_setup(mode)
    messages = write(make_writer(origin, schema=schema, **options), 1, *batch_one(mode))
    expected = [*before, 3, 4, 5]

    counting = tmp_path / "counting"
    shutil.copytree(origin, counting)
    report = tmp_path / "events"
    commit_in_child(str(counting), messages, 1, None, str(report), schema, options)  # counts here
    assert read_ids(counting) == expected
    events = int(report.read_text())
    assert events > 5

    children = {}
    for kill_at in kill_points(events):  # the killed commits run side by side
        table = tmp_path / f"killed-{kill_at}"
        shutil.copytree(origin, table)
        children[kill_at] = (table, start_child(table, messages, kill_at, report, mode))
    for kill_at, (table, child) in children.items():
        assert ended(child) == -9, f"the commit was not killed at line event {kill_at}"
        seen = read_ids(table) if (table / "_delta_log").exists() else []
        assert seen in (before, expected), f"killed at line event {kill_at} of {events}: {seen}"
        replay = make_writer(table, schema=schema, **options)  # the restarted query's replay
        run_batch(replay, 1, *batch_one(mode))
        assert read_ids(table) == expected, f"after a kill at line event {kill_at} of {events}"
        assert [txn for txn in transactions(table) if txn] == [
            ("query-1", batch) for batch in (([0] if before else []) + [1])
        ]
