"""Drives a json file sink as fast as it goes, for the tests of readers of its folder.

Usage: python sink_fast_writer.py OUTPUT FIRST_BATCH STOP_FILE

Writes batch after batch from FIRST_BATCH on (batch ``b`` holds the values ``3b .. 3b+2`` in
column ``value``), each written and committed as the engine does, until STOP_FILE exists; then
prints the id of the last committed batch.
"""

from __future__ import annotations

import os
import sys

import pyarrow as pa

from microbatch import PartContext, WriteContext
from microbatch_file.sinks import JsonFileSink

SCHEMA = pa.schema([("value", pa.int64())])
ROWS_PER_BATCH = 3


def main(output: str, first_batch: int, stop_file: str) -> None:
    options = JsonFileSink.options.parse({"path": output}, connector="json")
    writer = JsonFileSink(options).stream_writer(
        WriteContext(schema=SCHEMA, query_id="fast-writer")
    )
    batch_id = first_batch
    while not os.path.exists(stop_file):
        start = batch_id * ROWS_PER_BATCH
        rows = pa.record_batch({"value": list(range(start, start + ROWS_PER_BATCH))}, SCHEMA)
        part = PartContext(batch_id=batch_id, part_index=0, num_parts=1, query_id="fast-writer")
        data = pa.RecordBatchReader.from_batches(SCHEMA, [rows])
        message = writer.part_writer().write(data, part)
        writer.commit([message], batch_id)
        batch_id += 1
    print(batch_id - 1, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
