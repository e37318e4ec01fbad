"""Schema enforcement and evolution of the ``delta`` sink: per-field diffs, mergeSchema,
overwriteSchema, partition columns (real tables, read back with delta-rs and Polars)."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent))
from _delta_sink_testing import (
    SCHEMA,
    data_files,
    log_entries,
    make_writer,
    read_ids,
    rows,
    run_batch,
    write,
)

WIDER = pa.schema([*SCHEMA, pa.field("score", pa.float64())])
COMPLETE = mb.OutputMode.COMPLETE


def table_of(path: Path) -> DeltaTable:
    return DeltaTable(str(path))


def test_a_batch_with_a_column_the_table_lacks_is_refused_at_start(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path), 0, rows([1]))
    with pytest.raises(mb.SchemaError) as caught:
        make_writer(path, schema=WIDER)
    assert str(caught.value) == (
        f"A schema mismatch detected when writing to the Delta table at {path}:\n"
        "  - extra column 'score' (double): not in the table\n"
        'Nothing was written. To enable schema migration, set .option("mergeSchema", '
        '"true") to add the batch\'s new columns.'
    )
    assert table_of(path).version() == 0


def test_every_difference_is_listed_field_by_field(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table_schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("name", pa.string(), nullable=False),
            pa.field("code", pa.int32(), nullable=False),
            pa.field("note", pa.string()),
        ]
    )
    write_deltalake(
        str(path),
        pa.table({"id": [1], "name": ["a"], "code": [1], "note": [None]}, schema=table_schema),
    )
    batch_schema = pa.schema(
        [
            pa.field("id", pa.string()),
            pa.field("name", pa.string()),
            pa.field("extra", pa.list_(pa.int64())),
        ]
    )
    with pytest.raises(mb.SchemaError) as caught:
        make_writer(path, schema=batch_schema, output_mode=COMPLETE)
    assert str(caught.value) == (
        f"A schema mismatch detected when writing to the Delta table at {path}:\n"
        "  - column 'id': type string (StringType) in the batch, int64 (LongType) in the table\n"
        "  - column 'name': nullable in the batch, NOT NULL in the table\n"
        "  - extra column 'extra' (list<element: int64>): not in the table\n"
        "  - missing column 'code' (int32): NOT NULL in the table, so every row needs a value\n"
        'Nothing was written. To enable schema migration, set .option("mergeSchema", '
        '"true") to add the batch\'s new columns, or .option("overwriteSchema", "true") to '
        "replace the table's schema. Cast 'id' to the table's type in the query."
    )


def test_a_table_changed_after_the_parts_were_written_fails_the_commit(tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer = make_writer(path)
    run_batch(writer, 0, rows([1]))
    messages = write(writer, 1, rows([2]))
    other = pa.table({"id": ["x"], "name": ["y"]})
    write_deltalake(str(path), other, mode="overwrite", schema_mode="overwrite")
    with pytest.raises(
        mb.SchemaError,
        match=r"column 'id': type int64 \(LongType\) in the batch, string \(StringType\) in the",
    ):
        writer.commit(messages, 1)
    assert table_of(path).version() == 1
    assert table_of(path).transaction_version("query-1") == 0
    assert all("part-00001-" not in name for name in data_files(path))


def test_missing_nullable_columns_are_written_as_nulls_and_narrow_ints_widen(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path, schema=WIDER), 0, rows([1], WIDER, score=[0.5]))
    narrow = pa.schema([pa.field("id", pa.int32(), nullable=False)])
    run_batch(
        make_writer(path, schema=narrow),
        1,
        pa.table({"id": pa.array([2], pa.int32())}, schema=narrow),
    )
    back = table_of(path).to_pyarrow_table().sort_by("id")
    assert back.schema.field("id").type == pa.int64()
    assert back.to_pylist() == [
        {"id": 1, "name": "n1", "score": 0.5},
        {"id": 2, "name": None, "score": None},
    ]


def test_merge_schema_adds_new_columns_in_one_commit_with_the_transaction(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path), 0, rows([1]))
    leftover = path / "_microbatch_staging" / "query-1" / "1" / "part-of-a-killed-run.parquet"
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"not committed")
    evolving = make_writer(path, schema=WIDER, mergeSchema="true")
    run_batch(evolving, 1, rows([2], WIDER, score=[2.5]), rows([3], WIDER, score=[None]))
    assert not leftover.parent.exists()  # the batch's staging folder is removed after it
    table = table_of(path)
    assert pa.schema(table.schema().to_arrow()).names == ["id", "name", "score"]
    assert table.transaction_version("query-1") == 1
    entry = log_entries(path)[1]
    kinds = [next(iter(action)) for action in entry]
    assert "metaData" in kinds and "txn" in kinds and kinds.count("add") >= 1
    assert not any((path / "_microbatch_staging").rglob("*.parquet"))
    polars_rows = pl.read_delta(str(path)).sort("id").to_dicts()
    assert polars_rows == [
        {"id": 1, "name": "n1", "score": None},
        {"id": 2, "name": "n2", "score": 2.5},
        {"id": 3, "name": "n3", "score": None},
    ]
    run_batch(make_writer(path, schema=WIDER, mergeSchema="true"), 1, rows([2], WIDER))  # a replay
    run_batch(make_writer(path, schema=WIDER), 2, rows([4], WIDER, score=[4.0]))  # fits now
    assert read_ids(path) == [1, 2, 3, 4]
    assert len(log_entries(path)) == 3


def test_overwrite_schema_replaces_the_schema_in_complete_mode(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path, output_mode=COMPLETE), 0, rows([1, 2]))
    other = pa.schema([pa.field("id", pa.string()), pa.field("total", pa.float64())])
    replacing = make_writer(path, schema=other, output_mode=COMPLETE, overwriteSchema="true")
    run_batch(replacing, 1, pa.table({"id": ["a"], "total": [1.5]}, schema=other))
    table = table_of(path)
    assert pa.schema(table.schema().to_arrow()) == other
    assert table.to_pyarrow_table().to_pylist() == [{"id": "a", "total": 1.5}]
    assert table.history(1)[0]["operation"] == "WRITE"
    assert table.transaction_version("query-1") == 1


def test_overwrite_schema_can_change_the_partitioning(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path, output_mode=COMPLETE), 0, rows([1, 2]))
    repartitioning = make_writer(
        path, output_mode=COMPLETE, partition_by=("name",), overwriteSchema="true"
    )
    run_batch(repartitioning, 1, rows([3, 4], name=["a", "b"]))
    table = table_of(path)
    assert table.metadata().partition_columns == ["name"]
    assert table.transaction_version("query-1") == 1
    assert sorted(pl.read_delta(str(path)).rows()) == [(3, "a"), (4, "b")]
    assert (path / "name=a").is_dir()


def test_complete_mode_without_overwrite_schema_refuses_another_partitioning(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path, output_mode=COMPLETE, partition_by=("name",)), 0, rows([1]))
    with pytest.raises(mb.SchemaError) as caught:
        make_writer(path, output_mode=COMPLETE, partition_by=("id",))
    assert str(caught.value) == (
        f"Partition columns do not match the partition columns of the table at {path}.\n"
        "Given: [`id`]\nTable: [`name`]\n"
        'To overwrite the schema or change partitioning, set .option("overwriteSchema", "true").'
    )


def test_append_mode_with_another_partitioning_says_how_to_write_it(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path, partition_by=("name",)), 0, rows([1]))
    with pytest.raises(mb.SchemaError) as caught:
        make_writer(path, partition_by=("id",))
    assert str(caught.value) == (
        f"Partition columns do not match the partition columns of the table at {path}.\n"
        "Given: [`id`]\nTable: [`name`]\n"
        "Leave out partition_by to write with the table's partitioning (Table: [`name`]), or "
        "write another table."
    )


TYPE_CHANGED = pa.schema(
    [pa.field("id", pa.string(), nullable=False), pa.field("name", pa.string())]
)


def test_merge_schema_says_it_cannot_change_a_type(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path), 0, rows([1]))
    with pytest.raises(mb.SchemaError) as caught:
        make_writer(path, schema=TYPE_CHANGED, mergeSchema="true")
    assert str(caught.value) == (
        f"A schema mismatch detected when writing to the Delta table at {path}:\n"
        "  - column 'id': type string (StringType) in the batch, int64 (LongType) in the table\n"
        "Nothing was written. mergeSchema adds new columns but cannot change a column's type: "
        "Failed to merge fields 'id' and 'id'. Failed to merge incompatible data types LongType "
        "and StringType. Cast 'id' to the table's type in the query, or replace the table's "
        'schema in complete output mode with .option("overwriteSchema", "true").'
    )
    with pytest.raises(mb.SchemaError) as caught:  # without mergeSchema: no advice to set it
        make_writer(path, schema=TYPE_CHANGED, output_mode=COMPLETE)
    assert "mergeSchema" not in str(caught.value)
    assert str(caught.value).endswith(
        "Nothing was written. Cast 'id' to the table's type in the query, or "
        '.option("overwriteSchema", "true") to replace the table\'s schema.'
    )
    assert table_of(path).version() == 0


def test_partition_by_lays_out_folders_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer = make_writer(path, partition_by=("name",))
    run_batch(writer, 0, rows([1, 2, 3], name=["a", "b", None]))
    table = table_of(path)
    assert table.metadata().partition_columns == ["name"]
    assert (path / "name=a").is_dir() and (path / "name=__HIVE_DEFAULT_PARTITION__").is_dir()
    # a later run without partition_by keeps the table's partitioning
    run_batch(make_writer(path), 1, rows([4], name=["a"]))
    assert sorted(pl.read_delta(str(path)).rows(), key=lambda row: row[0]) == [
        (1, "a"),
        (2, "b"),
        (3, None),
        (4, "a"),
    ]
    with pytest.raises(mb.SchemaError, match=r"Given: \[`id`\]\nTable: \[`name`\]\nLeave out"):
        make_writer(path, partition_by=("id",))


@pytest.mark.parametrize(
    ("mode", "options", "text"),
    [
        (mb.OutputMode.UPDATE, {}, "update output mode only with mode=merge"),
        (COMPLETE, {"mode": "merge", "mergeKeys": "id"}, "cannot replace the table"),
        (mb.OutputMode.APPEND, {"overwriteSchema": "true"}, "only in complete output mode"),
    ],
)
def test_modes_that_do_not_go_together_are_refused(
    tmp_path: Path, mode: mb.OutputMode, options: dict[str, str], text: str
) -> None:
    with pytest.raises(mb.UnsupportedOperationError, match=text):
        make_writer(tmp_path / "t", output_mode=mode, **options)
    assert not (tmp_path / "t").exists()


def test_a_type_delta_cannot_hold_is_refused_at_start(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("at", pa.time64("us"))])
    with pytest.raises(mb.SchemaError, match="Column 'at' has type time64"):
        make_writer(tmp_path / "t", schema=schema)


def test_a_column_added_by_another_writer_makes_the_batch_run_again(tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer = make_writer(path)
    run_batch(writer, 0, rows([1]))
    messages = write(writer, 1, rows([2]))  # written for the table as batch 0 left it
    write_deltalake(str(path), rows([9], WIDER, score=[9.0]), mode="append", schema_mode="merge")
    with pytest.raises(mb.RetriableError, match="changed while batch 1 was written"):
        writer.commit(messages, 1)
    assert all("part-00001-" not in name for name in data_files(path))
    run_batch(writer, 1, rows([2]))  # the engine's retry: written for the table as it is now
    back = table_of(path).to_pyarrow_table().sort_by("id").to_pylist()
    assert back == [
        {"id": 1, "name": "n1", "score": None},
        {"id": 2, "name": "n2", "score": None},
        {"id": 9, "name": "n9", "score": 9.0},
    ]


def test_a_nested_partition_column_is_refused_at_start(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("tags", pa.list_(pa.string()))])
    with pytest.raises(mb.SchemaError) as caught:
        make_writer(tmp_path / "t", schema=schema, partition_by=("tags",))
    assert str(caught.value) == (
        f"The Delta table at {tmp_path / 't'} cannot be partitioned by column 'tags' of type "
        "list<element: string>: partition columns must be strings, numbers, booleans, dates, "
        "timestamps or binaries"
    )
