"""The torture run's JDBC pipelines: their queries and the checks of their tables.

- ``jdbc-append``: JSON files -> the ``jdbc`` sink on PostgreSQL, every row appended; two
  files per batch.
- ``jdbc-upsert``: the same files with a key column (``key = id & 31``: keys repeat within a
  file and across files) -> the sink with ``mode=upsert``, ``keys=key``: the table must end
  with the latest row of each key.

Each pipeline writes into a database of its own on the server the testkit's service selection
finds or starts (``MICROBATCH_SERVICES``); ``run_torture.py`` notes its URL in
``WORKDIR/KIND/jdbc.json``. The tables are read with psycopg (no SQLAlchemy, no microbatch
code), and the sink's ledger is checked against the checkpoint: every batch in the commit log
applied once, none applied beyond the offset log.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from torture_check import KEY_MASK, SinkReport, check_table
from torture_input import Row

import microbatch as mb

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "connectors/jdbc/tests/scripts"))
import jdbc_crash_pipeline as jdbc_helpers

__all__ = [
    "JDBC_KILL_VAR",
    "JDBC_PIPELINES",
    "build_jdbc",
    "check_jdbc",
    "jdbc_url",
    "kill_inside_client",
    "read_jdbc_rows",
]

JDBC_PIPELINES = ("jdbc-append", "jdbc-upsert")
TABLE = "torture"
JDBC_KILL_VAR = "MICROBATCH_TORTURE_TXN_KILL"
"""Where ``mid_sink`` kills inside psycopg: ``mid-copy``, ``before-commit`` (see
``jdbc_crash_pipeline.py``); unset keeps the crash hook's own ``mid_sink``."""


kill_inside_client = jdbc_helpers.kill_inside_client
"""Move ``mid_sink`` into psycopg where ``at`` says (arm the session's crash hook with
``mid_sink_in_script=True``)."""


def jdbc_url(base: Path) -> str:
    """The SQLAlchemy URL of the pipeline's database (from ``base/jdbc.json``)."""
    return str(json.loads((base / "jdbc.json").read_text())["url"])


def build_jdbc(
    session: mb.Session, kind: str, schema: str, folders: dict[str, Path], drain: bool
) -> Any:
    """Start the query of JDBC pipeline ``kind``; return it."""
    frame = (
        session.read_stream.format("json")
        .schema(schema)
        .option("maxFilesPerTrigger", 2)
        .load(str(folders["input"]))
    )
    if kind == "jdbc-upsert":
        frame = frame.with_column("key", pc.bit_wise_and(pc.field("id"), KEY_MASK))
    writer = (
        frame.write_stream.format("jdbc")
        .option("url", jdbc_url(folders["checkpoint"].parent))
        .option("dbtable", TABLE)
        .option("checkpointLocation", str(folders["checkpoint"]))
    )
    if kind == "jdbc-upsert":
        writer = writer.option("mode", "upsert").option("keys", "key")
    if drain:
        writer = writer.trigger(available_now=True)
    return writer.start()


def read_jdbc_rows(url: str) -> list[tuple]:
    """Every row of the pipeline's table as ``(id, file, note, kind)``; [] before it exists."""
    import psycopg

    with psycopg.connect(jdbc_helpers._dsn(url), connect_timeout=10) as connection:
        if not jdbc_helpers._exists(connection, TABLE):
            return []
        found = connection.execute(f'SELECT id, file, note, kind FROM "{TABLE}"').fetchall()
    return [tuple(row) for row in found]


def check_jdbc(kind: str, base: Path, expected: dict[int, Row]) -> SinkReport:
    """Read pipeline ``kind``'s table and compare it with the rows written (``jdbc-upsert``:
    with the latest row of each key); the ledger's problems are in ``problems``."""
    url, checkpoint = jdbc_url(base), base / "checkpoint"
    return check_table(
        partial(read_jdbc_rows, url),
        expected,
        keyed=kind == "jdbc-upsert",
        where=TABLE,
        more_problems=partial(ledger_problems, url, checkpoint),
    )


def ledger_problems(url: str, checkpoint: Path) -> list[str]:
    """What is wrong with the ledger: a batch of the commit log not applied, a batch applied
    twice, a batch applied that the offset log does not have."""
    if not (checkpoint / "metadata").exists():
        return ["the query never started"]
    applied = jdbc_helpers.ledger_batches(url, jdbc_helpers.query_id(checkpoint))
    problems = []
    twice = sorted(batch for batch, count in Counter(applied).items() if count > 1)
    if twice:
        problems.append(f"batches applied more than once: {twice[:10]}")
    committed = jdbc_helpers.committed_batches(checkpoint)
    missing = sorted(set(committed) - set(applied))
    if missing:
        problems.append(f"batches in the commit log the ledger lacks: {missing[:10]}")
    offsets = checkpoint / "offsets"
    names = [path.name for path in offsets.iterdir()] if offsets.is_dir() else []
    planned = {int(name) for name in names if name.isdigit()}
    beyond = sorted(set(applied) - planned)
    if beyond:
        problems.append(f"batches applied that the offset log lacks: {beyond[:10]}")
    return problems


def ledger_count(base: Path) -> int:
    """How many batches the pipeline's ledger holds."""
    checkpoint = base / "checkpoint"
    if not (checkpoint / "metadata").exists():
        return 0
    return len(jdbc_helpers.ledger_batches(jdbc_url(base), jdbc_helpers.query_id(checkpoint)))
