"""What the Delta source's tests share: running real queries from a table into memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

import microbatch as mb

_runs = 0


def stream(session: mb.Session, path: str, **options: Any) -> mb.StreamFrame:
    """``session.read_stream.format("delta")`` with ``options`` over the table at ``path``."""
    reader = session.read_stream.format("delta")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(path)


def run_available_now(
    session: mb.Session, path: str, checkpoint: Path, **options: Any
) -> tuple[pa.Table, mb.StreamingQuery]:
    """One available-now run of the table into a new memory table; its rows and the query.
    Raises the query's error when it failed."""
    global _runs
    _runs += 1
    name = f"delta_source_run_{_runs}"
    query = (
        stream(session, path, **options)
        .write_stream.format("memory")
        .query_name(name)
        .option("checkpointLocation", str(checkpoint))
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(timeout=60)
    error = query.exception()
    if error is not None:
        raise error
    return session.table(name), query


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def batch_sizes(query: mb.StreamingQuery) -> list[int]:
    """The input rows of each batch the query ran (this run's)."""
    return [int(p["numInputRows"]) for p in query.recent_progress]
