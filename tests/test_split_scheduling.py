"""How a batch's splits are shared between the query's thread and the split pool: they are
written in parallel once the pool starts one, a split the pool has not started is written on
the query's thread instead of waiting for the pool, and every part is written exactly once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

import microbatch as mb

SCHEMA = pa.schema([pa.field("id", pa.int64())])
WAIT = 10.0
"""Seconds a part waits for another one before it counts as serialised behind it."""


@dataclass(frozen=True)
class One(mb.Split):
    value: int


class SplitsReader(mb.StreamReader, mb.SplitReader):
    """One batch of ``splits`` splits of one row each."""

    def __init__(self, splits: int) -> None:
        self.splits = splits

    def initial_offset(self) -> mb.Offset:
        return {"rows": 0}

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        return {"rows": self.splits}

    def partitions(self, start: mb.Offset, end: mb.Offset) -> list[One]:
        return [One(value) for value in range(start["rows"], end["rows"])]

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        assert isinstance(split, One)
        yield pa.record_batch([pa.array([split.value], pa.int64())], SCHEMA)


class SplitsSource(mb.Source):
    format_name = "splits-test"
    options = mb.OptionSpec(mb.Option(name="splits", type="int", default=2, doc="Splits."))

    def schema(self) -> pa.Schema:
        return SCHEMA

    def stream_reader(self, context: mb.ReadContext) -> SplitsReader:
        return SplitsReader(self.opts.splits)


@dataclass(frozen=True)
class Written(mb.CommitMessage):
    part: int
    ids: tuple[int, ...]
    thread: str


class Rendezvous:
    """Part ``waiter`` waits until part ``awaited`` has started writing (on another thread)."""

    def __init__(self, waiter: int, awaited: int) -> None:
        self.waiter, self.awaited = waiter, awaited
        self.started = threading.Event()
        self.met: bool | None = None
        self.committed: list[Written | None] = []


RENDEZVOUS: dict[str, Rendezvous] = {}


class MeetingWriter(mb.StreamWriter, mb.PartWriter):
    def __init__(self, key: str) -> None:
        self.key = key

    def write(self, data: pa.RecordBatchReader, part: mb.PartContext) -> Written:
        meeting = RENDEZVOUS[self.key]
        if part.part_index == meeting.awaited:
            meeting.started.set()
        if part.part_index == meeting.waiter:
            meeting.met = meeting.started.wait(WAIT)
        ids = tuple(data.read_all().column("id").to_pylist())
        return Written(part.part_index, ids, threading.current_thread().name)

    def commit(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        RENDEZVOUS[self.key].committed = [m if isinstance(m, Written) else None for m in messages]


class MeetingSink(mb.Sink):
    format_name = "meeting-test"
    options = mb.OptionSpec(mb.Option(name="key", required=True, doc="Which rendezvous."))

    def stream_writer(self, context: mb.WriteContext) -> MeetingWriter:
        return MeetingWriter(self.opts.key)


@pytest.fixture
def session(session: mb.Session, register: Callable[..., None]) -> mb.Session:
    register(session, "split-scheduling", SplitsSource, MeetingSink)
    session.conf.set("maxReadThreads", 2)  # the query's thread and one pool thread
    return session


def run(session: mb.Session, tmp_path: Path, splits: int, meeting: Rendezvous) -> Rendezvous:
    RENDEZVOUS[tmp_path.name] = meeting
    query = (
        session.read_stream.format("splits-test")
        .option("splits", splits)
        .load()
        .write_stream.format("meeting-test")
        .option("key", tmp_path.name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(once=True)
        .start()
    )
    assert query.await_termination(timeout=4 * WAIT)
    assert query.exception() is None
    return RENDEZVOUS.pop(tmp_path.name)


def parts_in_order(meeting: Rendezvous, splits: int) -> None:
    assert [m.part if m else None for m in meeting.committed] == list(range(splits))
    assert [m.ids if m else None for m in meeting.committed] == [(i,) for i in range(splits)]


def test_splits_are_written_in_parallel_once_the_pool_starts_one(
    session: mb.Session, tmp_path: Path
) -> None:
    # part 0 (on the query's thread) holds until part 1 has started: only a parallel write
    # of part 1 lets it go on
    meeting = run(session, tmp_path, splits=2, meeting=Rendezvous(waiter=0, awaited=1))
    assert meeting.met is True
    parts_in_order(meeting, 2)
    assert meeting.committed[0] and meeting.committed[1]
    assert meeting.committed[0].thread != meeting.committed[1].thread


def test_a_split_the_busy_pool_has_not_started_is_written_on_the_query_thread(
    session: mb.Session, tmp_path: Path
) -> None:
    # whichever part the single pool thread takes holds it until part 2 has started: part 2
    # is written only if the query's thread takes it instead of queueing it behind the pool
    meeting = run(session, tmp_path, splits=3, meeting=Rendezvous(waiter=1, awaited=2))
    assert meeting.met is True
    parts_in_order(meeting, 3)
