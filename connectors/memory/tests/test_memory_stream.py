"""MemoryStream and the memory source, driven through the source contract."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pytest

from microbatch import ConfigurationError, ReadAllAvailable, ReadContext, ReadMaxRows
from microbatch.errors import OptionError, SchemaError, SchemaMismatchError, SourceError
from microbatch_memory import MemoryStream, MemoryStreamReader, MemoryStreamSource

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def make_connector(stream: Any, streaming: bool = True) -> MemoryStreamSource:
    options = MemoryStreamSource.options.parse({"stream": stream}, connector="memory")
    return MemoryStreamSource(options, streaming=streaming)


def make_source(stream: Any, wake: Any = None, streaming: bool = True) -> MemoryStreamReader:
    """The stream reader of one run, as the engine makes it."""
    source = make_connector(stream, streaming=streaming)
    extra = {"wake": wake} if wake is not None else {}
    return source.stream_reader(ReadContext(schema=source.schema(), streaming=streaming, **extra))


def read_range(source: MemoryStreamReader, start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
    out: list[Any] = []
    split_reader = source.split_reader()
    for split in source.partitions(start, end):
        for batch in split_reader.read(split):
            assert batch.schema.equals(source.stream.schema)
            out.extend(batch.to_pylist())
    return out


def test_add_data_accepts_rows_tables_and_record_batches() -> None:
    stream = MemoryStream(SCHEMA)
    assert stream.add_data([{"id": 1, "name": "a"}, {"id": 2}]) == 1
    assert stream.add_data(pa.table({"name": ["c"], "id": pa.array([3], pa.int32())})) == 2
    batch = pa.RecordBatch.from_pylist([{"id": 4, "name": "d"}], schema=SCHEMA)
    assert stream.add_data(batch) == 3
    assert stream.num_batches == 3
    assert stream.batch(0).to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": None}]
    assert stream.batch(1).schema.equals(SCHEMA)
    assert stream.batch(2).to_pylist() == [{"id": 4, "name": "d"}]


def test_single_column_stream_takes_plain_values() -> None:
    stream = MemoryStream(pa.schema([("value", pa.int64())]))
    stream.add_data([1, 2, 3])
    stream.add_data(range(4, 6))
    assert stream.batch(0).column("value").to_pylist() == [1, 2, 3]
    assert stream.batch(1).column("value").to_pylist() == [4, 5]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([{"id": 1, "nmae": "x"}], "unknown column\\(s\\) nmae"),
        ([{"id": "not a number"}], "do not fit the schema"),
        (pa.table({"id": [1]}), "missing: name"),
        (pa.table({"id": [1], "name": ["a"], "extra": [0]}), "unknown: extra"),
        (pa.table({"id": ["x"], "name": ["a"]}), "cannot cast"),
        ({"id": 1}, "got dict"),
        ("id,name", "got str"),
    ],
)
def test_add_data_rejects_data_that_does_not_fit(data: Any, message: str) -> None:
    stream = MemoryStream(SCHEMA)
    with pytest.raises(SchemaMismatchError, match=message):
        stream.add_data(data)
    assert stream.num_batches == 0


def test_schema_may_be_a_ddl_string() -> None:
    stream = MemoryStream("id BIGINT, name STRING")
    assert stream.schema.equals(SCHEMA)
    not_a_schema: Any = ["id"]
    with pytest.raises(SchemaError, match=r"pyarrow\.Schema or a DDL string"):
        MemoryStream(not_a_schema)


def test_source_offsets_count_batches() -> None:
    stream = MemoryStream(SCHEMA)
    source = make_source(stream)
    start = source.initial_offset()
    assert start == {"offset": 0}
    assert source.latest_offset(start, ReadAllAvailable()) is start  # nothing new
    stream.add_data([{"id": 1, "name": "a"}])
    stream.add_data([{"id": 2, "name": "b"}, {"id": 3, "name": "c"}])
    end = source.latest_offset(start, ReadAllAvailable())
    assert end == {"offset": 2}
    # one split per added batch
    assert [split.index for split in source.partitions(start, end)] == [0, 1]
    assert [row["id"] for row in read_range(source, start, end)] == [1, 2, 3]
    assert source.latest_offset(end, ReadMaxRows(1)) is end
    stream.add_data([{"id": 4, "name": "d"}])
    later = source.latest_offset(end, ReadAllAvailable())
    assert later == {"offset": 3}
    assert [row["id"] for row in read_range(source, end, later)] == [4]


def test_source_replays_the_same_rows_for_the_same_offsets() -> None:
    stream = MemoryStream(SCHEMA)
    for i in range(3):
        stream.add_data([{"id": i, "name": str(i)}])
    first = make_source(stream)
    rows = read_range(first, {"offset": 1}, {"offset": 3})
    first.stop()
    second = make_source(stream)  # a restarted query in the same process
    assert read_range(second, {"offset": 1}, {"offset": 3}) == rows
    assert [row["id"] for row in rows] == [1, 2]


def test_empty_batches_are_batches() -> None:
    stream = MemoryStream(SCHEMA)
    source = make_source(stream)
    stream.add_data([])
    end = source.latest_offset({"offset": 0}, ReadAllAvailable())
    assert end == {"offset": 1}
    assert read_range(source, {"offset": 0}, end) == []


def test_offsets_beyond_the_stream_fail_clearly() -> None:
    stream = MemoryStream(SCHEMA)
    stream.add_data([{"id": 1, "name": "a"}])
    source = make_source(stream)
    # a checkpoint from an earlier process points past what this stream holds
    assert source.latest_offset({"offset": 5}, ReadAllAvailable()) == {"offset": 5}
    with pytest.raises(SourceError, match=r"holds 1 batch\(es\): .*Delete the checkpoint"):
        source.partitions({"offset": 1}, {"offset": 5})


@pytest.mark.parametrize("offset", [{}, {"offset": -1}, {"offset": "1"}, {"offset": True}])
def test_malformed_offsets_are_rejected(offset: dict[str, Any]) -> None:
    source = make_source(MemoryStream(SCHEMA))
    with pytest.raises(SourceError, match="Invalid MemoryStream offset"):
        source.latest_offset(offset, ReadAllAvailable())


def test_add_data_wakes_subscribed_queries_until_stopped() -> None:
    stream = MemoryStream(SCHEMA)
    woken: list[str] = []
    source = make_source(stream, wake=lambda: woken.append("a"))
    stream.add_data([{"id": 1, "name": "a"}])
    assert woken == ["a"]
    source.stop()
    source.stop()  # idempotent
    stream.add_data([{"id": 2, "name": "b"}])
    assert woken == ["a"]


def test_add_data_from_another_thread_wakes_the_waiting_query() -> None:
    stream = MemoryStream(SCHEMA)
    arrived = threading.Event()
    source = make_source(stream, wake=arrived.set)
    thread = threading.Thread(target=stream.add_data, args=([{"id": 7, "name": "x"}],))
    thread.start()
    assert arrived.wait(5)
    thread.join()
    end = source.latest_offset({"offset": 0}, ReadAllAvailable())
    assert [row["id"] for row in read_range(source, {"offset": 0}, end)] == [7]


def test_stream_option_is_required_and_must_be_a_memory_stream() -> None:
    with pytest.raises(OptionError, match="missing required option 'stream'"):
        MemoryStreamSource.options.parse({}, connector="memory")
    with pytest.raises(
        ConfigurationError, match=r"must be a microbatch_memory\.MemoryStream, got list"
    ):
        make_connector([1, 2, 3])


def test_schema_and_description_come_from_the_stream() -> None:
    source = make_connector(MemoryStream(SCHEMA))
    assert source.schema().equals(SCHEMA)
    assert source.describe() == "MemoryStream[id, name]"
    assert MemoryStreamSource.capabilities.replayable is True
    assert MemoryStreamSource.capabilities.user_schema == "forbidden"


def test_batch_read_takes_everything_added() -> None:
    stream = MemoryStream(SCHEMA)
    stream.add_data([{"id": 1, "name": "a"}])
    stream.add_data([{"id": 2, "name": "b"}])
    source = make_source(stream, streaming=False)
    start = source.initial_offset()
    end = source.latest_offset(start, ReadAllAvailable())
    assert [row["id"] for row in read_range(source, start, end)] == [1, 2]


def test_repr_shows_columns_and_batch_count() -> None:
    stream = MemoryStream(SCHEMA)
    stream.add_data([])
    assert repr(stream) == "MemoryStream([id, name], batches=1)"
