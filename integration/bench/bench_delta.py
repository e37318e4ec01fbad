"""JSON event files to a Delta table: microbatch against a plain ``write_deltalake`` loop.

The data comes from the shared generator (``gen_events.py``: 200 files x 10,000 rows of sensor
events by default), the files and helpers of ``bench_files_to_parquet.py``. Each measurement
runs in a fresh child process, so that its peak memory (max RSS) is its own, and the
contenders take turns (interleaved repeats), so that both see the same machine state:

- ``plain``: for each file, ``pyarrow.json.read_json`` then ``deltalake.write_deltalake``
  (mode append: one Delta commit per file), the loop a user writes by hand;
- ``plain-batched``: the same, ``--files-per-trigger`` files read and concatenated per
  ``write_deltalake`` call (as many commits as microbatch makes, one data file per commit), a
  stricter reference;
- ``microbatch``: the json file source with ``maxFilesPerTrigger`` (the same number of files
  per batch) and the available-now trigger into the ``delta`` sink (exactly once: checkpoint,
  one commit per batch with the query's transaction; the parts of a batch are written in
  parallel, one data file each).

Both read a file the same way: ``read_json`` of one ~1 MB file is one 1 MiB block, which
pyarrow parses on one thread whether ``use_threads`` is on (the plain loop) or off (the file
source turns threads on only above 2 MiB); the file source also checks that the text is UTF-8
and that every line is an object before it hands it to ``read_json``.

Each child imports its libraries before its clock starts; ``rows/s`` counts from there to the
end of the last commit. For microbatch that includes building the session and ``start()``
(plugin discovery, checkpoint, reading the table), which is also shown on its own
(``startup``), with the rate without it (``rows/s after start``). ``peak RSS`` is the
process's; ``arrow peak`` is the most the Arrow memory pool held at once (the data in
flight): the rest of the RSS is the libraries and the allocator's retained pages (mimalloc,
Arrow's default, keeps freed pages of each thread; ``ARROW_DEFAULT_MEMORY_POOL=system`` shows
the difference).

``--partition-by status`` partitions every table (as the demo's).

Then microbatch runs over a backlog ``--backlog-factor`` times larger (the same files linked
under other names) to show that peak memory stays flat as the backlog grows. Usage::

    .venv/bin/python integration/bench/bench_delta.py [--files 200] [--rows 10000] [--repeat 3]

``GEN_EVENTS`` names the generator (default ``../shared/bench/gen_events.py`` next to the repo).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_files_to_parquet import ROOT, SCHEMA, enlarge, generate

KINDS = ("plain", "plain-batched", "microbatch")
STARTED: list[float] = []  # perf_counter after the imports (and, for microbatch, after start())


# -- the contenders, each run in a child process --------------------------------------------
def run_plain(data: Path, out: Path, per_write: int, partition_by: list[str]) -> int:
    import pyarrow as pa
    import pyarrow.json as pajson
    from deltalake import write_deltalake

    STARTED.append(time.perf_counter())
    options = pajson.ParseOptions(explicit_schema=SCHEMA)
    paths = sorted(data.glob("*.json"))
    rows = 0
    for start in range(0, len(paths), per_write):
        tables = [
            pajson.read_json(p, parse_options=options) for p in paths[start : start + per_write]
        ]
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        write_deltalake(str(out / "table"), table, mode="append", partition_by=partition_by or None)
        rows += table.num_rows
    return rows


def run_microbatch(data: Path, out: Path, per_trigger: int, partition_by: list[str]) -> int:
    import microbatch as mb

    STARTED.append(time.perf_counter())
    session = mb.Session()
    query = (
        session.read_stream.format("json")
        .schema(SCHEMA)
        .option("maxFilesPerTrigger", per_trigger)
        .load(str(data))
        .write_stream.format("delta")
        .partition_by(*partition_by)
        .option("checkpointLocation", str(out / "_checkpoint"))
        .trigger(available_now=True)
        .start(str(out / "table"))
    )
    STARTED.append(time.perf_counter())
    query.await_termination()
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]
    return sum(p["numInputRows"] for p in query.recent_progress)


def child(kind: str, data: Path, out: Path, per_trigger: int, partition_by: list[str]) -> None:
    if kind == "microbatch":
        rows = run_microbatch(data, out, per_trigger, partition_by)
    else:
        rows = run_plain(data, out, 1 if kind == "plain" else per_trigger, partition_by)
    ended = time.perf_counter()
    elapsed = ended - STARTED[0]
    startup = STARTED[1] - STARTED[0] if len(STARTED) > 1 else 0.0
    import pyarrow as pa
    from deltalake import DeltaTable

    table = DeltaTable(str(out / "table"))
    if table.count() != rows:
        raise SystemExit(f"{kind}: {rows} rows read, {table.count()} in the table")
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    arrow_mib = pa.default_memory_pool().max_memory() / (1 << 20)
    files = len(table.file_uris())
    print(
        json.dumps(
            {
                "rows": rows,
                "seconds": elapsed,
                "startup": startup,
                "peak_mib": peak_mib,
                "arrow_mib": arrow_mib,
                "commits": table.version() + 1,
                "files": files,
            }
        )
    )


def child_env(folder: Path) -> dict[str, str]:
    """The children's environment: compiled modules cached under ``folder`` (an environment
    with ``PYTHONDONTWRITEBYTECODE`` would otherwise compile microbatch's sources in every
    run, ~0.4 s that the plain loop, on installed wheels, does not pay)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    return env


def measure(
    kind: str, data: Path, folder: Path, per_trigger: int, partition_by: list[str]
) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(dir=folder))
    columns = ",".join(partition_by)
    try:
        result = subprocess.run(
            [sys.executable, __file__, "--child", kind, str(data), str(out), str(per_trigger)]
            + (["--partition-by", columns] if columns else []),
            check=True,
            capture_output=True,
            text=True,
            env=child_env(folder),
        )
    finally:
        shutil.rmtree(out, ignore_errors=True)
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def rate(figures: dict[str, float]) -> float:
    return figures["rows"] / figures["seconds"]


def steady_rate(figures: dict[str, float]) -> float:
    return figures["rows"] / (figures["seconds"] - figures.get("startup", 0.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--files-per-trigger", type=int, default=20)
    parser.add_argument("--backlog-factor", type=int, default=5)
    parser.add_argument("--dir", default=str(ROOT / ".bench-work"))
    parser.add_argument(
        "--partition-by", default="", help="comma-separated partition columns (e.g. status)"
    )
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    partition_by = [name for name in args.partition_by.split(",") if name]
    if args.child:
        kind, data, out, per_trigger = args.child
        child(kind, Path(data), Path(out), int(per_trigger), partition_by)
        return
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    data = generate(folder, args.files, args.rows)
    per = args.files_per_trigger

    for kind in KINDS:  # warm-up, not counted: compiled modules and the files' pages cached
        measure(kind, data, folder, per, partition_by)
    results: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    for round_ in range(args.repeat):  # interleaved, first contender alternating
        order = KINDS if round_ % 2 == 0 else KINDS[::-1]
        for kind in order:
            results[kind].append(measure(kind, data, folder, per, partition_by))
    partitioned = f", partitioned by {args.partition_by}" if partition_by else ""
    print(
        f"{args.files} files x {args.rows:,} rows to Delta{partitioned}, {per} files per trigger, "
        f"{args.repeat} interleaved runs each (median, best):"
    )
    medians = {}
    for kind, runs in results.items():
        medians[kind] = statistics.median(rate(r) for r in runs)
        best = max(runs, key=rate)
        print(
            f"  {kind:<14} {medians[kind]:>12,.0f} rows/s  best {rate(best):>12,.0f}  "
            f"peak RSS {statistics.median(r['peak_mib'] for r in runs):4.0f} MiB (max "
            f"{max(r['peak_mib'] for r in runs):4.0f})  arrow peak "
            f"{statistics.median(r['arrow_mib'] for r in runs):4.0f} MiB  "
            f"commits {int(best['commits'])}  files {int(best['files'])}"
        )
    mb_runs = results["microbatch"]
    steady = statistics.median(steady_rate(r) for r in mb_runs)
    startup = statistics.median(r["startup"] for r in mb_runs)
    print(f"  microbatch startup (session, start()) {startup:.2f} s; rows/s after it {steady:,.0f}")
    for reference in ("plain", "plain-batched"):
        ratio = medians["microbatch"] / medians[reference]
        print(
            f"  microbatch / {reference}: {ratio:.0%} (median rows/s), "
            f"{steady / medians[reference]:.0%} after start"
        )

    large = enlarge(data, folder, args.backlog_factor)
    big = measure("microbatch", large, folder, per, partition_by)
    small_peak = max(r["peak_mib"] for r in results["microbatch"])
    print(
        f"backlog of {args.files * args.backlog_factor} files: microbatch peak RSS "
        f"{big['peak_mib']:.0f} MiB (vs {small_peak:.0f} MiB for {args.files} files), "
        f"arrow peak {big['arrow_mib']:.0f} MiB, {rate(big):,.0f} rows/s"
    )


if __name__ == "__main__":
    main()
