"""A batch that fails with a RetriableError is re-run, same id and offsets, up to
``maxBatchRetries`` times; any other error stops the query with its cause."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch.errors import StreamingQueryException
from microbatch_example import read_jsonl_folder
from microbatch_example.jsonl import JsonLinesSink, JsonLinesWriter

SCHEMA = pa.schema([pa.field("id", pa.int64())])
ROWS, PER_BATCH = 12, 5

# How often each (test token, place) has failed so far: readers may be rebuilt, this is not.
FAILURES: Counter[tuple[str, str]] = Counter()


@dataclass(frozen=True)
class Rows(mb.Split):
    first: int
    stop: int


class FlakyReader(mb.StreamReader, mb.SplitReader):
    """``rows`` rows, ``PER_BATCH`` per batch; fails ``times`` times at ``where`` per batch."""

    def __init__(self, opts: mb.Options) -> None:
        self.opts = opts

    def _maybe_fail(self, where: str, batch_end: int) -> None:
        if self.opts.where != where:
            return
        key = (self.opts.token, f"{where}@{batch_end}")
        if FAILURES[key] < self.opts.times:
            FAILURES[key] += 1
            cause = ConnectionResetError(f"broker restarting ({where}, attempt {FAILURES[key]})")
            if self.opts.kind == "retriable":
                raise mb.RetriableError(f"transient failure in {where}") from cause
            raise cause

    def initial_offset(self) -> mb.Offset:
        return {"rows": 0}

    def default_read_limit(self) -> mb.ReadLimit:
        return mb.ReadMaxRows(PER_BATCH)

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        end = min(ROWS, start["rows"] + PER_BATCH)
        if end > start["rows"]:
            self._maybe_fail("latest_offset", end)
        return {"rows": end}

    def partitions(self, start: mb.Offset, end: mb.Offset) -> list[Rows]:
        self._maybe_fail("partitions", end["rows"])
        middle = (start["rows"] + end["rows"]) // 2
        return [Rows(start["rows"], middle), Rows(middle, end["rows"])]

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        assert isinstance(split, Rows)
        if split.first % PER_BATCH == 0:  # the first split of each batch
            self._maybe_fail("read", split.first)
        yield pa.record_batch([pa.array(range(split.first, split.stop), pa.int64())], SCHEMA)


class FlakySource(mb.Source):
    format_name = "flaky-test"
    capabilities = mb.SourceCapabilities(available_now=True)
    options = mb.OptionSpec(
        mb.Option(name="token", required=True, doc="Keys this test's failure counts."),
        mb.Option(name="times", type="int", default=2, doc="Failures per batch."),
        mb.Option(
            name="where",
            default="read",
            choices=("latest_offset", "partitions", "read", "none"),
            doc="Where the failures happen.",
        ),
        mb.Option(
            name="kind",
            default="retriable",
            choices=("retriable", "permanent"),
            doc="What is raised.",
        ),
    )

    def schema(self) -> pa.Schema:
        return SCHEMA

    def stream_reader(self, context: mb.ReadContext) -> mb.StreamReader:
        return FlakyReader(self.opts)


class AppliedThenFailingWriter(JsonLinesWriter):
    """Commits each batch, then fails once as if the reply of the commit was lost."""

    def commit(self, messages: Any, batch_id: int) -> None:
        super().commit(messages, batch_id)
        key = (str(self.folder), f"commit@{batch_id}")
        if FAILURES[key] < 1:
            FAILURES[key] += 1
            raise mb.RetriableError("connection lost before the commit was acknowledged")


class AppliedThenFailingSink(JsonLinesSink):
    format_name = "applied-then-failing-test"

    def stream_writer(self, context: mb.WriteContext) -> AppliedThenFailingWriter:
        folder = Path(self.opts.path)
        folder.mkdir(parents=True, exist_ok=True)
        return AppliedThenFailingWriter(folder)


@pytest.fixture
def session(session: mb.Session, register: Callable[..., None]) -> mb.Session:
    register(session, "flaky", FlakySource, AppliedThenFailingSink)
    session.conf.set("batchRetryBackoff", "10 milliseconds")
    return session


def run(
    session: mb.Session, tmp_path: Path, sink: str = "example-jsonl", **options: Any
) -> mb.StreamingQuery:
    token = f"{tmp_path.name}-{sorted(options.items())}"
    query = (
        session.read_stream.format("flaky-test")
        .options(token=token, **options)
        .load()
        .write_stream.format(sink)
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start()
    )
    return query


def ids_in_sink(tmp_path: Path) -> list[int]:
    return sorted(read_jsonl_folder(tmp_path / "out", SCHEMA).column("id").to_pylist())


@pytest.mark.parametrize("where", ["read", "partitions", "latest_offset"])
def test_a_transient_error_is_retried_and_every_row_lands_once(
    session: mb.Session, tmp_path: Path, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="microbatch"):
        query = run(session, tmp_path, where=where, times=2)
        query.await_termination(timeout=30)
    assert query.exception() is None
    assert ids_in_sink(tmp_path) == list(range(ROWS))
    batches = [progress for progress in query.recent_progress if progress["numInputRows"]]
    assert [progress["batchId"] for progress in batches] == [0, 1, 2]
    if where != "latest_offset":  # the offsets were written: the batch itself was re-run
        assert [progress.get("batchRetries") for progress in batches] == [2, 2, 2]
    retries = [r for r in caplog.records if "failed with a retriable error" in r.getMessage()]
    assert len(retries) == 6
    assert "retry 1 of 3" in retries[0].getMessage()
    assert "broker restarting" in retries[0].getMessage()


def test_a_retried_batch_keeps_its_id_and_offsets(session: mb.Session, tmp_path: Path) -> None:
    query = run(session, tmp_path, where="read", times=1)
    query.await_termination(timeout=30)
    offsets = sorted((tmp_path / "cp" / "offsets").iterdir(), key=lambda p: int(p.name))
    assert [path.name for path in offsets] == ["0", "1", "2"]
    ends = [json.loads(path.read_text().splitlines()[-1]) for path in offsets]
    assert "12" in json.dumps(ends[-1])


def test_a_permanent_error_stops_the_query_with_its_cause(
    session: mb.Session, tmp_path: Path
) -> None:
    query = run(session, tmp_path, where="read", times=1, kind="permanent")
    with pytest.raises(StreamingQueryException) as caught:
        query.await_termination(timeout=30)
    assert isinstance(caught.value.cause, ConnectionResetError)
    assert "broker restarting (read, attempt 1)" in str(caught.value)
    assert ids_in_sink(tmp_path) == []


def test_retries_are_used_up_then_the_query_stops(session: mb.Session, tmp_path: Path) -> None:
    session.conf.set("maxBatchRetries", 2)
    query = run(session, tmp_path, where="partitions", times=5)
    with pytest.raises(StreamingQueryException) as caught:
        query.await_termination(timeout=30)
    cause = caught.value.cause
    assert isinstance(cause, mb.RetriableError)
    assert "batch 0 failed 3 times; maxBatchRetries is 2" in "\n".join(cause.__notes__)
    assert ids_in_sink(tmp_path) == []
    session.conf.set("maxBatchRetries", 10)  # a restart replays batch 0 and completes
    again = run(session, tmp_path, where="partitions", times=5)
    again.await_termination(timeout=30)
    assert again.exception() is None
    assert ids_in_sink(tmp_path) == list(range(ROWS))


def test_no_retries_when_max_batch_retries_is_zero(session: mb.Session, tmp_path: Path) -> None:
    session.conf.set("maxBatchRetries", 0)
    query = run(session, tmp_path, where="read", times=1)
    with pytest.raises(StreamingQueryException):
        query.await_termination(timeout=30)


def test_a_sink_commit_retried_after_it_was_applied_lands_once(
    session: mb.Session, tmp_path: Path
) -> None:
    query = run(session, tmp_path, sink="applied-then-failing-test", where="none")
    query.await_termination(timeout=30)
    assert query.exception() is None
    assert ids_in_sink(tmp_path) == list(range(ROWS))
    batches = [progress for progress in query.recent_progress if progress["numInputRows"]]
    assert [progress.get("batchRetries") for progress in batches] == [1, 1, 1]
