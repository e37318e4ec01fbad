"""Rows into PostgreSQL and back: the ``jdbc`` sink and source against plain ADBC and SQLAlchemy.

The server is started by the testkit (``microbatch_testkit.services.start_postgres``: the
local provider runs a throwaway cluster from the installed PostgreSQL binaries, with
``fsync=off``; ``MICROBATCH_POSTGRES_URL`` points it at a running server instead), so the
benchmark runs on a fresh machine. The data is ``--rows`` rows (1M by default) of ``id``
int8, ``value`` float8, ``name`` text and ``at`` timestamptz, built in memory in each child
before its clock starts, in chunks of ``--chunk`` rows (100k). Each measurement runs in a
fresh child process against a database of its own with the table created beforehand (the
same DDL for all), so that its peak memory (max RSS) is its own; the contenders take turns
(interleaved repeats, first contender alternating) and the medians are compared.

Each child imports the driver libraries it uses (``adbc_driver_postgresql``, SQLAlchemy,
psycopg, pgpq) before its clock starts, the plain loops and microbatch alike; microbatch's own
modules and its plugins load inside the clock (in ``Session()``).

Writes (rows/s from the first row written to the last commit; for microbatch from building
the session, ``start()`` included, which is also shown on its own with the rate without it):

- ``microbatch``: a streaming query serving one chunk per batch (the testkit's in-memory
  source) into the ``jdbc`` sink, available-now: exactly once, so each batch's rows and its
  ledger row are committed in one transaction, with a checkpoint;
- ``adbc``: a plain ``adbc_ingest`` loop (``adbc_driver_postgresql``), one chunk and one
  commit at a time;
- ``executemany``: a plain SQLAlchemy loop, ``connection.execute(insert(table), rows)`` and
  a commit per chunk (``--executemany-rows`` limits its share of the rows: it is slow).

Reads of the 1M-row table (rows/s of the whole read into one Arrow table):

- ``microbatch-read``: ``session.read.format("jdbc")`` with ``partitionColumn=id`` and
  ``numPartitions`` (``--partitions``, 4) ranges read in parallel (``id`` is indexed, as a
  partition column should be: without an index each range statement scans the whole table,
  which on this benchmark's 2-core machine made the partitioned read slower than one
  statement);
- ``microbatch-read-1``: the same without partitioning (one statement);
- ``adbc-read``: a plain ADBC ``cursor.execute(query)`` + ``fetch_arrow_table()``.

Usage::

    .venv/bin/python integration/bench/bench_jdbc.py [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WRITERS = ("microbatch", "adbc", "executemany")
READERS = ("microbatch-read", "microbatch-read-1", "adbc-read")
TABLE = "events"
DDL = f"CREATE TABLE {TABLE} (id bigint, value double precision, name text, at timestamptz)"
STARTED: list[float] = []


def chunks(rows: int, chunk: int) -> list[Any]:
    """The data: ``rows`` rows in record batches of ``chunk`` rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    batches = []
    for start in range(0, rows, chunk):
        ids = pa.array(range(start, min(start + chunk, rows)), pa.int64())
        micros = pc.add(pc.multiply(ids, 1000), 1_700_000_000_000_000)
        batches.append(
            pa.record_batch(
                {
                    "id": ids,
                    "value": pc.multiply(ids.cast(pa.float64()), 0.5),
                    "name": pc.binary_join_element_wise("event-", ids.cast(pa.string()), ""),
                    "at": micros.cast(pa.timestamp("us", tz="UTC")),
                }
            )
        )
    return batches


def _dsn(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


# -- the contenders, each run in a child process --------------------------------------------
def write_microbatch(url: str, batches: list[Any], checkpoint: Path) -> int:
    # the drivers the sink writes through, imported before the clock as the plain loops
    # import theirs (microbatch's own modules and plugins load inside it)
    import pgpq  # noqa: F401
    import psycopg  # noqa: F401
    import sqlalchemy  # noqa: F401

    import microbatch as mb
    from microbatch_testkit._engine import ROWS_FORMAT, RowsSource, ensure_registered

    STARTED.append(time.perf_counter())
    session = mb.Session()
    ensure_registered(session, "source", RowsSource)
    query = (
        session.read_stream.format(ROWS_FORMAT)
        .option("batches", [[[batch]] for batch in batches])
        .option("rowsSchema", batches[0].schema)
        .load()
        .write_stream.format("jdbc")
        .option("url", url)
        .option("dbtable", TABLE)
        .option("checkpointLocation", str(checkpoint))
        .trigger(available_now=True)
        .start()
    )
    STARTED.append(time.perf_counter())
    query.await_termination()
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]
    return sum(p["numInputRows"] for p in query.recent_progress)


def write_adbc(url: str, batches: list[Any]) -> int:
    import adbc_driver_postgresql.dbapi as adbc

    STARTED.append(time.perf_counter())
    rows = 0
    with adbc.connect(_dsn(url)) as connection:
        for batch in batches:
            with connection.cursor() as cursor:
                cursor.adbc_ingest(TABLE, batch, mode="append")
            connection.commit()
            rows += batch.num_rows
    return rows


def write_executemany(url: str, batches: list[Any]) -> int:
    import sqlalchemy as sa

    STARTED.append(time.perf_counter())
    engine = sa.create_engine(url)
    table = sa.Table(TABLE, sa.MetaData(), autoload_with=engine)
    rows = 0
    with engine.connect() as connection:
        for batch in batches:
            connection.execute(sa.insert(table), batch.to_pylist())
            connection.commit()
            rows += batch.num_rows
    engine.dispose()
    return rows


def read_microbatch(url: str, rows: int, partitions: int) -> int:
    # the drivers the source reads through, imported before the clock as in read_adbc
    import adbc_driver_postgresql.dbapi  # noqa: F401
    import sqlalchemy  # noqa: F401

    import microbatch as mb

    STARTED.append(time.perf_counter())
    reader = mb.Session().read.format("jdbc").option("url", url).option("dbtable", TABLE)
    if partitions > 1:
        reader = (
            reader.option("partitionColumn", "id")
            .option("lowerBound", 0)
            .option("upperBound", rows)
            .option("numPartitions", partitions)
        )
    return int(reader.load().num_rows)


def read_adbc(url: str) -> int:
    import adbc_driver_postgresql.dbapi as adbc

    STARTED.append(time.perf_counter())
    with adbc.connect(_dsn(url)) as connection, connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {TABLE}")
        return int(cursor.fetch_arrow_table().num_rows)


def count_rows(url: str) -> tuple[int, int]:
    """(rows in the table, rows in the ledger)."""
    import psycopg

    with psycopg.connect(_dsn(url)) as connection:
        found = connection.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
        ledger = connection.execute(
            "SELECT count(*) FROM pg_tables WHERE tablename = 'microbatch_ledger'"
        ).fetchone()
        applied = (0,)
        if ledger and ledger[0]:
            applied = connection.execute("SELECT count(*) FROM microbatch_ledger").fetchone()
    return int(found[0]), int(applied[0])  # type: ignore[index]


def child(kind: str, url: str, rows: int, chunk: int, extra: str) -> None:
    if kind in WRITERS:
        batches = chunks(rows, chunk)
        if kind == "microbatch":
            done = write_microbatch(url, batches, Path(extra))
        elif kind == "adbc":
            done = write_adbc(url, batches)
        else:
            done = write_executemany(url, batches)
    elif kind == "adbc-read":
        done = read_adbc(url)
    else:
        done = read_microbatch(url, rows, int(extra) if kind == "microbatch-read" else 1)
    elapsed = time.perf_counter() - STARTED[0]
    startup = STARTED[1] - STARTED[0] if len(STARTED) > 1 else 0.0
    if kind in WRITERS:
        found, applied = count_rows(url)
        expected_ledger = len(batches) if kind == "microbatch" else 0
        if (found, applied) != (rows, expected_ledger) or done != rows:
            raise SystemExit(
                f"{kind}: wrote {done} rows; the table holds {found} of {rows}, the ledger "
                f"{applied} batches (expected {expected_ledger})"
            )
    elif done != rows:
        raise SystemExit(f"{kind}: read {done} rows of {rows}")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rows": done, "seconds": elapsed, "startup": startup, "peak_mib": peak_mib}))


# -- the parent: server, databases, turns ---------------------------------------------------
def child_env(folder: Path) -> dict[str, str]:
    """Compiled modules cached under ``folder`` (no recompilation in each child)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    return env


def run_child(kind: str, url: str, rows: int, chunk: int, extra: str, folder: Path) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--child", kind, url, str(rows), str(chunk), extra],
        capture_output=True,
        text=True,
        env=child_env(folder),
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{result.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def measure_write(service: Any, kind: str, rows: int, chunk: int, folder: Path) -> dict:
    import psycopg

    database = service.create_database(hint=f"bench_{kind}")
    try:
        with psycopg.connect(database.dsn, autocommit=True) as connection:
            connection.execute(DDL)
        checkpoint = folder / f"cp-{database.name}"
        return run_child(kind, database.url, rows, chunk, str(checkpoint), folder)
    finally:
        service.drop_database(database.name)


def rate(figures: dict[str, float]) -> float:
    return figures["rows"] / figures["seconds"]


def report(results: dict[str, list[dict]], rows: dict[str, int]) -> dict[str, float]:
    medians = {}
    for kind, runs in results.items():
        medians[kind] = statistics.median(rate(r) for r in runs)
        seconds = statistics.median(r["seconds"] for r in runs)
        peak = statistics.median(r["peak_mib"] for r in runs)
        print(
            f"  {kind:<18} {rows[kind]:>9,} rows  {medians[kind]:>12,.0f} rows/s (median; "
            f"{seconds:6.2f} s)  best {max(map(rate, runs)):>12,.0f}  peak RSS {peak:5.0f} MiB"
        )
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=100_000, help="rows per batch (100000)")
    parser.add_argument("--executemany-rows", type=int, default=None, help="(default: --rows)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--dir", default=str(Path(__file__).resolve().parents[2] / ".bench-work"))
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, url, rows, chunk, extra = args.child
        child(kind, url, int(rows), int(chunk), extra)
        return
    from microbatch_testkit.services import start_postgres

    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    service = start_postgres()
    print(f"PostgreSQL: {service.description}")
    try:
        rows = {kind: args.rows for kind in WRITERS + READERS}
        rows["executemany"] = args.executemany_rows or args.rows
        for kind in WRITERS:  # warm-up, not counted: compiled modules, server caches
            measure_write(service, kind, min(rows[kind], 2 * args.chunk), args.chunk, folder)
        writes: dict[str, list[dict]] = {kind: [] for kind in WRITERS}
        for round_ in range(args.repeat):
            for kind in WRITERS if round_ % 2 == 0 else WRITERS[::-1]:
                writes[kind].append(measure_write(service, kind, rows[kind], args.chunk, folder))
        print(
            f"{args.rows:,} rows (int8, float8, text, timestamptz) into PostgreSQL in batches of "
            f"{args.chunk:,}, {args.repeat} interleaved runs each:"
        )
        medians = report(writes, rows)
        runs = writes["microbatch"]
        startup = statistics.median(r["startup"] for r in runs)
        steady = statistics.median(r["rows"] / (r["seconds"] - r["startup"]) for r in runs)
        print(
            f"  microbatch startup (session, start()) {startup:.2f} s; rows/s after it "
            f"{steady:,.0f}\n"
            f"  microbatch / adbc: {medians['microbatch'] / medians['adbc']:.0%} "
            f"({steady / medians['adbc']:.0%} after start); microbatch / executemany: "
            f"{medians['microbatch'] / medians['executemany']:.1f}x"
        )

        database = service.create_database(hint="bench_read")
        try:
            import psycopg

            with psycopg.connect(database.dsn, autocommit=True) as connection:
                connection.execute(DDL)
            run_child("adbc", database.url, args.rows, args.chunk, "", folder)
            with psycopg.connect(database.dsn, autocommit=True) as connection:
                # the partition column indexed, as a partitioned read expects: without it each
                # of the range statements scans the whole table
                connection.execute(f"CREATE INDEX {TABLE}_id ON {TABLE} (id)")
                connection.execute(f"VACUUM ANALYZE {TABLE}")
            extra = str(args.partitions)
            for kind in READERS:  # warm-up
                run_child(kind, database.url, args.rows, args.chunk, extra, folder)
            reads: dict[str, list[dict]] = {kind: [] for kind in READERS}
            for round_ in range(args.repeat):
                for kind in READERS if round_ % 2 == 0 else READERS[::-1]:
                    figures = run_child(kind, database.url, args.rows, args.chunk, extra, folder)
                    reads[kind].append(figures)
        finally:
            service.drop_database(database.name)
        print(
            f"reading the {args.rows:,}-row table into Arrow ({args.partitions} partitions for "
            f"microbatch-read), {args.repeat} interleaved runs each:"
        )
        medians = report(reads, rows)
        plain = medians["adbc-read"]
        print(
            f"  microbatch-read / adbc-read: {medians['microbatch-read'] / plain:.0%}; "
            f"microbatch-read-1 / adbc-read: {medians['microbatch-read-1'] / plain:.0%}"
        )
    finally:
        service.close()


if __name__ == "__main__":
    main()
