"""A crash-test pipeline: rate-micro-batch -> parquet file sink.

Usage: python rate_to_parquet.py OUTPUT CHECKPOINT LAST_BATCH

Runs until batch LAST_BATCH is committed, then stops. Each batch has ROWS_PER_BATCH rows read in
three splits, written as files of at most 150 rows.
"""

from __future__ import annotations

import sys

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
    crash.stop_after_batch(query, last_batch, timeout=30)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
