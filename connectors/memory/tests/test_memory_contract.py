"""The ``memory`` source and sink pass the microbatch-testkit suites."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

import microbatch as mb
from microbatch import StreamReader, StreamWriter
from microbatch_memory import MemorySink, MemoryStream, MemoryStreamSource, memory_table
from microbatch_testkit import SinkContract, SourceContract, data


class TestMemorySourceContract(SourceContract):
    source_class = MemoryStreamSource

    def make_options(self) -> dict[str, Any]:
        if not hasattr(self, "stream"):
            self.stream = MemoryStream(data.EDGE_SCHEMA)
        return {"stream": self.stream}

    def produce(self, reader: StreamReader) -> None:
        for batch in data.edge_batches():
            self.stream.add_data(batch)

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return [({}, "missing required option 'stream'")]


class TestMemorySinkContract(SinkContract):
    sink_class = MemorySink
    query_name = "contract_output"
    ordered = True

    def make_options(self) -> dict[str, Any]:
        return {}

    def make_session(self) -> Any:
        return mb.Session(load_plugins=False)

    def read_back(self, writer: StreamWriter) -> pa.Table:
        return self.session.table("contract_output")

    def build(self, **kwargs: Any) -> StreamWriter:
        # A writer built after a query ran into the table (the suite's engine check) reads
        # it back as a restart of that query would: with its query id. A writer of another
        # query id would start a new, empty table, as a new query's memory sink does.
        table = memory_table(self.session, "contract_output")
        if table is not None:
            self.query_id = table.query_id
        return super().build(**kwargs)


class TestMemorySinkCompleteModeContract(TestMemorySinkContract):
    output_mode = mb.OutputMode.COMPLETE
    # A query reaches complete mode only through an aggregation, so the engine check would run
    # in append mode: TestMemorySinkContract runs it.
    engine_check = False
