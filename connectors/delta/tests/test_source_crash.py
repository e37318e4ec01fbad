"""A Delta-to-Delta pipeline killed with SIGKILL at each batch phase, then run to completion:
the target holds every row of the source table exactly once.

The source table has 16 versions of 10 rows (one file each); the pipeline reads it with
``maxFilesPerTrigger=2`` and the available-now trigger into the exactly-once ``delta`` sink.
Runs are killed one batch after the other (batch 1 at the first phase, batch 2 at the next...)
at the phases that matter to a source: after the batch's offsets were written (a restart
replays the planned batch), after the sink committed it (a replay the sink skips) and after the
checkpoint committed it (a restart goes on after it); ``MICROBATCH_DELTA_SOURCE_CRASH_ALL=1``
kills at every phase of ``crash.PHASES``. Each run restarts from the checkpoint the killed one
left;
more versions are appended to the source between the runs. After each kill the target holds
the rows of the batches committed before it (plus the killed one when the sink had committed
it), never a row twice: the source replays a planned batch with the same files, and goes on
after the last committed one.

Run as a script (``python test_source_crash.py SOURCE TARGET CHECKPOINT``), this module is the
pipeline.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa

VERSIONS, ROWS, PER_TRIGGER = 16, 10, 2
COMMITTED_PHASES = ("sink_committed", "batch_committed")
SOURCE_PHASES = ("offsets_written", "sink_committed", "batch_committed")


def _pipeline(source: str, target: str, checkpoint: str) -> None:
    import microbatch as mb
    from microbatch_testkit import crash

    session = mb.Session()
    crash.arm(session)
    query = (
        session.read_stream.format("delta")
        .option("maxFilesPerTrigger", PER_TRIGGER)
        .load(source)
        .write_stream.format("delta")
        .option("checkpointLocation", checkpoint)
        .trigger(available_now=True)
        .start(target)
    )
    query.await_termination()


def _append(source: Path, first_version: int, count: int) -> None:
    from deltalake import write_deltalake

    for version in range(first_version, first_version + count):
        ids = range(version * ROWS, (version + 1) * ROWS)
        rows = pa.table(
            {"id": pa.array(ids, pa.int64()), "version": pa.array([version] * ROWS, pa.int64())}
        )
        write_deltalake(str(source), rows, mode="append")


def _target_ids(target: Path) -> list[int]:
    from deltalake import DeltaTable

    if not (target / "_delta_log").exists():
        return []
    return sorted(DeltaTable(str(target)).to_pyarrow_table().column("id").to_pylist())


def test_a_delta_to_delta_pipeline_is_exactly_once_after_sigkills(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from microbatch_testkit import crash

    source, target, checkpoint = tmp_path / "source", tmp_path / "target", tmp_path / "cp"
    _append(source, 0, VERSIONS)
    args = [source, target, checkpoint]
    committed = 0  # rows the target holds
    written = VERSIONS
    every = os.environ.get("MICROBATCH_DELTA_SOURCE_CRASH_ALL") == "1"
    for index, phase in enumerate(crash.PHASES if every else SOURCE_PHASES):
        batch = index + 1
        killed = crash.run_until_crash(__file__, phase, batch, args=args)
        assert f"at {phase}:{batch}" in killed.stderr
        batches = batch + (1 if phase in COMMITTED_PHASES else 0)
        ids = _target_ids(target)
        duplicates = [i for i, n in Counter(ids).items() if n > 1]
        assert not duplicates, f"killed at {phase}:{batch}: rows twice {duplicates[:5]}"
        assert len(ids) >= committed
        assert len(ids) == batches * PER_TRIGGER * ROWS, f"killed at {phase}:{batch}"
        committed = len(ids)
        _append(source, written, 1)  # the source grows between the runs
        written += 1
    crash.run_to_completion(__file__, args=args)
    assert _target_ids(target) == list(range(written * ROWS))
    history = DeltaTable(str(target)).history()
    assert len(history) == len({h["version"] for h in history})


if __name__ == "__main__":
    _pipeline(*sys.argv[1:4])
