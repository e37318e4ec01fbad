"""Crash tests with real processes: SIGKILL at each batch phase, restart, check the table.

A pipeline reads 16 JSON files of 10 rows, two files (two parts) per batch, with the
available-now trigger, into a Delta table partitioned by ``kind`` (a plain value, one that needs
escaping in a folder name, and null; ``scripts/delta_crash_pipeline.py``). It is killed at the
phases of ``crash.PHASES`` in turn, one batch after the other (batch 1 at the first phase, batch
2 at the next...), each run restarting from the checkpoint the killed one left, then run to
completion:

- append: the table holds every input row exactly once;
- merge (``mode=merge``, ``mergeKeys=key``, keys repeating across batches): the table holds
  the latest row of each key; killed at the phases inside the sink (``mid_sink``,
  ``sink_write_done``, ``sink_committed``), or at all with ``MICROBATCH_DELTA_CRASH_ALL=1``.

In both, the table's log has exactly one commit per batch id, each carrying the query's
application transaction (app id = the query id, version = the batch id). After each kill the
tests check what the killed run left visible (the batches before it, plus the killed one when
the sink had committed it), which proves that the process died where it was meant to and that
the run before recovered from its own kill; a ``mid_sink`` kill leaves data files that no
commit lists.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from microbatch_testkit import crash

SCRIPT = Path(__file__).parent / "scripts" / "delta_crash_pipeline.py"
sys.path.insert(0, str(SCRIPT.parent))
import delta_crash_pipeline as pipeline_script  # noqa: E402

FILES, ROWS, PER_TRIGGER, KEYS = 16, 10, 2, 25
"""Input files, rows in each, files per batch, and distinct keys (merge: they repeat)."""
COMMITTED_PHASES = ("sink_committed", "batch_committed")
"""Phases after the sink's commit: the killed batch is in the table already."""
KILLS = {
    "append": crash.PHASES,
    "merge": crash.PHASES
    if os.environ.get("MICROBATCH_DELTA_CRASH_ALL")
    else ("mid_sink", "sink_write_done", "sink_committed"),
}
"""Where each mode is killed, in turn. Merge differs from append only inside the sink (staged
files, the MERGE commit, the replay skipped by its transaction), so make test kills it there;
``MICROBATCH_DELTA_CRASH_ALL=1`` kills it at every phase too."""


def write_input(folder: Path) -> list[dict[str, Any]]:
    """FILES files of ROWS rows into ``folder``, oldest first; every row written, in order."""
    folder.mkdir(parents=True)
    rows = []
    for index in range(FILES):
        lines = []
        for row in range(ROWS):
            ident = index * ROWS + row
            key = ident % KEYS
            record = {
                "id": ident,
                "key": key,
                "value": f"file {index} row {row}",
                "kind": pipeline_script.KINDS[key % len(pipeline_script.KINDS)],
            }
            rows.append(record)
            lines.append(json.dumps(record, ensure_ascii=False) + "\n")
        path = folder / f"ev-{index:03d}.json"
        path.write_text("".join(lines), encoding="utf-8")
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))
    return rows


def latest_per_key(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last row of each key, sorted by id."""
    latest = {row["key"]: row for row in rows}
    return sorted(latest.values(), key=lambda row: row["id"])


def expected_after(mode: str, rows: list[dict[str, Any]], batches: int) -> list[dict[str, Any]]:
    """What the table holds once batches ``0 .. batches - 1`` are committed."""
    taken = rows[: batches * PER_TRIGGER * ROWS]
    return taken if mode == "append" else latest_per_key(taken)


def unlisted_files(table: Path) -> set[str]:
    """Parquet files in the table folder (staging included) that no commit adds."""
    listed = {path for entry in pipeline_script.read_log(table) for path in entry.added}
    found = {str(p.relative_to(table)) for p in table.rglob("*.parquet")}
    # the log holds the paths URI-encoded
    return found - {unquote(path) for path in listed}


@pytest.mark.parametrize("mode", pipeline_script.MODES)
def test_delta_sink_is_exactly_once_after_sigkills(mode: str, tmp_path: Path) -> None:
    rows = write_input(tmp_path / "in")
    table, checkpoint = tmp_path / "table", tmp_path / "checkpoint"
    args = [mode, tmp_path / "in", table, checkpoint, PER_TRIGGER]

    for index, phase in enumerate(KILLS[mode]):
        batch = index + 1
        before = unlisted_files(table) if table.exists() else set()
        killed = crash.run_until_crash(SCRIPT, phase, batch, args=args)
        assert f"at {phase}:{batch}" in killed.stderr
        batches = batch + (1 if phase in COMMITTED_PHASES else 0)
        assert pipeline_script.read_table(table) == expected_after(mode, rows, batches), (
            f"killed at {phase}:{batch}"
        )
        if phase == "mid_sink":
            assert unlisted_files(table) - before, "the mid_sink kill left no written part"

    crash.run_to_completion(SCRIPT, args=args)

    assert pipeline_script.read_table(table) == expected_after(mode, rows, FILES // PER_TRIGGER)
    batches = pipeline_script.committed_batches(checkpoint)
    assert batches == list(range(FILES // PER_TRIGGER))
    app_id = pipeline_script.query_id(checkpoint)
    assert pipeline_script.history_problems(table, app_id, batches) == []
    from deltalake import DeltaTable

    delta = DeltaTable(str(table))
    assert delta.transaction_version(app_id) == batches[-1]
    assert len(delta.history()) == len(batches)
    assert delta.metadata().partition_columns == ["kind"]


def test_history_check_finds_a_batch_committed_twice(tmp_path: Path) -> None:
    """The log check the crash tests rely on sees a replayed batch committed again, a batch
    with no commit, and a commit without the query's transaction."""
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    table = str(tmp_path / "table")
    rows = pa.table({"id": [1]})
    for version in (0, 0, 2):
        txn = CommitProperties(app_transactions=[Transaction("q", version)])
        write_deltalake(table, rows, mode="append", commit_properties=txn)
    write_deltalake(table, rows, mode="append")
    problems = pipeline_script.history_problems(table, "q", [0, 1, 2])
    assert problems == [
        "version 3 (WRITE) carries the transactions [], not one of q",
        "batches committed more than once: [0]",
        "batches without a commit: [1]; commits of no batch: []",
    ]
    assert pipeline_script.history_problems(table, "q", [0, 2]) != []
