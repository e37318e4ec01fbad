"""``foreachBatch``, ``foreach`` and ``noop`` pass the microbatch-testkit sink suite."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from microbatch import Sink
from microbatch_foreachbatch import ForeachBatchSink, ForeachSink, NoopSink
from microbatch_testkit import SinkContract


class TestForeachBatchContract(SinkContract):
    sink_class = ForeachBatchSink
    ordered = True

    def make_options(self) -> dict[str, Any]:
        if not hasattr(self, "calls"):
            self.calls: list[tuple[int, pa.Table]] = []
        return {"function": lambda batch, batch_id: self.calls.append((batch_id, batch))}

    def read_back(self, sink: Sink) -> pa.Table:
        tables = [table for _, table in self.calls]
        return pa.concat_tables(tables) if tables else self.input_schema().empty_table()

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [
            ({}, "missing required option 'function'"),
        ]


class TestForeachFunctionContract(SinkContract):
    sink_class = ForeachSink
    ordered = True

    def make_options(self) -> dict[str, Any]:
        if not hasattr(self, "rows"):
            self.rows: list[dict[str, Any]] = []
        return {"writer": self.rows.append}

    def read_back(self, sink: Sink) -> pa.Table:
        return pa.Table.from_pylist(self.rows, schema=self.input_schema())

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [({}, "missing required option 'writer'")]


class SharedRows(list[dict[str, Any]]):
    """Rows shared by every copy of a writer (the foreach sink deep-copies writers per split)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> SharedRows:
        return self


class RowWriter:
    def __init__(self, rows: SharedRows) -> None:
        self.rows = rows
        self.opened: tuple[int, int] | None = None

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self.opened = (partition_id, epoch_id)
        return True

    def process(self, row: dict[str, Any]) -> None:
        assert self.opened is not None
        self.rows.append(row)

    def close(self, error: BaseException | None) -> None:
        self.opened = None


class TestForeachWriterContract(TestForeachFunctionContract):
    def make_options(self) -> dict[str, Any]:
        if not hasattr(self, "shared"):
            self.shared = SharedRows()
            self.rows = self.shared
        return {"writer": RowWriter(self.shared)}


class TestNoopContract(SinkContract):
    sink_class = NoopSink

    def make_options(self) -> dict[str, Any]:
        return {}

    def read_back(self, sink: Sink) -> pa.Table:
        return self.input_schema().empty_table()

    def expected_contents(self, committed: pa.Table) -> pa.Table:
        return committed.schema.empty_table()
