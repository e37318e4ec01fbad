"""Exactly once through Delta's application transactions: replays, two queries on one table,
two runs of one query racing, conflicts with other writers (real tables, real delta-rs)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import microbatch as mb
from microbatch_delta._commit import COMMIT_ATTEMPTS, DeltaStreamWriter, SinkSettings
from microbatch_delta._table import DeltaTarget

sys.path.insert(0, str(Path(__file__).parent))
from _delta_sink_testing import (
    SCHEMA,
    data_files,
    log_entries,
    make_writer,
    read_ids,
    rows,
    run_batch,
    transactions,
    write,
)


class RacingWriter(DeltaStreamWriter):
    """The sink's writer, with another writer committing right after each of its reads of the
    table (the next one, or every one): the handle it commits on is then one version behind,
    as in a real race."""

    def __init__(self, path: Path, query_id: str = "query-1", *, complete: bool = False) -> None:
        super().__init__(DeltaTarget(str(path)), SCHEMA, query_id, SinkSettings(complete=complete))
        self.meanwhile: list[Callable[[], None]] = []
        self.every_time = False

    def _read(self) -> DeltaTable | None:
        table = super()._read()
        actions = list(self.meanwhile)
        if not self.every_time:
            self.meanwhile.clear()
        for action in actions:
            action()
        return table


def committed_files(path: Path) -> set[str]:
    """The data files the table's current version names, relative to its folder."""
    return {str(Path(uri).relative_to(path)) for uri in DeltaTable(str(path)).file_uris()}


def test_a_replayed_batch_is_committed_once_and_each_commit_carries_its_transaction(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "t"
    first = make_writer(path)
    run_batch(first, 0, rows([1, 2]), rows([3]))
    run_batch(first, 1, rows([4]))
    first.stop()
    replaying = make_writer(path)  # a restart: the same query id, a new writer
    with caplog.at_level(logging.INFO, logger="microbatch.delta"):
        run_batch(replaying, 1, rows([4]))
        run_batch(replaying, 1, rows([4]))
    assert (
        caplog.messages
        == [
            f"Skipping batch 1 of query query-1: the Delta table {path} already holds it "
            "(application transaction version 1)"
        ]
        * 2
    )
    assert read_ids(path) == [1, 2, 3, 4]
    assert transactions(path) == [("query-1", 0), ("query-1", 1)]
    for actions in log_entries(path):  # the txn is in the same log entry as the data
        kinds = [next(iter(action)) for action in actions]
        assert "add" in kinds and "txn" in kinds, kinds
    assert data_files(path) == committed_files(path)  # the replays' files were deleted
    run_batch(replaying, 2, rows([5]))
    assert transactions(path)[-1] == ("query-1", 2)


def test_an_older_batch_id_never_moves_the_transaction_back(tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer = make_writer(path)
    for batch_id in range(3):
        run_batch(writer, batch_id, rows([batch_id]))
    run_batch(make_writer(path), 1, rows([1]))
    assert DeltaTable(str(path)).transaction_version("query-1") == 2
    assert read_ids(path) == [0, 1, 2]
    assert len(log_entries(path)) == 3


def test_empty_batches_are_committed_with_their_transaction(tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer = make_writer(path)
    writer.commit([], 0)  # creates the table, with no files
    run_batch(writer, 1, rows([]))
    assert [h["operation"] for h in reversed(DeltaTable(str(path)).history())] == [
        "CREATE TABLE",
        "WRITE",
    ]
    assert transactions(path) == [("query-1", 0), ("query-1", 1)]
    assert DeltaTable(str(path)).schema().to_arrow() is not None
    assert read_ids(path) == []


def test_two_queries_write_one_table_each_with_its_own_app_id(tmp_path: Path) -> None:
    path = tmp_path / "t"
    one, other = make_writer(path, query_id="q-one"), make_writer(path, query_id="q-two")
    run_batch(one, 0, rows([1]))
    run_batch(other, 0, rows([2]))  # batch 0 of another query is not a replay
    run_batch(one, 1, rows([3]))
    run_batch(other, 0, rows([2]))  # this one is
    assert read_ids(path) == [1, 2, 3]
    table = DeltaTable(str(path))
    assert (table.transaction_version("q-one"), table.transaction_version("q-two")) == (1, 0)


def test_the_parts_of_a_batch_written_in_parallel_make_one_commit(tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer = make_writer(path)
    part_writer = writer.part_writer()
    parts = [rows(range(i * 100, i * 100 + 100)) for i in range(4)]

    def write_part(index: int) -> mb.CommitMessage | None:
        data = pa.RecordBatchReader.from_batches(SCHEMA, parts[index].to_batches())
        context = mb.PartContext(batch_id=0, part_index=index, num_parts=4, query_id="query-1")
        return part_writer.write(data, context)

    with ThreadPoolExecutor(4) as pool:
        messages = list(pool.map(write_part, range(4)))
    assert len(log_entries(path)) == 0  # nothing visible before the commit
    writer.commit(messages, 0)
    (entry,) = log_entries(path)
    assert sum("add" in action for action in entry) == 4
    assert read_ids(path) == list(range(400))


def test_a_second_run_of_the_query_racing_the_first_is_fenced(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path), 0, rows([1]))
    first = make_writer(path)
    messages = write(first, 1, rows([2]))
    second = RacingWriter(path)
    second_messages = write(second, 1, rows([2]))
    # the second run reads the table, then the first run commits batch 1, then the second
    # commits on its (now stale) handle: delta-rs refuses it (same app id)
    second.meanwhile.append(lambda: first.commit(messages, 1))
    with pytest.raises(mb.SinkError) as caught:
        second.commit(second_messages, 1)
    assert str(caught.value) == (
        f"another run of query query-1 committed batch 1 to {path} concurrently: this run "
        "stops (only one run of a query may write at a time)"
    )
    assert not isinstance(caught.value, mb.RetriableError)
    assert type(caught.value.__cause__).__name__ == "CommitFailedError"
    assert read_ids(path) == [1, 2]
    assert transactions(path) == [("query-1", 0), ("query-1", 1)]
    assert data_files(path) == committed_files(path)  # the fenced run's files are gone


def test_an_append_racing_another_writer_is_committed(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path), 0, rows([1]))
    writer = RacingWriter(path)
    messages = write(writer, 1, rows([2]))
    writer.meanwhile.append(lambda: write_deltalake(str(path), rows([100]), mode="append"))
    writer.commit(messages, 1)
    assert read_ids(path) == [1, 2, 100]
    assert transactions(path) == [("query-1", 0), None, ("query-1", 1)]


def test_delta_rs_rebases_a_stale_overwrite_over_a_concurrent_append(tmp_path: Path) -> None:
    # The measurement behind the README's warning: a plain delta-rs overwrite whose snapshot
    # is older than another writer's append commits, and the appended rows survive it.
    path = tmp_path / "t"
    write_deltalake(str(path), rows([1, 2]))
    stale = DeltaTable(str(path))
    write_deltalake(str(path), rows([100]), mode="append")
    write_deltalake(stale, rows([7]), mode="overwrite")
    assert read_ids(path) == [7, 100]


def test_a_complete_mode_overwrite_racing_an_append_is_retried_and_replaces_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path, output_mode=mb.OutputMode.COMPLETE), 0, rows([1, 2]))
    writer = RacingWriter(path, complete=True)
    messages = write(writer, 1, rows([7]))
    writer.meanwhile.append(lambda: write_deltalake(str(path), rows([100]), mode="append"))
    writer.commit(messages, 1)
    assert read_ids(path) == [7]  # the overwrite was made again on the fresh table
    operations = [h["operation"] for h in reversed(DeltaTable(str(path)).history())]
    assert operations == ["CREATE TABLE", "WRITE", "WRITE"]
    assert transactions(path) == [("query-1", 0), None, ("query-1", 1)]


def test_conflicts_that_never_end_are_retriable(tmp_path: Path) -> None:
    path = tmp_path / "t"
    run_batch(make_writer(path, output_mode=mb.OutputMode.COMPLETE), 0, rows([1]))
    writer = RacingWriter(path, complete=True)
    messages = write(writer, 1, rows([7]))
    writer.every_time = True
    writer.meanwhile.append(lambda: write_deltalake(str(path), rows([100]), mode="append"))
    with pytest.raises(mb.RetriableError, match=f"conflicted with it {COMMIT_ATTEMPTS} times"):
        writer.commit(messages, 1)
    writer.meanwhile.clear()
    assert DeltaTable(str(path)).transaction_version("query-1") == 0
    assert data_files(path) == committed_files(path)


def test_abort_deletes_the_parts_files(tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer = make_writer(path)
    run_batch(writer, 0, rows([1]))
    before = data_files(path)
    messages = write(writer, 1, rows([2, 3]), rows([4]))
    assert len(data_files(path)) == len(before) + 2
    writer.abort(messages, 1)
    assert data_files(path) == before
    assert read_ids(path) == [1]


def test_abort_after_the_commit_landed_keeps_the_files(tmp_path: Path) -> None:
    # The engine aborts a batch whose commit() raised, even when the error came after the
    # commit: the files the log names must stay.
    path = tmp_path / "t"
    writer = make_writer(path)
    messages = write(writer, 0, rows([1, 2]))
    writer.commit(messages, 0)
    writer.abort(messages, 0)
    assert data_files(path) == committed_files(path) != set()
    assert read_ids(path) == [1, 2]


def test_two_runs_creating_the_table_at_once_are_fenced(tmp_path: Path) -> None:
    path = tmp_path / "t"
    first, second = make_writer(path), RacingWriter(path)
    messages, second_messages = write(first, 0, rows([1])), write(second, 0, rows([1]))
    second.meanwhile.append(lambda: first.commit(messages, 0))  # after second saw no table
    with pytest.raises(mb.SinkError, match=r"committed batch 0 to .* concurrently"):
        second.commit(second_messages, 0)
    assert read_ids(path) == [1]
    assert transactions(path) == [("query-1", 0)]
    assert data_files(path) == committed_files(path)


def test_a_table_created_by_another_query_meanwhile_is_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "t"
    other, writer = make_writer(path, query_id="q-other"), RacingWriter(path)
    other_messages, messages = write(other, 0, rows([1])), write(writer, 0, rows([2]))
    writer.meanwhile.append(lambda: other.commit(other_messages, 0))
    writer.commit(messages, 0)
    assert read_ids(path) == [1, 2]
    assert transactions(path) == [("q-other", 0), ("query-1", 0)]
