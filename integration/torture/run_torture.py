"""Torture run: kill real pipelines with SIGKILL at random while new files keep arriving.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python integration/torture/run_torture.py --kills 50 --seed 7
    .venv/bin/python integration/torture/run_torture.py --quick
    .venv/bin/python integration/torture/run_torture.py --kills 50 --in-place
    .venv/bin/python integration/torture/run_torture.py --pipelines kafka --kills 30
    .venv/bin/python integration/torture/run_torture.py --pipelines delta --kills 30
    .venv/bin/python integration/torture/run_torture.py --pipelines jdbc --kills 30

Pipelines (``--pipelines``, comma-separated, or the groups ``files`` (the default: the first
three), ``kafka`` (the next three), ``delta`` (the next two), ``jdbc`` (the last two) and
``all``):

- ``parquet``: JSON files -> parquet file sink partitioned by ``kind``;
- ``archive``: the same with ``cleanSource=archive`` (every input file archived exactly once);
- ``chained``: a streaming query over ``parquet``'s sink folder (read through its manifest)
  into another parquet sink, run and killed while the ``parquet`` query writes (it implies
  ``parquet``, which then keeps running until ``chained`` is done);
- ``kafka-parquet``, ``kafka-kafka-eos``, ``kafka-kafka-alo`` (``--pipelines kafka`` selects
  the three): a 3-partition Kafka topic, written while the pipeline runs (some chunks in
  transactions, some of those aborted), -> the parquet sink, -> a Kafka topic with
  ``exactlyOnce=true``, -> a Kafka topic at-least-once (``kafka_pipeline.py``). They need a
  broker: the testkit's service selection (``MICROBATCH_SERVICES``, ``MICROBATCH_KAFKA_BOOTSTRAP``)
  finds or starts one;
- ``delta-append``, ``delta-merge`` (``--pipelines delta``): JSON files -> the ``delta`` sink,
  appended, or upserted with ``mode=merge`` (the table must end with the latest row of each
  key); every Delta commit must carry one transaction of the query, no batch id twice
  (``torture_delta.py``). While ``delta-append`` is killed, its table is read again and again
  with delta-rs: every read must succeed and show no row twice.
- ``jdbc-append``, ``jdbc-upsert`` (``--pipelines jdbc``): JSON files -> the ``jdbc`` sink on
  PostgreSQL (the testkit's service selection), appended or upserted by ``key = id & 31``
  (``torture_jdbc.py``); the ledger must hold each committed batch once. While
  ``jdbc-append`` is killed, its table is read again and again with psycopg.

Each pipeline runs in a loop: new files arrive (between runs, and while it runs), the pipeline
starts in a child process (``pipeline.py``) and is killed with SIGKILL, either at a random
moment (during start-up, or after it started) or by the testkit's crash hook at a random batch
phase. After ``--kills`` kills, one last run with the available-now trigger takes what is left
and must exit 0. Then the sink is read through its manifest and compared with every row
written: lost, doubled and bad rows, and for ``archive`` the archive folder. Any run that ends
other than by the kill (an exit status, a traceback or an ERROR line in its log) is a failure;
its log is kept in ``<workdir>/logs``. Exit status 1 when anything was lost, doubled, bad or
failed (an at-least-once sink may double rows: they are counted, not a failure).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from torture_check import SinkReport, check_archive, check_sink, compare, orphan_files, read_rows
from torture_delta import (
    DELTA_PIPELINES,
    check_delta,
    commit_count,
    read_delta_rows,
    unlisted_files,
)
from torture_input import InputFolder
from torture_jdbc import JDBC_PIPELINES, check_jdbc, jdbc_url, ledger_count, read_jdbc_rows
from torture_kafka import (
    PARTITIONS,
    KafkaInput,
    check_parquet,
    check_topic,
    end_offsets,
    read_topic,
)

from microbatch_testkit import crash

FILE_PIPELINES = ("parquet", "archive", "chained")
KAFKA_PIPELINES = ("kafka-parquet", "kafka-kafka-eos", "kafka-kafka-alo")
PIPELINES = FILE_PIPELINES + KAFKA_PIPELINES + DELTA_PIPELINES + JDBC_PIPELINES
GROUPS = {
    "files": FILE_PIPELINES,
    "kafka": KAFKA_PIPELINES,
    "delta": DELTA_PIPELINES,
    "jdbc": JDBC_PIPELINES,
    "all": PIPELINES,
}
SCRIPT = Path(__file__).with_name("pipeline.py")
KAFKA_SCRIPT = Path(__file__).with_name("kafka_pipeline.py")
TXN_KILL_VAR = "MICROBATCH_TORTURE_TXN_KILL"
"""Tells ``kafka_pipeline.py`` where in the Kafka client ``mid_sink`` kills."""
PLANS = ("early", "timed", "phase")
"""How a run is killed: during start-up, at a random moment after it started, or by the
crash hook at a batch phase (then by the timer when that batch is not reached in time)."""
READY_TIMEOUT = 60.0
DRAIN_TIMEOUT = 360.0
FAILURE_MARKERS = (
    "Traceback (most recent call last)",
    "terminated with exception",
    " CRITICAL ",
    "TORTURE:",
)
"""A log line with one of these makes its run a failure, even when the run was killed."""


@dataclass
class Run:
    """One run of a pipeline: how it was meant to die and how it did."""

    number: int
    plan: str
    returncode: int
    seconds: float
    log: Path
    failure: str | None = None


@dataclass
class Pipeline:
    """The state of one pipeline's kill loop."""

    kind: str
    workdir: Path
    rng: random.Random
    source: InputFolder | KafkaInput | None
    runs: list[Run] = field(default_factory=list)
    kills: int = 0
    seconds: float = 0.0
    warnings: int = 0
    errors: list[tuple[Path, str]] = field(default_factory=list)
    batch_reads: int = 0
    steady_rate: float = 0.0
    batch_read_failures: list[str] = field(default_factory=list)
    report: SinkReport | None = None
    notes: list[str] = field(default_factory=list)
    looping: threading.Event = field(default_factory=threading.Event)
    drained: threading.Event = field(default_factory=threading.Event)

    @property
    def base(self) -> Path:
        return self.workdir / self.kind

    @property
    def failures(self) -> list[Run]:
        return [run for run in self.runs if run.failure is not None]


def last_offset(checkpoint: Path) -> int:
    """The highest batch id in the checkpoint's offset log, -1 when there is none."""
    folder = checkpoint / "offsets"
    names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
    return max((int(name) for name in names if name.isdigit()), default=-1)


def read_log_verdict(pipeline: Pipeline, log: Path) -> str | None:
    """The first failure line of a run's log, or None; counts its WARNING lines and keeps its
    other ERROR lines (logged, but no query failed) in ``pipeline``."""
    lines = (log.read_text(errors="replace") if log.exists() else "").splitlines()
    pipeline.warnings += sum(1 for line in lines if " WARNING " in line)
    failure = next((line for line in lines if any(m in line for m in FAILURE_MARKERS)), None)
    if failure is None:
        pipeline.errors += [(log, line.strip()[:300]) for line in lines if " ERROR " in line]
    return failure.strip()[:300] if failure is not None else None


def start_child(
    pipeline: Pipeline,
    mode: str,
    number: int,
    crash_at: str | None,
    extra_env: dict[str, str] | None = None,
) -> tuple:
    log = pipeline.workdir / "logs" / pipeline.kind / f"run-{number:04d}-{mode}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {
        key: value for key, value in os.environ.items() if key not in (crash.ENV_VAR, TXN_KILL_VAR)
    }
    if crash_at is not None:
        env[crash.ENV_VAR] = crash_at
    env.update(extra_env or {})
    script = KAFKA_SCRIPT if pipeline.kind in KAFKA_PIPELINES else SCRIPT
    handle = log.open("w")
    child = subprocess.Popen(
        [sys.executable, str(script), pipeline.kind, mode, str(pipeline.workdir)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=handle,
        env=env,
        text=True,
    )
    handle.close()
    ready = threading.Event()

    def watch_stdout() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            if line.strip() == "READY":
                ready.set()

    threading.Thread(target=watch_stdout, daemon=True).start()
    return child, ready, log


def kill_run(pipeline: Pipeline, max_delay: float, arrive_while_running: bool) -> Run:
    """Start the pipeline once in stream mode and SIGKILL it; return the run."""
    rng = pipeline.rng
    number = len(pipeline.runs)
    draw = rng.random()
    crash_at = None
    extra_env: dict[str, str] = {}
    if draw < 0.2:
        plan, after_ready, delay = "early", False, rng.uniform(0.05, 0.6)
    elif draw < 0.65:
        longer = rng.random() < 0.2  # some runs last long enough for several batches
        delay = rng.uniform(max_delay, 3 * max_delay) if longer else rng.uniform(0.02, max_delay)
        plan, after_ready = "timed", True
    else:
        batch = max(last_offset(pipeline.base / "checkpoint"), 0) + rng.randint(0, 2)
        phases = crash.PHASES
        if pipeline.kind in ("kafka-kafka-eos", "kafka-kafka-alo", *JDBC_PIPELINES):
            phases += ("mid_sink",)  # twice as likely: it has several places in the client
        crash_at = f"{rng.choice(phases)}:{batch}"
        plan, after_ready, delay = f"phase {crash_at}", True, rng.uniform(0.5, 2 * max_delay)
        if pipeline.kind in KAFKA_PIPELINES:  # a Kafka query takes longer to its batches
            delay = rng.uniform(2 * max_delay, 4 * max_delay)
        where = {
            "kafka-kafka-eos": ("open", "done", "part"),
            "kafka-kafka-alo": ("flush", "part"),
            # in psycopg: while the batch's COPY streams, or after the ledger row was inserted
            **{kind: ("mid-copy", "before-commit", "part") for kind in JDBC_PIPELINES},
        }
        if pipeline.kind in where and crash_at.startswith("mid_sink:"):
            # in the client: transaction open or just committed, before a flush, mid-COPY...
            when = rng.choice(where[pipeline.kind])
            plan += f" ({when})"
            if when != "part":
                extra_env[TXN_KILL_VAR] = when
    began = time.monotonic()
    child, ready, log = start_child(pipeline, "stream", number, crash_at, extra_env)
    feeder = None
    if arrive_while_running and pipeline.source is not None:
        feeder = threading.Thread(
            target=feed_while_running, args=(pipeline, child, rng.randint(0, 4), max_delay)
        )
        feeder.start()
    failure = None
    if after_ready and not wait_ready(child, ready) and child.poll() is None:
        failure = f"not READY after {READY_TIMEOUT} s"
    deadline = time.monotonic() + delay
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    if child.poll() is None:
        os.kill(child.pid, signal.SIGKILL)
    returncode = child.wait()
    if feeder is not None:
        feeder.join()
    verdict = read_log_verdict(pipeline, log)
    if returncode != -signal.SIGKILL:
        failure = failure or f"exited with status {returncode}: {verdict or 'no message'}"
    elif verdict is not None and failure is None:
        failure = f"killed, but the log reports: {verdict}"
    if returncode == -signal.SIGKILL:
        pipeline.kills += 1
    run = Run(number, plan, returncode, time.monotonic() - began, log, failure)
    pipeline.runs.append(run)
    return run


def wait_ready(child: subprocess.Popen, ready: threading.Event) -> bool:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if ready.wait(0.01):
            return True
        if child.poll() is not None:
            return False
    return False


def feed_while_running(
    pipeline: Pipeline, child: subprocess.Popen, count: int, max_delay: float
) -> None:
    """Add ``count`` files at random moments while ``child`` runs, and with a
    ``steady_rate`` one file every ``1 / steady_rate`` seconds on average until it ends."""
    assert pipeline.source is not None
    for _ in range(count):
        time.sleep(pipeline.rng.uniform(0.0, max_delay))
        if child.poll() is not None:
            return
        pipeline.source.add()
    while pipeline.steady_rate > 0 and child.poll() is None:
        pipeline.source.add()
        time.sleep(pipeline.rng.expovariate(pipeline.steady_rate))


def read_while_written(
    pipeline: Pipeline,
    read: Callable[[], list[tuple]],
    rows: dict,
    stop: threading.Event,
    ready: Callable[[], bool] = lambda: True,
) -> None:
    """Read the sink with ``read`` again and again until ``stop`` (once ``ready``): each read
    must succeed and show whole rows of the input, none twice (only committed batches are
    visible: a consistent manifest version, Delta version or database transaction)."""
    while not stop.wait(pipeline.rng.uniform(0.05, 0.3)):
        if not ready():
            continue
        pipeline.batch_reads += 1
        try:
            found = read()
        except Exception as error:
            pipeline.batch_read_failures.append(f"{type(error).__name__}: {error}"[:300])
            continue
        report = compare(found, rows.copy())  # copied after the read: every row written
        if report.doubled:  # bad rows are the upstream's, counted in its own report
            pipeline.batch_read_failures.append(f"{report.doubled} rows seen twice")


def table_reader(pipeline: Pipeline) -> Callable[[], list[tuple]]:
    """How to read the table of a Delta or JDBC pipeline while it is written."""
    if pipeline.kind.startswith("delta"):
        return partial(read_delta_rows, pipeline.base / "out")
    return partial(read_jdbc_rows, jdbc_url(pipeline.base))


def table_ready(pipeline: Pipeline) -> Callable[[], bool]:
    """True once the pipeline's table can be read (a Delta table: its log exists)."""
    if pipeline.kind.startswith("delta"):
        return (pipeline.base / "out" / "_delta_log").is_dir
    return lambda: True


def drain(pipeline: Pipeline) -> Run:
    """The last run: available-now, must exit 0."""
    number = len(pipeline.runs)
    began = time.monotonic()
    child, _, log = start_child(pipeline, "drain", number, None)
    try:
        returncode = child.wait(DRAIN_TIMEOUT + 30)
    except subprocess.TimeoutExpired:
        os.kill(child.pid, signal.SIGKILL)
        returncode = child.wait()
    verdict = read_log_verdict(pipeline, log)
    failure = None
    if returncode != 0:
        failure = f"the drain exited with status {returncode}: {verdict or 'no message'}"
    elif verdict is not None:
        failure = f"the drain finished, but the log reports: {verdict}"
    run = Run(number, "drain", returncode, time.monotonic() - began, log, failure)
    pipeline.runs.append(run)
    return run


def loop(
    pipeline: Pipeline,
    kills: int,
    max_delay: float,
    until: threading.Event | None,
    wait_for: threading.Event | None,
) -> None:
    """Kill ``pipeline`` ``kills`` times (and on until ``until`` is set), then drain it once
    ``wait_for`` is set."""
    began = time.monotonic()
    try:
        while pipeline.kills < kills or (until is not None and not until.is_set()):
            if pipeline.source is not None:
                pipeline.source.add_many(pipeline.rng.randint(0, 3))
            run = kill_run(pipeline, max_delay, arrive_while_running=True)
            if run.failure:
                print(f"  {pipeline.kind} run {run.number}: FAILURE {run.failure}", flush=True)
            if len(pipeline.runs) > 4 * kills + 20:
                pipeline.notes.append("stopped: too many runs without a kill")
                break
        pipeline.looping.set()
        if wait_for is not None:
            wait_for.wait()
        drain(pipeline)
    finally:
        pipeline.looping.set()
        pipeline.drained.set()
        pipeline.seconds = time.monotonic() - began


def verify(pipeline: Pipeline, upstream: Pipeline | None) -> None:
    if pipeline.kind in DELTA_PIPELINES:
        verify_delta(pipeline)
        return
    if pipeline.kind in JDBC_PIPELINES:
        verify_jdbc(pipeline)
        return
    if pipeline.kind in KAFKA_PIPELINES:
        verify_kafka(pipeline)
        note_leftovers_and_kills(pipeline, pipeline.base / "out")
        return
    source = pipeline.source if pipeline.source is not None else upstream and upstream.source
    assert isinstance(source, InputFolder)
    output = pipeline.base / "out"
    pipeline.report = check_sink(output, source.rows)
    if pipeline.kind == "archive":
        pipeline.report.problems += check_archive(
            source.folder, pipeline.base / "archive", source.contents
        )
    if output.exists():
        orphans = orphan_files(output)
        if orphans:
            pipeline.notes.append(
                f"{len(orphans)} data files the manifest does not list, e.g. {orphans[0]}"
            )
    lost = [ident for ident in source.rows if ident not in pipeline.report.seen]
    if lost:
        files = sorted({source.rows[ident][1] for ident in lost})
        named = [f"{source.file_name(i)} ({source.arrived_by[source.file_name(i)]})" for i in files]
        pipeline.notes.append(f"lost rows come from {len(files)} files: {', '.join(named[:10])}")
    note_leftovers_and_kills(pipeline, output)
    if isinstance(pipeline.source, InputFolder):
        methods = ", ".join(f"{k} {v}" for k, v in pipeline.source.methods.items() if v)
        pipeline.notes.append(f"{pipeline.source.file_count} input files ({methods})")


def verify_delta(pipeline: Pipeline) -> None:
    """Compare a Delta pipeline's table and log with its input."""
    source = pipeline.source
    assert isinstance(source, InputFolder)
    output = pipeline.base / "out"
    pipeline.report = check_delta(pipeline.kind, pipeline.base, source.rows)
    lost = [ident for ident in source.rows if ident not in pipeline.report.seen]
    if lost and pipeline.kind == "delta-append":
        files = sorted({source.rows[ident][1] for ident in lost})
        pipeline.notes.append(f"lost rows come from files {files[:10]}")
    pipeline.notes.append(
        f"{commit_count(output)} Delta commits, {unlisted_files(output)} parquet files not in "
        f"the latest version (killed attempts, rewritten by merges, for VACUUM); "
        f"{source.file_count} input files, {len(source.rows)} rows"
    )
    note_leftovers_and_kills(pipeline, output)


def verify_jdbc(pipeline: Pipeline) -> None:
    """Compare a JDBC pipeline's table and ledger with its input."""
    source = pipeline.source
    assert isinstance(source, InputFolder)
    pipeline.report = check_jdbc(pipeline.kind, pipeline.base, source.rows)
    lost = [ident for ident in source.rows if ident not in pipeline.report.seen]
    if lost and pipeline.kind == "jdbc-append":
        files = sorted({source.rows[ident][1] for ident in lost})
        pipeline.notes.append(f"lost rows come from files {files[:10]}")
    pipeline.notes.append(
        f"{ledger_count(pipeline.base)} batches in the ledger; {source.file_count} input "
        f"files, {len(source.rows)} rows"
    )
    note_leftovers_and_kills(pipeline, pipeline.base / "out")


def verify_kafka(pipeline: Pipeline) -> None:
    """Compare a Kafka pipeline's sink with the committed input records."""
    source = pipeline.source
    assert isinstance(source, KafkaInput)
    setup = json.loads((pipeline.base / "kafka.json").read_text())
    if pipeline.kind == "kafka-parquet":
        output = pipeline.base / "out"
        pipeline.report = check_parquet(str(output), source)
        orphans = orphan_files(output) if output.exists() else []
        if orphans:
            pipeline.notes.append(
                f"{len(orphans)} data files the manifest does not list, e.g. {orphans[0]}"
            )
    else:
        topic, bootstrap = setup["output"], setup["bootstrap"]
        exactly_once = pipeline.kind == "kafka-kafka-eos"
        pipeline.report = check_topic(topic, source, doubles_allowed=not exactly_once)
        stable = end_offsets(bootstrap, topic, committed=True)
        high = end_offsets(bootstrap, topic, committed=False)
        if stable != high:
            pipeline.report.problems.append(
                f"a transaction is still open on {topic} after the drain: last stable offsets "
                f"{stable}, high watermarks {high}"
            )
        if exactly_once:
            uncommitted = len(read_topic(bootstrap, topic, committed=False))
            pipeline.notes.append(
                f"{uncommitted - pipeline.report.found} records of aborted sink transactions "
                "(seen by read_uncommitted readers only)"
            )
        elif pipeline.report.doubled:
            pipeline.notes.append(
                f"{pipeline.report.doubled} extra copies (allowed: at-least-once)"
            )
    lost = sorted(ident for ident in source.rows if ident not in pipeline.report.seen)
    if lost:
        where = [f"{i} at {source.rows[i].partition}/{source.rows[i].offset}" for i in lost[:10]]
        pipeline.notes.append(f"lost records (id at partition/offset): {', '.join(where)}")
    chunks = source.methods
    pipeline.notes.append(
        f"{source.file_count} input chunks into {setup['input']} (plain {chunks['plain']}, "
        f"committed transactions {chunks['committed']}, aborted {chunks['aborted']}): "
        f"{len(source.rows)} committed records, {len(source.aborted)} aborted"
    )


def note_leftovers_and_kills(pipeline: Pipeline, output: Path) -> None:
    """Note ``.tmp`` files left behind and how the kills were spread over the plans."""
    leftovers = [
        path
        for folder in (pipeline.base / "checkpoint", output / "_microbatch_metadata")
        if folder.is_dir()
        for path in folder.rglob("*.tmp")
    ]
    if leftovers:
        pipeline.notes.append(f"{len(leftovers)} .tmp files left, e.g. {leftovers[0]}")
    killed = [run for run in pipeline.runs if run.returncode == -signal.SIGKILL]
    hooked = [run for run in killed if "microbatch-testkit: killing" in run.log.read_text()]
    plans = {plan: sum(1 for run in killed if run.plan.startswith(plan)) for plan in PLANS}
    # "phase mid_sink:3 (open)" -> "mid_sink (open)": where the hook's kills landed
    places = Counter(
        " ".join(part.split(":")[0] for part in run.plan.split(" ")[1:]) for run in hooked
    )
    pipeline.notes.append(
        "kills: "
        + ", ".join(f"{plan} {count}" for plan, count in plans.items())
        + f" (the crash hook fired in {len(hooked)}: "
        + ", ".join(f"{place} {count}" for place, count in sorted(places.items()))
        + ")"
    )


def print_summary(pipelines: list[Pipeline]) -> None:
    header = (
        "pipeline",
        "kills",
        "runs",
        "expected",
        "found",
        "lost",
        "doubled",
        "bad",
        "failures",
        "warnings",
        "errors",
        "seconds",
    )
    rows = [header]
    for p in pipelines:
        r = p.report or SinkReport(0, 0, 0, 0, 0)
        rows.append(
            (
                p.kind,
                *map(str, (p.kills, len(p.runs), r.expected, r.found, r.lost, r.doubled, r.bad)),
                *map(str, (len(p.failures), p.warnings, len(p.errors), f"{p.seconds:.0f}")),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for index, row in enumerate(rows):
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("  ".join("-" * width for width in widths))
    for p in pipelines:
        for problem in p.report.problems if p.report else []:
            print(f"{p.kind}: PROBLEM {problem}")
        for run in p.failures:
            print(f"{p.kind}: FAILURE in run {run.number} ({run.plan}): {run.failure}")
            print(f"    log: {run.log}")
        for log, line in p.errors[:5]:
            print(f"{p.kind}: ERROR logged, no query failed: {line}\n    log: {log}")
        if len(p.errors) > 5:
            print(f"{p.kind}: ... {len(p.errors) - 5} more ERROR lines")
        if p.batch_reads:
            print(
                f"{p.kind}: {p.batch_reads} batch reads of "
                f"{'the upstream' if p.kind == 'chained' else 'its'} sink while it was "
                f"written, {len(p.batch_read_failures)} failed"
            )
        for problem in p.batch_read_failures[:5]:
            print(f"{p.kind}: FAILED batch read: {problem}")
        for note in p.notes:
            print(f"{p.kind}: {note}")


def wait_for_first_commit(output: Path, timeout: float = 120.0) -> bool:
    """Wait until the sink at ``output`` has committed a batch (the chained query's source
    path must exist when it starts); False when it has not in ``timeout`` seconds."""
    metadata = output / "_microbatch_metadata"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if metadata.is_dir() and any(p.name.isdigit() for p in metadata.iterdir()):
            return True
        time.sleep(0.05)
    return False


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=50, help="SIGKILLs per pipeline (50)")
    parser.add_argument(
        "--pipelines",
        default="files",
        help=f"comma-separated, of {PIPELINES}, or the groups {tuple(GROUPS)} (files)",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (printed)")
    parser.add_argument("--workdir", type=Path, default=None, help="an empty or new folder")
    parser.add_argument(
        "--in-place", action="store_true", help="files also arrive by cp and chunked writes"
    )
    parser.add_argument(
        "--max-delay", type=float, default=1.5, help="longest run before a kill, s (1.5)"
    )
    parser.add_argument(
        "--upstream-rate",
        type=float,
        default=4.0,
        help="with chained: files per second into parquet while it runs (4; 0 for none)",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5 kills each")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.pipelines.split(",") if name.strip()]
    args.pipelines = [member for name in names for member in GROUPS.get(name, (name,))]
    unknown = sorted(set(args.pipelines) - set(PIPELINES))
    if unknown:
        parser.error(f"unknown pipelines {unknown}; choose from {PIPELINES}")
    if args.quick:
        args.kills, args.max_delay = 5, min(args.max_delay, 1.0)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1_000_000)
    if args.workdir is None:
        args.workdir = Path(tempfile.mkdtemp(prefix="microbatch-torture-"))
    elif args.workdir.exists() and any(args.workdir.iterdir()):
        parser.error(f"--workdir {args.workdir} is not empty")
    args.workdir = args.workdir.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    selected = [name for name in PIPELINES if name in args.pipelines]
    if "chained" in selected and "parquet" not in selected:
        selected.insert(0, "parquet")  # the chained query reads the parquet pipeline's sink
    print(
        f"torture run: pipelines {', '.join(selected)}, {args.kills} kills each, seed "
        f"{args.seed}, arrivals {'atomic, cp, chunked' if args.in_place else 'atomic'}, "
        f"workdir {args.workdir}",
        flush=True,
    )
    service = None
    if any(kind in KAFKA_PIPELINES for kind in selected):
        from microbatch_testkit.services import start_kafka

        service = start_kafka()  # MICROBATCH_SERVICES / MICROBATCH_KAFKA_BOOTSTRAP choose
        print(f"Kafka: {service.description}", flush=True)
    postgres = None
    if any(kind in JDBC_PIPELINES for kind in selected):
        from microbatch_testkit.services import start_postgres

        postgres = start_postgres()  # MICROBATCH_SERVICES / MICROBATCH_POSTGRES_URL choose
        print(f"PostgreSQL: {postgres.description}", flush=True)
    try:
        return run(args, selected, service, postgres)
    finally:
        if service is not None:
            service.close()
        if postgres is not None:
            postgres.close()


def kafka_input(kind: str, base: Path, rng: random.Random, service: Any) -> KafkaInput:
    """Create the topics of Kafka pipeline ``kind``, note them in ``base/kafka.json`` for
    the child processes, and return its input."""
    base.mkdir(parents=True, exist_ok=True)
    setup = {
        "bootstrap": service.bootstrap_servers,
        "input": service.create_topic(PARTITIONS, hint=f"torture-{kind}-in"),
    }
    if kind != "kafka-parquet":
        setup["output"] = service.create_topic(PARTITIONS, hint=f"torture-{kind}-out")
    (base / "kafka.json").write_text(json.dumps(setup, indent=1))
    return KafkaInput(setup["bootstrap"], setup["input"], rng)


def run(args: argparse.Namespace, selected: list[str], service: Any, postgres: Any = None) -> int:
    """Run the selected pipelines' kill loops, verify them and print the summary."""
    pipelines: dict[str, Pipeline] = {}
    for index, kind in enumerate(selected):
        rng = random.Random(args.seed * 10 + index)
        source: InputFolder | KafkaInput | None = None
        if kind in KAFKA_PIPELINES:
            source = kafka_input(kind, args.workdir / kind, rng, service)
            source.add_many(3)
        elif kind != "chained":
            base = args.workdir / kind
            source = InputFolder(base / "in", base / "staging", rng, in_place=args.in_place)
            source.add_many(3)
        if kind in JDBC_PIPELINES:  # a database of its own, noted for the child processes
            database = postgres.create_database(hint=f"torture_{kind}")
            (args.workdir / kind / "jdbc.json").write_text(json.dumps({"url": database.url}))
        pipelines[kind] = Pipeline(kind, args.workdir, rng, source)
        if kind == "parquet" and "chained" in selected:
            # a sink written all the time under the chained query: many commits, compactions
            pipelines[kind].steady_rate = args.upstream_rate
    if "chained" in pipelines:
        (args.workdir / "chained").mkdir(parents=True, exist_ok=True)
    threads = []
    for kind, pipeline in pipelines.items():
        until = wait_for = None
        if kind == "parquet" and "chained" in pipelines:
            until = pipelines["chained"].looping
        if kind == "chained":
            wait_for = pipelines["parquet"].drained
            # the chained query's source folder must exist when it starts
            if not wait_for_first_commit(args.workdir / "parquet" / "out"):
                pipeline.notes.append("not run: the parquet pipeline committed nothing")
                pipeline.looping.set()
                continue
        thread = threading.Thread(
            target=loop, args=(pipeline, args.kills, args.max_delay, until, wait_for)
        )
        thread.start()
        threads.append(thread)
        if kind in ("delta-append", "jdbc-append") and isinstance(pipeline.source, InputFolder):
            reader = threading.Thread(
                target=read_while_written,
                args=(pipeline, table_reader(pipeline), pipeline.source.rows, pipeline.looping),
                kwargs={"ready": table_ready(pipeline)},
            )
            reader.start()
            threads.append(reader)
        if kind == "chained" and pipelines["parquet"].source is not None:
            reader = threading.Thread(
                target=read_while_written,
                args=(
                    pipeline,
                    partial(read_rows, args.workdir / "parquet" / "out"),
                    pipelines["parquet"].source.rows,
                    pipelines["parquet"].looping,
                ),
            )
            reader.start()
            threads.append(reader)
    for thread in threads:
        thread.join()
    for kind, pipeline in pipelines.items():
        if isinstance(pipeline.source, KafkaInput):
            pipeline.source.close()
        verify(pipeline, pipelines.get("parquet") if kind == "chained" else None)
    print()
    print_summary(list(pipelines.values()))
    bad = any(
        p.failures
        or p.batch_read_failures
        or p.report is None
        or not p.report.ok
        or p.kills < args.kills
        for p in pipelines.values()
    )
    if service is not None and not bad:  # topics of a failed run stay, to look into
        for kind in pipelines:
            setup = args.workdir / kind / "kafka.json"
            if setup.exists():
                for key in ("input", "output"):
                    topic = json.loads(setup.read_text()).get(key)
                    if topic:
                        service.delete_topic(topic)
    print(f"\n{'FAILED' if bad else 'PASSED'} (seed {args.seed}, logs in {args.workdir / 'logs'})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
