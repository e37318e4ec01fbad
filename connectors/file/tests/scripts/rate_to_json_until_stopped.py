"""An upstream query for chained-query tests: rate-micro-batch -> json file sink.

Usage: python rate_to_json_until_stopped.py OUTPUT CHECKPOINT STOP_FILE

Runs batches back to back (batch ``k`` holds the values ``5k .. 5k+4``) until STOP_FILE
exists, then stops and prints the id of the last committed batch.
"""

from __future__ import annotations

import os
import sys
import time

import microbatch as mb

ROWS_PER_BATCH = 5


def main(output: str, checkpoint: str, stop_file: str) -> None:
    session = mb.Session()
    query = (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", ROWS_PER_BATCH)
        .load()
        .write_stream.format("json")
        .option("checkpointLocation", checkpoint)
        .start(output)
    )
    while not os.path.exists(stop_file) and query.exception() is None:
        time.sleep(0.05)
    query.stop()
    if query.exception() is not None:
        raise SystemExit(f"upstream query failed: {query.exception()}")
    progress = query.last_progress
    print(-1 if progress is None else progress["batchId"], flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
