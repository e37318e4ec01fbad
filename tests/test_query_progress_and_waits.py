"""``process_all_available(timeout)``, the progress record's ``latestOffset`` and the error for
a format installed in the other role only."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch._registry import ConnectorRegistry
from microbatch.errors import (
    ConfigurationError,
    StreamingQueryException,
    UnknownFormatError,
    UnsupportedOperationError,
)
from microbatch_memory import MemoryStream
from microbatch_rate import RateSource
from microbatch_testkit._engine import wait_until

SCHEMA = pa.schema([("value", pa.int64())])
START = 1_700_000_000.0


@dataclass(frozen=True)
class RowRange(mb.Split):
    first: int
    stop: int


class BacklogReader(mb.StreamReader, mb.SplitReader):
    """Offsets and reads of :class:`BacklogSource`."""

    def __init__(self, rows: int, max_rows_per_trigger: int, fail_at: int) -> None:
        self.rows = rows
        self.max_rows_per_trigger = max_rows_per_trigger
        self.fail_at = fail_at

    def initial_offset(self) -> mb.Offset:
        return {"rows": 0}

    def default_read_limit(self) -> mb.ReadLimit:
        return mb.ReadMaxRows(self.max_rows_per_trigger)

    def latest_offset(self, start: mb.Offset, limit: mb.ReadLimit) -> mb.Offset:
        end = self.rows
        if isinstance(limit, mb.ReadMaxRows):
            end = min(end, start["rows"] + limit.max_rows)
        return {"rows": end}

    def report_latest_offset(self) -> mb.Offset | None:
        return {"rows": self.rows}

    def partitions(self, start: mb.Offset, end: mb.Offset) -> list[RowRange]:
        return [RowRange(start["rows"], end["rows"])] if end["rows"] > start["rows"] else []

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        assert isinstance(split, RowRange)
        if split.first <= self.fail_at < split.stop:
            raise ValueError(f"row {self.fail_at} cannot be read")
        yield pa.record_batch([pa.array(range(split.first, split.stop), pa.int64())], schema=SCHEMA)


class BacklogSource(mb.Source):
    """``rows`` rows known from the start, at most ``maxRowsPerTrigger`` per batch; reports the
    end of its data, so that progress shows how far it is held back."""

    format_name = "backlog-test"
    options = mb.OptionSpec(
        mb.Option(name="rows", type="int", required=True, doc="Rows available."),
        mb.Option(name="maxRowsPerTrigger", type="int", required=True, doc="Rows per batch."),
        mb.Option(name="failAt", type="int", default=-1, doc="A row whose read fails."),
    )

    def schema(self) -> pa.Schema:
        return SCHEMA

    def stream_reader(self, context: mb.ReadContext) -> mb.StreamReader:
        return BacklogReader(self.opts.rows, self.opts.max_rows_per_trigger, self.opts.fail_at)


@pytest.fixture
def backlog(session: Any, register: Callable[..., None]) -> Any:
    register(session, "backlog", BacklogSource)
    return session


class EverySecondClock:
    """Moves one second on every reading, so the rate source has new data at each trigger."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def __call__(self) -> float:
        return START + next(self._ticks)


# -- process_all_available --------------------------------------------------------------------
def test_process_all_available_returns_true_once_caught_up(session: Any) -> None:
    stream = MemoryStream(SCHEMA)
    query = stream.to_frame(session).write_stream.format("memory").query_name("caught").start()
    try:
        stream.add_data([1, 2])
        assert query.process_all_available(timeout=10) is True
        assert session.table("caught").column("value").to_pylist() == [1, 2]
        stream.add_data([3])
        assert query.process_all_available() is True
        assert session.table("caught").column("value").to_pylist() == [1, 2, 3]
    finally:
        query.stop()
    assert query.process_all_available(timeout=1) is True  # ended: nothing more to process


def test_process_all_available_times_out_on_an_endless_rate_micro_batch(session: Any) -> None:
    frame = session.read_stream.format("rate-micro-batch").option("rowsPerBatch", 5).load()
    query = frame.write_stream.format("noop").start()
    try:
        clock = time.monotonic()
        assert query.process_all_available(timeout=0.3) is False
        assert time.monotonic() - clock < 3
        assert query.is_active and query.exception() is None
    finally:
        query.stop()


def test_process_all_available_times_out_on_an_endless_rate_source(
    session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(RateSource, "clock", EverySecondClock())
    frame = session.read_stream.format("rate").options(rowsPerSecond=1, numPartitions=1).load()
    query = frame.write_stream.format("noop").start()
    try:
        clock = time.monotonic()
        assert query.process_all_available(timeout=0.3) is False
        assert time.monotonic() - clock < 3
        assert query.is_active
        wait_until(lambda: query.last_progress is not None, 10, "the first batch", query)
        assert query.last_progress is not None and query.last_progress["numInputRows"] > 0
    finally:
        query.stop()


def test_process_all_available_refuses_a_timeout_that_is_not_positive(session: Any) -> None:
    stream = MemoryStream(SCHEMA)
    query = stream.to_frame(session).write_stream.format("memory").query_name("t").start()
    try:
        for timeout in (0, -1):
            with pytest.raises(ConfigurationError, match="timeout must be positive"):
                query.process_all_available(timeout=timeout)
    finally:
        query.stop()


def test_process_all_available_with_a_timeout_raises_the_query_error(backlog: Any) -> None:
    frame = backlog.read_stream.format("backlog-test").options(
        rows=6, maxRowsPerTrigger=2, failAt=4
    )
    query = frame.load().write_stream.format("noop").start()
    with pytest.raises(StreamingQueryException, match="row 4 cannot be read"):
        query.process_all_available(timeout=10)


# -- latestOffset in progress -----------------------------------------------------------------
def test_latest_offset_is_where_the_data_ends_while_a_read_limit_holds_it_back(
    backlog: Any,
) -> None:
    frame = backlog.read_stream.format("backlog-test").options(rows=10, maxRowsPerTrigger=3)
    query = frame.load().write_stream.format("noop").start()
    try:
        assert query.process_all_available(timeout=10) is True
    finally:
        query.stop()
    sources = [p["sources"][0] for p in query.recent_progress if p["numInputRows"]]
    assert [s["endOffset"] for s in sources] == [{"rows": n} for n in (3, 6, 9, 10)]
    assert [s["latestOffset"] for s in sources] == [{"rows": 10}] * 4
    assert json.loads(query.last_progress.json)["sources"][0]["latestOffset"] == {"rows": 10}


def test_latest_offset_is_null_when_the_source_does_not_report_it(session: Any) -> None:
    frame = session.read_stream.format("rate-micro-batch").option("rowsPerBatch", 5).load()
    query = frame.write_stream.format("noop").trigger(available_now=True).start()
    query.await_termination(timeout=10)
    [progress] = [p for p in query.recent_progress if p["numInputRows"]]
    source = progress["sources"][0]
    assert source["endOffset"] == {"offset": 5, "timestamp": 1000}
    assert source["latestOffset"] is None
    assert json.loads(progress.json)["sources"][0]["latestOffset"] is None


def test_memory_stream_reports_the_batches_added(session: Any) -> None:
    stream = MemoryStream(SCHEMA)
    query = stream.to_frame(session).write_stream.format("memory").query_name("m").start()
    try:
        stream.add_data([1])
        stream.add_data([2])
        query.process_all_available(timeout=10)
    finally:
        query.stop()
    source = query.recent_progress[-1]["sources"][0]
    assert source["latestOffset"] == {"offset": stream.num_batches} == source["endOffset"]


def test_rate_source_reports_the_seconds_elapsed(
    session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Stepped:
        now = START

        def __call__(self) -> float:
            return self.now

    clock = Stepped()
    monkeypatch.setattr(RateSource, "clock", clock)
    frame = session.read_stream.format("rate").options(rowsPerSecond=2, numPartitions=1).load()
    query = frame.write_stream.format("noop").start()
    try:
        clock.now = START + 2.5
        assert query.process_all_available(timeout=10) is True
    finally:
        query.stop()
    [source] = [p["sources"][0] for p in query.recent_progress if p["numInputRows"]]
    assert source["endOffset"] == source["latestOffset"] == {"seconds": 2}


# -- a format installed in the other role only ------------------------------------------------
def test_a_source_only_format_is_named_as_such_by_write_stream(session: Any) -> None:
    frame = session.read_stream.format("rate-micro-batch").option("rowsPerBatch", 1).load()
    with pytest.raises(UnknownFormatError) as caught:
        frame.write_stream.format("rate").start()
    message = str(caught.value)
    assert message.startswith("Unknown sink format 'rate'.")
    assert (
        "'rate' is installed as a source only (distribution microbatch-rate 0.1.0): it cannot "
        "be used with write_stream, only with read_stream or read." in message
    )
    assert "pip install" not in message and "Install the distribution" not in message
    assert "Installed sink formats: " in message


def test_a_sink_only_format_is_named_as_such_by_read_stream(session: Any) -> None:
    for read in (session.read_stream, session.read):
        with pytest.raises(UnknownFormatError) as caught:
            read.format("console").load()
        message = str(caught.value)
        assert message.startswith("Unknown source format 'console'.")
        assert "'console' is installed as a sink only (distribution microbatch-console" in message
        assert "it cannot be used with read_stream or read, only with write_stream." in message


class WidgetSource(BacklogSource):
    format_name = "widget"


class WidgetsSink(mb.Sink):
    format_name = "widgets"
    capabilities = mb.SinkCapabilities(needs_checkpoint=False)

    def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
        raise AssertionError("never started")


def test_the_other_role_hint_keeps_the_close_match() -> None:
    class Plugin:
        @mb.hookimpl
        def microbatch_register_connectors(self, registry: ConnectorRegistry) -> None:
            registry.add_source(WidgetSource)
            registry.add_sink(WidgetsSink)

    registry = ConnectorRegistry()
    registry.register_plugin(Plugin(), "widgets", distribution="microbatch-widgets", version="2.1")
    with pytest.raises(UnknownFormatError) as caught:
        registry.find("sink", "Widget")
    lines = str(caught.value).splitlines()
    assert lines[0] == "Unknown sink format 'Widget'. Did you mean 'widgets'?"
    assert lines[1] == (
        "'widget' is installed as a source only (distribution microbatch-widgets 2.1): it "
        "cannot be used with write_stream, only with read_stream or read."
    )
    with pytest.raises(UnknownFormatError, match="Unknown format 'gadget'"):
        registry.find_any("gadget")
    with pytest.raises(UnknownFormatError) as caught:
        registry.find("source", "gadget")
    assert "installed as" not in str(caught.value)


# -- complete mode needs an aggregation -------------------------------------------------------
@pytest.mark.parametrize("sink", ["memory", "console", "noop"])
def test_complete_mode_is_refused_at_start_without_an_aggregation(session: Any, sink: str) -> None:
    stream = MemoryStream(SCHEMA)
    writer = stream.to_frame(session).write_stream.format(sink).query_name(f"complete_{sink}")
    with pytest.raises(
        UnsupportedOperationError,
        match=r"^Complete output mode not supported when there are no streaming aggregations on "
        r"streaming DataFrames/Datasets",
    ):
        writer.output_mode("complete").start()
    assert session.streams.active == []
    query = writer.output_mode("update").start()  # the other modes still start
    query.stop()
