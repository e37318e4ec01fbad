"""The torture run's Delta pipelines: their queries and the checks of their tables.

- ``delta-append``: JSON files -> the ``delta`` sink, partitioned by ``kind`` (``a``,
  ``b c/é``, null), every row appended; two files per batch, at most 25 rows per data file.
- ``delta-merge``: the same files with a key column (``key = id & 31``: keys repeat within a
  file and across files, and a key's ``kind`` changes from row to row) -> the sink with
  ``mode=merge``, ``mergeKeys=key``: the table must end with the latest row of each key.

The tables are read with delta-rs (``DeltaTable``), as any other reader would, and their logs
with the crash tests' helpers (``connectors/delta/tests/scripts/delta_crash_pipeline.py``):
every commit must carry exactly one application transaction of the query (app id = the query
id), no batch id twice, batch ids increasing with the table's versions.
"""

from __future__ import annotations

import sys
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from torture_check import KEY_MASK, SinkReport, check_table
from torture_input import Row

import microbatch as mb

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "connectors/delta/tests/scripts"))
import delta_crash_pipeline as delta_helpers

__all__ = ["DELTA_PIPELINES", "build_delta", "check_delta", "read_delta_rows"]

DELTA_PIPELINES = ("delta-append", "delta-merge")


def build_delta(
    session: mb.Session, kind: str, schema: str, folders: dict[str, Path], drain: bool
) -> Any:
    """Start the query of Delta pipeline ``kind``; return it."""
    frame = (
        session.read_stream.format("json")
        .schema(schema)
        .option("maxFilesPerTrigger", 2)
        .load(str(folders["input"]))
    )
    if kind == "delta-merge":
        frame = frame.with_column("key", pc.bit_wise_and(pc.field("id"), KEY_MASK))
    writer = (
        frame.write_stream.format("delta")
        .partition_by("kind")
        .option("checkpointLocation", str(folders["checkpoint"]))
        .option("maxRecordsPerFile", 25)
    )
    if kind == "delta-merge":
        writer = writer.option("mode", "merge").option("mergeKeys", "key")
    if drain:
        writer = writer.trigger(available_now=True)
    return writer.start(str(folders["output"]))


def read_delta_rows(output: Path) -> list[tuple]:
    """Every row of the Delta table at ``output`` as ``(id, file, note, kind)``."""
    from deltalake import DeltaTable

    table = pa.table(DeltaTable(str(output)).to_pyarrow_table())
    columns = [table.column(name).to_pylist() for name in ("id", "file", "note", "kind")]
    return list(zip(*columns, strict=True)) if table.num_rows else []


def check_delta(kind: str, base: Path, expected: dict[int, Row]) -> SinkReport:
    """Read pipeline ``kind``'s table under ``base`` and compare it with the rows written
    (``delta-merge``: with the latest row of each key); the log's problems are in
    ``problems``."""
    output, checkpoint = base / "out", base / "checkpoint"
    return check_table(
        partial(read_delta_rows, output),
        expected,
        keyed=kind == "delta-merge",
        where=str(output),
        more_problems=partial(log_problems, output, checkpoint),
    )


def log_problems(output: Path, checkpoint: Path) -> list[str]:
    """What is wrong with the table's history: each commit one transaction of the query, no
    batch id twice, batch ids increasing with the versions, none beyond the checkpoint's."""
    if not (output / "_delta_log").is_dir():
        return ["no Delta table was written"]
    app_id = delta_helpers.query_id(checkpoint)
    problems = []
    carried = []
    for entry in delta_helpers.read_log(output):
        mine = [version for app, version in entry.transactions if app == app_id]
        if len(mine) != 1 or len(entry.transactions) != 1:
            problems.append(
                f"version {entry.version} ({entry.operation}) carries {list(entry.transactions)}"
            )
        carried += mine
    twice = sorted(batch for batch, count in Counter(carried).items() if count > 1)
    if twice:
        problems.append(f"batches committed more than once: {twice[:10]}")
    if carried != sorted(carried):
        problems.append(f"batch ids do not increase with the table's versions: {carried[:20]}")
    batches = delta_helpers.committed_batches(checkpoint)
    if carried and batches and carried[-1] > batches[-1]:
        problems.append(
            f"batch {carried[-1]} committed to Delta, the checkpoint ends at {batches[-1]}"
        )
    return problems


def commit_count(output: Path) -> int:
    """The number of commits in the table's log."""
    return len(delta_helpers.read_log(output)) if (output / "_delta_log").is_dir() else 0


def unlisted_files(output: Path) -> int:
    """Parquet files in the table folder that are not in its latest version: left by killed
    attempts and removed by merges (rewritten files), for ``VACUUM`` to delete."""
    from urllib.parse import unquote

    if not output.is_dir():
        return 0
    live: set[str] = set()
    for entry in delta_helpers.read_log(output):
        live -= {unquote(path) for path in entry.removed}
        live |= {unquote(path) for path in entry.added}
    found = {str(p.relative_to(output)) for p in output.rglob("*.parquet")}
    return len(found - live)
