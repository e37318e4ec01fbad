"""What the Delta source reads from the files: partition values, schema evolution of the
source table, log entries that are gone, and what it refuses (deletion vectors, column
mapping)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import microbatch as mb

sys.path.insert(0, str(Path(__file__).parent))
from _delta_source_testing import ids, run_available_now, run_frame, stream


@pytest.fixture(scope="module")
def session() -> mb.Session:
    return mb.Session()


def _sorted(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda row: row["id"])


def _partition_rows(first: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(first, first + 4), pa.int64()),
            "day": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2), None, dt.date(2024, 1, 1)]),
            "city": pa.array(["a b", "x/y=z", "plain", None]),
            "n": pa.array([1, 2, 3, 4], pa.int32()),
        }
    )


def test_partition_values_come_back_typed_in_the_snapshot_and_in_later_versions(
    session: mb.Session, delta_table: Any, tmp_path: Path
) -> None:
    delta_table.append(_partition_rows(0), partition_by=["day", "city"])
    checkpoint = tmp_path / "cp"
    snapshot, _ = run_available_now(session, delta_table.uri, checkpoint)
    delta_table.append(_partition_rows(10), partition_by=["day", "city"])
    later, _ = run_available_now(session, delta_table.uri, checkpoint)
    assert snapshot.schema == later.schema == delta_table.read().schema
    expected = _sorted(delta_table.read())
    assert _sorted(pa.concat_tables([snapshot, later])) == expected
    assert {row["city"] for row in expected} == {"a b", "x/y=z", "plain", None}
    batch = session.read.format("delta").load(delta_table.uri)
    assert _sorted(batch) == expected


def test_a_schema_change_stops_a_running_stream_and_a_restart_reads_the_new_schema(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 3))
    checkpoint = tmp_path / "cp"
    run_available_now(session, delta_table.uri, checkpoint)
    frame = stream(session, delta_table.uri)  # loaded with the old schema
    wider = make_numbers(3, 3).append_column("extra", pa.array(["e3", "e4", "e5"]))
    delta_table.append(make_numbers(100, 1))
    version = delta_table.append(wider, schema_mode="merge")
    with pytest.raises(mb.StreamingQueryException) as failure:
        run_frame(session, frame, checkpoint, name="before_restart")
    text = str(failure.value.__cause__)
    assert text.startswith(f"Detected schema change in version {version} of the Delta table")
    assert "streaming source schema: root\n-- id: int64" in text
    assert "-- extra: string (nullable = true)" in text
    assert "Please try restarting the query." in text
    assert ids(session.table("before_restart")) == [100]  # the version before it was read
    rows, _ = run_available_now(session, delta_table.uri, checkpoint)  # a new load
    assert rows.schema.names == ["id", "name", "extra"]
    assert rows.to_pylist() == [{"id": i, "name": f"n{i}", "extra": f"e{i}"} for i in (3, 4, 5)]
    # a new stream reads files written before the column as nulls in it
    everything, _ = run_available_now(session, delta_table.uri, tmp_path / "fresh")
    assert {row["id"]: row["extra"] for row in everything.to_pylist()}[0] is None


def _read_then_lose_versions_0_to_2(
    session: mb.Session, delta_table: Any, make_numbers: Any, checkpoint: Path
) -> None:
    """Version 0 (ids 0, 1) read up to (1, -1); versions 1, 2, 3 (ids 10, 11, 12) appended;
    then a log checkpoint at version 3 and the log entries of versions 0 to 2 removed."""
    delta_table.append(make_numbers(0, 2))
    run_available_now(session, delta_table.uri, checkpoint)
    for n in range(3):
        delta_table.append(make_numbers(10 + n, 1))
    DeltaTable(delta_table.uri).create_checkpoint()
    for version in range(3):
        (Path(delta_table.uri) / "_delta_log" / f"{version:020d}.json").unlink()


def test_a_log_entry_removed_after_a_checkpoint_is_reported_with_its_version(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "cp"
    _read_then_lose_versions_0_to_2(session, delta_table, make_numbers, checkpoint)
    with pytest.raises(mb.StreamingQueryException) as failure:
        run_available_now(session, delta_table.uri, checkpoint)
    text = str(failure.value.__cause__)
    assert text.startswith(
        "The log entry _delta_log/00000000000000000001.json of version 1 of the Delta table"
    )
    assert "(the log now keeps version 3)" in text
    assert "it's likely your query is lagging behind" in text


def test_a_new_query_missing_a_version_inside_the_log_lists_what_is_kept(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    for n in range(5):
        delta_table.append(make_numbers(10 * n, 1))
    DeltaTable(delta_table.uri).create_checkpoint()  # at version 4: the log may lose entries
    (Path(delta_table.uri) / "_delta_log" / f"{1:020d}.json").unlink()
    with pytest.raises(mb.StreamingQueryException) as failure:
        run_available_now(session, delta_table.uri, tmp_path / "cp", startingVersion=0)
    text = str(failure.value.__cause__)
    assert text.startswith(
        "The log entry _delta_log/00000000000000000001.json of version 1 of the Delta table"
    )
    assert "(the log now keeps versions 0 and 2 to 4)" in text
    assert "checkpoint" not in text.replace("after a checkpoint", "")  # a new query: none
    assert "failOnDataLoss" in text


def _write_entry(path: str, version: int, actions: list[dict[str, Any]]) -> None:
    entry = Path(path) / "_delta_log" / f"{version:020d}.json"
    entry.write_text("".join(json.dumps(action) + "\n" for action in actions))


def _first_add(path: str) -> dict[str, Any]:
    text = (Path(path) / "_delta_log" / f"{0:020d}.json").read_text()
    return next(json.loads(line)["add"] for line in text.splitlines() if '"add"' in line)


def _add_with_deletion_vector(path: str) -> dict[str, Any]:
    """The first file version 0 added, with an inline deletion vector marking one row."""
    return {
        **_first_add(path),
        "deletionVector": {
            "storageType": "i",
            "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
            "offset": 1,
            "sizeInBytes": 36,
            "cardinality": 1,
        },
    }


def test_files_with_deletion_vectors_are_refused(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 2))
    checkpoint = tmp_path / "cp"
    run_available_now(session, delta_table.uri, checkpoint)
    add = _add_with_deletion_vector(delta_table.uri)
    _write_entry(
        delta_table.uri, 1, [{"commitInfo": {"timestamp": 1, "operation": "WRITE"}}, {"add": add}]
    )
    with pytest.raises(mb.StreamingQueryException) as failure:
        run_available_now(session, delta_table.uri, checkpoint)
    assert "of version 1 of the Delta table" in str(failure.value.__cause__)
    assert "has a deletion vector, which the Delta source cannot apply" in str(
        failure.value.__cause__
    )


def test_deletion_vectors_in_the_snapshot_are_refused_by_streams_and_batch_reads(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 2))
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors"],
    }
    add = _add_with_deletion_vector(delta_table.uri)
    remove = {"path": add["path"], "dataChange": True, "deletionTimestamp": 1}
    _write_entry(
        delta_table.uri,
        1,
        [
            {"commitInfo": {"timestamp": 1, "operation": "DELETE"}},
            {"protocol": protocol},
            {"remove": remove},
            {"add": add},
        ],
    )
    with pytest.raises(mb.StreamingQueryException) as failure:
        run_available_now(session, delta_table.uri, tmp_path / "cp")
    assert "of version 1 of the Delta table" in str(failure.value.__cause__)
    assert "deletion vector" in str(failure.value.__cause__)
    with pytest.raises(mb.SourceError, match="deletion vector"):
        session.read.format("delta").load(delta_table.uri)


def test_column_mapping_is_refused(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 2))
    frame = stream(session, delta_table.uri)
    table = DeltaTable(delta_table.uri)
    metadata = {
        "id": table.metadata().id,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": table.schema().to_json(),
        "partitionColumns": [],
        "configuration": {"delta.columnMapping.mode": "name"},
        "createdTime": 1,
    }
    _write_entry(
        delta_table.uri,
        1,
        [
            {"commitInfo": {"timestamp": 1, "operation": "SET TBLPROPERTIES"}},
            {"metaData": metadata},
        ],
    )
    with pytest.raises(mb.SourceError, match=r"mode=name \(since version 1\)\)"):
        # the snapshot the stream would start with is newer than its schema
        run_frame(session, frame, tmp_path / "cp")
    with pytest.raises(mb.SourceError, match="uses column mapping"):
        session.read_stream.format("delta").load(delta_table.uri)


def test_files_written_before_a_nested_field_was_added_read_with_nulls_in_it(
    session: mb.Session, delta_table: Any
) -> None:
    inner = pa.struct([("a", pa.int64())])
    wider = pa.struct([("a", pa.int64()), ("b", pa.string())])
    delta_table.append(
        pa.table(
            {
                "id": pa.array([1, 2], pa.int64()),
                "s": pa.array([{"a": 1}, None], inner),
                "l": pa.array([[{"a": 1}, None], None], pa.list_(inner)),
            }
        )
    )
    delta_table.append(
        pa.table(
            {
                "id": pa.array([3], pa.int64()),
                "s": pa.array([{"a": 3, "b": "x"}], wider),
                "l": pa.array([[{"a": 3, "b": "y"}]], pa.list_(wider)),
            }
        ),
        schema_mode="merge",
    )
    rows = session.read.format("delta").load(delta_table.uri)
    assert _sorted(rows) == [
        {"id": 1, "s": {"a": 1, "b": None}, "l": [{"a": 1, "b": None}, None]},
        {"id": 2, "s": None, "l": None},
        {"id": 3, "s": {"a": 3, "b": "x"}, "l": [{"a": 3, "b": "y"}]},
    ]
    assert _sorted(rows) == _sorted(delta_table.read())


def test_a_version_that_only_changes_table_properties_is_read_past(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 2))
    checkpoint = tmp_path / "cp"
    frame = stream(session, delta_table.uri)
    DeltaTable(delta_table.uri).alter.set_table_properties({"delta.appendOnly": "false"})
    delta_table.append(make_numbers(2, 2))
    rows, _ = run_frame(session, frame, checkpoint)
    assert ids(rows) == [0, 1, 2, 3]


def test_with_fail_on_data_loss_false_lost_versions_are_skipped_and_counted(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "cp"
    _read_then_lose_versions_0_to_2(session, delta_table, make_numbers, checkpoint)
    rows, query = run_available_now(session, delta_table.uri, checkpoint, failOnDataLoss=False)
    assert ids(rows) == [12]  # versions 1 and 2 are lost
    assert query.recent_progress[-1]["sources"][0]["metrics"]["numLostVersions"] == "2"


def test_a_data_file_removed_by_hand_or_vacuum_stops_the_stream_naming_it(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    delta_table.append(make_numbers(0, 2))
    gone = _first_add(delta_table.uri)["path"]
    (Path(delta_table.uri) / gone).unlink()
    with pytest.raises(mb.StreamingQueryException) as failure:
        run_available_now(session, delta_table.uri, tmp_path / "cp")
    text = str(failure.value.__cause__)
    assert text.startswith(f"The data file {gone} of version 0 of the Delta table at")
    assert "cannot be found" in text


def test_lists_and_maps_of_structs_read_in_a_wider_schema_batch_by_batch(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from microbatch_delta._file_reader import DeltaFileReader, DeltaFileSplit, conform_array
    from microbatch_delta._table import DeltaTarget

    item = pa.struct([("a", pa.int64())])
    wider = pa.struct([("a", pa.int64()), ("b", pa.string())])
    lists = [[{"a": 1}], None, [{"a": 2}, {"a": 3}], [], None, [{"a": 4}]]
    maps = [[("k", {"a": 1})], None, [], [("x", None)], None, [("y", {"a": 2})]]
    data = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "l": pa.array(lists, pa.list_(item)),
            "m": pa.array(maps, pa.map_(pa.string(), item)),
        }
    )
    pq.write_table(data, tmp_path / "f.parquet")
    schema = pa.schema(
        [("id", pa.int64()), ("l", pa.list_(wider)), ("m", pa.map_(pa.string(), wider))]
    )
    reader = DeltaFileReader(DeltaTarget(str(tmp_path)), schema, (), batch_rows=4)
    batches = list(reader.read(DeltaFileSplit("f.parquet", 1, (), 0, 0)))
    rows = pa.Table.from_batches(batches).to_pylist()
    assert [row["l"] for row in rows] == [
        None if v is None else [{**x, "b": None} for x in v] for v in lists
    ]
    assert [row["m"] for row in rows] == [
        None if v is None else [(k, None if x is None else {**x, "b": None}) for k, x in v]
        for v in maps
    ]
    sliced = data.column("l").combine_chunks().slice(1)  # a slice with nulls, as batches can be
    assert conform_array(sliced, pa.list_(wider)).to_pylist() == [
        None if v is None else [{**x, "b": None} for x in v] for v in lists[1:]
    ]


def test_a_table_with_deletion_vectors_enabled_but_none_written_reads(
    session: mb.Session, delta_table: Any, make_numbers: Any, tmp_path: Path
) -> None:
    # delta-rs declares the reader features deletionVectors and variantType for such a table
    delta_table.append(make_numbers(0, 3), configuration={"delta.enableDeletionVectors": "true"})
    assert "variantType" in DeltaTable(delta_table.uri).protocol().reader_features
    delta_table.append(make_numbers(3, 2))
    rows, _ = run_available_now(session, delta_table.uri, tmp_path / "cp")
    assert ids(rows) == list(range(5))
    assert ids(session.read.format("delta").load(delta_table.uri)) == list(range(5))


def test_variant_columns_are_refused_by_name(
    session: mb.Session, delta_table: Any, make_numbers: Any
) -> None:
    delta_table.append(make_numbers(0, 2), configuration={"delta.enableDeletionVectors": "true"})
    table = DeltaTable(delta_table.uri)
    schema = json.loads(table.schema().to_json())
    variant = {"name": "v", "type": "variant", "nullable": True, "metadata": {}}
    inner = {"type": "struct", "fields": [variant]}
    schema["fields"].append({"name": "s", "type": inner, "nullable": True, "metadata": {}})
    metadata = {
        "id": table.metadata().id,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": [],
        "configuration": {},
        "createdTime": 1,
    }
    _write_entry(
        delta_table.uri,
        1,
        [{"commitInfo": {"timestamp": 1, "operation": "ADD COLUMNS"}}, {"metaData": metadata}],
    )
    with pytest.raises(mb.SourceError, match=r"has variant columns \(s\.v\), which the Delta"):
        session.read_stream.format("delta").load(delta_table.uri)
