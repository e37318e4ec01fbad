"""A crash-test pipeline: rate-micro-batch -> foreach_batch -> SQLite, exactly once.

Usage: python rate_to_sqlite.py CHECKPOINT DATABASE LAST_BATCH

Runs until batch LAST_BATCH is committed, then stops. Each batch's rows and its ledger row are
committed in one SQLite transaction, so a replayed batch is applied once. When
MICROBATCH_CRASH_AT is "mid_sink:<id>", the function inserts half of the rows of that batch and
then kills the process inside the open transaction.
"""

from __future__ import annotations

import sqlite3
import sys
from contextlib import closing
from typing import Any

import pyarrow as pa

import microbatch as mb
from microbatch_testkit import crash

ROWS_PER_BATCH = 10


def main(checkpoint: str, database: str, last_batch: int) -> None:
    def write(batch: pa.Table, batch_id: int) -> None:
        values = [(value,) for value in batch.column("value").to_pylist()]
        half = len(values) // 2

        def insert(connection: Any) -> None:
            connection.executemany("INSERT INTO numbers (value) VALUES (?)", values[:half])
            crash.crash_point("mid_sink", batch_id)
            connection.executemany("INSERT INTO numbers (value) VALUES (?)", values[half:])

        with closing(sqlite3.connect(database)) as connection:
            connection.execute("CREATE TABLE IF NOT EXISTS numbers (value INTEGER NOT NULL)")
            connection.commit()
            mb.BatchLedger(connection, key="rate-to-sqlite").apply_once(batch_id, insert)

    session = mb.Session()
    crash.arm(session, mid_sink_in_script=True)
    query = (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", ROWS_PER_BATCH)
        .load()
        .write_stream.foreach_batch(write)
        .option("checkpointLocation", checkpoint)
        .trigger(processing_time="0 seconds")
        .start()
    )
    crash.stop_after_batch(query, last_batch)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
