"""Failure paths of the sink: a half-written part file; a commit that landed but failed (a
lost answer, a failed post-commit step) on the staged path (mergeSchema), for an empty batch
and for an append; a second run racing on the staged path; the sink's own log lines with a
store away (real tables, real delta-rs; the failure after the commit is the injected fault)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from deltalake import DeltaTable

import microbatch as mb
from microbatch_delta._commit import DeltaStreamWriter
from microbatch_delta._parquet_files import write_parquet_files
from microbatch_delta._schema_fit import Fit

sys.path.insert(0, str(Path(__file__).parent))
from _delta_sink_testing import make_writer, read_ids, rows, run_batch, transactions, write


class Broken(Exception):
    pass


def test_a_part_that_fails_midway_leaves_no_half_written_file(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64())])

    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, 30, 10):
            yield pa.record_batch([pa.array(range(start, start + 10))], schema=schema)
        raise Broken("the source failed")

    finished: list[str] = []
    # any filesystem the writer is given (an object store too): the caller only knows the
    # files it was told of, so the writer must remove the one it was writing
    filesystem = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    with pytest.raises(Broken):
        write_parquet_files(
            batches(), schema, filesystem, "t", "part-{i}.parquet", 4, 8,
            lambda file: finished.append(file.path),
        )  # fmt: skip
    assert finished == [f"t/part-{i}.parquet" for i in range(3)]  # 24 rows in 3 files
    left = sorted(path.name for path in (tmp_path / "t").iterdir())
    assert left == ["part-0.parquet", "part-1.parquet", "part-2.parquet"]  # not part-3


def lost_answer(writer: mb.StreamWriter, hook: bool = False) -> mb.StreamWriter:
    """``writer``, whose next commit lands but then fails as a lost race (an object store that
    applied a conditional write whose answer was lost, delta-rs's retry meeting its own entry),
    or with ``hook`` as a post-commit hook (a checkpoint) failing after the commit."""
    assert isinstance(writer, DeltaStreamWriter)
    original = writer._commit_once

    def commit_once(
        table: DeltaTable | None, fit: Fit, files: Sequence[Any], batch_id: int
    ) -> None:
        from deltalake.exceptions import CommitFailedError, DeltaError

        original(table, fit, files, batch_id)
        writer._commit_once = original  # type: ignore[method-assign]
        if hook:
            raise DeltaError("Generic DeltaTable error: checkpoint could not be written")
        raise CommitFailedError("Failed to commit transaction: Concurrent transaction failed.")

    writer._commit_once = commit_once  # type: ignore[method-assign]
    return writer


@pytest.mark.parametrize("hook", [False, True], ids=["lost race", "post-commit hook"])
def test_a_staged_commit_reported_as_lost_is_in_the_table_once(tmp_path: Path, hook: bool) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path), 0, rows([1]))
    wider = pa.schema([*rows([1]).schema, pa.field("extra", pa.int64())])
    writer = lost_answer(make_writer(path, schema=wider, mergeSchema=True), hook)
    messages = write(writer, 1, rows([2], wider, extra=[7]))
    writer.commit(messages, 1)  # landed: no error (it used to say another run committed)
    run_batch(writer, 1, rows([2], wider, extra=[7]))  # a replay: skipped
    assert read_ids(path) == [1, 2]
    assert transactions(path) == [("query-1", 0), ("query-1", 1)]
    assert not (path / "_microbatch_staging").exists() or not any(
        (path / "_microbatch_staging").rglob("*.parquet")
    )


def test_an_empty_batch_reported_as_lost_is_in_the_table(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path), 0, rows([1]))
    writer = lost_answer(make_writer(path))
    writer.commit([], 1)
    assert read_ids(path) == [1]
    assert DeltaTable(str(path)).transaction_version("query-1") == 1


def test_an_append_failing_after_it_landed_keeps_its_files(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path), 0, rows([1]))
    writer = lost_answer(make_writer(path), hook=True)
    writer.commit(write(writer, 1, rows([2])), 1)
    assert read_ids(path) == [1, 2]
    assert pl.read_delta(str(path))["id"].sort().to_list() == [1, 2]
    assert DeltaTable(str(path)).transaction_version("query-1") == 1


def test_a_second_run_racing_the_first_on_the_staged_path_is_fenced(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path), 0, rows([1]))
    wider = pa.schema([*rows([1]).schema, pa.field("extra", pa.int64())])
    first = make_writer(path, schema=wider, mergeSchema=True)
    messages = write(first, 1, rows([2], wider, extra=[7]))
    second = make_writer(path, schema=wider, mergeSchema=True)
    assert isinstance(second, DeltaStreamWriter)
    second_messages = write(second, 1, rows([2], wider, extra=[7]))
    original = second._commit_once

    def commit_once(
        table: DeltaTable | None, fit: Fit, files: Sequence[Any], batch_id: int
    ) -> None:
        first.commit(messages, 1)  # lands between the second run's read and its commit
        second._commit_once = original  # type: ignore[method-assign]
        original(table, fit, files, batch_id)

    second._commit_once = commit_once  # type: ignore[method-assign]
    with pytest.raises(mb.SinkError, match="another run of query query-1 committed batch 1"):
        second.commit(second_messages, 1)
    assert read_ids(path) == [1, 2]
    assert transactions(path) == [("query-1", 0), ("query-1", 1)]


def test_the_sinks_own_log_lines_show_no_storage_option_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from test_storage_options_secret import KEY, TOKEN, storage_options

    from microbatch_delta._commit import SinkSettings
    from microbatch_delta._part_writer import AddFile, DeltaFilesMessage
    from microbatch_delta._table import DeltaTarget

    target = DeltaTarget("s3://bucket/table", storage_options())
    writer = DeltaStreamWriter(target, rows([1]).schema, "query-1", SinkSettings())
    file = AddFile("part-00000-00000-x-0.c000.snappy.parquet", 1, (), 0, 1, "{}")
    with caplog.at_level(logging.DEBUG, logger="microbatch"):
        writer.abort([DeltaFilesMessage((file,))], 0)  # the store is away: files are kept
    assert "Keeping the files of aborted batch 0" in caplog.text
    assert "redacted" in caplog.text  # the endpoint was in delta-rs's error
    assert TOKEN not in caplog.text and KEY not in caplog.text
