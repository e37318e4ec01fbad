"""What the merge tests share: staged files written by the real part writer, and the
actions of each Delta log entry."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import microbatch as mb
from microbatch_delta._part_writer import AddFile, DeltaPartWriter
from microbatch_delta._table import DeltaTarget

QUERY = "query-1"


def stage(
    target: DeltaTarget, schema: pa.Schema, parts: Sequence[pa.Table], batch_id: int
) -> list[AddFile]:
    """The staged files of batch ``batch_id`` written part by part, in part order (as the
    sink's parts write them in ``mode=merge``)."""
    writer = DeltaPartWriter(target, schema, staging=True)
    files: list[AddFile] = []
    for index, part in enumerate(parts):
        message = writer.write(
            pa.RecordBatchReader.from_batches(schema, part.cast(schema).to_batches()),
            mb.PartContext(batch_id, index, len(parts), QUERY),
        )
        files.extend(message.files)
    return files


def log_entries(table: Path) -> list[dict[str, list[dict[str, Any]]]]:
    """Each version's log entry as ``{action kind: [actions...]}``, in version order."""
    entries = []
    for path in sorted((table / "_delta_log").glob("*.json")):
        actions: dict[str, list[dict[str, Any]]] = {}
        for line in path.read_text().splitlines():
            if line.strip():
                ((kind, action),) = json.loads(line).items()
                actions.setdefault(kind, []).append(action)
        entries.append(actions)
    return entries


def batch_commits(table: Path, app_id: str) -> list[tuple[int, str]]:
    """(batch id, operation) of every log entry that records a transaction of ``app_id``."""
    found = []
    for entry in log_entries(table):
        for txn in entry.get("txn", []):
            if txn["appId"] == app_id:
                found.append((txn["version"], entry["commitInfo"][0]["operation"]))
    return found


def rows_by(table: pa.Table, *keys: str) -> list[dict[str, Any]]:
    """The rows as dicts, sorted by ``keys`` (NULLs first)."""
    return sorted(
        table.to_pylist(),
        key=lambda row: tuple((row[key] is not None, row[key]) for key in keys),
    )


def keyed_values(session: mb.Session, rows: int, partitions: int = 1) -> Any:
    """rate-micro-batch values with ``key = value % 7`` (several rows of each key in a batch
    of 14 rows or more) and ``bucket``, ``"even"`` or ``"odd"`` as the key is; with one
    partition, batch order is value order."""

    def add_key(batch: pa.RecordBatch) -> pa.RecordBatch:
        values = batch.column("value")
        key = pc.subtract(values, pc.multiply(pc.divide(values, 7), 7))
        odd = pc.equal(pc.bit_wise_and(key, 1), 1)
        bucket = pc.if_else(odd, "odd", "even")
        return pa.RecordBatch.from_arrays([key, bucket, values], names=["key", "bucket", "value"])

    frame = (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", partitions)
        .load()
    )
    return frame.map_batches(add_key)


def latest_per_key(values: range) -> list[dict[str, Any]]:
    """What upserting ``values`` in order by ``key = value % 7`` leaves, sorted by key."""
    latest = {value % 7: value for value in values}
    return [
        {"key": key, "bucket": "odd" if key % 2 else "even", "value": latest[key]}
        for key in sorted(latest)
    ]
