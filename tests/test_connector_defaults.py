"""What the contract's base classes do for a connector: refuse batch reads of a source declared
``streaming_only``, and hand out a reader or writer that also reads its splits or writes its
parts as its own split reader or part writer."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb

SCHEMA = pa.schema([("n", pa.int64())])


class TickerReader(mb.StreamReader, mb.SplitReader):
    """One row per batch, for ever; reads its own splits."""

    def initial_offset(self) -> mb.Offset:
        return {"n": 0}

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        return {"n": start["n"] + 1}

    def partitions(self, start: mb.Offset, end: mb.Offset) -> list[mb.Split]:
        return [mb.Split()]

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        yield pa.record_batch([pa.array([1], pa.int64())], schema=SCHEMA)


class TickerSource(mb.Source):
    """A source that only streams."""

    format_name = "ticker-test"
    description = "One row per batch (test)."
    capabilities = mb.SourceCapabilities(streaming_only="use session.read_stream, for ever")

    def schema(self) -> pa.Schema:
        return SCHEMA

    def stream_reader(self, context: mb.ReadContext) -> TickerReader:
        return TickerReader()


STREAMING_ONLY = (
    "The ticker-test source only supports streaming reads: use session.read_stream, for ever."
)


def test_a_streaming_only_source_refuses_to_be_made_for_a_batch_read() -> None:
    options = TickerSource.options.parse({}, connector="ticker-test")
    with pytest.raises(mb.UnsupportedOperationError) as caught:
        TickerSource(options, streaming=False)
    assert str(caught.value) == STREAMING_ONLY
    assert TickerSource(options).streaming


def test_session_read_of_a_streaming_only_source_fails_and_read_stream_works(
    session: mb.Session, register: Callable[..., None]
) -> None:
    register(session, "ticker", TickerSource)
    with pytest.raises(mb.UnsupportedOperationError, match="only supports streaming reads"):
        session.read.format("ticker-test").load()
    frame = session.read_stream.format("ticker-test").load()
    query = frame.write_stream.format("memory").query_name("ticks").trigger(once=True).start()
    query.await_termination(30)
    assert session.table("ticks").num_rows == 1


def test_sources_are_read_in_batch_unless_declared_streaming_only() -> None:
    assert mb.SourceCapabilities().streaming_only == ""

    class Batchable(TickerSource):
        capabilities = mb.SourceCapabilities()

    source = Batchable(Batchable.options.parse({}, connector="ticker-test"), streaming=False)
    assert not source.streaming


class Halves(mb.StreamWriter):
    """A writer that is not its own part writer and does not say which one it uses."""

    def commit(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        return None


class PlannerOnly(mb.StreamReader):
    """A reader that is not its own split reader and does not say which one it uses."""

    def initial_offset(self) -> mb.Offset:
        return {}

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        return start

    def partitions(self, start: mb.Offset, end: mb.Offset) -> list[mb.Split]:
        return []


class WholeWriter(Halves, mb.PartWriter):
    def write(self, data: pa.RecordBatchReader, part: mb.PartContext) -> Any:
        return None


def test_a_reader_or_writer_that_does_both_halves_is_its_own_split_reader_or_part_writer() -> None:
    reader = TickerReader()
    assert reader.split_reader() is reader
    writer = WholeWriter()
    assert writer.part_writer() is writer


def test_a_missing_split_reader_or_part_writer_is_named() -> None:
    with pytest.raises(TypeError) as caught:
        PlannerOnly().split_reader()
    assert str(caught.value) == (
        "PlannerOnly must implement split_reader() (or also subclass microbatch.SplitReader)"
    )
    with pytest.raises(TypeError) as caught:
        Halves().part_writer()
    assert str(caught.value) == (
        "Halves must implement part_writer() (or also subclass microbatch.PartWriter)"
    )
