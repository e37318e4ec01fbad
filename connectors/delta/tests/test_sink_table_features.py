"""Tables made by other writers with features the ``delta`` sink's own parquet files cannot
honour: CHECK constraints are enforced (through delta-rs's writer), column mapping, generated
columns and append-only overwrites are refused before anything is written; table properties the
sink cannot honour at creation are refused (tables made by delta-rs itself)."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, Field, Schema, write_deltalake

import microbatch as mb
from microbatch_delta._commit import DeltaStreamWriter, SinkSettings
from microbatch_delta._schema_fit import Fit
from microbatch_delta._table import DeltaTarget

sys.path.insert(0, str(Path(__file__).parent))
from _delta_sink_testing import (
    SCHEMA,
    data_files,
    make_writer,
    read_ids,
    rows,
    run_batch,
    transactions,
    write,
)

COMPLETE = mb.OutputMode.COMPLETE
UPDATE = mb.OutputMode.UPDATE


def constrained(path: Path) -> None:
    write_deltalake(str(path), rows([1, 2]))
    DeltaTable(str(path)).alter.add_constraint({"positive": "id > 0"})


def test_rows_that_violate_a_check_constraint_fail_the_batch_and_commit_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t"
    constrained(path)
    writer = make_writer(path)
    before = data_files(path)
    messages = write(writer, 0, rows([3]), rows([-5]))
    with pytest.raises(mb.SinkError, match="violate a CHECK constraint") as caught:
        writer.commit(messages, 0)
    writer.abort(messages, 0)
    assert str(path) in str(caught.value)
    assert read_ids(path) == [1, 2]
    assert DeltaTable(str(path)).transaction_version("query-1") is None
    # the staged files are gone (delta-rs's writer may leave a file of its own that no commit
    # names: invisible, and VACUUM removes it)
    assert not [name for name in data_files(path) - before if name.startswith("_microbatch")]


@pytest.mark.parametrize("output_mode", [mb.OutputMode.APPEND, COMPLETE])
def test_rows_that_pass_a_check_constraint_commit_once(
    tmp_path: Path, output_mode: mb.OutputMode
) -> None:
    path = tmp_path / "t"
    constrained(path)
    run_batch(make_writer(path, output_mode=output_mode), 0, rows([3]), rows([4]))
    run_batch(make_writer(path, output_mode=output_mode), 0, rows([3]), rows([4]))  # a replay
    expected = [3, 4] if output_mode == COMPLETE else [1, 2, 3, 4]
    assert read_ids(path) == expected
    assert transactions(path)[-1] == ("query-1", 0)
    assert len(transactions(path)) == 3  # create, constraint, one commit of batch 0
    assert DeltaTable(str(path)).metadata().configuration["delta.constraints.positive"]


def test_merge_mode_enforces_a_check_constraint(tmp_path: Path) -> None:
    path = tmp_path / "t"
    constrained(path)
    writer = make_writer(path, output_mode=UPDATE, mode="merge", mergeKeys="id")
    with pytest.raises(mb.SinkError, match="violate a CHECK constraint"):
        run_batch(writer, 0, rows([-1]))
    assert read_ids(path) == [1, 2]


def test_a_column_mapped_table_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(
        str(path),
        rows([1, 2]),
        configuration={
            "delta.columnMapping.mode": "name",
            "delta.minReaderVersion": "2",
            "delta.minWriterVersion": "5",
        },
    )
    with pytest.raises(mb.UnsupportedOperationError, match="column mapping") as caught:
        make_writer(path)
    assert str(path) in str(caught.value)
    assert len(transactions(path)) == 1  # nothing committed


def test_a_table_with_a_generated_column_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t"
    schema = Schema(
        [
            Field("id", "long", nullable=False),
            Field("name", "string"),
            Field("twice", "long", metadata={"delta.generationExpression": "id * 2"}),
        ]
    )
    DeltaTable.create(str(path), schema)
    with pytest.raises(mb.UnsupportedOperationError, match=r"generated columns .*: column 'twice'"):
        make_writer(path)


def test_complete_mode_into_an_append_only_table_is_refused_at_start(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), rows([1, 2]), configuration={"delta.appendOnly": "true"})
    with pytest.raises(mb.UnsupportedOperationError, match="append-only"):
        make_writer(path, output_mode=COMPLETE)
    with pytest.raises(mb.UnsupportedOperationError, match="append-only"):
        make_writer(path, output_mode=UPDATE, mode="merge", mergeKeys="id")
    run_batch(make_writer(path), 0, rows([3]))  # appends are what the table takes
    assert read_ids(path) == [1, 2, 3]
    with pytest.raises(mb.ConfigurationError, match=r"delta\.appendOnly"):  # nor made so
        make_writer(tmp_path / "new", output_mode=COMPLETE, **{"delta.appendOnly": "true"})


def test_change_feed_columns_are_refused_with_the_change_data_feed(tmp_path: Path) -> None:
    schema = pa.schema([*SCHEMA, pa.field("_change_type", pa.string())])
    with pytest.raises(mb.ConfigurationError, match="DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS"):
        make_writer(tmp_path / "t", schema=schema, **{"delta.enableChangeDataFeed": "true"})
    assert not (tmp_path / "t" / "_delta_log").exists()
    make_writer(tmp_path / "u", schema=schema)  # without the feed the name is a column like any


def test_merge_schema_cannot_add_change_feed_columns_to_a_table_with_the_feed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), rows([1]), configuration={"delta.enableChangeDataFeed": "true"})
    schema = pa.schema([*SCHEMA, pa.field("_commit_version", pa.int64())])
    with pytest.raises(mb.ConfigurationError, match="DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS"):
        make_writer(path, schema=schema, mergeSchema=True)
    assert len(transactions(path)) == 1


@pytest.mark.parametrize(
    "option", ["delta.columnMapping.mode=name", "delta.constraints.positive=id > 0"]
)
def test_table_properties_the_sink_cannot_honour_are_refused(tmp_path: Path, option: str) -> None:
    key, value = option.split("=")
    with pytest.raises(mb.ConfigurationError, match=key.replace(".", r"\.")):
        make_writer(tmp_path / "t", **{key: value})


def test_merge_batch_into_an_append_only_table_fails_for_good(tmp_path: Path) -> None:
    from microbatch_delta import merge_batch

    path = tmp_path / "t"
    write_deltalake(str(path), rows([1, 2]), configuration={"delta.appendOnly": "true"})
    with pytest.raises(mb.UnsupportedOperationError, match="append-only"):
        merge_batch(rows([2]), 0, path, "id", app_id="app")
    assert read_ids(path) == [1, 2]


def test_merge_batch_refuses_change_feed_columns_with_the_feed(tmp_path: Path) -> None:
    from microbatch_delta import merge_batch

    batch = pa.table({"id": [1], "_commit_version": [3]})
    feed = {"delta.enableChangeDataFeed": "true"}
    with pytest.raises(mb.ConfigurationError, match="DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS"):
        merge_batch(batch, 0, tmp_path / "t", "id", app_id="app", configuration=feed)
    assert not (tmp_path / "t" / "_delta_log").exists()


@pytest.mark.parametrize("merge_schema", [False, True])
def test_merge_mode_keeps_the_values_of_table_columns_the_query_lacks(
    tmp_path: Path, merge_schema: bool
) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), rows([1, 2]))
    only_id = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    writer = make_writer(
        path,
        schema=only_id,
        output_mode=UPDATE,
        mode="merge",
        mergeKeys="id",
        mergeSchema=merge_schema,
    )
    run_batch(writer, 0, pa.table({"id": [1, 3]}, schema=only_id))
    table = DeltaTable(str(path)).to_pyarrow_table().sort_by("id")
    assert table.to_pylist() == [
        {"id": 1, "name": "n1"},  # matched: its name is not the query's to erase
        {"id": 2, "name": "n2"},
        {"id": 3, "name": None},  # inserted: NULL where the query has no value
    ]


class LostAnswerWriter(DeltaStreamWriter):
    """The sink's writer whose first commit lands but then fails as a lost race, as a commit to
    an object store does when the store applied a conditional write whose answer was lost and
    delta-rs's retry then meets its own entry."""

    def _commit_once(self, table: DeltaTable | None, fit: Fit, files: list, batch_id: int) -> None:
        from deltalake.exceptions import CommitFailedError

        super()._commit_once(table, fit, files, batch_id)
        if not getattr(self, "failed", False):
            self.failed = True
            raise CommitFailedError("Failed to commit transaction: Concurrent transaction failed.")


@pytest.mark.parametrize("partition_by", [(), ("name",)])
def test_a_landed_commit_reported_as_lost_keeps_its_files(
    tmp_path: Path, partition_by: tuple[str, ...]
) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path, partition_by=partition_by), 0, rows([1]))
    settings = SinkSettings(partition_by=partition_by)
    writer = LostAnswerWriter(DeltaTarget(str(path)), SCHEMA, "query-1", settings)
    messages = write(writer, 1, rows([2], name=["a b/c"]))
    writer.commit(messages, 1)  # the batch is in: no error, and its files stay
    assert writer.failed
    assert read_ids(path) == [1, 2]
    assert pl.read_delta(str(path)).sort("id")["id"].to_list() == [1, 2]
    assert transactions(path) == [("query-1", 0), ("query-1", 1)]
