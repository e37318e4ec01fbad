"""A pipeline for crash tests: 30 rows of ``example-counter`` into ``example-jsonl``, 5 a batch.

Usage: ``python counter_to_jsonl.py CHECKPOINT OUTPUT``. Killed where ``MICROBATCH_CRASH_AT``
says (``<phase>:<batch id>``), by the test kit's crash helper.
"""

from __future__ import annotations

import sys

import microbatch as mb
from microbatch_testkit import crash

checkpoint, output = sys.argv[1], sys.argv[2]
with mb.Session() as session:
    crash.arm(session)
    query = (
        session.read_stream.format("example-counter")
        .option("rowsPerBatch", 5)
        .load()
        .filter(mb.col("id") < 30)
        .write_stream.format("example-jsonl")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(processing_time="0 seconds")
        .start()
    )
    while (
        query.last_progress is None or query.last_progress["sources"][0]["endOffset"]["rows"] < 30
    ):
        query.await_termination(timeout=0.05)
    query.stop()
