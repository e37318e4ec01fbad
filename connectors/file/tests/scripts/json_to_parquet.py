"""A crash-test pipeline: a folder of JSON files -> parquet file sink, partitioned.

Usage: python json_to_parquet.py INPUT OUTPUT CHECKPOINT ARCHIVE

Reads two files per batch with the available-now trigger, archives every file it has committed
into ARCHIVE (cleanSource=archive), and writes parquet partitioned by ``kind``.
"""

from __future__ import annotations

import sys

import microbatch as mb
from microbatch_testkit import crash


def main(source: str, output: str, checkpoint: str, archive: str) -> None:
    session = mb.Session()
    crash.arm(session)
    query = (
        session.read_stream.format("json")
        .schema("id BIGINT, kind STRING, note STRING")
        .option("maxFilesPerTrigger", 2)
        .option("cleanSource", "archive")
        .option("sourceArchiveDir", archive)
        .load(source)
        .write_stream.format("parquet")
        .partition_by("kind")
        .option("maxRecordsPerFile", 40)
        .option("checkpointLocation", checkpoint)
        .trigger(available_now=True)
        .start(output)
    )
    query.await_termination(60)
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
