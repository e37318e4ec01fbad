"""Crash tests with real processes: SIGKILL at each batch phase, restart, check the table.

A pipeline reads 16 JSON files of 10 rows, two files per batch, with the available-now trigger,
into a PostgreSQL table through the ``jdbc`` sink (``scripts/jdbc_crash_pipeline.py``). It is
killed at the phases of ``crash.PHASES`` in turn, one batch after the other (batch 1 at the
first phase, batch 2 at the next...), each run restarting from the checkpoint the killed one
left, then run to completion. ``mid_sink`` kills twice inside the database client: while the
batch's ``COPY`` streams (``mid-copy``) and just after the ledger row was inserted, before the
transaction commits (``before-commit``).

- append: the table holds every input row exactly once, with its values;
- upsert (``mode=upsert``, ``keys=key``, keys repeating across batches): the table holds the
  latest row of each key; killed at the phases inside the sink (``mid_sink`` twice,
  ``sink_committed``), or at all with ``MICROBATCH_JDBC_CRASH_ALL=1``.

In both, the ledger holds each batch id of the query once. After each kill the tests check
what the killed run left visible (the batches before it, plus the killed one when the sink had
committed it), which proves that the process died where it was meant to and that the run
before recovered from its own kill.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from microbatch_testkit import crash

SCRIPT = Path(__file__).parent / "scripts" / "jdbc_crash_pipeline.py"
sys.path.insert(0, str(SCRIPT.parent))
import jdbc_crash_pipeline as pipeline_script  # noqa: E402

FILES, ROWS, PER_TRIGGER, KEYS = 16, 10, 2, 25
"""Input files, rows in each, files per batch, and distinct keys (upsert: they repeat)."""
BATCHES = FILES // PER_TRIGGER
COMMITTED_PHASES = ("sink_committed", "batch_committed")
"""Phases after the sink's commit: the killed batch is in the table already."""
KILLS = [
    ("offsets_written", ""),
    ("mid_sink", "mid-copy"),
    ("mid_sink", "before-commit"),
    ("sink_write_done", ""),
    ("sink_committed", ""),
    ("batch_committed", ""),
]
"""Where append is killed, one kill per batch from batch 1 on: (phase, crash point in the
database client, see ``scripts/jdbc_crash_pipeline.py``)."""
assert {phase for phase, _ in KILLS} == set(crash.PHASES)
UPSERT_KILLS = (
    KILLS
    if os.environ.get("MICROBATCH_JDBC_CRASH_ALL")
    else [kill for kill in KILLS if kill[0] in ("mid_sink", "sink_committed")]
)
"""Upsert differs from append only inside the sink (the staging table, the ``ON CONFLICT``
statement, the replay skipped by the ledger), so make test kills it there;
``MICROBATCH_JDBC_CRASH_ALL=1`` kills it at every phase too."""


def write_input(folder: Path) -> list[dict[str, Any]]:
    """FILES files of ROWS rows into ``folder``, oldest first; every row written, in order."""
    folder.mkdir(parents=True)
    rows = []
    for index in range(FILES):
        lines = []
        for row in range(ROWS):
            ident = index * ROWS + row
            record = {
                "id": ident,
                "key": ident % KEYS,
                "value": None if ident % 7 == 3 else f"file {index} row {row} é✓",
                "amount": None if ident % 11 == 5 else ident * 0.25,
            }
            rows.append(record)
            lines.append(json.dumps(record, ensure_ascii=False) + "\n")
        path = folder / f"ev-{index:03d}.json"
        path.write_text("".join(lines), encoding="utf-8")
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))
    return rows


def expected_after(mode: str, rows: list[dict[str, Any]], batches: int) -> list[dict[str, Any]]:
    """What the table holds once batches ``0 .. batches - 1`` are committed, sorted by id."""
    taken = rows[: batches * PER_TRIGGER * ROWS]
    if mode == "append":
        return taken
    latest = {row["key"]: row for row in taken}
    return sorted(latest.values(), key=lambda row: row["id"])


@pytest.mark.parametrize("mode", pipeline_script.MODES)
def test_jdbc_sink_is_exactly_once_after_sigkills(
    mode: str, postgres_database: Any, tmp_path: Path
) -> None:
    rows = write_input(tmp_path / "in")
    url, table, checkpoint = postgres_database.url, "events", tmp_path / "checkpoint"
    args = [mode, url, tmp_path / "in", table, checkpoint, PER_TRIGGER]

    for index, (phase, at) in enumerate(KILLS if mode == "append" else UPSERT_KILLS):
        batch = index + 1
        where = f"killed at {phase}:{batch} {at}"
        killed = crash.run_until_crash(
            SCRIPT, phase, batch, args=[*map(str, args), *([at] if at else [])]
        )
        assert f"at {phase}:{batch}" in killed.stderr, where
        batches = batch + (1 if phase in COMMITTED_PHASES else 0)
        found = pipeline_script.read_table(url, table)
        assert pipeline_script.row_problems(found, expected_after(mode, rows, batches)) == [], where
        assert found == expected_after(mode, rows, batches), where

    crash.run_to_completion(SCRIPT, args=list(map(str, args)))

    found = pipeline_script.read_table(url, table)
    assert pipeline_script.row_problems(found, expected_after(mode, rows, BATCHES)) == []
    assert found == expected_after(mode, rows, BATCHES)
    assert pipeline_script.committed_batches(checkpoint) == list(range(BATCHES))
    key = pipeline_script.query_id(checkpoint)
    assert pipeline_script.ledger_batches(url, key) == list(range(BATCHES))


def test_row_check_finds_lost_doubled_and_changed_rows() -> None:
    """The comparison the crash tests rely on sees each kind of difference."""
    expected = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}]
    found = [{"id": 1, "v": "a"}, {"id": 1, "v": "a"}, {"id": 3, "v": "x"}, {"id": 9, "v": "z"}]
    problems = pipeline_script.row_problems(found, expected)
    assert problems[:3] == [
        "1 rows lost, e.g. ids [2]",
        "1 rows written more than once, e.g. ids [1]",
        "1 rows of no expected id, e.g. [9]",
    ]
    assert problems[3].startswith("1 rows with other values")
    assert pipeline_script.row_problems(expected, expected) == []
