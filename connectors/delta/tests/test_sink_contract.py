"""The ``delta`` sink passes the testkit's sink suite in append and in complete mode.

Contents are read back with delta-rs from a fresh ``DeltaTable``; timestamps with a time zone
come back in UTC, as Delta stores them (the same instants).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from microbatch import OutputMode, StateStore, StreamWriter
from microbatch_delta.sink import DeltaSink
from microbatch_testkit import SinkContract

sys.path.insert(0, str(Path(__file__).parent))
from _delta_sink_testing import as_stored, read_table

FORK_REFUSED = (
    "the kit kills commit() in a forked child, and delta-rs refuses to run in a forked process "
    "(its tokio runtime panics: 'Forked process detected'); test_sink_commit_kills.py kills "
    "the commit at lines of its code in spawned processes instead"
)


class DeltaSinkSuite(SinkContract):
    """The sink over a table in the test's folder."""

    __test__ = False
    sink_class = DeltaSink

    @property
    def table_path(self) -> str:
        return str(self.tmp_path / "table")

    def make_options(self) -> dict[str, Any]:
        return {"path": self.table_path}

    def expected_contents(self, committed: pa.Table) -> pa.Table:
        return committed.cast(as_stored(committed.schema))

    def read_back(self, writer: StreamWriter) -> pa.Table:
        return read_table(self.table_path, as_stored(self.input_schema()))

    def build(
        self,
        *,
        state: StateStore | None = None,
        options: dict[str, Any] | None = None,
        output_mode: OutputMode | None = None,
        partition_by: tuple[str, ...] = (),
        last_committed_batch_id: int | None = None,
    ) -> StreamWriter:
        # The sink takes update mode only as an upsert (mode=merge, tested with the merge
        # suite): the capability check builds an update-mode writer with those options.
        if output_mode == OutputMode.UPDATE and options is None:
            options = {**self.make_options(), "mode": "merge", "mergeKeys": "id"}
        return super().build(
            state=state,
            options=options,
            output_mode=output_mode,
            partition_by=partition_by,
            last_committed_batch_id=last_committed_batch_id,
        )

    def test_commit_is_atomic_when_killed(self) -> None:
        pytest.skip(FORK_REFUSED)

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        path = {"path": self.table_path}
        return [
            ({}, "path"),
            ({**path, "mode": "merge"}, "mode=merge needs 'mergeKeys'"),
            ({**path, "mergeKeys": "id"}, "only applies with mode=merge"),
            ({**path, "mode": "upsert"}, "append, merge"),
            ({**path, "mergeSchema": "yes"}, "mergeSchema"),
            ({**path, "maxRecordsPerFile": "0"}, "maxRecordsPerFile"),
        ]


class TestDeltaSinkContract(DeltaSinkSuite):
    """Append mode over the kit's edge-case rows (nested types, time zones, nulls)."""

    # update mode is the merge suite's: here only append and complete are exercised


class TestDeltaSinkCompleteContract(DeltaSinkSuite):
    """Complete mode: every batch replaces the table in one overwrite commit."""

    output_mode = OutputMode.COMPLETE
    engine_check = False  # the kit runs its engine query in append mode: the append suite does
