"""JSON event files to parquet: microbatch against a plain pyarrow loop, in the same run.

The data comes from the shared generator (``gen_events.py``: 200 files x 10,000 rows of sensor
events by default). Each measurement runs in a fresh child process, so that its peak memory
(max RSS) is its own:

- ``plain``: for each file, ``pyarrow.json.read_json`` then ``pyarrow.parquet.write_table``;
- ``microbatch``: the json file source with ``maxFilesPerTrigger`` 20 and the available-now
  trigger into the parquet file sink (with its checkpoint and manifest).

Then the microbatch run is repeated over a backlog ten times larger (the same files copied under
other names) to show that peak memory stays flat. Usage::

    .venv/bin/python integration/bench/bench_files_to_parquet.py [--files 200] [--rows 10000]

``GEN_EVENTS`` names the generator (default ``../shared/bench/gen_events.py`` next to the repo).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = Path(os.environ.get("GEN_EVENTS", ROOT.parent / "shared" / "bench" / "gen_events.py"))
SCHEMA = pa.schema(
    [
        ("device_id", pa.string()),
        ("temperature", pa.float64()),
        ("status", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)


def generate(folder: Path, files: int, rows: int) -> Path:
    """The shared dataset, generated once per size and reused."""
    data = folder / f"events-{files}x{rows}"
    if not (data / f"part-{files - 1:05d}.json").exists():
        subprocess.run(
            [sys.executable, str(GENERATOR), str(data), "--files", str(files), "--rows", str(rows)],
            check=True,
        )
    return data


def enlarge(source: Path, folder: Path, copies: int) -> Path:
    """A backlog of ``copies`` times the dataset (hard links under new names)."""
    target = folder / f"{source.name}-x{copies}"
    if not target.exists():
        partial = Path(tempfile.mkdtemp(dir=folder))
        for copy in range(copies):
            for path in sorted(source.glob("*.json")):
                link = partial / f"c{copy:02d}-{path.name}"
                try:
                    os.link(path, link)
                except OSError:
                    shutil.copyfile(path, link)
        partial.rename(target)
    return target


# -- the two contenders, each run in a child process ----------------------------------------
def run_plain(data: Path, out: Path) -> int:
    import pyarrow.json as pajson
    import pyarrow.parquet as pq

    options = pajson.ParseOptions(explicit_schema=SCHEMA)
    rows = 0
    for index, path in enumerate(sorted(data.glob("*.json"))):
        table = pajson.read_json(path, parse_options=options)
        pq.write_table(table, out / f"part-{index:05d}.parquet")
        rows += table.num_rows
    return rows


def run_microbatch(data: Path, out: Path) -> int:
    import microbatch as mb

    session = mb.Session()
    query = (
        session.read_stream.format("json")
        .schema(SCHEMA)
        .option("maxFilesPerTrigger", 20)
        .load(str(data))
        .write_stream.format("parquet")
        .option("checkpointLocation", str(out / "_checkpoint"))
        .trigger(available_now=True)
        .start(str(out / "table"))
    )
    query.await_termination()
    return sum(p["numInputRows"] for p in query.recent_progress)


def child(kind: str, data: Path, out: Path) -> None:
    began = time.perf_counter()
    rows = (run_plain if kind == "plain" else run_microbatch)(data, out)
    elapsed = time.perf_counter() - began
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rows": rows, "seconds": elapsed, "peak_mib": peak_mib}))


def measure(kind: str, data: Path, folder: Path) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(dir=folder))
    try:
        result = subprocess.run(
            [sys.executable, __file__, "--child", kind, str(data), str(out)],
            check=True,
            capture_output=True,
            text=True,
        )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backlog-factor", type=int, default=10)
    parser.add_argument("--dir", default=str(ROOT / ".bench-work"))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, data, out = args.child
        child(kind, Path(data), Path(out))
        return
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    data = generate(folder, args.files, args.rows)

    results: dict[str, list[dict[str, float]]] = {"plain": [], "microbatch": []}
    for _ in range(args.repeat):  # interleaved, so that both see the same machine state
        for kind in results:
            results[kind].append(measure(kind, data, folder))
    best = {
        kind: max(runs, key=lambda r: r["rows"] / r["seconds"]) for kind, runs in results.items()
    }
    print(f"{args.files} files x {args.rows:,} rows, best of {args.repeat}:")
    for kind, figures in best.items():
        rate = figures["rows"] / figures["seconds"]
        print(f"  {kind:<11} {rate:>12,.0f} rows/s  peak RSS {figures['peak_mib']:7.0f} MiB")
    ratio = (best["microbatch"]["rows"] / best["microbatch"]["seconds"]) / (
        best["plain"]["rows"] / best["plain"]["seconds"]
    )
    print(f"  microbatch / plain: {ratio:.0%}")

    large = enlarge(data, folder, args.backlog_factor)
    big = measure("microbatch", large, folder)
    files = args.files * args.backlog_factor
    print(
        f"backlog of {files} files: microbatch peak RSS {big['peak_mib']:.0f} MiB "
        f"(vs {best['microbatch']['peak_mib']:.0f} MiB for {args.files} files), "
        f"{big['rows'] / big['seconds']:,.0f} rows/s"
    )


if __name__ == "__main__":
    main()
