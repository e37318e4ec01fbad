"""The ``delta`` sink's options: Delta's names, their checks and where each one goes."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import microbatch as mb
from microbatch_delta._schema_fit import same_type
from microbatch_delta._sink_options import SINK_OPTIONS, table_properties
from microbatch_delta.sink import DeltaSink

sys.path.insert(0, str(Path(__file__).parent))
from _delta_sink_testing import make_writer, rows, run_batch


def parse(**raw: object) -> mb.Options:
    return SINK_OPTIONS.parse({"path": "/tmp/t", **raw}, connector="delta")


def problems(**raw: object) -> list[str]:
    with pytest.raises(mb.OptionError) as caught:
        parse(**raw)
    return caught.value.problems


def test_defaults_follow_delta() -> None:
    opts = parse()
    assert (opts.mode, opts.merge_schema, opts.overwrite_schema) == ("append", False, False)
    assert opts.merge_keys is None and opts.user_metadata is None
    assert opts.max_records_per_file is None


def test_merge_needs_keys_and_keys_need_merge() -> None:
    assert problems(mode="merge") == [
        "mode=merge needs 'mergeKeys': the columns that identify a row (e.g. "
        ".option('mergeKeys', 'id'))"
    ]
    assert problems(mergeKeys="id") == [
        "option 'mergeKeys' only applies with mode=merge (.option('mode', 'merge'))"
    ]
    assert parse(mode="MERGE", mergeKeys="a, b").merge_keys == ("a", "b")
    assert parse(mode="merge", mergeKeys=["a"]).merge_keys == ("a",)


def test_wrong_values_are_all_reported_at_once() -> None:
    found = problems(mode="upsert", mergeSchema="yes", maxRecordsPerFile=0, overwriteSchem="x")
    text = "\n".join(found)
    assert "mode" in text and "append, merge" in text
    assert "mergeSchema" in text and "'true' or 'false'" in text
    assert "maxRecordsPerFile" in text and "at least 1" in text
    assert "Did you mean 'overwriteSchema'?" in text or "overwriteSchema" in text


def test_delta_properties_are_table_properties() -> None:
    opts = parse(
        **{
            "delta.enableChangeDataFeed": "true",
            "delta.appendOnly": True,
            "storage.AWS_REGION": "x",
        }
    )
    assert table_properties(opts) == {
        "delta.enableChangeDataFeed": "true",
        "delta.appendOnly": "true",
    }
    assert "needs a table property name" in problems(**{"delta.": "x"})[0]


def test_properties_given_for_an_existing_table_are_ignored_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path, **{"delta.appendOnly": "true"}), 0, rows([1]))
    with caplog.at_level(logging.WARNING, logger="microbatch.delta"):
        make_writer(path, **{"delta.appendOnly": "true", "delta.enableChangeDataFeed": "true"})
    assert (
        "options delta.enableChangeDataFeed=true (applied only when the sink creates a table)"
        in caplog.text
    )
    assert "delta.appendOnly" not in caplog.text
    assert "delta.enableChangeDataFeed" not in DeltaTable(str(path)).metadata().configuration


def test_storage_options_never_show(tmp_path: Path) -> None:
    raw = {
        "path": str(tmp_path / "t"),
        "storageOptions": {"AWS_SECRET_ACCESS_KEY": "hunter22"},
        "storage.AWS_ACCESS_KEY_ID": "AKIAXX",
    }
    opts = SINK_OPTIONS.parse(raw, connector="delta")
    shown = repr(opts) + str(opts.redacted()) + DeltaSink(opts).describe()
    assert "hunter22" not in shown and "AKIAXX" not in shown


def test_widening_and_delta_types() -> None:
    assert same_type(pa.int32(), pa.int64()) and same_type(pa.float32(), pa.float64())
    assert not same_type(pa.int64(), pa.int32()) and not same_type(pa.int64(), pa.float64())
    assert same_type(pa.large_string(), pa.string())
    assert same_type(pa.large_list(pa.int32()), pa.list_(pa.field("element", pa.int64())))
    narrow = pa.struct([pa.field("x", pa.int32())])
    assert same_type(narrow, pa.struct([pa.field("x", pa.int64())]))
    assert not same_type(narrow, pa.struct([pa.field("x", pa.int64()), pa.field("y", pa.int8())]))
