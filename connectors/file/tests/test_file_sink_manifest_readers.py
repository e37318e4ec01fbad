"""Readers of a sink's folder while its writer commits and compacts: never a failure.

A downstream streaming query and batch reads (``session.read``) run against a folder that
another process keeps writing. Each test runs for :data:`SECONDS` (a few seconds); set
``MICROBATCH_SOAK_SECONDS`` for a longer soak, e.g. ``MICROBATCH_SOAK_SECONDS=300``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import fsspec

import microbatch as mb
from microbatch_file.manifest import METADATA_DIR, Manifest

SCRIPTS = Path(__file__).parent / "scripts"
SECONDS = float(os.environ.get("MICROBATCH_SOAK_SECONDS") or 3)


class Upstream:
    """A writer script in its own process, stopped through a stop file."""

    def __init__(self, script: Path, *args: str, stop_file: Path) -> None:
        self.stop_file = stop_file
        self.process = subprocess.Popen(
            [sys.executable, str(script), *args, str(stop_file)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(self) -> int:
        """Stop the writer; the id of its last batch."""
        self.stop_file.touch()
        out, err = self.process.communicate(timeout=60)
        assert self.process.returncode == 0, f"the writer failed:\n{out}\n{err}"
        return int(out.strip().splitlines()[-1])

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


class BatchReads:
    """``session.read`` of a folder in a loop on a thread, keeping every failure."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.failures: list[str] = []
        self.reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                table = (
                    mb.Session().read.format("json").schema("value BIGINT").load(str(self.folder))
                )
                values = table.column("value").to_pylist()
                if len(set(values)) != len(values):
                    self.failures.append("a batch read returned a row twice")
                self.reads += 1
            except Exception as error:
                self.failures.append(f"{type(error).__name__}: {error}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def downstream(session: mb.Session, folder: Path, checkpoint: Path) -> mb.StreamingQuery:
    return (
        session.read_stream.format("json")
        .schema("value BIGINT")
        .load(str(folder))
        .write_stream.format("memory")
        .query_name("copy")
        .option("checkpointLocation", str(checkpoint))
        .start()
    )


def run_readers(session: mb.Session, folder: Path, checkpoint: Path) -> mb.StreamingQuery:
    """Run a downstream query and two batch-read loops for SECONDS, asserting that each read
    at least once and that neither the query nor any batch read failed; the query (still
    running)."""
    query = downstream(session, folder, checkpoint)
    reads = [BatchReads(folder), BatchReads(folder)]
    try:
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline and query.exception() is None:
            time.sleep(0.1)
    finally:
        for loop in reads:
            loop.stop()
    assert all(loop.reads or loop.failures for loop in reads), "a batch-read loop never ran"
    failures = [failure for loop in reads for failure in loop.failures]
    assert query.exception() is None, f"the downstream query failed: {query.exception()}"
    assert not failures, f"{len(failures)} batch reads failed, first: {failures[0]}"
    return query


def assert_exact_copy(session: mb.Session, query: mb.StreamingQuery, expected: list[int]) -> None:
    """Let the downstream query catch up and stop it: it copied ``expected``, each row once."""
    query.process_all_available()
    copied = session.table("copy").column("value").to_pylist()
    query.stop()
    assert query.exception() is None
    assert sorted(copied) == expected, "the downstream copy lost or doubled rows"


def committed_values(folder: Path) -> list[int]:
    values: list[int] = []
    for path in Manifest(fsspec.filesystem("file"), str(folder)).files():
        with open(path) as handle:
            values += [json.loads(line)["value"] for line in handle]
    return values


def test_a_chained_query_and_batch_reads_never_fail_while_the_sink_is_written(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "out"
    upstream = Upstream(
        SCRIPTS / "rate_to_json_until_stopped.py",
        str(folder),
        str(tmp_path / "cp-up"),
        stop_file=tmp_path / "stop",
    )
    try:
        wait_for(lambda: (folder / METADATA_DIR / "0").exists(), "the upstream's first batch")
        session = mb.Session()
        query = run_readers(session, folder, tmp_path / "cp-down")
        wait_for(lambda: len(committed_values(folder)) > 50, "the upstream's 11th batch")
        upstream.finish()
        expected = sorted(committed_values(folder))
        assert expected == list(range(len(expected))) and len(expected) > 50
        assert_exact_copy(session, query, expected)
    finally:
        upstream.kill()


def seed_long_log(folder: Path, batches: int) -> None:
    """The manifest a sink has after ``batches`` batches without rows (one compact)."""
    metadata = folder / METADATA_DIR
    metadata.mkdir(parents=True)
    entries = [
        {"version": 1, "batchId": b, "committedAtMs": 0, "files": []} for b in range(batches)
    ]
    document = {"version": 1, "batchId": batches - 1, "entries": entries}
    (metadata / f"{batches - 1}.compact").write_text(json.dumps(document))


def test_readers_of_a_long_log_never_fail_while_a_fast_writer_compacts(tmp_path: Path) -> None:
    # A long-running sink: reading its log takes longer than the writer takes for the ten
    # batches between compactions, so every read overlaps a compaction.
    first = 50_000
    folder = tmp_path / "out"
    seed_long_log(folder, first)
    upstream = Upstream(
        SCRIPTS / "sink_fast_writer.py", str(folder), str(first), stop_file=tmp_path / "stop"
    )
    try:
        manifest = Manifest(fsspec.filesystem("file"), str(folder))
        wait_for(
            lambda: (manifest.latest_batch_id() or 0) >= first + 20, "the writer's compactions"
        )
        session = mb.Session()
        query = run_readers(session, folder, tmp_path / "cp-down")
        last = upstream.finish()
        expected = list(range(first * 3, (last + 1) * 3))
        assert sorted(committed_values(folder)) == expected
        assert_exact_copy(session, query, expected)
    finally:
        upstream.kill()
