"""The ``delta`` sink in ``mode=merge`` passes the testkit's sink suite in update mode.

The kit writes the same rows in every batch, and an upsert of the same rows leaves the same
table: contents alone cannot show a batch applied twice. So ``read_back`` also checks the
table's log: each batch id of the query is committed at most once, in increasing order (the
replay and crash checks then prove exactly once, not only "same contents").
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch import Guarantee, OutputMode, SinkCapabilities, StreamWriter
from microbatch_delta._merge import last_per_key
from microbatch_delta.sink import DeltaSink
from microbatch_testkit import SinkContract

sys.path.insert(0, str(Path(__file__).parent))
from _delta_merge_testing import batch_commits
from _delta_sink_testing import as_stored, read_table

FORK_REFUSED = (
    "the kit kills commit() in a forked child, and delta-rs refuses to run in a forked process "
    "(its tokio runtime panics: 'Forked process detected'); merge commits are killed in real "
    "query processes by test_crash_delta_sink.py instead"
)


class MergeDeltaSink(DeltaSink):
    """The sink as ``mode=merge`` makes it: upserts in append and update mode (complete mode,
    which replaces the table, is refused with mode=merge)."""

    capabilities = SinkCapabilities(
        output_modes=frozenset({OutputMode.APPEND, OutputMode.UPDATE}),
        guarantee=Guarantee.EXACTLY_ONCE,
        partition_by=True,
    )


class TestDeltaMergeSinkContract(SinkContract):
    """Update mode, ``mergeKeys=id``, over the kit's edge-case rows (nested types, time zones,
    nulls): the table holds the last row of each id."""

    sink_class = MergeDeltaSink
    output_mode = OutputMode.UPDATE
    keys = ("id",)

    @property
    def table_path(self) -> Path:
        return self.tmp_path / "table"

    def make_options(self) -> dict[str, Any]:
        return {"path": str(self.table_path), "mode": "merge", "mergeKeys": ",".join(self.keys)}

    def expected_contents(self, committed: pa.Table) -> pa.Table:
        latest = last_per_key(committed, self.keys)
        return latest.cast(as_stored(latest.schema))

    def read_back(self, writer: StreamWriter) -> pa.Table:
        table = read_table(str(self.table_path), as_stored(self.input_schema()))
        batch_ids = [batch_id for batch_id, _ in batch_commits(self.table_path, self.query_id)]
        assert batch_ids == sorted(set(batch_ids)), (
            f"batch ids committed by query {self.query_id}, in log order: {batch_ids} (each "
            "batch must be committed once, in order)"
        )
        return table

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        path = {"path": str(self.table_path)}
        return [
            ({**path, "mode": "merge"}, "mode=merge needs 'mergeKeys'"),
            ({**path, "mergeKeys": "id"}, "only applies with mode=merge"),
        ]

    def test_commit_is_atomic_when_killed(self) -> None:
        pytest.skip(FORK_REFUSED)


class TestDeltaMergeCompositeKeyContract(TestDeltaMergeSinkContract):
    """Two key columns, with NULLs in both (NULL keys match NULL keys), a key repeated within
    each batch (the last of its rows wins), and the table partitioned by a key column."""

    keys = ("flag", "small")
    engine_check = False  # the engine query is the same as in the suite above

    def input_batches(self) -> list[pa.RecordBatch]:
        batches = super().input_batches()
        # each (flag, small) pair is distinct in the kit's rows: repeat one with other values
        first = batches[0].to_pylist()
        repeat = {**first[1], "text": "the last row of key (False, -2**31)", "score": 2.5}
        return [*batches, pa.RecordBatch.from_pylist([repeat], schema=self.input_schema())]

    def build(self, *, partition_by: tuple[str, ...] = (), **kwargs: Any) -> StreamWriter:
        return super().build(partition_by=partition_by or ("flag",), **kwargs)

    def read_back(self, writer: StreamWriter) -> pa.Table:
        from deltalake import DeltaTable

        table = super().read_back(writer)
        if (self.table_path / "_delta_log").is_dir():
            assert DeltaTable(str(self.table_path)).metadata().partition_columns == ["flag"]
        return table
