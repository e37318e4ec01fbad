"""The file sinks: replay, crash leftovers, partitions, rotation, formats, errors, end to end."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import microbatch as mb
from microbatch import OutputMode, PartContext, WriteContext
from microbatch.errors import (
    CheckpointError,
    ConfigurationError,
    SinkError,
    UnsupportedOperationError,
)
from microbatch_file._writer_files import PART_FILE
from microbatch_file.manifest import Manifest
from microbatch_file.sink_partitions import escape_path_name, unescape_path_name
from microbatch_file.sinks import (
    CsvFileSink,
    FileCommitMessage,
    FileSink,
    FileStreamWriter,
    JsonFileSink,
    ParquetFileSink,
)

SCHEMA = pa.schema([("id", pa.int64()), ("key", pa.string()), ("amount", pa.float64())])


def make_sink(
    cls: type[FileSink],
    path: str,
    *,
    schema: pa.Schema = SCHEMA,
    partition_by: tuple[str, ...] = (),
    query_id: str = "query-1",
    output_mode: OutputMode = OutputMode.APPEND,
    **options: Any,
) -> FileStreamWriter:
    """The stream writer of a new run of a ``cls`` sink writing to ``path``."""
    parsed = cls.options.parse({"path": path, **options}, connector=cls.format_name)
    return cls(parsed).stream_writer(
        WriteContext(
            schema=schema,
            output_mode=output_mode,
            query_id=query_id,
            partition_by=partition_by,
        )
    )


def rows(start: int, count: int, keys: tuple[str | None, ...] = ("a", "b")) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "id": list(range(start, start + count)),
            "key": [keys[i % len(keys)] for i in range(count)],
            "amount": [i * 0.5 for i in range(count)],
        },
        schema=SCHEMA,
    )


def reader(*batches: pa.RecordBatch, schema: pa.Schema = SCHEMA) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(schema, list(batches))


def write_reader(
    sink: FileStreamWriter, batch_id: int, data: pa.RecordBatchReader, *, part: int = 0
) -> Any:
    """Part ``part`` of batch ``batch_id`` written by the run's part writer."""
    context = PartContext(
        batch_id=batch_id, part_index=part, num_parts=part + 1, query_id=sink.context.query_id
    )
    return sink.part_writer().write(data, context)


def write(sink: FileStreamWriter, batch_id: int, *batches: pa.RecordBatch, part: int = 0) -> Any:
    return write_reader(sink, batch_id, reader(*batches, schema=sink.context.schema), part=part)


def read_committed(sink: FileStreamWriter) -> pa.Table:
    """Every committed row, partition columns restored as strings from the manifest."""
    tables = []
    for entry in Manifest(sink.fs, sink.root).entries():
        for file in entry["files"]:
            with sink.fs.open(f"{sink.root}/{file['path']}", "rb") as handle:
                table = pq.read_table(handle)
            for name, value in file["partition"].items():
                table = table.append_column(name, pa.array([value] * table.num_rows, pa.string()))
            tables.append(table)
    return pa.concat_tables(tables) if tables else pa.table({})


def data_files(sink: FileStreamWriter) -> set[str]:
    prefix = len(sink.root) + 1
    return {
        str(path)[prefix:]
        for path in sink.fs.find(sink.root)
        if PART_FILE.match(str(path).rsplit("/", 1)[-1])
    }


@pytest.fixture(params=["local", "memory"])
def folder(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "out")
    return f"memory://sink-{uuid.uuid4().hex}/out"


# ---------------------------------------------------------------------------------- replay


def test_a_replayed_batch_reads_and_writes_nothing(folder: str) -> None:
    first = make_sink(ParquetFileSink, folder)
    first.commit([write(first, 0, rows(0, 10))], 0)
    files_before = data_files(first)

    consumed: list[int] = []

    def batches() -> Iterator[pa.RecordBatch]:
        consumed.append(1)
        yield rows(0, 10)

    second = make_sink(ParquetFileSink, folder)
    message = write_reader(second, 0, pa.RecordBatchReader.from_batches(SCHEMA, batches()))
    assert isinstance(message, FileCommitMessage)
    assert message.skipped and message.files == ()
    assert consumed == [], "the replayed split was read"
    second.commit([message], 0)
    assert data_files(second) == files_before
    assert read_committed(second).num_rows == 10


def test_files_of_a_crashed_attempt_are_never_listed_and_are_removed(folder: str) -> None:
    crashed = make_sink(ParquetFileSink, folder, partition_by=("key",))
    crashed.commit([write(crashed, 0, rows(0, 4))], 0)
    left = [write(crashed, 1, rows(100, 6), part=0), write(crashed, 1, rows(200, 6), part=1)]
    leftovers = {f["path"] for message in left for f in message.files}
    assert len(leftovers) == 4
    assert leftovers <= data_files(crashed)
    assert not set(Manifest(crashed.fs, crashed.root).files()) & {
        f"{crashed.root}/{p}" for p in leftovers
    }
    # the process dies here; a new run replays batch 1 with the same rows
    rerun = make_sink(ParquetFileSink, folder, partition_by=("key",))
    rerun.commit([write(rerun, 1, rows(100, 6), part=0), write(rerun, 1, rows(200, 6), part=1)], 1)
    assert not leftovers & data_files(rerun), "leftover files were not removed"
    ids = sorted(read_committed(rerun).column("id").to_pylist())
    assert ids == [0, 1, 2, 3, *range(100, 106), *range(200, 206)]
    assert data_files(rerun) == {
        p[len(rerun.root) + 1 :] for p in Manifest(rerun.fs, rerun.root).files()
    }


def test_leftovers_go_also_when_the_replay_finds_the_batch_committed(folder: str) -> None:
    first = make_sink(ParquetFileSink, folder)
    first.commit([write(first, 0, rows(0, 3))], 0)
    stray = write(first, 1, rows(3, 3))  # an attempt that crashed before its commit
    second = make_sink(ParquetFileSink, folder)
    second.commit([write(second, 1, rows(3, 3))], 1)  # committed; then killed before the log
    third = make_sink(ParquetFileSink, folder)
    assert write(third, 1, rows(3, 3)).skipped
    third.commit([], 1)
    assert stray.files[0]["path"] not in data_files(third)
    assert sorted(read_committed(third).column("id").to_pylist()) == list(range(6))


def test_abort_deletes_the_files_of_its_messages(folder: str) -> None:
    sink = make_sink(ParquetFileSink, folder)
    messages = [write(sink, 0, rows(0, 5), part=0), write(sink, 0, rows(5, 5), part=1)]
    assert len(data_files(sink)) == 2
    sink.abort([*messages, None], 0)
    assert data_files(sink) == set()
    assert not Manifest(sink.fs, sink.root).has_batch(0)


def test_a_failing_reader_leaves_no_file(folder: str) -> None:
    sink = make_sink(ParquetFileSink, folder, partition_by=("key",), maxRecordsPerFile=2)

    def batches() -> Iterator[pa.RecordBatch]:
        yield rows(0, 10)
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        write_reader(sink, 0, pa.RecordBatchReader.from_batches(SCHEMA, batches()))
    assert data_files(sink) == set()


def test_another_query_cannot_reuse_the_batch_ids_of_a_folder(folder: str) -> None:
    first = make_sink(ParquetFileSink, folder, query_id="first")
    first.commit([write(first, 0, rows(0, 3))], 0)
    other = make_sink(ParquetFileSink, folder, query_id="second")
    with pytest.raises(SinkError, match="written by another query"):
        write(other, 0, rows(0, 3))


# ---------------------------------------------------------------------------------- partitions


def test_partition_values_are_escaped_and_stay_inside_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "out"
    nasty = [
        "../../etc",
        "/abs",
        "a/b",
        "x=y",
        "100%",
        "nul\x00byte",
        "back\\slash",
        "..",
        None,
        "",
    ]
    sink = make_sink(ParquetFileSink, str(out), partition_by=("key",))
    sink.commit([write(sink, 0, rows(0, len(nasty), keys=tuple(nasty)))], 0)
    assert sorted(os.listdir(tmp_path)) == ["deep"]
    assert sorted(os.listdir(tmp_path / "deep")) == ["out"]
    folders = {p.name for p in out.iterdir() if p.is_dir() and p.name != "_microbatch_metadata"}
    assert folders == {
        "key=..%2F..%2Fetc",
        "key=%2Fabs",
        "key=a%2Fb",
        "key=x%3Dy",
        "key=100%25",
        "key=nul%00byte",
        "key=back%5Cslash",
        "key=..",
        "key=__HIVE_DEFAULT_PARTITION__",
    }
    for path in out.rglob("*.parquet"):
        assert path.resolve().is_relative_to(out.resolve())
    table = read_committed(sink)
    by_id = dict(zip(table.column("id").to_pylist(), table.column("key").to_pylist(), strict=True))
    expected = {i: (value or None) for i, value in enumerate(nasty)}
    assert by_id == expected, "partition values do not round-trip (null and '' are both null)"
    assert "key" not in pq.read_schema(next(out.rglob("*.parquet"))).names


def test_escaping_round_trips() -> None:
    for text in ["plain", "a/b", "%41", "x=y:z", "\x01\x7f", "日本", "{[^]}*?#'\""]:
        assert unescape_path_name(escape_path_name(text)) == text
    assert escape_path_name("a/b") == "a%2Fb"


def test_typed_partition_columns_are_rendered_as_spark_does(tmp_path: Path) -> None:
    import datetime

    schema = pa.schema(
        [("v", pa.int64()), ("day", pa.date32()), ("flag", pa.bool_()), ("n", pa.int32())]
    )
    sink = make_sink(
        ParquetFileSink, str(tmp_path / "out"), schema=schema, partition_by=("day", "flag", "n")
    )
    batch = pa.record_batch(
        {
            "v": [1, 2, 3],
            "day": [datetime.date(2024, 5, 1), None, datetime.date(2024, 5, 1)],
            "flag": [True, False, True],
            "n": [7, 7, None],
        },
        schema=schema,
    )
    sink.commit([write(sink, 0, batch)], 0)
    found = {
        p.parent.relative_to(tmp_path / "out").as_posix()
        for p in (tmp_path / "out").rglob("*.parquet")
    }
    assert found == {
        "day=2024-05-01/flag=true/n=7",
        "day=__HIVE_DEFAULT_PARTITION__/flag=false/n=7",
        "day=2024-05-01/flag=true/n=__HIVE_DEFAULT_PARTITION__",
    }


@pytest.mark.parametrize(
    ("schema", "partition_by", "message"),
    [
        (SCHEMA, ("id", "key", "amount"), "all columns"),
        (SCHEMA, ("missing",), "not in the output"),
        (SCHEMA, ("key", "key"), "more than once"),
        (pa.schema([("v", pa.int64()), ("l", pa.list_(pa.int64()))]), ("l",), "partition column"),
    ],
)
def test_unusable_partition_columns_are_refused(
    tmp_path: Path, schema: pa.Schema, partition_by: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        make_sink(ParquetFileSink, str(tmp_path / "out"), schema=schema, partition_by=partition_by)


# ---------------------------------------------------------------------------------- rotation


def test_files_rotate_at_max_records_per_file(folder: str) -> None:
    sink = make_sink(ParquetFileSink, folder, maxRecordsPerFile=300)
    message = write(sink, 7, rows(0, 400), rows(400, 600), part=3)
    sink.commit([message], 7)
    counts = [f["rows"] for f in message.files]
    assert counts == [300, 300, 300, 100]
    names = [f["path"] for f in message.files]
    assert all(name.startswith("part-00007-00003-") for name in names)
    assert [name.split(".")[1] for name in names] == ["c000", "c001", "c002", "c003"]
    assert all(name.endswith(".snappy.parquet") for name in names)
    for file in message.files:
        with sink.fs.open(f"{sink.root}/{file['path']}", "rb") as handle:
            metadata = pq.read_metadata(handle)
        assert metadata.num_rows == file["rows"]
        assert sink.fs.size(f"{sink.root}/{file['path']}") == file["size"]


def test_files_rotate_at_the_target_size_and_row_groups_are_bounded(tmp_path: Path) -> None:
    sink = make_sink(
        ParquetFileSink,
        str(tmp_path / "out"),
        targetFileSize=200_000,
        rowGroupSize=5_000,
        compression="none",
    )
    batches = [rows(i * 1000, 1000) for i in range(100)]  # 100k rows, ~2.4 MB of data
    message = write(sink, 0, *batches)
    sizes = [f["size"] for f in message.files]
    assert sum(f["rows"] for f in message.files) == 100_000
    # a file ends on the first row group (5,000 rows, about 64 kB here) that reaches the target
    assert len(sizes) == 5, sizes
    assert all(200_000 <= size < 270_000 for size in sizes), sizes
    for file in message.files:
        metadata = pq.read_metadata(tmp_path / "out" / file["path"])
        assert all(metadata.row_group(i).num_rows <= 5_000 for i in range(metadata.num_row_groups))


def test_small_input_batches_are_gathered_into_large_row_groups(tmp_path: Path) -> None:
    sink = make_sink(ParquetFileSink, str(tmp_path / "out"), rowGroupSize=10_000)
    message = write(sink, 0, *[rows(i * 10, 10) for i in range(2_500)])
    metadata = pq.read_metadata(tmp_path / "out" / message.files[0]["path"])
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [
        10_000,
        10_000,
        5_000,
    ]


def open_files_under(folder: Path) -> int:
    count = 0
    for descriptor in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{descriptor}").startswith(str(folder)):
                count += 1
    return count


def test_many_partitions_make_one_file_each_within_the_buffer(tmp_path: Path) -> None:
    keys = tuple(f"k{i}" for i in range(50))
    sink = make_sink(ParquetFileSink, str(tmp_path / "out"), partition_by=("key",))
    message = write(sink, 0, *[rows(i * 100, 100, keys=keys) for i in range(50)])
    assert sum(f["rows"] for f in message.files) == 5000
    assert sorted(f["partition"]["key"] for f in message.files) == sorted(keys)


def test_many_partitions_keep_few_files_open(tmp_path: Path) -> None:
    out = tmp_path / "out"
    keys = tuple(f"k{i}" for i in range(20))
    sink = make_sink(
        ParquetFileSink, str(out), partition_by=("key",), maxOpenFiles=4, rowGroupBytes=4096
    )
    most_open = 0

    def batches() -> Iterator[pa.RecordBatch]:
        nonlocal most_open
        for i in range(20):
            most_open = max(most_open, open_files_under(out))
            yield rows(i * 100, 100, keys=keys)

    message = write_reader(sink, 0, pa.RecordBatchReader.from_batches(SCHEMA, batches()))
    assert sum(f["rows"] for f in message.files) == 2000
    assert {f["partition"]["key"] for f in message.files} == set(keys)
    assert 1 <= most_open <= 4
    assert len(message.files) > 20  # the small buffer made files finish early


# ---------------------------------------------------------------------------------- memory


def test_a_large_split_is_written_as_it_is_read(tmp_path: Path) -> None:
    """1M rows of ~100 bytes stream through; memory stays far below the data size."""
    total_rows, batch_rows = 1_000_000, 10_000
    schema = pa.schema([("id", pa.int64()), ("payload", pa.string())])
    out = tmp_path / "out"
    sink = make_sink(
        ParquetFileSink,
        str(out),
        schema=schema,
        maxRecordsPerFile=100_000,
        rowGroupSize=50_000,
    )
    peak = 0
    files_seen_midway = -1
    baseline = pa.total_allocated_bytes()

    def batches() -> Iterator[pa.RecordBatch]:
        nonlocal peak, files_seen_midway
        for start in range(0, total_rows, batch_rows):
            peak = max(peak, pa.total_allocated_bytes() - baseline)
            if start == total_rows // 2:
                files_seen_midway = sum(1 for p in out.glob("*.parquet"))
            ids = pa.array(range(start, start + batch_rows), pa.int64())
            payload = pa.array([f"{i:0>100}" for i in range(start, start + batch_rows)])
            yield pa.record_batch([ids, payload], schema=schema)

    message = write_reader(sink, 0, pa.RecordBatchReader.from_batches(schema, batches()))
    sink.commit([message], 0)
    data_bytes = total_rows * 108
    assert sum(f["rows"] for f in message.files) == total_rows
    assert len(message.files) == 10
    assert files_seen_midway >= 4, "files were not written while the split was being read"
    assert peak < data_bytes / 10, f"{peak} bytes held for {data_bytes} bytes of data"


# ---------------------------------------------------------------------------------- formats


def test_json_lines_follow_spark_conventions(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("score", pa.float64()),
            ("raw", pa.binary()),
            ("note", pa.string()),
            ("attrs", pa.map_(pa.string(), pa.int32())),
        ]
    )
    batch = pa.record_batch(
        {
            "id": [1, 2],
            "score": [float("nan"), 2.5],
            "raw": [b"\x00\xff", None],
            "note": [None, "é"],
            "attrs": [[("a", 1)], None],
        },
        schema=schema,
    )
    sink = make_sink(JsonFileSink, str(tmp_path / "out"), schema=schema)
    message = write(sink, 0, batch)
    sink.commit([message], 0)
    (file,) = message.files
    assert file["path"].endswith(".c000.json")
    lines = (tmp_path / "out" / file["path"]).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"id": 1, "score": "NaN", "raw": "AP8=", "attrs": {"a": 1}},
        {"id": 2, "score": 2.5, "note": "é"},
    ]
    keep_nulls = make_sink(
        JsonFileSink,
        str(tmp_path / "nulls"),
        schema=schema,
        ignoreNullFields=False,
        compression="gzip",
    )
    message = write(keep_nulls, 0, batch)
    assert message.files[0]["path"].endswith(".json.gz")
    text = gzip.decompress((tmp_path / "nulls" / message.files[0]["path"]).read_bytes())
    assert json.loads(text.decode().splitlines()[1])["raw"] is None


def test_csv_header_and_separator(tmp_path: Path) -> None:
    sink = make_sink(CsvFileSink, str(tmp_path / "out"), header=True, sep=";", nullValue="NA")
    batch = pa.record_batch(
        {"id": [1, 2], "key": ["a;b", None], "amount": [0.5, None]}, schema=SCHEMA
    )
    message = write(sink, 0, batch)
    text = (tmp_path / "out" / message.files[0]["path"]).read_text()
    assert text == '"id";"key";"amount"\n1;"a;b";0.5\n2;NA;NA\n'


def test_csv_refuses_nested_columns(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("tags", pa.list_(pa.string()))])
    with pytest.raises(ConfigurationError, match="CSV data source does not support"):
        make_sink(CsvFileSink, str(tmp_path / "out"), schema=schema)


def test_parquet_compression_names_the_files(tmp_path: Path) -> None:
    sink = make_sink(ParquetFileSink, str(tmp_path / "out"), compression="zstd")
    message = write(sink, 0, rows(0, 3))
    path = tmp_path / "out" / message.files[0]["path"]
    assert path.name.endswith(".zstd.parquet")
    assert pq.read_metadata(path).row_group(0).column(0).compression == "ZSTD"


# ---------------------------------------------------------------------------------- errors


def test_a_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "table.parquet"
    file.write_bytes(b"not a folder")
    with pytest.raises(ConfigurationError, match="is a file"):
        make_sink(ParquetFileSink, str(file))


def test_only_append_mode(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedOperationError, match="supports only append"):
        make_sink(ParquetFileSink, str(tmp_path / "out"), output_mode=OutputMode.COMPLETE)


def test_describe_names_the_folder(tmp_path: Path) -> None:
    def sink(cls: type[FileSink], path: str) -> FileSink:
        return cls(cls.options.parse({"path": path}, connector=cls.format_name))

    assert sink(ParquetFileSink, str(tmp_path)).describe() == f"FileSink[file:{tmp_path}]"
    assert sink(JsonFileSink, "memory://x/out").describe() == "FileSink[memory:///x/out]"


# ---------------------------------------------------------------------------------- end to end


def test_streaming_query_writes_partitioned_parquet(tmp_path: Path) -> None:
    session = mb.Session()
    frame = (
        session.read_stream.format("rate-micro-batch")
        .option("rowsPerBatch", 100)
        .load()
        .with_column("big", mb.col("value") >= 60)
    )
    query = (
        frame.write_stream.format("parquet")
        .partition_by("big")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(available_now=True)
        .start(str(tmp_path / "out"))
    )
    query.await_termination(30)
    assert query.exception() is None
    assert query.last_progress["sink"]["description"] == f"FileSink[file:{tmp_path / 'out'}]"
    manifest = Manifest(fsspec.filesystem("file"), str(tmp_path / "out"))
    values = []
    for entry in manifest.entries():
        for file in entry["files"]:
            table = pq.read_table(tmp_path / "out" / file["path"])
            assert "big" not in table.column_names
            big = file["partition"]["big"] == "true"
            assert all((v >= 60) == big for v in table.column("value").to_pylist())
            values += table.column("value").to_pylist()
    assert sorted(values) == list(range(100))


def test_the_plugin_registers_the_three_sinks() -> None:
    session = mb.Session()
    found = {name: session.registry.find("sink", name).cls for name in ("parquet", "json", "csv")}
    assert found == {"parquet": ParquetFileSink, "json": JsonFileSink, "csv": CsvFileSink}


def test_the_sink_needs_a_checkpoint(tmp_path: Path) -> None:
    session = mb.Session()
    frame = session.read_stream.format("rate-micro-batch").option("rowsPerBatch", 1).load()
    with pytest.raises(CheckpointError, match="needs a checkpoint"):
        frame.write_stream.format("parquet").start(str(tmp_path / "out"))
    with pytest.raises(UnsupportedOperationError, match="update"):
        (
            frame.write_stream.format("json")
            .output_mode("update")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .start(str(tmp_path / "out"))
        )


def test_json_column_and_row_encodings_agree() -> None:
    import datetime
    import decimal

    from microbatch_file._writer_json import JsonEncoder

    utc = datetime.UTC
    schema = pa.schema(
        [
            ("i", pa.int64()),
            ("f", pa.float64()),
            ("b", pa.bool_()),
            ("s", pa.string()),
            ("d", pa.date32()),
            ("t_utc", pa.timestamp("ms", tz="UTC")),
            ("t_ny", pa.timestamp("us", tz="America/New_York")),
            ("t_naive", pa.timestamp("s")),
            ("dec", pa.decimal128(10, 2)),
            ("cat", pa.dictionary(pa.int8(), pa.string())),
        ]
    )
    moment = datetime.datetime(2024, 3, 10, 6, 59, 59, 123000, tzinfo=utc)
    batch = pa.record_batch(
        {
            "i": [1, None, -(2**63)],
            "f": [0.1, float("inf"), None],
            "b": [True, None, False],
            "s": ['quote " back \\ nl \n tab \t', None, "日本 🎉"],
            "d": [datetime.date(2024, 1, 2), None, datetime.date(1969, 12, 31)],
            "t_utc": [moment, None, datetime.datetime(1969, 12, 31, 23, 59, 59, tzinfo=utc)],
            "t_ny": [moment, moment, None],
            "t_naive": [datetime.datetime(2024, 1, 1, 12, 0, 0), None, None],
            "dec": [decimal.Decimal("1.50"), None, decimal.Decimal("-3.00")],
            "cat": pa.array(["x", None, "y"]).dictionary_encode(),
        },
        schema=schema,
    )
    for ignore in (True, False):
        encoder = JsonEncoder(schema, ignore_null_fields=ignore, line_sep="\n")
        assert encoder.vectorized
        fast = bytes(encoder.encode(batch)).decode().splitlines()
        slow = encoder._encode_rows(batch).decode().splitlines()
        assert [json.loads(line) for line in fast] == [json.loads(line) for line in slow]
    first = json.loads(fast[0])
    assert first["t_utc"] == "2024-03-10T06:59:59.123Z"
    assert first["t_ny"] == "2024-03-10T01:59:59.123000-05:00"
    assert first["t_naive"] == "2024-01-01T12:00:00"
    assert first["s"] == 'quote " back \\ nl \n tab \t'
    assert json.loads(fast[1])["f"] == "Infinity"
    # a rare control character takes the row path, and still gives valid JSON
    odd = pa.record_batch({"s": ["bell \x07"]})
    encoder = JsonEncoder(odd.schema, ignore_null_fields=True, line_sep="\n")
    assert json.loads(bytes(encoder.encode(odd))) == {"s": "bell \x07"}


def test_csv_timestamps_are_iso_8601(tmp_path: Path) -> None:
    import datetime

    schema = pa.schema([("id", pa.int64()), ("at", pa.timestamp("ms", tz="UTC"))])
    moment = datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
    sink = make_sink(CsvFileSink, str(tmp_path / "out"), schema=schema)
    message = write(sink, 0, pa.record_batch({"id": [1, 2], "at": [moment, None]}, schema=schema))
    text = (tmp_path / "out" / message.files[0]["path"]).read_text()
    assert text == '1,"2024-01-02T03:04:05.678Z"\n2,\n'


def test_a_small_target_size_also_bounds_row_groups(tmp_path: Path) -> None:
    sink = make_sink(ParquetFileSink, str(tmp_path / "out"), targetFileSize=100_000)
    message = write(sink, 0, *[rows(i * 1000, 1000) for i in range(100)])
    sizes = [f["size"] for f in message.files]
    assert len(sizes) > 5, sizes
    assert max(sizes) < 300_000, sizes


def test_checkpoint_fsync_also_syncs_data_files_and_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(descriptor: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", spy)
    out = tmp_path / "out"
    parsed = ParquetFileSink.options.parse({"path": str(out)}, connector="parquet")
    sink = ParquetFileSink(parsed).stream_writer(
        WriteContext(
            schema=SCHEMA,
            query_id="q",
            state=mb.StateStore(str(tmp_path / "state"), fsync=True),
        )
    )
    message = write(sink, 0, rows(0, 5))
    sink.commit([message], 0)
    assert str(out / message.files[0]["path"]) in synced
    assert str(out / "_microbatch_metadata") in synced  # the entry is linked into it


def test_batch_reads_of_the_folder_see_only_committed_files(folder: str) -> None:
    sink = make_sink(ParquetFileSink, folder, partition_by=("key",))
    sink.commit([write(sink, 0, rows(0, 6))], 0)
    uncommitted = write(sink, 1, rows(100, 6))  # written, never committed (a crash)
    assert uncommitted.files
    table = mb.Session().read.format("parquet").load(folder)
    got = sorted(zip(table.column("id").to_pylist(), table.column("key").to_pylist(), strict=True))
    assert got == [(i, "ab"[i % 2]) for i in range(6)]
