"""Running a connector under test in a real query: the kit's own source and sink for it.

A source under test is read into :class:`CollectSink` (``microbatch-testkit-collect``), which
keeps each batch's rows by batch id; a sink under test is fed by :class:`RowsSource`
(``microbatch-testkit-rows``), which serves a list of batches, each cut into parts (one split
per part, so the engine writes several parts of a batch at once). Both live in the test's
process and are registered only on the session the check uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from microbatch import (
    BatchWriter,
    Guarantee,
    Offset,
    Option,
    OptionSpec,
    OutputMode,
    ReadAllAvailable,
    ReadContext,
    ReadLimit,
    ReadMaxFiles,
    Session,
    Sink,
    SinkCapabilities,
    Source,
    SourceCapabilities,
    Split,
    SplitReader,
    StreamReader,
    StreamWriter,
    WriteContext,
)
from microbatch.errors import UnknownFormatError

__all__ = [
    "COLLECT_FORMAT",
    "ROWS_FORMAT",
    "CollectSink",
    "RowsSource",
    "batch_ranges",
    "ensure_registered",
    "wait_until",
]

COLLECT_FORMAT = "microbatch-testkit-collect"
ROWS_FORMAT = "microbatch-testkit-rows"


class _CollectWriter(BatchWriter):
    def __init__(self, into: dict[int, pa.Table], context: WriteContext) -> None:
        super().__init__(context)
        self.into = into

    def add_batch(self, table: pa.Table, batch_id: int) -> None:
        self.into[batch_id] = table  # a replayed batch replaces itself


class CollectSink(Sink):
    """Keeps each batch's rows in the dict given as option ``into``, by batch id."""

    format_name = COLLECT_FORMAT
    description = "Keeps each batch in a dict (microbatch-testkit)"
    options = OptionSpec(
        Option(name="into", type="object", required=True, doc="Dict of batch id to rows."),
    )
    capabilities = SinkCapabilities(
        output_modes=frozenset(OutputMode), guarantee=Guarantee.EXACTLY_ONCE
    )

    def stream_writer(self, context: WriteContext) -> StreamWriter:
        return _CollectWriter(self.opts.into, context)


@dataclass(frozen=True)
class _PartSplit(Split):
    batch: int
    part: int


class _RowsReader(StreamReader, SplitReader):
    def __init__(self, batches: list[list[list[pa.RecordBatch]]]) -> None:
        self.batches = batches
        self.target: int | None = None

    def initial_offset(self) -> Offset:
        return {"batch": 0}

    def default_read_limit(self) -> ReadLimit:
        return ReadMaxFiles(1)  # one listed batch per micro-batch

    def prepare_available_now(self) -> None:
        self.target = len(self.batches)

    def latest_offset(self, start: Offset, limit: ReadLimit) -> Offset:
        end = len(self.batches) if self.target is None else self.target
        if not isinstance(limit, ReadAllAvailable):
            end = min(end, start["batch"] + 1)
        return {"batch": max(end, start["batch"])}

    def partitions(self, start: Offset, end: Offset) -> list[_PartSplit]:
        return [
            _PartSplit(batch, part)
            for batch in range(start["batch"], end["batch"])
            for part in range(len(self.batches[batch]))
        ]

    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        assert isinstance(split, _PartSplit)
        yield from self.batches[split.batch][split.part]


class RowsSource(Source):
    """Serves option ``batches`` (a list of batches, each a list of parts, each a list of
    record batches of option ``rowsSchema``): one listed batch per micro-batch."""

    format_name = ROWS_FORMAT
    description = "Serves a list of batches (microbatch-testkit)"
    options = OptionSpec(
        Option(name="batches", type="object", required=True, doc="The batches to serve."),
        Option(name="rowsSchema", type="object", required=True, doc="Their schema."),
    )
    capabilities = SourceCapabilities(available_now=True)

    def schema(self) -> pa.Schema:
        schema: pa.Schema = self.opts.rows_schema
        return schema

    def stream_reader(self, context: ReadContext) -> StreamReader:
        return _RowsReader(self.opts.batches)


def ensure_registered(session: Session, role: str, cls: type[Any]) -> None:
    """Register ``cls`` on ``session`` unless its format is already known in that role."""
    try:
        session.registry.find(role, cls.format_name)  # type: ignore[arg-type]
    except UnknownFormatError:
        if role == "source":
            session.registry.add_source(cls)
        else:
            session.registry.add_sink(cls)


def wait_until(condition: Callable[[], bool], timeout: float, what: str, query: Any) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` (and the query's error)."""
    deadline = time.monotonic() + timeout
    while not condition():
        error = query.exception()
        if error is not None:
            raise AssertionError(f"the query failed while waiting for {what}: {error!r}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.01)


def batch_ranges(query: Any, batch_ids: Sequence[int]) -> dict[int, tuple[Offset, Offset]]:
    """``(startOffset, endOffset)`` of each of ``batch_ids`` from the query's progress."""
    ranges: dict[int, tuple[Offset, Offset]] = {}
    for progress in query.recent_progress:
        batch_id = progress["batchId"]
        if batch_id in batch_ids and progress["sources"]:
            source = progress["sources"][0]
            if source["startOffset"] != source["endOffset"] or batch_id not in ranges:
                ranges[batch_id] = (source["startOffset"], source["endOffset"])
    return ranges
