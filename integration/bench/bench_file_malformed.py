"""What malformed lines cost the JSON and CSV file sources: clean files against the same files
with 1% of their lines malformed, in the same run.

The data comes from the shared generator (``gen_events.py``: 20 files x 10,000 rows of sensor
events by default), as JSON Lines and as CSV (strings quoted). The malformed copies replace
1% of the lines, at seeded random places, half with a value of the wrong type (kept in
``_corrupt_record`` with the good fields, as Spark does) and half with text that is not a
record at all (cut short). Each measurement runs the file source with the available-now trigger
into the parquet file sink, as ``bench_files_to_parquet.py`` does (``--sink noop`` to leave the
writing out), PERMISSIVE mode with the corrupt-record column, in a fresh child process; the
best of ``--repeat`` runs is kept. Usage::

    .venv/bin/python integration/bench/bench_file_malformed.py [--files 20] [--rows 10000] \\
        [--sink parquet|noop]

``GEN_EVENTS`` names the generator (default ``../shared/bench/gen_events.py`` next to the repo).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from bench_files_to_parquet import ROOT, generate
from bench_files_to_parquet import SCHEMA as EVENTS

SCHEMA = EVENTS.append(pa.field("_corrupt_record", pa.string()))
SHARE = 0.01


def _csv_line(line: bytes) -> bytes:
    record = json.loads(line)
    return b'"%s",%r,"%s","%s"' % (
        record["device_id"].encode(),
        record["temperature"],
        record["status"].encode(),
        record["ts"].encode(),
    )


def _spoil_json(line: bytes, rng: random.Random) -> bytes:
    if rng.random() < 0.5:
        return line.replace(b'"temperature": ', b'"temperature": "hot", "was": ')
    return line[: len(line) // 2]


def _spoil_csv(line: bytes, rng: random.Random) -> bytes:
    fields = line.split(b",")
    if rng.random() < 0.5:
        fields[1] = b"hot"
        return b",".join(fields)
    return b",".join(fields[:2])


def variants(source: Path, folder: Path) -> dict[str, Path]:
    """The four inputs, written once: JSON and CSV, clean and with 1% malformed lines."""
    made = {}
    for fmt in ("json", "csv"):
        for kind in ("clean", "malformed"):
            target = folder / f"{source.name}-{fmt}-{kind}"
            made[f"{fmt} {kind}"] = target
            if target.exists():
                continue
            partial = folder / f"{target.name}.partial"
            partial.mkdir(exist_ok=True)
            rng = random.Random(7)
            for path in sorted(source.glob("*.json")):
                lines = path.read_bytes().splitlines()
                if fmt == "csv":
                    lines = [_csv_line(line) for line in lines]
                if kind == "malformed":
                    spoil = _spoil_json if fmt == "json" else _spoil_csv
                    for index in rng.sample(range(len(lines)), int(len(lines) * SHARE)):
                        lines[index] = spoil(lines[index], rng)
                (partial / f"{path.stem}.{fmt}").write_bytes(b"\n".join(lines) + b"\n")
            partial.rename(target)
    return made


def run(fmt: str, sink: str, data: Path, work: Path) -> dict[str, float]:
    import microbatch as mb

    session = mb.Session()
    began = time.perf_counter()
    query = (
        session.read_stream.format(fmt)
        .schema(SCHEMA)
        .option("maxFilesPerTrigger", 10)
        .load(str(data))
        .write_stream.format(sink)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(available_now=True)
        .start(*([str(work / "table")] if sink == "parquet" else []))
    )
    query.await_termination()
    seconds = time.perf_counter() - began
    return {"rows": sum(p["numInputRows"] for p in query.recent_progress), "seconds": seconds}


def measure(fmt: str, sink: str, data: Path, folder: Path) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(dir=folder))
    try:
        result = subprocess.run(
            [sys.executable, __file__, "--child", fmt, sink, str(data), str(work)],
            check=True,
            capture_output=True,
            text=True,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sink", choices=["parquet", "noop"], default="parquet")
    parser.add_argument("--dir", default=str(ROOT / ".bench-work"))
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        fmt, sink, data, work = args.child
        print(json.dumps(run(fmt, sink, Path(data), Path(work))))
        return
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    inputs = variants(generate(folder, args.files, args.rows), folder)
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.repeat):  # interleaved, so that all see the same machine state
        for name, data in inputs.items():
            figures = measure(name.split()[0], args.sink, data, folder)
            if name not in best or figures["seconds"] < best[name]["seconds"]:
                best[name] = figures
    print(
        f"{args.files} files x {args.rows:,} rows to {args.sink}, {SHARE:.0%} malformed, "
        f"best of {args.repeat}:"
    )
    for name, figures in best.items():
        rate = figures["rows"] / figures["seconds"]
        print(f"  {name:<15} {rate:>12,.0f} rows/s  {figures['seconds']:7.3f} s")
    for fmt in ("json", "csv"):
        cost = best[f"{fmt} malformed"]["seconds"] / best[f"{fmt} clean"]["seconds"]
        print(f"  {fmt} malformed / clean time: {cost:.2f}x")


if __name__ == "__main__":
    main()
