"""``console`` passes the microbatch-testkit sink suite; its output is parsed back into rows."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pyarrow as pa
import pytest

from microbatch import OutputMode, Sink, StreamWriter
from microbatch_console import ConsoleSink
from microbatch_testkit import SinkContract, data


def parse_console(text: str) -> list[tuple[int, list[dict[str, str]]]]:
    """The batches printed in ``text``: (batch id, rows of cell texts)."""
    batches: list[tuple[int, list[dict[str, str]]]] = []
    header: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("Batch: "):
            batches.append((int(line.removeprefix("Batch: ")), []))
            header = None
        elif line.startswith("|"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if header is None:
                header = cells
            else:
                batches[-1][1].append(dict(zip(header, cells, strict=True)))
    return batches


class TestConsoleSinkContract(SinkContract):
    sink_class = ConsoleSink
    ordered = True

    @pytest.fixture(autouse=True)
    def _capture(self) -> None:
        self.output = io.StringIO()

    def make_options(self) -> dict[str, Any]:
        return {"numRows": 50, "truncate": "false"}

    def build_sink(self, *, options: dict[str, Any] | None = None) -> Sink:
        sink = super().build_sink(options=options)
        assert isinstance(sink, ConsoleSink)
        sink.stream = self.output  # the writers made from it print here
        return sink

    def input_schema(self) -> pa.Schema:
        return data.SIMPLE_SCHEMA

    def input_batches(self) -> list[pa.RecordBatch]:
        return data.simple_batches()

    def read_back(self, writer: StreamWriter) -> pa.Table:
        printed = parse_console(self.output.getvalue())
        if self.built_of(writer).context.output_mode == OutputMode.COMPLETE:
            printed = printed[-1:]  # each batch prints the whole result: the last one is it
        rows = [row for _, batch in printed for row in batch]
        return pa.Table.from_pylist(rows, schema=_TEXT_SCHEMA)

    def test_runs_through_the_engine(self) -> None:
        # The engine makes its own ConsoleSink, which prints to sys.stdout when it prints.
        with contextlib.redirect_stdout(self.output):
            super().test_runs_through_the_engine()

    def expected_contents(self, committed: pa.Table) -> pa.Table:
        rows = [
            {"id": str(row["id"]), "name": "NULL" if row["name"] is None else row["name"]}
            for row in committed.to_pylist()
        ]
        return pa.Table.from_pylist(rows, schema=_TEXT_SCHEMA)

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [
            ({"numRows": -1}, "must be at least 0"),
            ({"truncate": "maybe"}, "'true' or 'false'"),
        ]


_TEXT_SCHEMA = pa.schema([("id", pa.string()), ("name", pa.string())])


def test_console_output_names_each_batch() -> None:
    output = "\n".join(
        ["-" * 43, "Batch: 4", "-" * 43, "+---+", "| id|", "+---+", "|  7|", "+---+"]
    )
    assert parse_console(output) == [(4, [{"id": "7"}])]
