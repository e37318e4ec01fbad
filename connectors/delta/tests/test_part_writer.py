"""The Delta part writer: data files written into a table's folder, committed with delta-rs,
read back with delta-rs and Polars."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import multiprocessing
import os
import pickle
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, Schema
from deltalake.transaction import create_table_with_add_actions

import microbatch as mb
from microbatch_delta._delta_schema import delta_arrow_schema
from microbatch_delta._part_writer import (
    STAGING_FOLDER,
    AddFile,
    DeltaFilesMessage,
    DeltaPartWriter,
    delete_files,
    read_files,
)
from microbatch_delta._table import DeltaTarget

UTC = dt.UTC
NAME = re.compile(r"part-(\d{5})-(\d{5})-[0-9a-f-]{36}-(\d+)\.c000\.snappy\.parquet")


class HandlerTarget(DeltaTarget):
    """A local table reached through delta-rs's object-store handler, as a remote one is."""

    @property
    def is_local(self) -> bool:
        return False


def reader(table: pa.Table, chunk: int | None = None) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=chunk))


def part(batch: int = 0, index: int = 0, query: str = "q1") -> mb.PartContext:
    return mb.PartContext(batch_id=batch, part_index=index, num_parts=index + 1, query_id=query)


def commit(
    folder: Path, schema: pa.Schema, files: Sequence[AddFile], partition_by: Sequence[str] = ()
) -> DeltaTable:
    table = DeltaTable(str(folder)) if (folder / "_delta_log").exists() else None
    actions = [file.to_action() for file in files]
    if table is None:
        create_table_with_add_actions(
            str(folder), Schema.from_arrow(schema), actions, partition_by=list(partition_by) or None
        )
    else:
        table.create_write_transaction(actions, mode="append", schema=Schema.from_arrow(schema))
    return DeltaTable(str(folder))


def rows_rs(folder: Path, order: str = "id") -> list[dict[str, object]]:
    return pa.table(DeltaTable(str(folder)).to_pyarrow_table()).sort_by(order).to_pylist()


def rows_pl(folder: Path, order: str = "id") -> list[dict[str, object]]:
    return pl.read_delta(str(folder)).sort(order).to_dicts()


def events(n: int, start: int = 0) -> pa.Table:
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "device": [f"sensor-{i % 7}" for i in range(start, start + n)],
            "temperature": [15.0 + (i % 300) / 10 for i in range(start, start + n)],
            "ts": pa.array(
                [base + dt.timedelta(milliseconds=10 * i) for i in range(start, start + n)],
                pa.timestamp("us", "UTC"),
            ),
        }
    )


def test_unpartitioned_parts_commit_and_read_back(tmp_path: Path) -> None:
    data = events(1000)
    schema = delta_arrow_schema(data.schema)
    writer = DeltaPartWriter(DeltaTarget(str(tmp_path)), schema)
    first = writer.write(reader(data.slice(0, 600), 100), part(batch=7, index=0))
    second = writer.write(reader(data.slice(600), 100), part(batch=7, index=1))
    assert isinstance(first, DeltaFilesMessage)
    files = first.files + second.files
    assert [file.num_records for file in files] == [600, 400]
    for index, file in enumerate(files):
        match = NAME.fullmatch(file.path)
        assert match, file.path
        assert (int(match[1]), int(match[2])) == (7, index)
        assert file.size == os.path.getsize(tmp_path / file.path)
        assert file.partition_values == ()
        assert abs(file.modification_time - dt.datetime.now(UTC).timestamp() * 1000) < 60_000
        meta = pq.read_metadata(tmp_path / file.path)
        assert meta.row_group(0).column(0).compression == "SNAPPY"
    # nothing is in the table before the commit
    assert not (tmp_path / "_delta_log").exists()
    commit(tmp_path, schema, files)
    assert rows_rs(tmp_path) == data.to_pylist()
    assert rows_pl(tmp_path) == data.to_pylist()
    # a second batch appends through a write transaction
    more = events(50, start=1000)
    third = writer.write(reader(more), part(batch=8))
    table = commit(tmp_path, schema, third.files)
    assert table.version() == 1
    assert rows_rs(tmp_path) == pa.concat_tables([data, more]).to_pylist()


PARTITIONED = pa.table(
    {
        "id": pa.array(range(10), pa.int64()),
        "s": ["a b", "x/y", "k=v", "50%", "", None, "é#?&:*", "a b", "__x__", " lead"],
        "n": pa.array([1, -2, 0, None, 5, 1, 1, 1, 2**40, 0], pa.int64()),
        "b": [True, False, None, True, True, False, True, True, False, None],
        "d": pa.array([dt.date(2024, 1, 2), None] + [dt.date(1999, 12, 31)] * 8),
        "ts": pa.array(
            [dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC), None]
            + [dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)] * 8,
            pa.timestamp("us", "UTC"),
        ),
        "v": [f"value {i}" for i in range(10)],
    }
)


@pytest.mark.parametrize("handler", [False, True], ids=["local", "object-store-handler"])
def test_partitioned_values_round_trip(tmp_path: Path, handler: bool) -> None:
    target = (HandlerTarget if handler else DeltaTarget)(str(tmp_path))
    schema = delta_arrow_schema(PARTITIONED.schema)
    by = ("s", "n", "b", "d", "ts")
    message = DeltaPartWriter(target, schema, by).write(reader(PARTITIONED, 3), part(batch=2))
    folders = {file.path.rsplit("/", 1)[0] for file in message.files}
    assert "s=a%20b/n=1/b=true/d=1999-12-31/ts=1969-12-31%2023%3A59%3A59.999999" in folders
    assert (
        "s=__HIVE_DEFAULT_PARTITION__/n=5/b=true/d=1999-12-31/ts=1969-12-31%2023%3A59%3A59.999999"
        in folders
    )
    assert (
        "s=__HIVE_DEFAULT_PARTITION__/n=1/b=false/d=1999-12-31/ts=1969-12-31%2023%3A59%3A59.999999"
        in folders
    )
    values = {file.partition_values for file in message.files}
    assert (("s", "x/y"), ("n", "-2"), ("b", "false"), ("d", None), ("ts", None)) in values
    assert (
        ("s", None),
        ("n", "5"),
        ("b", "true"),
        ("d", "1999-12-31"),
        ("ts", "1969-12-31 23:59:59.999999"),
    ) in values
    for file in message.files:
        assert (tmp_path / file.path).is_file()
        # partition columns are not inside the files (Delta's layout)
        assert pq.read_schema(tmp_path / file.path).names == ["id", "v"]
    assert sum(file.num_records for file in message.files) == 10
    commit(tmp_path, schema, message.files, by)
    # Delta stores an empty string partition value as null, as Spark's writer does
    expected = [dict(row, s=row["s"] or None) for row in PARTITIONED.to_pylist()]
    assert rows_rs(tmp_path) == expected
    assert rows_pl(tmp_path) == expected
    # readers prune by the partition values of the log
    pruned = DeltaTable(str(tmp_path)).to_pyarrow_table(filters=[("s", "=", "k=v")])
    assert pruned.column("id").to_pylist() == [2]
    assert pl.scan_delta(str(tmp_path)).filter(pl.col("s") == "50%").collect()["id"].to_list() == [
        3
    ]
    assert pl.scan_delta(str(tmp_path)).filter(pl.col("s").is_null()).collect()[
        "id"
    ].sort().to_list() == [4, 5]


def test_partition_by_float_decimal_and_ntz(tmp_path: Path) -> None:
    data = pa.table(
        {
            "id": [0, 1, 2, 3],
            "f": [1.5, float("nan"), float("inf"), -0.5],
            "dec": pa.array(
                [decimal.Decimal("-0.01"), None, decimal.Decimal("12.30"), decimal.Decimal("0")],
                pa.decimal128(6, 2),
            ),
            "ntz": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, 6)] * 4, pa.timestamp("ns")),
        }
    )
    schema = delta_arrow_schema(data.schema)
    by = ("f", "dec", "ntz")
    message = DeltaPartWriter(DeltaTarget(str(tmp_path)), schema, by).write(reader(data), part())
    commit(tmp_path, schema, message.files, by)
    back = rows_pl(tmp_path)
    assert [row["dec"] for row in back] == data.column("dec").to_pylist()
    assert [row["ntz"] for row in back] == [dt.datetime(2024, 1, 2, 3, 4, 5, 6)] * 4
    assert back[0]["f"] == 1.5 and back[2]["f"] == float("inf") and back[1]["f"] != back[1]["f"]
    # delta-rs's own reader fails on this table: it turns the partition value -0.01 into the
    # text '0.-1' (its writer writes that same wrong text), so Polars reads it here
    rs = DeltaTable(str(tmp_path)).get_add_actions(flatten=True)
    assert sorted(str(v) for v in pa.table(rs).column("partition.dec").to_pylist()) == sorted(
        str(v) for v in data.column("dec").to_pylist()
    )


def test_empty_part_writes_nothing(tmp_path: Path) -> None:
    schema = events(1).schema
    empty = pa.RecordBatchReader.from_batches(
        schema, [pa.RecordBatch.from_pylist([], schema=schema)]
    )
    for by in [(), ("device",)]:
        message = DeltaPartWriter(DeltaTarget(str(tmp_path)), schema, by).write(empty, part())
        assert message == DeltaFilesMessage(())
        empty = pa.RecordBatchReader.from_batches(schema, [])
    assert list(tmp_path.iterdir()) == []


def test_max_records_per_file(tmp_path: Path) -> None:
    data = events(250)
    writer = DeltaPartWriter(DeltaTarget(str(tmp_path)), data.schema, max_records_per_file=100)
    files = writer.write(reader(data, 30), part()).files
    assert [file.num_records for file in files] == [100, 100, 50]
    assert [int(NAME.fullmatch(file.path)[3]) for file in files] == [0, 1, 2]  # type: ignore[index]
    commit(tmp_path, data.schema, files)
    assert rows_rs(tmp_path) == data.to_pylist()
    by_device = DeltaPartWriter(
        DeltaTarget(str(tmp_path / "p")), data.schema, ("device",), max_records_per_file=20
    )
    files = by_device.write(reader(data), part()).files
    assert max(file.num_records for file in files) == 20
    assert sum(file.num_records for file in files) == 250


def test_batches_are_cast_to_the_table_schema(tmp_path: Path) -> None:
    paris = dt.timezone(dt.timedelta(hours=1))
    incoming = pa.table(
        {
            # 04:00:00.000001999 in Paris: the nanoseconds are cut, the instant is kept
            "ts": pa.array(
                [int(dt.datetime(2024, 1, 2, 4, 0, 0, tzinfo=paris).timestamp()) * 10**9 + 1999],
                pa.int64(),
            ).cast(pa.timestamp("ns", "Europe/Paris")),
            "id": pa.array([200], pa.uint8()),
            "name": pa.array(["x"], pa.large_string()).dictionary_encode(),
        }
    )
    table_schema = pa.schema(
        [
            ("id", pa.int16()),
            ("name", pa.string()),
            ("ts", pa.timestamp("us", "UTC")),
            ("extra", pa.float64()),
        ]
    )
    files = (
        DeltaPartWriter(DeltaTarget(str(tmp_path)), table_schema)
        .write(reader(incoming), part())
        .files
    )
    assert pq.read_schema(tmp_path / files[0].path).remove_metadata() == table_schema
    commit(tmp_path, table_schema, files)
    assert rows_rs(tmp_path) == [
        {
            "id": 200,
            "name": "x",
            "ts": dt.datetime(2024, 1, 2, 3, 0, 0, 1, tzinfo=UTC),
            "extra": None,
        }
    ]


def test_bad_rows_name_the_column(tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path))
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("small", pa.int8())])
    too_big = pa.table({"id": [1], "small": [300]})
    with pytest.raises(
        mb.SinkError,
        match=r"Column 'small' of type int64 cannot be written as int8 \(batch 4, part 2\)",
    ):
        DeltaPartWriter(target, schema).write(reader(too_big), part(batch=4, index=2))
    null_id = pa.table({"id": [1, None], "small": [1, 2]})
    with pytest.raises(
        mb.SinkError, match=r"Column 'id' is not nullable .* 1 row\(s\) have a null"
    ):
        DeltaPartWriter(target, schema).write(reader(null_id), part())
    extra = pa.table({"id": [1], "small": [1], "surprise": ["x"]})
    with pytest.raises(mb.SchemaError, match="surprise"):
        DeltaPartWriter(target, schema).write(reader(extra), part())
    with pytest.raises(mb.SchemaError, match=r"not nullable .* no such column"):
        DeltaPartWriter(target, schema).write(reader(pa.table({"small": [1]})), part())
    with pytest.raises(mb.SchemaError, match="Partition column"):
        DeltaPartWriter(target, schema, ("nope",))
    assert not any(tmp_path.rglob("*.parquet"))


def test_nested_columns(tmp_path: Path) -> None:
    data = pa.table(
        {
            "id": [1, 2, 3],
            "payload": pa.array(
                [
                    {"name": "a", "tags": ["x", "y"], "at": dt.datetime(2024, 1, 1, tzinfo=UTC)},
                    None,
                    {"name": None, "tags": [], "at": None},
                ],
                pa.struct(
                    [
                        ("name", pa.large_string()),
                        ("tags", pa.large_list(pa.string())),
                        ("at", pa.timestamp("ns", "UTC")),
                    ]
                ),
            ),
            "attrs": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.uint32())),
            "day": ["mon", "mon", "tue"],
        }
    )
    schema = delta_arrow_schema(data.schema)
    message = DeltaPartWriter(DeltaTarget(str(tmp_path)), schema, ("day",)).write(
        reader(data), part()
    )
    commit(tmp_path, schema, message.files, ("day",))
    back = rows_rs(tmp_path)
    assert back[0]["payload"] == {
        "name": "a",
        "tags": ["x", "y"],
        "at": dt.datetime(2024, 1, 1, tzinfo=UTC),
    }
    assert back[1]["payload"] is None
    assert back[0]["attrs"] == [("k", 1)]
    assert [row["day"] for row in back] == ["mon", "mon", "tue"]
    polars_rows = rows_pl(tmp_path)
    assert polars_rows[0]["payload"]["tags"] == ["x", "y"]
    assert polars_rows[2]["payload"] == {"name": None, "tags": [], "at": None}


def test_staged_files_read_back_in_order_and_delete(tmp_path: Path) -> None:
    target = DeltaTarget(str(tmp_path))
    data = events(300)
    writer = DeltaPartWriter(
        target, data.schema, ("device",), staging=True, max_records_per_file=70
    )
    first = writer.write(reader(data.slice(0, 200), 50), part(batch=3, index=0, query="qid")).files
    second = writer.write(reader(data.slice(200), 50), part(batch=3, index=1, query="qid")).files
    files = first + second
    assert all(file.path.startswith(f"{STAGING_FOLDER}/qid/3/part-00003-") for file in files)
    assert all(file.partition_values == () for file in files)
    assert pq.read_schema(tmp_path / files[0].path).names == data.schema.names
    back = read_files(target, files, data.schema)
    assert back.schema == data.schema
    assert back.read_all().to_pylist() == data.to_pylist()  # batch order kept
    delete_files(target, files)
    delete_files(target, files)  # already gone: fine
    assert not any(tmp_path.rglob("*.parquet"))
    assert [p.name for p in tmp_path.iterdir()] == [STAGING_FOLDER]
    assert list((tmp_path / STAGING_FOLDER).iterdir()) == []


def test_delete_files_through_the_handler(tmp_path: Path) -> None:
    target = HandlerTarget(str(tmp_path))
    data = events(10)
    files = DeltaPartWriter(target, data.schema, ("device",)).write(reader(data), part()).files
    assert all((tmp_path / file.path).is_file() for file in files)
    assert (
        read_files(target, files[:1], data.schema.remove(1)).read_all().num_rows
        == files[0].num_records
    )
    delete_files(target, files)
    delete_files(target, files)
    assert not any(tmp_path.rglob("*.parquet"))
    staged = DeltaPartWriter(target, data.schema, staging=True).write(reader(data, 3), part(4))
    assert [file.path.split("/")[:3] for file in staged.files] == [[STAGING_FOLDER, "q1", "4"]]
    assert read_files(target, staged.files, data.schema).read_all() == data
    delete_files(target, staged.files)
    assert not any(tmp_path.rglob("*.parquet"))


def _write_in_child(payload: bytes) -> bytes:
    writer, data = pickle.loads(payload)
    message = writer.write(reader(data), part(batch=5, index=1))
    return pickle.dumps(message)


def test_pickled_writer_writes_in_a_spawned_process(tmp_path: Path) -> None:
    schema = delta_arrow_schema(PARTITIONED.schema)
    writer = DeltaPartWriter(DeltaTarget(str(tmp_path)), schema, ("s", "d"))
    payload = pickle.dumps((writer, PARTITIONED))
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        message = pickle.loads(pool.apply(_write_in_child, (payload,)))
    assert isinstance(message, DeltaFilesMessage)
    assert message.files and all(NAME.search(file.path) for file in message.files)
    commit(tmp_path, schema, message.files, ("s", "d"))
    expected = [dict(row, s=row["s"] or None) for row in PARTITIONED.to_pylist()]
    assert rows_rs(tmp_path) == expected
    assert rows_pl(tmp_path) == expected


def test_a_failed_part_leaves_no_files(tmp_path: Path) -> None:
    table_schema = pa.schema([("id", pa.int8()), ("p", pa.string())])
    good = pa.table({"id": [i % 100 for i in range(400)], "p": ["a", "b"] * 200})
    too_big = pa.table({"id": [300], "p": ["a"]})

    def failing(last: pa.Table | None) -> pa.RecordBatchReader:
        def batches() -> Iterator[pa.RecordBatch]:
            yield from good.to_batches(max_chunksize=10)
            time.sleep(0.2)  # the files written so far are closed by then
            if last is None:
                raise RuntimeError("the source failed")
            yield from last.to_batches()

        return pa.RecordBatchReader.from_batches(good.schema, batches())

    for by in [(), ("p",)]:
        writer = DeltaPartWriter(
            DeltaTarget(str(tmp_path)), table_schema, by, max_records_per_file=10
        )
        with pytest.raises(RuntimeError, match="the source failed"):
            writer.write(failing(None), part())
        assert not any(tmp_path.rglob("*.parquet"))
        with pytest.raises(mb.SinkError, match=r"Column 'id' .* 300 not in range"):
            writer.write(failing(too_big), part())
        assert not any(tmp_path.rglob("*.parquet"))


def test_partition_column_names_with_spaces(tmp_path: Path) -> None:
    data = pa.table({"id": [1, 2], "my col": ["x y", None]})
    files = (
        DeltaPartWriter(DeltaTarget(str(tmp_path)), data.schema, ("my col",))
        .write(reader(data), part())
        .files
    )
    assert {file.path.split("/")[0] for file in files} == {
        "my col=x%20y",
        "my col=__HIVE_DEFAULT_PARTITION__",
    }
    commit(tmp_path, data.schema, files, ("my col",))
    assert rows_rs(tmp_path) == data.to_pylist()
    assert rows_pl(tmp_path) == data.to_pylist()


def test_parquet_settings(tmp_path: Path) -> None:
    data = events(1000)
    files = (
        DeltaPartWriter(DeltaTarget(str(tmp_path)), data.schema)
        .write(reader(data, 100), part())
        .files
    )
    meta = pq.read_metadata(tmp_path / files[0].path)
    assert meta.num_row_groups == 1  # small incoming batches gathered into one row group
    columns = {
        meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i) for i in range(4)
    }
    assert columns["device"].has_dictionary_page
    assert not columns["ts"].has_dictionary_page  # timestamps: no dictionary
    assert all(
        column.compression == "SNAPPY" and column.statistics is not None
        for column in columns.values()
    )


def test_max_records_per_file_rolls_whole_files_in_order(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    batches = [
        pa.record_batch(
            [pa.array(range(start, start + 7000)), pa.array([f"n{i}" for i in range(7000)])],
            schema=schema,
        )
        for start in range(0, 70_000, 7000)
    ]
    writer = DeltaPartWriter(DeltaTarget(str(tmp_path), {}), schema, max_records_per_file=25_000)
    message = writer.write(
        pa.RecordBatchReader.from_batches(schema, batches),
        mb.PartContext(batch_id=0, part_index=0, num_parts=1, query_id="q"),
    )
    assert [file.num_records for file in message.files] == [25_000, 25_000, 20_000]
    ids: list[int] = []
    for file in message.files:
        metadata = pq.read_metadata(tmp_path / file.path)
        assert all(metadata.row_group(i).num_rows for i in range(metadata.num_row_groups))
        assert file.size == (tmp_path / file.path).stat().st_size
        stats = json.loads(file.stats)
        assert stats["minValues"]["id"] == (ids[-1] + 1 if ids else 0)
        ids.extend(pq.read_table(tmp_path / file.path)["id"].to_pylist())
        assert stats["maxValues"]["id"] == ids[-1]
    assert ids == list(range(70_000))
