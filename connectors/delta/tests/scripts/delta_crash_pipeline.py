"""A crash-test pipeline: JSON files -> the ``delta`` sink, available-now.

Usage: python delta_crash_pipeline.py MODE INPUT TABLE CHECKPOINT FILES_PER_TRIGGER

MODE is ``append`` (every row appended, the table partitioned by ``kind``) or ``merge``
(``mode=merge``, ``mergeKeys=key``: the table holds the latest row of each key, also
partitioned by ``kind``, which a key never changes). The source reads the JSON files of INPUT
(:data:`SCHEMA`), ``maxFilesPerTrigger=FILES_PER_TRIGGER``, with the available-now trigger;
each file is a split, so a batch of two files has two parts and ``mid_sink`` ("after the
first part was written") kills with data files in the table folder that no commit lists.

The testkit's crash hook is armed (``MICROBATCH_CRASH_AT``). The torture run's Delta
pipelines (``integration/torture``) start their queries and read their tables with the
functions here too.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import microbatch as mb
from microbatch_testkit import crash

SCHEMA = "id BIGINT, key BIGINT, value STRING, kind STRING"
KINDS = ("a", "b c/é=%", None)
"""Values of the partition column: a plain one, one that needs escaping, and null."""
MODES = ("append", "merge")


def start_query(
    session: mb.Session,
    mode: str,
    source: str,
    table: str,
    checkpoint: str,
    files_per_trigger: int,
    *,
    drain: bool = True,
    max_records_per_file: int | None = None,
) -> Any:
    """Start the pipeline (``mode`` as the usage says) with the available-now trigger if
    ``drain``, else the default one; return the query."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; use one of {MODES}")
    writer = (
        session.read_stream.format("json")
        .schema(SCHEMA)
        .option("maxFilesPerTrigger", files_per_trigger)
        .load(source)
        .write_stream.format("delta")
        .partition_by("kind")
        .option("checkpointLocation", checkpoint)
    )
    if mode == "merge":
        writer = writer.option("mode", "merge").option("mergeKeys", "key")
    if max_records_per_file is not None:
        writer = writer.option("maxRecordsPerFile", max_records_per_file)
    if drain:
        writer = writer.trigger(available_now=True)
    return writer.start(table)


def query_id(checkpoint: str | Path) -> str:
    """The query id a checkpoint records (the app id of the sink's Delta transactions)."""
    return str(json.loads((Path(checkpoint) / "metadata").read_text())["id"])


@dataclass(frozen=True)
class LogEntry:
    """One commit of a Delta table, as its ``_delta_log`` entry says."""

    version: int
    operation: str
    transactions: tuple[tuple[str, int], ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]


def read_log(table: str | Path) -> list[LogEntry]:
    """Every commit of the local Delta table at ``table`` from its log entries, oldest first
    (checkpoints are not read: the sink's tables here never get one removed from under)."""
    entries = []
    for path in sorted((Path(table) / "_delta_log").glob("[0-9]*.json")):
        actions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        entries.append(
            LogEntry(
                version=int(path.stem),
                operation=str(info.get("operation", "?")),
                transactions=tuple(
                    (a["txn"]["appId"], int(a["txn"]["version"])) for a in actions if "txn" in a
                ),
                added=tuple(a["add"]["path"] for a in actions if "add" in a),
                removed=tuple(a["remove"]["path"] for a in actions if "remove" in a),
            )
        )
    return entries


def history_problems(table: str | Path, app_id: str, batches: list[int]) -> list[str]:
    """What is wrong with the table's history, given the ids of the batches that wrote data:
    every commit must carry exactly one ``txn`` of ``app_id`` and each of ``batches`` must be
    carried by exactly one commit (and no other batch id by any). Empty when all is well."""
    problems = []
    carried: Counter[int] = Counter()
    for entry in read_log(table):
        mine = [version for app, version in entry.transactions if app == app_id]
        others = [pair for pair in entry.transactions if pair[0] != app_id]
        if len(mine) != 1 or others:
            problems.append(
                f"version {entry.version} ({entry.operation}) carries the transactions "
                f"{list(entry.transactions)}, not one of {app_id}"
            )
        carried.update(mine)
    twice = sorted(batch for batch, count in carried.items() if count > 1)
    if twice:
        problems.append(f"batches committed more than once: {twice}")
    if sorted(carried) != sorted(batches):
        missing = sorted(set(batches) - set(carried))
        extra = sorted(set(carried) - set(batches))
        problems.append(f"batches without a commit: {missing}; commits of no batch: {extra}")
    return problems


def read_table(table: str | Path) -> list[dict[str, Any]]:
    """Every row of the Delta table at ``table`` (read with delta-rs), sorted by id."""
    from deltalake import DeltaTable

    if not (Path(table) / "_delta_log").is_dir():
        return []
    rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda row: row["id"])


def committed_batches(checkpoint: str | Path) -> list[int]:
    """The batch ids in the checkpoint's commit log."""
    folder = Path(checkpoint) / "commits"
    if not folder.is_dir():
        return []
    return sorted(int(path.name) for path in folder.iterdir() if path.name.isdigit())


def main(mode: str, source: str, table: str, checkpoint: str, files_per_trigger: str) -> None:
    session = mb.Session()
    crash.arm(session)
    query = start_query(session, mode, source, table, checkpoint, int(files_per_trigger))
    crash.await_available_now(query)


if __name__ == "__main__":
    main(*sys.argv[1:])
