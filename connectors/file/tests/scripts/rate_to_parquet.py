"""A crash-test pipeline: rate-micro-batch -> parquet file sink.

Usage: python rate_to_parquet.py OUTPUT CHECKPOINT LAST_BATCH

Runs until batch LAST_BATCH is committed, then stops. Each batch has ROWS_PER_BATCH rows read in
three splits, written as files of at most 150 rows.
"""

from __future__ import annotations

import sys
import time

import microbatch as mb
from microbatch_testkit import crash

ROWS_PER_BATCH = 1000


def main(output: str, checkpoint: str, last_batch: int) -> None:
    session = mb.Session()
    crash.arm(session)
    query = (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", ROWS_PER_BATCH)
        .option("numPartitions", 3)
        .load()
        .write_stream.format("parquet")
        .option("path", output)
        .option("maxRecordsPerFile", 150)
        .option("checkpointLocation", checkpoint)
        .trigger(processing_time="0 seconds")
        .start()
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        progress = query.last_progress
        if progress is not None and progress["batchId"] >= last_batch:
            break
        if query.exception() is not None:
            break
        time.sleep(0.01)
    query.stop()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    if query.last_progress is None or query.last_progress["batchId"] < last_batch:
        raise SystemExit(f"batch {last_batch} was not reached in 30 s")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
