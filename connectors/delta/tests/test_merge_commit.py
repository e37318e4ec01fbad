"""``_merge.commit_merge``: the commit of a ``mode=merge`` batch, on staged files written by the
real part writer, into real Delta tables (delta-rs, read back with Polars too)."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

import microbatch as mb
from microbatch_delta._commit import commit_properties
from microbatch_delta._merge import (
    check_merge_keys,
    commit_merge,
    last_per_key,
    merge_predicate,
    quote_identifier,
)
from microbatch_delta._table import DeltaTarget

sys.path.insert(0, str(Path(__file__).parent))
from _delta_merge_testing import QUERY, batch_commits, log_entries, rows_by, stage

SCHEMA = pa.schema([("key", pa.int64()), ("kind", pa.string()), ("value", pa.int64())])


def commit(
    path: Path,
    parts: list[pa.Table],
    batch_id: int,
    keys: tuple[str, ...] = ("key",),
    *,
    schema: pa.Schema = SCHEMA,
    partition_by: tuple[str, ...] = (),
    configuration: dict[str, str] | None = None,
    merge_schema: bool = False,
) -> None:
    """Stage ``parts`` as batch ``batch_id`` and commit them as the sink's writer does."""
    target = DeltaTarget(str(path))
    files = stage(target, schema, parts, batch_id)
    commit_merge(
        target,
        target.open(),
        files,
        schema,
        keys,
        partition_by,
        commit_properties(QUERY, batch_id, "merge test"),
        configuration or {},
        merge_schema=merge_schema,
    )


def rows(*values: tuple[int | None, str | None, int | None]) -> pa.Table:
    return pa.Table.from_pylist(
        [{"key": key, "kind": kind, "value": value} for key, kind, value in values], SCHEMA
    )


def test_each_batch_is_one_commit_carrying_its_transaction(tmp_path: Path) -> None:
    table = tmp_path / "table"
    commit(
        table,
        [rows((1, "a", 10), (2, "b", 20)), rows((3, "a", 30))],
        0,
        partition_by=("kind",),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    commit(table, [rows((2, "a", 21)), rows((4, None, 40))], 1, partition_by=("kind",))
    entries = log_entries(table)
    assert len(entries) == 2
    for batch_id, entry in enumerate(entries):
        assert entry["txn"] == [{"appId": QUERY, "version": batch_id}]
        assert len(entry["commitInfo"]) == 1
        assert entry["commitInfo"][0]["userMetadata"] == "merge test"
        assert entry["add"], f"version {batch_id} adds no file"
    assert entries[0]["commitInfo"][0]["operation"] == "WRITE"
    merge = entries[1]["commitInfo"][0]
    assert merge["operation"] == "MERGE"
    assert merge["operationParameters"]["mergePredicate"] == "t.key = s.key"
    delta = DeltaTable(str(table))
    assert delta.metadata().partition_columns == ["kind"]
    assert delta.metadata().configuration == {"delta.enableChangeDataFeed": "true"}
    assert delta.transaction_version(QUERY) == 1
    expected = [
        {"key": 1, "kind": "a", "value": 10},
        {"key": 2, "kind": "a", "value": 21},  # moved to another partition
        {"key": 3, "kind": "a", "value": 30},
        {"key": 4, "kind": None, "value": 40},
    ]
    assert rows_by(delta.to_pyarrow_table(), "key") == expected
    assert pl.read_delta(str(table)).sort("key").to_dicts() == expected
    assert not list((table / "_microbatch_staging").rglob("*.parquet")), "staged files were kept"


def test_the_last_row_of_a_key_in_batch_order_wins(tmp_path: Path) -> None:
    table = tmp_path / "table"
    commit(table, [rows((1, "old", 0), (9, "kept", 9))], 0)
    # key 1 three times in the first part and once more in the second; key 2 twice in a part
    first = rows((1, "x", 1), (2, "y", 1), (1, "x", 2), (1, "x", 3), (2, "y", 2))
    second = rows((3, "z", 1), (1, "last", 4))
    commit(table, [first, second], 1)
    assert rows_by(DeltaTable(str(table)).to_pyarrow_table(), "key") == [
        {"key": 1, "kind": "last", "value": 4},
        {"key": 2, "kind": "y", "value": 2},
        {"key": 3, "kind": "z", "value": 1},
        {"key": 9, "kind": "kept", "value": 9},
    ]
    # a first batch with repeated keys creates the table with the last row of each
    fresh = tmp_path / "fresh"
    commit(fresh, [first, second], 0)
    assert rows_by(DeltaTable(str(fresh)).to_pyarrow_table(), "key") == [
        {"key": 1, "kind": "last", "value": 4},
        {"key": 2, "kind": "y", "value": 2},
        {"key": 3, "kind": "z", "value": 1},
    ]


def test_composite_keys(tmp_path: Path) -> None:
    table = tmp_path / "table"
    keys = ("key", "kind")
    commit(table, [rows((1, "a", 1), (1, "b", 2))], 0, keys)
    commit(table, [rows((1, "b", 3), (1, "a", 4), (1, "b", 5), (2, "a", 6))], 1, keys)
    assert rows_by(DeltaTable(str(table)).to_pyarrow_table(), "key", "kind") == [
        {"key": 1, "kind": "a", "value": 4},
        {"key": 1, "kind": "b", "value": 5},
        {"key": 2, "kind": "a", "value": 6},
    ]


def test_null_keys_match_null_keys(tmp_path: Path) -> None:
    """A NULL key is one key (as a NULL group of an aggregation): its latest row replaces the
    previous one instead of piling up (which a MERGE ON t.k = s.k would do)."""
    table = tmp_path / "table"
    keys = ("key", "kind")
    commit(table, [rows((None, None, 1), (None, "a", 1), (1, None, 1), (1, "a", 1))], 0, keys)
    commit(table, [rows((None, None, 2), (None, None, 3), (1, None, 2))], 1, keys)
    commit(table, [rows((None, "a", 4), (2, "b", 4))], 2, keys)
    expected = [
        {"key": None, "kind": None, "value": 3},
        {"key": None, "kind": "a", "value": 4},
        {"key": 1, "kind": None, "value": 2},
        {"key": 1, "kind": "a", "value": 1},
        {"key": 2, "kind": "b", "value": 4},
    ]
    assert rows_by(DeltaTable(str(table)).to_pyarrow_table(), "key", "kind") == expected
    predicates = [
        entry["commitInfo"][0]["operationParameters"]["mergePredicate"]
        for entry in log_entries(table)[1:]
    ]
    assert predicates == [
        "t.key IS NOT DISTINCT FROM s.key AND t.kind IS NOT DISTINCT FROM s.kind",
        # no NULL kind in batch 2: '=' there, which lets delta-rs prune files
        "t.key IS NOT DISTINCT FROM s.key AND t.kind = s.kind",
    ]


HOSTILE_NAMES = [
    "my col",
    "MixedCase",
    "select",
    "order",
    "a.b",
    "s.key",
    "t",
    "ünïcödé",
    "1abc",
    "back`tick",
    'dq"uote',
    'k" OR TRUE OR "',
    "k` OR TRUE OR `",
    "x) OR (1=1",
    "x' OR '1'='1",
    "-- comment",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_column_names_are_quoted_and_never_change_the_predicate(tmp_path: Path, name: str) -> None:
    """Keys and other columns with names that need quoting, or that try to break out of it:
    an injected ``OR TRUE`` would match every row (and fail on several matches or update them
    all)."""
    schema = pa.schema([(name, pa.int64()), (f"{name} value", pa.string())])
    table = tmp_path / "table"

    def batch(*pairs: tuple[int, str]) -> pa.Table:
        return pa.Table.from_pylist(
            [{name: key, f"{name} value": value} for key, value in pairs], schema
        )

    commit(table, [batch((1, "a"), (2, "b"), (3, "c"))], 0, (name,), schema=schema)
    commit(table, [batch((2, "B"), (4, "d"))], 1, (name,), schema=schema)
    assert rows_by(DeltaTable(str(table)).to_pyarrow_table(), name) == [
        {name: 1, f"{name} value": "a"},
        {name: 2, f"{name} value": "B"},
        {name: 3, f"{name} value": "c"},
        {name: 4, f"{name} value": "d"},
    ]
    assert merge_predicate((name,), batch((1, "a"))) == (
        f"t.{quote_identifier(name)} = s.{quote_identifier(name)}"
    )


def test_an_empty_batch_is_one_commit_that_records_its_transaction(tmp_path: Path) -> None:
    table = tmp_path / "table"
    commit(table, [SCHEMA.empty_table()], 0)  # creates the (empty) table
    commit(table, [rows((1, "a", 1))], 1)
    commit(table, [], 2)  # a batch without parts
    commit(table, [SCHEMA.empty_table()], 3)
    assert batch_commits(table, QUERY) == [(0, "WRITE"), (1, "MERGE"), (2, "WRITE"), (3, "WRITE")]
    entries = log_entries(table)
    assert "add" not in entries[2] and "remove" not in entries[2]
    delta = DeltaTable(str(table))
    assert delta.transaction_version(QUERY) == 3
    assert delta.to_pyarrow_table().to_pylist() == [{"key": 1, "kind": "a", "value": 1}]


def test_merge_schema_adds_the_new_columns(tmp_path: Path) -> None:
    table = tmp_path / "table"
    commit(table, [rows((1, "a", 1), (2, "b", 2))], 0)
    wider = SCHEMA.append(pa.field("extra", pa.string()))
    update = pa.Table.from_pylist([{"key": 2, "kind": "B", "value": 3, "extra": "new"}], wider)
    commit(table, [update], 1, schema=wider, merge_schema=True)
    assert rows_by(DeltaTable(str(table)).to_pyarrow_table(), "key") == [
        {"key": 1, "kind": "a", "value": 1, "extra": None},
        {"key": 2, "kind": "B", "value": 3, "extra": "new"},
    ]


def test_a_failed_commit_keeps_the_staged_files(tmp_path: Path) -> None:
    """The writer retries a conflicting commit from the same files: they must survive it."""
    table = tmp_path / "table"
    commit(table, [rows((1, "a", 1))], 0)
    target = DeltaTarget(str(table))
    files = stage(target, SCHEMA, [rows((1, "b", 2))], 1)
    with pytest.raises(mb.ConfigurationError, match="'nope', which is not a column"):
        commit_merge(
            target,
            target.open(),
            files,
            SCHEMA,
            ("nope",),
            (),
            commit_properties(QUERY, 1, None),
            {},
        )
    assert all((table / file.path).exists() for file in files)
    assert DeltaTable(str(table)).version() == 0


def test_last_per_key_keeps_batch_order_and_returns_distinct_rows_unchanged() -> None:
    distinct = rows((3, "a", 1), (1, "b", 2), (None, "c", 3))
    assert last_per_key(distinct, ["key"]) is distinct
    repeated = rows((3, "a", 1), (1, "b", 2), (3, "c", 3), (None, "d", 4), (None, "e", 5))
    assert last_per_key(repeated, ["key"]).to_pylist() == [
        {"key": 1, "kind": "b", "value": 2},
        {"key": 3, "kind": "c", "value": 3},
        {"key": None, "kind": "e", "value": 5},
    ]


def test_merge_keys_are_checked() -> None:
    schema = pa.schema(
        [
            ("Id", pa.int64()),
            ("tags", pa.list_(pa.string())),
            ("point", pa.struct([("x", pa.int8())])),
        ]
    )
    with pytest.raises(mb.ConfigurationError, match=r"'id', which is not a column .*'Id'"):
        check_merge_keys(schema, ["id"])
    with pytest.raises(mb.SchemaError, match="column 'tags' has type list<item: string>"):
        check_merge_keys(schema, ["tags"])
    with pytest.raises(mb.SchemaError, match="column 'point' has type struct"):
        check_merge_keys(schema, ["point"])
    with pytest.raises(mb.ConfigurationError, match="names 'Id' more than once"):
        check_merge_keys(schema, ["Id", "Id"])
    with pytest.raises(mb.ConfigurationError, match="is empty"):
        check_merge_keys(schema, [])
    reserved = pa.schema([("id", pa.int64()), ("__delta_rs_source", pa.bool_())])
    with pytest.raises(mb.SchemaError, match="Column '__delta_rs_source' cannot be merged"):
        check_merge_keys(reserved, ["id"])
    check_merge_keys(schema, ["Id"])


def test_a_merge_from_a_stale_read_conflicts_and_changes_nothing(tmp_path: Path) -> None:
    """The writer retries a conflicting commit from a fresh read: a merge planned on an older
    version of the table must fail, not overwrite the other writer's update."""
    table = tmp_path / "table"
    commit(table, [rows((1, "a", 1), (2, "b", 2))], 0)
    target = DeltaTarget(str(table))
    stale = target.open()
    commit(table, [rows((1, "other writer", 10))], 1)
    files = stage(target, SCHEMA, [rows((2, "late", 20))], 2)
    with pytest.raises(CommitFailedError, match="concurrent"):
        commit_merge(
            target, stale, files, SCHEMA, ("key",), (), commit_properties(QUERY, 2, None), {}
        )
    assert all((table / file.path).exists() for file in files), "a retry needs the staged files"
    assert rows_by(DeltaTable(str(table)).to_pyarrow_table(), "key") == [
        {"key": 1, "kind": "other writer", "value": 10},
        {"key": 2, "kind": "b", "value": 2},
    ]
    commit_merge(
        target, target.open(), files, SCHEMA, ("key",), (), commit_properties(QUERY, 2, None), {}
    )
    assert rows_by(DeltaTable(str(table)).to_pyarrow_table(), "key")[1]["kind"] == "late"
