"""The foreachBatch sink, driven through the sink contract as the engine drives it."""

from __future__ import annotations

import functools
import threading
from typing import Any

import pyarrow as pa
import pytest

from microbatch import ConfigurationError, OutputMode, PartContext, WriteContext
from microbatch.errors import OptionError
from microbatch_foreachbatch import ForeachBatchSink, ForeachBatchWriter

SCHEMA = pa.schema([("value", pa.int64())])


def make_connector(function: Any) -> ForeachBatchSink:
    options = ForeachBatchSink.options.parse({"function": function}, connector="foreachBatch")
    return ForeachBatchSink(options)


def make_sink(function: Any, mode: OutputMode = OutputMode.APPEND) -> ForeachBatchWriter:
    """The stream writer of one query run, as ``start()`` makes it."""
    return make_connector(function).stream_writer(WriteContext(schema=SCHEMA, output_mode=mode))


def write_part(
    sink: ForeachBatchWriter, batch_id: int, data: pa.RecordBatchReader, index: int = 0
) -> Any:
    """Write one part of a batch as the engine does."""
    return sink.part_writer().write(data, PartContext(batch_id, index, index + 1))


def part(*values: int) -> pa.RecordBatchReader:
    batch = pa.RecordBatch.from_pydict({"value": list(values)}, schema=SCHEMA)
    return pa.RecordBatchReader.from_batches(SCHEMA, [batch])


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[list[int], int, type]] = []

    def __call__(self, batch: pa.Table, batch_id: int) -> None:
        self.calls.append((batch.column("value").to_pylist(), batch_id, type(batch_id)))


def test_function_gets_the_whole_batch_once_with_its_id() -> None:
    recorder = Recorder()
    sink = make_sink(recorder)
    messages = [write_part(sink, 0, part(1, 2)), write_part(sink, 0, part(3), 1)]
    assert recorder.calls == []  # nothing happens before the batch commits
    sink.commit(messages, 0)
    sink.commit([write_part(sink, 1, part(4))], 1)
    assert recorder.calls == [([1, 2, 3], 0, int), ([4], 1, int)]


def test_parts_written_in_parallel_arrive_in_split_order() -> None:
    recorder = Recorder()
    sink = make_sink(recorder)
    messages: list[Any] = [None] * 6

    def write(index: int) -> None:
        messages[index] = write_part(sink, 7, part(*range(index * 10, index * 10 + 10)), index)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sink.commit(messages, 7)
    assert recorder.calls == [(list(range(60)), 7, int)]


def test_an_executed_batch_without_rows_calls_the_function_with_an_empty_table() -> None:
    seen: list[pa.Table] = []
    sink = make_sink(lambda batch, batch_id: seen.append(batch))
    sink.commit([write_part(sink, 0, pa.RecordBatchReader.from_batches(SCHEMA, []))], 0)
    sink.commit([], 1)
    assert [table.num_rows for table in seen] == [0, 0]
    assert all(table.schema.equals(SCHEMA) for table in seen)


def test_a_replayed_batch_calls_the_function_again() -> None:
    recorder = Recorder()
    sink = make_sink(recorder)
    sink.commit([write_part(sink, 3, part(1))], 3)
    sink.commit([write_part(sink, 3, part(1))], 3)
    assert recorder.calls == [([1], 3, int), ([1], 3, int)]


def test_the_user_error_propagates_unchanged() -> None:
    class Boom(RuntimeError):
        pass

    failure = Boom("target table is full")

    def fail(batch: pa.Table, batch_id: int) -> None:
        raise failure

    sink = make_sink(fail)
    message = write_part(sink, 0, part(1))
    with pytest.raises(Boom) as caught:
        sink.commit([message], 0)
    assert caught.value is failure


@pytest.mark.parametrize("mode", list(OutputMode))
def test_every_output_mode_is_accepted(mode: OutputMode) -> None:
    recorder = Recorder()
    sink = make_sink(recorder, mode)
    sink.commit([write_part(sink, 0, part(5))], 0)
    assert recorder.calls == [([5], 0, int)]


def test_function_is_required() -> None:
    with pytest.raises(OptionError, match="missing required option 'function'"):
        ForeachBatchSink.options.parse({}, connector="foreachBatch")


def test_function_must_be_callable() -> None:
    with pytest.raises(
        ConfigurationError, match="must be a callable function\\(batch, batch_id\\), got str"
    ):
        make_connector("print")


def one_argument(batch: pa.Table) -> None:
    pass


def three_arguments(batch: pa.Table, batch_id: int, extra: str) -> None:
    pass


def keyword_only(batch: pa.Table, *, batch_id: int) -> None:
    pass


@pytest.mark.parametrize("function", [one_argument, three_arguments, keyword_only, lambda: None])
def test_function_must_take_two_positional_arguments(function: Any) -> None:
    with pytest.raises(
        ConfigurationError, match="cannot be called as function\\(batch, batch_id\\)"
    ):
        make_connector(function)


def test_a_function_with_more_required_arguments_is_told_how_to_bind_them() -> None:
    with pytest.raises(ConfigurationError) as caught:
        make_connector(three_arguments)
    assert str(caught.value) == (
        "The foreachBatch function three_arguments(batch, batch_id, extra) cannot be called as "
        "function(batch, batch_id) with two positional arguments: missing a required argument: "
        "'extra'. Bind its other required arguments first: lambda batch, batch_id: "
        "three_arguments(batch, batch_id, extra=...), or functools.partial(three_arguments, "
        "extra=...)"
    )
    with pytest.raises(ConfigurationError) as caught:  # too few arguments: nothing to bind
        make_connector(one_argument)
    assert "Bind" not in str(caught.value)


def with_default(batch: pa.Table, batch_id: int, retries: int = 3) -> None:
    pass


class Writer:
    def write(self, batch: pa.Table, batch_id: int) -> None:
        pass


@pytest.mark.parametrize(
    "function",
    [
        with_default,
        lambda *args: None,
        functools.partial(three_arguments, extra="x"),
        Writer().write,
        Recorder(),
        print,  # a built-in that takes any arguments
    ],
)
def test_compatible_callables_are_accepted(function: Any) -> None:
    assert make_connector(function).function is function
    assert make_sink(function).function is function


def test_describe_names_the_function() -> None:
    assert make_connector(with_default).describe() == "ForeachBatchSink[with_default]"
