"""The example connectors pass the microbatch conformance suites."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

import microbatch as mb
from microbatch_example import CounterSource, JsonLinesSink, read_jsonl_folder
from microbatch_testkit import SinkContract, SourceContract


class TestCounterSourceContract(SourceContract):
    source_class = CounterSource
    generates_data_on_its_own = True

    def make_options(self) -> dict[str, Any]:
        return {"rowsPerBatch": 7, "step": 3}

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [
            ({}, "missing required option 'rowsPerBatch'"),
            ({"rowsPerBatch": 0}, "must be at least 1"),
            ({"rowsPerBatch": "seven"}, "expected an integer"),
        ]


class TestJsonLinesSinkContract(SinkContract):
    sink_class = JsonLinesSink
    ordered = True

    def make_options(self) -> dict[str, Any]:
        return {"path": str(self.tmp_path / "out")}

    def read_back(self, writer: mb.StreamWriter) -> pa.Table:
        return read_jsonl_folder(self.tmp_path / "out", self.input_schema())

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [({}, "missing required option 'path'"), ({"path": " "}, "must not be empty")]


def test_counter_values_follow_step() -> None:
    options = CounterSource.options.parse(
        {"rowsPerBatch": 3, "step": 5}, connector="example-counter"
    )
    source = CounterSource(options)
    reader = source.stream_reader(mb.ReadContext(schema=source.schema()))
    start = reader.initial_offset()
    end = reader.latest_offset(start, reader.default_read_limit())
    [split] = reader.partitions(start, end)
    [batch] = reader.split_reader().read(split)
    assert batch.to_pydict() == {"id": [0, 1, 2], "value": [0, 5, 10]}
