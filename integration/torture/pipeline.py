"""One pipeline of the torture run, run in a child process and killed at random.

Usage: python pipeline.py KIND MODE WORKDIR

KIND is ``parquet`` (JSON files -> parquet, partitioned by ``kind``), ``archive`` (the same
with ``cleanSource=archive``), ``chained`` (the parquet sink of ``parquet``, read through its
manifest, -> another parquet sink), or ``delta-append`` / ``delta-merge`` (JSON files -> the
``delta`` sink, see ``torture_delta.py``), or ``jdbc-append`` / ``jdbc-upsert`` (JSON files ->
the ``jdbc`` sink on PostgreSQL, see ``torture_jdbc.py``). MODE is ``stream`` (run until
killed; prints ``READY`` on stdout once the query has started) or ``drain`` (the
available-now trigger: take everything there is, then exit 0). The crash hook of the testkit
is armed, so ``MICROBATCH_CRASH_AT`` kills the process at a batch phase (for the JDBC
pipelines ``MICROBATCH_TORTURE_TXN_KILL`` moves ``mid_sink`` into psycopg). Any query failure
exits non-zero with its traceback.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from torture_delta import DELTA_PIPELINES, build_delta
from torture_jdbc import JDBC_KILL_VAR, JDBC_PIPELINES, build_jdbc, kill_inside_client

import microbatch as mb
from microbatch_testkit import crash

SCHEMA = "id BIGINT, file BIGINT, note STRING, kind STRING"
DRAIN_TIMEOUT = 300.0


def paths(workdir: Path, kind: str) -> dict[str, Path]:
    """The folders of pipeline ``kind`` under the torture run's ``workdir``."""
    base = workdir / kind
    return {
        "input": base / "in",
        "output": base / "out",
        "checkpoint": base / "checkpoint",
        "archive": base / "archive",
        "upstream": workdir / "parquet" / "out",
    }


def build(session: mb.Session, kind: str, folders: dict[str, Path], drain: bool) -> object:
    """Start the query of pipeline ``kind``; return it."""
    if kind in DELTA_PIPELINES:
        return build_delta(session, kind, SCHEMA, folders, drain)
    if kind in JDBC_PIPELINES:
        return build_jdbc(session, kind, SCHEMA, folders, drain)
    if kind == "chained":
        reader = (
            session.read_stream.format("parquet")
            .schema(SCHEMA)
            .option("maxFilesPerTrigger", 4)
            .load(str(folders["upstream"]))
        )
    else:
        reader = (
            session.read_stream.format("json")
            .schema(SCHEMA)
            # one file per batch upstream of the chained query: many small commits, and a
            # manifest compaction every ten of them, while the chained query reads
            .option("maxFilesPerTrigger", 1 if kind == "parquet" else 2)
        )
        if kind == "archive":
            reader = reader.option("cleanSource", "archive").option(
                "sourceArchiveDir", str(folders["archive"])
            )
        reader = reader.load(str(folders["input"]))
    writer = (
        reader.write_stream.format("parquet")
        .option("checkpointLocation", str(folders["checkpoint"]))
        .option("maxRecordsPerFile", 25)
    )
    if kind != "chained":
        writer = writer.partition_by("kind")
    if drain:
        writer = writer.trigger(available_now=True)
    return writer.start(str(folders["output"]))


def main(kind: str, mode: str, workdir: str) -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    folders = paths(Path(workdir), kind)
    session = mb.Session()
    in_client = kind in JDBC_PIPELINES and bool(os.environ.get(JDBC_KILL_VAR))
    crash.arm(session, mid_sink_in_script=in_client)
    if in_client:  # mid_sink inside psycopg (see torture_jdbc.kill_inside_client)
        kill_inside_client(os.environ[JDBC_KILL_VAR])
    query = build(session, kind, folders, drain=mode == "drain")
    return finish(query, mode)


def finish(query: Any, mode: str) -> int:
    """Run the started ``query`` to its end as ``mode`` says; the child's exit status: 0 for a
    drain that finished, 1 for a failed query (traceback on stderr), 2 for a streaming query
    that ended on its own, 3 for a drain not finished in ``DRAIN_TIMEOUT``."""
    if mode == "stream":
        print("READY", flush=True)
        query.await_termination()
        sys.stderr.write("TORTURE: a streaming query ended on its own\n")
    elif not query.await_termination(DRAIN_TIMEOUT):
        sys.stderr.write(f"TORTURE: the drain did not finish in {DRAIN_TIMEOUT} s\n")
        return 3
    error = query.exception()
    if error is not None:
        sys.stderr.write("TORTURE: the query failed\n")
        traceback.print_exception(error, file=sys.stderr)
        return 1
    return 0 if mode == "drain" else 2


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[2] not in ("stream", "drain"):
        sys.exit(__doc__)
    sys.exit(main(*sys.argv[1:4]))
