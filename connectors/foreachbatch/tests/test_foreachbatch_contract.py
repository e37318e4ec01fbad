"""``foreachBatch``, ``foreach`` and ``noop`` pass the microbatch-testkit sink suite."""

from __future__ import annotations

import functools
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest

from microbatch import OutputMode, StreamWriter
from microbatch_foreachbatch import ForeachBatchSink, ForeachSink, NoopSink
from microbatch_testkit import SinkContract

HERE = Path(__file__).parent


class TestForeachBatchContract(SinkContract):
    sink_class = ForeachBatchSink
    ordered = True

    def make_options(self) -> dict[str, Any]:
        if not hasattr(self, "calls"):
            self.calls: list[tuple[int, pa.Table]] = []
        return {"function": lambda batch, batch_id: self.calls.append((batch_id, batch))}

    def read_back(self, writer: StreamWriter) -> pa.Table:
        tables = [table for _, table in self.calls]
        if self.built_of(writer).context.output_mode == OutputMode.COMPLETE:
            tables = tables[-1:]  # each call hands the function the whole result
        return pa.concat_tables(tables) if tables else self.input_schema().empty_table()

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [
            ({}, "missing required option 'function'"),
        ]


class ForeachRowsContract(SinkContract):
    """The rows a foreach writer received, kept in files of ``self.tmp_path``, so that parts
    written in other processes are read back too (the writers live in a module those processes
    can import)."""

    __test__ = False
    sink_class = ForeachSink

    @pytest.fixture(autouse=True)
    def _importable_writers(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.syspath_prepend(str(HERE))  # spawned processes start with this sys.path

    def writers(self) -> ModuleType:
        return importlib.import_module("_foreachbatch_spawn")

    def folder(self) -> Path:
        folder = self.tmp_path / "rows"
        folder.mkdir(exist_ok=True)
        return folder

    def read_back(self, writer: StreamWriter) -> pa.Table:
        read_rows = self.writers().read_rows
        rows = [row for path in sorted(self.folder().iterdir()) for row in read_rows(path)]
        return pa.Table.from_pylist(rows, schema=self.input_schema())

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [({}, "missing required option 'writer'")]


class TestForeachFunctionContract(ForeachRowsContract):
    # Parts run at once on several threads (or processes), and a function f(row) is not told
    # which part a row belongs to: the order across parts is not defined.
    ordered = False

    def make_options(self) -> dict[str, Any]:
        return {"writer": functools.partial(self.writers().record_row, str(self.folder()))}

    def test_complete_mode_replaces_the_previous_batch(self) -> None:
        pytest.skip(
            "a foreach function f(row) is not told which batch a row belongs to, so it cannot "
            "replace one batch's result with the next; TestForeachWriterContract checks "
            "complete mode with open(partition_id, epoch_id)"
        )


class TestForeachWriterContract(ForeachRowsContract):
    ordered = True  # files are named after batch, partition and time: read back in order

    def make_options(self) -> dict[str, Any]:
        return {"writer": self.writers().PickledRowWriter(str(self.folder()))}

    def read_back(self, writer: StreamWriter) -> pa.Table:
        paths = sorted(self.folder().iterdir())
        if paths and self.built_of(writer).context.output_mode == OutputMode.COMPLETE:
            latest = max(path.name.partition("-")[0] for path in paths)
            paths = [path for path in paths if path.name.startswith(f"{latest}-")]
        read_rows = self.writers().read_rows
        rows = [row for path in paths for row in read_rows(path)]
        return pa.Table.from_pylist(rows, schema=self.input_schema())


class TestNoopContract(SinkContract):
    sink_class = NoopSink

    def make_options(self) -> dict[str, Any]:
        return {}

    def read_back(self, writer: StreamWriter) -> pa.Table:
        return self.input_schema().empty_table()

    def expected_contents(self, committed: pa.Table) -> pa.Table:
        return committed.schema.empty_table()
