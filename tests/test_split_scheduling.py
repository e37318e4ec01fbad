"""How a batch's splits are shared between the query's thread and the split pool.

- The first batch, and any batch after one whose splits took a while, hands splits 1.. to the
  pool: they are written in parallel with split 0.
- A batch after a quick one writes every split on the query's thread (no hand-over).
- Either way every part is written exactly once and the commit gets the parts in order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch._engine import INLINE_SPLITS_BELOW

SCHEMA = pa.schema([pa.field("id", pa.int64())])
WAIT = 10.0
"""Seconds a part waits for another one before it counts as serialised behind it."""


@dataclass(frozen=True)
class One(mb.Split):
    value: int


class SplitsReader(mb.StreamReader, mb.SplitReader):
    """``batches`` batches of ``splits`` splits of one row each."""

    def __init__(self, splits: int, batches: int) -> None:
        self.splits, self.batches = splits, batches

    def initial_offset(self) -> mb.Offset:
        return {"rows": 0}

    def default_read_limit(self) -> mb.ReadLimit:
        return mb.ReadMaxRows(self.splits)

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        return {"rows": min(self.splits * self.batches, start["rows"] + self.splits)}

    def partitions(self, start: mb.Offset, end: mb.Offset) -> list[One]:
        return [One(value) for value in range(start["rows"], end["rows"])]

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        assert isinstance(split, One)
        yield pa.record_batch([pa.array([split.value], pa.int64())], SCHEMA)


class SplitsSource(mb.Source):
    format_name = "splits-test"
    capabilities = mb.SourceCapabilities(available_now=True)
    options = mb.OptionSpec(
        mb.Option(name="splits", type="int", default=2, doc="Splits per batch."),
        mb.Option(name="batches", type="int", default=1, doc="Batches."),
    )

    def schema(self) -> pa.Schema:
        return SCHEMA

    def stream_reader(self, context: mb.ReadContext) -> SplitsReader:
        return SplitsReader(self.opts.splits, self.opts.batches)


@dataclass(frozen=True)
class Written(mb.CommitMessage):
    part: int
    ids: tuple[int, ...]
    thread: str


@dataclass
class Plan:
    """What the parts of each batch do: in batch ``meet_in``, part ``waiter`` waits until part
    ``awaited`` has started; in batch ``slow_in``, part 0 takes ``SLOW`` seconds."""

    meet_in: int = -1
    waiter: int = 0
    awaited: int = 1
    slow_in: int = -1
    started: threading.Event = field(default_factory=threading.Event)
    met: bool | None = None
    committed: dict[int, list[Written | None]] = field(default_factory=dict)


SLOW = 4 * INLINE_SPLITS_BELOW
PLANS: dict[str, Plan] = {}


class PlannedWriter(mb.StreamWriter, mb.PartWriter):
    def __init__(self, key: str) -> None:
        self.key = key

    def write(self, data: pa.RecordBatchReader, part: mb.PartContext) -> Written:
        plan = PLANS[self.key]
        if part.batch_id == plan.meet_in:
            if part.part_index == plan.awaited:
                plan.started.set()
            if part.part_index == plan.waiter:
                plan.met = plan.started.wait(WAIT)
        if part.batch_id == plan.slow_in and part.part_index == 0:
            time.sleep(SLOW)
        ids = tuple(data.read_all().column("id").to_pylist())
        return Written(part.part_index, ids, threading.current_thread().name)

    def commit(self, messages: Sequence[mb.CommitMessage | None], batch_id: int) -> None:
        written = [m if isinstance(m, Written) else None for m in messages]
        PLANS[self.key].committed[batch_id] = written


class PlannedSink(mb.Sink):
    format_name = "planned-test"
    options = mb.OptionSpec(mb.Option(name="key", required=True, doc="Which plan."))

    def stream_writer(self, context: mb.WriteContext) -> PlannedWriter:
        return PlannedWriter(self.opts.key)


@pytest.fixture
def session(session: mb.Session, register: Callable[..., None]) -> mb.Session:
    register(session, "split-scheduling", SplitsSource, PlannedSink)
    session.conf.set("maxReadThreads", 2)  # the query's thread and one pool thread
    return session


def run(
    session: mb.Session, tmp_path: Path, plan: Plan, splits: int, batches: int = 1
) -> tuple[Plan, mb.StreamingQuery]:
    PLANS[tmp_path.name] = plan
    query = (
        session.read_stream.format("splits-test")
        .options(splits=splits, batches=batches)
        .load()
        .write_stream.format("planned-test")
        .option("key", tmp_path.name)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(available_now=True)
        .start()
    )
    assert query.await_termination(timeout=4 * WAIT)
    assert query.exception() is None
    plan = PLANS.pop(tmp_path.name)
    for batch_id in range(batches):  # every part once, in order
        parts = plan.committed[batch_id]
        assert [m.ids if m else None for m in parts] == [
            (value,) for value in range(batch_id * splits, (batch_id + 1) * splits)
        ]
    return plan, query


def threads_of(plan: Plan, batch_id: int) -> set[str]:
    return {m.thread for m in plan.committed[batch_id] if m is not None}


def test_splits_are_written_in_parallel(session: mb.Session, tmp_path: Path) -> None:
    # part 0 (on the query's thread) holds until part 1 has started: only a parallel write
    # of part 1 lets it go on
    plan, _ = run(session, tmp_path, Plan(meet_in=0, waiter=0, awaited=1), splits=2)
    assert plan.met is True
    assert len(threads_of(plan, 0)) == 2


def test_after_a_slow_batch_the_next_one_uses_the_pool_again(
    session: mb.Session, tmp_path: Path
) -> None:
    # batch 1 takes longer than INLINE_SPLITS_BELOW; in batch 2, part 0 holds until part 1 has
    # started, which needs the pool
    plan, _ = run(session, tmp_path, Plan(slow_in=1, meet_in=2), splits=2, batches=3)
    assert plan.met is True
    assert len(threads_of(plan, 2)) == 2


def test_after_a_quick_batch_every_split_is_written_on_the_query_thread(
    session: mb.Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a bound well above what one-row splits take, also on a busy machine
    monkeypatch.setattr("microbatch._engine.INLINE_SPLITS_BELOW", 0.05)
    plan, query = run(session, tmp_path, Plan(), splits=3, batches=12)
    add_batch_ms = {p["batchId"]: p["durationMs"]["addBatch"] for p in query.recent_progress}
    # the split writes of a batch whose addBatch (writes and commit) took at most 25 ms were
    # quicker than the bound for certain
    quick = [b for b in range(11) if add_batch_ms[b] <= 25]
    assert quick, f"no quick batch on this machine: {add_batch_ms}"
    query_threads = threads_of(plan, 0) - {t for t in threads_of(plan, 0) if "split" in t}
    for batch_id in quick:
        assert threads_of(plan, batch_id + 1) == query_threads, batch_id + 1
