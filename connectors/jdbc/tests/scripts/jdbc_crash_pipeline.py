"""A crash-test pipeline: JSON files -> the ``jdbc`` sink on PostgreSQL, available-now.

Usage: python jdbc_crash_pipeline.py MODE URL INPUT TABLE CHECKPOINT FILES_PER_TRIGGER [AT]

MODE is ``append`` (every row appended) or ``upsert`` (``mode=upsert``, ``keys=key``: the
table holds the latest row of each key). URL is the SQLAlchemy URL of the database. The
source reads the JSON files of INPUT (:data:`SCHEMA`), ``maxFilesPerTrigger=FILES_PER_TRIGGER``,
with the available-now trigger.

The testkit's crash hook is armed (``MICROBATCH_CRASH_AT``). ``AT`` moves the ``mid_sink``
crash point into the database client (psycopg): ``mid-copy`` at the first chunk a ``COPY``
of the batch sends (the batch's rows half-streamed into the open transaction),
``before-commit`` just after the ledger row of the batch was inserted (rows and ledger row in
the open transaction, not committed). Without ``AT``, ``mid_sink`` is the testkit's default.

The torture run's JDBC pipelines (``integration/torture``) start their queries and read their
tables with the functions here too.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import microbatch as mb
from microbatch_testkit import crash

SCHEMA = "id BIGINT, key BIGINT, value STRING, amount DOUBLE"
MODES = ("append", "upsert")
CLIENT_POINTS = ("mid-copy", "before-commit")
LEDGER = "microbatch_ledger"


def kill_inside_client(at: str) -> None:
    """Make psycopg call ``crash_point("mid_sink", batch)`` where ``at`` says."""
    import psycopg

    if at not in CLIENT_POINTS:
        raise ValueError(f"unknown crash point {at!r}; use one of {CLIENT_POINTS}")
    if at == "mid-copy":
        base_write = psycopg.Copy.write

        def write(self: Any, buffer: Any) -> None:
            base_write(self, buffer)
            crash.crash_point("mid_sink", crash.running_batch())

        psycopg.Copy.write = write  # type: ignore[method-assign]
    else:
        base_execute = psycopg.Cursor.execute

        def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            result = base_execute(self, query, *args, **kwargs)
            text = query if isinstance(query, str) else str(query)
            if text.lstrip().upper().startswith("INSERT INTO") and LEDGER in text:
                crash.crash_point("mid_sink", crash.running_batch())
            return result

        psycopg.Cursor.execute = execute  # type: ignore[method-assign]


def start_query(
    session: mb.Session,
    mode: str,
    url: str,
    source: str,
    table: str,
    checkpoint: str,
    files_per_trigger: int,
    *,
    drain: bool = True,
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
        .write_stream.format("jdbc")
        .option("url", url)
        .option("dbtable", table)
        .option("checkpointLocation", checkpoint)
    )
    if mode == "upsert":
        writer = writer.option("mode", "upsert").option("keys", "key")
    if drain:
        writer = writer.trigger(available_now=True)
    return writer.start()


def query_id(checkpoint: str | Path) -> str:
    """The query id a checkpoint records (the key of the query's ledger rows)."""
    return str(json.loads((Path(checkpoint) / "metadata").read_text())["id"])


def committed_batches(checkpoint: str | Path) -> list[int]:
    """The batch ids in the checkpoint's commit log."""
    folder = Path(checkpoint) / "commits"
    if not folder.is_dir():
        return []
    return sorted(int(path.name) for path in folder.iterdir() if path.name.isdigit())


def _dsn(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _exists(connection: Any, table: str) -> bool:
    from psycopg.rows import tuple_row

    with connection.cursor(row_factory=tuple_row) as cursor:
        row = cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (f'"{table}"',)).fetchone()
    return bool(row[0])


def read_table(url: str, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` (read with psycopg, no SQLAlchemy), sorted by id; [] when the
    table does not exist yet."""
    import psycopg
    from psycopg import sql
    from psycopg.rows import dict_row

    with psycopg.connect(_dsn(url), row_factory=dict_row) as connection:
        if not _exists(connection, table):
            return []
        query = sql.SQL("SELECT id, key, value, amount FROM {} ORDER BY id")
        return list(connection.execute(query.format(sql.Identifier(table))).fetchall())


def ledger_batches(url: str, key: str) -> list[int]:
    """The batch ids the ledger holds for the query ``key``, in order, repeats kept."""
    import psycopg

    with psycopg.connect(_dsn(url)) as connection:
        if not _exists(connection, LEDGER):
            return []
        found = connection.execute(
            f"SELECT batch_id FROM {LEDGER} WHERE query_key = %s ORDER BY batch_id", (key,)
        ).fetchall()
    return [int(row[0]) for row in found]


def row_problems(found: list[dict[str, Any]], expected: list[dict[str, Any]]) -> list[str]:
    """What differs between the table's rows and the expected ones, compared by id: ids
    lost, ids doubled, ids that are no input row and rows whose values differ."""
    counts = Counter(row["id"] for row in found)
    wanted = {row["id"]: row for row in expected}
    problems = []
    lost = sorted(set(wanted) - set(counts))
    doubled = sorted(ident for ident, count in counts.items() if count > 1)
    extra = sorted(set(counts) - set(wanted))
    changed = [row for row in found if row["id"] in wanted and row != wanted[row["id"]]]
    if lost:
        problems.append(f"{len(lost)} rows lost, e.g. ids {lost[:5]}")
    if doubled:
        problems.append(f"{len(doubled)} rows written more than once, e.g. ids {doubled[:5]}")
    if extra:
        problems.append(f"{len(extra)} rows of no expected id, e.g. {extra[:5]}")
    if changed:
        problems.append(f"{len(changed)} rows with other values, e.g. {changed[:2]}")
    return problems


def main(
    mode: str,
    url: str,
    source: str,
    table: str,
    checkpoint: str,
    files_per_trigger: str,
    at: str = "",
) -> None:
    if at:
        kill_inside_client(at)
    session = mb.Session()
    crash.arm(session, mid_sink_in_script=bool(at))
    query = start_query(session, mode, url, source, table, checkpoint, int(files_per_trigger))
    crash.await_available_now(query)


if __name__ == "__main__":
    main(*sys.argv[1:])
