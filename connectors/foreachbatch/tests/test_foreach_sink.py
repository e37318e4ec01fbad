"""The foreach sink: Spark's open / process / close protocol, per split."""

from __future__ import annotations

import logging
import threading
from typing import Any, ClassVar

import pyarrow as pa
import pytest

from microbatch import ConfigurationError, PartContext, WriteContext
from microbatch.errors import OptionError
from microbatch_foreachbatch import ForeachSink, ForeachWriter, RowsProcessed

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def make_connector(writer: Any) -> ForeachSink:
    options = ForeachSink.options.parse({"writer": writer}, connector="foreach")
    return ForeachSink(options)


def make_sink(writer: Any) -> ForeachWriter:
    """The stream writer of one query run, as ``start()`` makes it."""
    return make_connector(writer).stream_writer(WriteContext(schema=SCHEMA))


def write(sink: ForeachWriter, batch_id: int, index: int, reader: pa.RecordBatchReader) -> Any:
    """Write one split as the engine does: with its index in the part context."""
    return sink.part_writer().write(reader, PartContext(batch_id, index, index + 1))


def part(*ids: int) -> pa.RecordBatchReader:
    rows = [{"id": i, "name": f"n{i}"} for i in ids]
    batches = [pa.RecordBatch.from_pylist(rows[:1], schema=SCHEMA)] if rows else []
    if len(rows) > 1:
        batches.append(pa.RecordBatch.from_pylist(rows[1:], schema=SCHEMA))
    return pa.RecordBatchReader.from_batches(SCHEMA, batches)


class EventWriter:
    """Logs every call in a class-level list (the sink works on copies of the instance)."""

    events: ClassVar[list[tuple[Any, ...]]] = []

    def __init__(self, accept: Any = True, fail_on: int | None = None) -> None:
        self.accept = accept
        self.fail_on = fail_on
        self.partition: int | None = None

    def open(self, partition_id: int, epoch_id: int) -> Any:
        self.partition = partition_id
        self.events.append(("open", partition_id, epoch_id))
        return self.accept

    def process(self, row: dict[str, Any]) -> None:
        if row["id"] == self.fail_on:
            raise ValueError(f"cannot store row {row['id']}")
        self.events.append(("process", self.partition, row))

    def close(self, error: BaseException | None) -> None:
        self.events.append(("close", self.partition, error))


@pytest.fixture
def events() -> list[tuple[Any, ...]]:
    EventWriter.events = []
    return EventWriter.events


def test_function_is_called_with_every_row_as_a_dict() -> None:
    seen: list[dict[str, Any]] = []
    sink = make_sink(seen.append)
    messages = [write(sink, 0, 0, part(1, 2)), write(sink, 0, 1, part(3))]
    assert messages == [RowsProcessed(2), RowsProcessed(1)]
    sink.commit(messages, 0)
    assert seen == [{"id": 1, "name": "n1"}, {"id": 2, "name": "n2"}, {"id": 3, "name": "n3"}]


def test_open_process_close_per_partition_with_the_batch_id(events: list[Any]) -> None:
    sink = make_sink(EventWriter())
    messages = [write(sink, 5, 0, part(1, 2)), write(sink, 5, 1, part(3))]
    sink.commit(messages, 5)
    assert messages == [RowsProcessed(2), RowsProcessed(1)]
    assert events == [
        ("open", 0, 5),
        ("process", 0, {"id": 1, "name": "n1"}),
        ("process", 0, {"id": 2, "name": "n2"}),
        ("close", 0, None),
        ("open", 1, 5),
        ("process", 1, {"id": 3, "name": "n3"}),
        ("close", 1, None),
    ]


def test_partition_ids_restart_with_each_batch(events: list[Any]) -> None:
    sink = make_sink(EventWriter())
    for batch_id in (0, 1):
        messages = [write(sink, batch_id, i, part(i)) for i in range(3)]
        sink.commit(messages, batch_id)
    opens = [event[1:] for event in events if event[0] == "open"]
    assert opens == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]


def test_an_aborted_batch_replays_with_the_same_partition_ids(events: list[Any]) -> None:
    sink = make_sink(EventWriter())
    messages = [write(sink, 2, 0, part(1)), write(sink, 2, 1, part(2))]
    sink.abort(messages, 2)
    sink.commit([write(sink, 2, 0, part(1)), write(sink, 2, 1, part(2))], 2)
    opens = [event[1:] for event in events if event[0] == "open"]
    assert opens == [(0, 2), (1, 2), (0, 2), (1, 2)]


def test_parallel_splits_get_distinct_partition_ids(events: list[Any]) -> None:
    sink = make_sink(EventWriter())
    threads = [threading.Thread(target=write, args=(sink, 0, i, part(i))) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    opened = sorted(event[1] for event in events if event[0] == "open")
    assert opened == list(range(16))
    processed = {event[1]: event[2]["id"] for event in events if event[0] == "process"}
    assert sorted(processed.values()) == list(range(16))  # each split's copy kept its own state


@pytest.mark.parametrize("accept", [False, None, 0])
def test_falsy_open_skips_process_but_still_closes(events: list[Any], accept: Any) -> None:
    sink = make_sink(EventWriter(accept=accept))
    assert write(sink, 0, 0, part(1, 2)) == RowsProcessed(0)
    assert events == [("open", 0, 0), ("close", 0, None)]


def test_process_error_is_passed_to_close_then_reraised(events: list[Any]) -> None:
    sink = make_sink(EventWriter(fail_on=2))
    with pytest.raises(ValueError, match="cannot store row 2") as caught:
        write(sink, 0, 0, part(1, 2, 3))
    assert [event[0] for event in events] == ["open", "process", "close"]
    assert events[1][2]["id"] == 1  # row 3 was never processed
    assert events[2][2] is caught.value


def test_open_error_propagates_without_close() -> None:
    closed: list[Any] = []

    class FailingOpen:
        def open(self, partition_id: int, epoch_id: int) -> bool:
            raise ConnectionError("database unreachable")

        def process(self, row: dict[str, Any]) -> None:
            raise AssertionError("process must not run")

        def close(self, error: BaseException | None) -> None:
            closed.append(error)

    sink = make_sink(FailingOpen())
    with pytest.raises(ConnectionError, match="database unreachable"):
        write(sink, 0, 0, part(1))
    assert closed == []


def test_close_error_after_success_propagates() -> None:
    class FailingClose:
        def process(self, row: dict[str, Any]) -> None:
            pass

        def close(self, error: BaseException | None) -> None:
            raise OSError("flush failed")

    with pytest.raises(OSError, match="flush failed"):
        write(make_sink(FailingClose()), 0, 0, part(1))


def test_process_only_writer_needs_no_open_or_close() -> None:
    class ProcessOnly:
        rows: ClassVar[list[int]] = []

        def process(self, row: dict[str, Any]) -> None:
            self.rows.append(row["id"])

    sink = make_sink(ProcessOnly())
    write(sink, 0, 0, part(1, 2))
    assert ProcessOnly.rows == [1, 2]


def test_each_split_works_on_a_fresh_copy_of_the_writer() -> None:
    class Buffering:
        flushed: ClassVar[list[list[int]]] = []

        def __init__(self) -> None:
            self.buffer: list[int] = []

        def process(self, row: dict[str, Any]) -> None:
            self.buffer.append(row["id"])

        def close(self, error: BaseException | None) -> None:
            self.flushed.append(self.buffer)

    writer = Buffering()
    sink = make_sink(writer)
    write(sink, 0, 0, part(1, 2))
    write(sink, 0, 0, part(3))
    assert Buffering.flushed == [[1, 2], [3]]  # no split saw another split's rows
    assert writer.buffer == []  # the user's object itself is untouched


def test_a_writer_that_cannot_be_copied_is_shared(caplog: pytest.LogCaptureFixture) -> None:
    class Locked:
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.rows: list[int] = []

        def process(self, row: dict[str, Any]) -> None:
            with self.lock:
                self.rows.append(row["id"])

    writer = Locked()
    sink = make_sink(writer)
    with caplog.at_level(logging.WARNING, logger="microbatch_foreachbatch.foreach"):
        write(sink, 0, 0, part(1))
        write(sink, 0, 0, part(2))
    assert writer.rows == [1, 2]
    warnings = [r for r in caplog.records if "cannot be copied" in r.getMessage()]
    assert len(warnings) == 1  # said once, not per split


def test_a_callable_object_is_used_as_a_function() -> None:
    class Callable:
        def __init__(self) -> None:
            self.rows: list[int] = []

        def __call__(self, row: dict[str, Any]) -> None:
            self.rows.append(row["id"])

    writer = Callable()
    write(make_sink(writer), 0, 0, part(4, 5))
    assert writer.rows == [4, 5]


def test_writer_is_required() -> None:
    with pytest.raises(OptionError, match="missing required option 'writer'"):
        ForeachSink.options.parse({}, connector="foreach")


class NoProcess:
    def open(self, partition_id: int, epoch_id: int) -> bool:
        return True


class ProcessNotCallable:
    process = "yes"


class OpenNotCallable:
    open = 1

    def process(self, row: Any) -> None:
        pass


class OpenWrongArity:
    def open(self, partition_id: int) -> bool:
        return True

    def process(self, row: Any) -> None:
        pass


class CloseWrongArity:
    def process(self, row: Any) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("writer", "message"),
    [
        (
            NoProcess(),
            "foreach writer NoProcess has no 'process' method: pass a function f\\(row\\)",
        ),
        (ProcessNotCallable(), "Attribute 'process' .* is not callable"),
        (OpenNotCallable(), "Attribute 'open' .* is not callable"),
        (OpenWrongArity(), "cannot be called as open\\(partition_id, epoch_id\\)"),
        (CloseWrongArity(), "cannot be called as close\\(error\\)"),
        (lambda: None, "foreach function .* cannot be called as f\\(row\\)"),
        (42, "foreach writer int has no 'process' method"),
    ],
)
def test_invalid_writers_are_rejected_at_construction(writer: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        make_connector(writer)


def test_describe_names_the_writer() -> None:
    assert make_connector(EventWriter()).describe() == "ForeachSink[EventWriter]"
