"""Per-batch engine overhead: rate-micro-batch into a no-op foreach_batch.

Runs, in one process and one run:
- a baseline loop that does the same work without the engine (the source's stream reader plans
  each batch, its split reader reads the splits, the function receives the table), and
- the real query (checkpoint on local disk: an offset and a commit entry per batch).

The difference per batch is the engine's overhead (checkpoint writes, planning, progress).
Then large batches give rows per second. Usage:

    .venv/bin/python integration/bench/bench_engine_overhead.py [--batches 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from typing import Any

import pyarrow as pa

import microbatch as mb

WORK_DIR = "."


def baseline(session: mb.Session, rows: int, batches: int) -> float:
    """Seconds per batch of the same work without the engine."""
    frame = session.read_stream.format("rate-micro-batch").option("rowsPerBatch", rows).load()
    spec = frame.source_spec
    reader = spec.stream_reader(streaming=True)
    sink_calls = 0

    def function(table: pa.Table, batch_id: int) -> None:
        nonlocal sink_calls
        sink_calls += 1

    start = reader.initial_offset()
    limit = reader.default_read_limit()
    began = time.perf_counter()
    for batch_id in range(batches):
        end = reader.latest_offset(start, limit)
        split_reader = reader.split_reader()
        tables = [
            pa.Table.from_batches(list(split_reader.read(split)), schema=spec.schema)
            for split in reader.partitions(start, end)
        ]
        function(pa.concat_tables(tables), batch_id)
        start = end
    elapsed = time.perf_counter() - began
    reader.stop()
    assert sink_calls == batches
    return elapsed / batches


def engine(session: mb.Session, rows: int, batches: int) -> tuple[float, list[Any]]:
    """Seconds per batch through a real query, and its progress records."""
    done = threading.Event()
    seen = 0

    def function(table: pa.Table, batch_id: int) -> None:
        nonlocal seen
        seen += 1
        if seen >= batches:
            done.set()

    with tempfile.TemporaryDirectory(dir=WORK_DIR) as checkpoint:
        frame = session.read_stream.format("rate-micro-batch").option("rowsPerBatch", rows).load()
        began = time.perf_counter()
        query = (
            frame.write_stream.foreach_batch(function)
            .option("checkpointLocation", checkpoint)
            .start()
        )
        done.wait()
        query.stop()
        elapsed = time.perf_counter() - began
        progress = query.recent_progress
    return elapsed / seen, progress


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--big-rows", type=int, default=1_000_000)
    parser.add_argument("--big-batches", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--dir", default=".bench-work", help="where checkpoints go (a local disk folder)"
    )
    args = parser.parse_args()
    global WORK_DIR
    WORK_DIR = args.dir
    os.makedirs(WORK_DIR, exist_ok=True)
    session = mb.Session(conf={"noDataProgressEventInterval": "1 hour"})

    base = min(baseline(session, 1, args.batches) for _ in range(args.repeat))
    runs = [engine(session, 1, args.batches)[0] for _ in range(args.repeat)]
    best = min(runs)
    print(f"small batches (1 row, {args.batches} batches, best of {args.repeat}):")
    print(f"  baseline loop          {base * 1e6:9.1f} us/batch")
    print(
        f"  engine                 {best * 1e6:9.1f} us/batch"
        f"  (median {statistics.median(runs) * 1e6:.1f})"
    )
    print(f"  engine overhead        {(best - base) * 1e6:9.1f} us/batch")

    rows = args.big_rows
    big_base = min(baseline(session, rows, args.big_batches) for _ in range(args.repeat))
    big_engine, progress = min(
        (engine(session, rows, args.big_batches) for _ in range(args.repeat)), key=lambda r: r[0]
    )
    print(f"large batches ({rows:,} rows, {args.big_batches} batches):")
    print(f"  baseline loop          {rows / big_base:12,.0f} rows/s")
    print(
        f"  engine                 {rows / big_engine:12,.0f} rows/s"
        f"  ({big_base / big_engine:.0%} of baseline)"
    )
    walls = [p["durationMs"].get("walCommit", 0) for p in progress if p["numInputRows"]]
    wal = statistics.median(walls) if walls else 0
    print(f"  median walCommit in progress records: {wal} ms")


if __name__ == "__main__":
    main()
