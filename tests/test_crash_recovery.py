"""SIGKILL a real pipeline process at each step of the write-ahead protocol, several times in a
row, and compare the sink with the batches the checkpoint planned: none missing, none doubled."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from microbatch._checkpoint import Checkpoint
from microbatch_testkit import crash

SCRIPT = (
    Path(__file__).parents[1] / "plugins" / "testkit" / "tests" / "scripts" / "rate_to_sqlite.py"
)
ROWS_PER_BATCH = 10


def stored_values(database: Path) -> list[int]:
    with closing(sqlite3.connect(database)) as connection:
        return sorted(value for (value,) in connection.execute("SELECT value FROM numbers"))


def planned_values(checkpoint: Path) -> list[int]:
    """Every value of every batch the checkpoint's offset log planned (rate-micro-batch
    offsets count rows)."""
    values: list[int] = []
    logs = Checkpoint(str(checkpoint))
    for batch_id in logs.batch_ids(logs.offsets):
        logged = logs.read_offsets(batch_id)
        values.extend(range(logged.start["offset"], logged.end["offset"]))  # type: ignore[index]
        assert logs.is_committed(batch_id), f"batch {batch_id} uncommitted"
    return values


def test_repeated_kills_at_every_phase_lose_and_double_nothing(tmp_path: Path) -> None:
    checkpoint, database = tmp_path / "checkpoint", tmp_path / "numbers.db"
    args = [str(checkpoint), str(database), "6"]
    for phase, batch_id in [
        ("offsets_written", 1),
        ("mid_sink", 2),
        ("sink_committed", 3),
        ("batch_committed", 4),
        ("sink_committed", 5),
    ]:
        run = crash.run_until_crash(SCRIPT, phase, batch_id, args=args)
        assert run.returncode == -9
    crash.run_to_completion(SCRIPT, args=args)
    planned = planned_values(checkpoint)
    assert len(planned) >= 7 * ROWS_PER_BATCH
    assert stored_values(database) == planned == list(range(len(planned)))
