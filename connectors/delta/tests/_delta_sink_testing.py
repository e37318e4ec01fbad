"""Helpers of the ``delta`` sink's tests: writers made as a query run makes them, batches
written and committed through them, and the table's log and rows read back (time-zone-aware
timestamps in UTC, as Delta stores them)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

import microbatch as mb
from microbatch_delta.sink import DeltaSink

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])


def make_writer(
    path: str | Path,
    *,
    query_id: str = "query-1",
    schema: pa.Schema = SCHEMA,
    output_mode: mb.OutputMode = mb.OutputMode.APPEND,
    partition_by: tuple[str, ...] = (),
    **options: Any,
) -> mb.StreamWriter:
    """A stream writer of the sink, made as ``start()`` makes one (options parsed)."""
    raw = {"path": str(path), **options}
    parsed = DeltaSink.options.parse(raw, connector="delta")
    context = mb.WriteContext(
        schema=schema, output_mode=output_mode, query_id=query_id, partition_by=partition_by
    )
    return DeltaSink(parsed).stream_writer(context)


def rows(ids: Sequence[int], schema: pa.Schema = SCHEMA, **columns: Sequence[Any]) -> pa.Table:
    """A table of ``schema`` with these ids (``name`` = ``n<id>`` unless given)."""
    data: dict[str, Sequence[Any]] = {"id": list(ids)}
    for field in schema:
        if field.name == "id":
            continue
        if field.name in columns:
            data[field.name] = columns[field.name]
        elif field.name == "name":
            data["name"] = [f"n{i}" for i in ids]
        else:
            data[field.name] = [None] * len(ids)
    return pa.table(data, schema=schema)


def write(
    writer: mb.StreamWriter, batch_id: int, *parts: pa.Table
) -> list[mb.CommitMessage | None]:
    """Each table through one part writer, as the engine writes the splits of a batch."""
    part_writer = writer.part_writer()
    return [
        part_writer.write(
            pa.RecordBatchReader.from_batches(part.schema, part.to_batches()),
            mb.PartContext(
                batch_id=batch_id, part_index=index, num_parts=len(parts), query_id=query_of(writer)
            ),
        )
        for index, part in enumerate(parts)
    ]


def run_batch(writer: mb.StreamWriter, batch_id: int, *parts: pa.Table) -> None:
    """Write and commit batch ``batch_id``."""
    writer.commit(write(writer, batch_id, *parts), batch_id)


def query_of(writer: mb.StreamWriter) -> str:
    return str(writer._query_id)  # type: ignore[attr-defined]


def read_ids(path: str | Path) -> list[int]:
    """The ids in the table, sorted, as delta-rs reads them."""
    from deltalake import DeltaTable

    return sorted(DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist())


def log_entries(path: str | Path) -> list[list[dict[str, Any]]]:
    """Every commit of the table's log, in version order: its actions as JSON objects."""
    entries = sorted(Path(path, "_delta_log").glob("*.json"))
    return [
        [json.loads(line) for line in entry.read_text().splitlines() if line] for entry in entries
    ]


def transactions(path: str | Path) -> list[tuple[str, int] | None]:
    """Per commit, its ``txn`` action as ``(appId, version)`` (``None`` when it has none)."""
    found: list[tuple[str, int] | None] = []
    for actions in log_entries(path):
        txns = [action["txn"] for action in actions if "txn" in action]
        found.append((txns[0]["appId"], txns[0]["version"]) if txns else None)
    return found


def data_files(path: str | Path) -> set[str]:
    """The parquet files under the table's folder (committed or not), relative to it."""
    root = Path(path)
    return {
        str(file.relative_to(root))
        for file in root.rglob("*.parquet")
        if not str(file.relative_to(root)).startswith("_delta_log")
    }


def commit_in_child(
    path: str,
    messages: list[mb.CommitMessage | None],
    batch_id: int,
    kill_at: int | None,
    report: str,
    schema: pa.Schema = SCHEMA,
    options: dict[str, Any] | None = None,
) -> None:
    """Run in a spawned process: commit ``messages`` as batch ``batch_id`` with a new writer of
    query ``query-1``, counting the line events of the sink's code, and SIGKILL this process at
    line event ``kill_at`` (never when ``None``); the count of a commit that ends goes to the
    file ``report``. ``schema`` and ``options`` make the writer as :func:`make_writer` does."""
    import os
    import signal

    # the modules the commit imports as it runs, loaded first so that their lines are not
    # counted: the count is then the same as in the process that counted the commit's lines
    import microbatch_delta._merge
    import microbatch_delta._part_writer  # noqa: F401

    writer = make_writer(path, schema=schema, **(options or {}))
    count = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
            if kill_at is not None and count >= kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        return local

    def trace(frame: Any, event: str, arg: Any) -> Any:
        module = str(frame.f_globals.get("__name__", ""))
        return local if event == "call" and module.startswith("microbatch_delta") else None

    sys.settrace(trace)
    try:
        writer.commit(messages, batch_id)
    finally:
        sys.settrace(None)
    Path(report).write_text(str(count))


def as_stored(schema: pa.Schema) -> pa.Schema:
    """``schema`` with time-zone-aware timestamps in UTC, as a Delta table holds them."""
    return pa.schema(
        [
            field.with_type(pa.timestamp("us", "UTC"))
            if pa.types.is_timestamp(field.type) and field.type.tz is not None
            else field
            for field in schema
        ]
    )


def read_table(path: str, schema: pa.Schema) -> pa.Table:
    """Every row of the Delta table at ``path`` (none when there is no table), as ``schema``."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(path).to_pyarrow_table()
    except TableNotFoundError:
        return schema.empty_table()
    return table.select(schema.names).cast(schema)
