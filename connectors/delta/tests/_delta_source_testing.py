"""What the Delta source's tests share: running real queries from a table into memory, and
changing a table by key with delta-rs."""

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
    return run_frame(session, stream(session, path, **options), checkpoint)


def run_frame(
    session: mb.Session, frame: mb.StreamFrame, checkpoint: Path, *, name: str | None = None
) -> tuple[pa.Table, mb.StreamingQuery]:
    """One available-now run of a loaded ``frame`` into the memory table ``name`` (a new one
    when ``None``); its rows and the query. Raises the query's error when it failed."""
    global _runs
    _runs += 1
    name = name or f"delta_source_run_{_runs}"
    query = (
        frame.write_stream.format("memory")
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


def upsert(path: str, rows: pa.Table, *, delete_unmatched: bool = False) -> None:
    """Merge ``rows`` into the table at ``path`` by ``id`` with delta-rs (one commit): matched
    rows updated, the others inserted; with ``delete_unmatched`` the table's rows whose id is
    not in ``rows`` are deleted."""
    from deltalake import DeltaTable

    merger = (
        DeltaTable(path)
        .merge(rows, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
    )
    if delete_unmatched:
        merger = merger.when_not_matched_by_source_delete()
    merger.execute()
